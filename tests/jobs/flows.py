"""Workflow steps for the tests: `step` (returns its name and what the steps before it returned;
fails for good when asked) and `summarize` (a chord's callback: records every run it makes)."""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel

from lambdajobs import JobContext, PermanentError, job


class Step(BaseModel):
    name: str
    fail: bool = False


@job(timeout_seconds=30, max_attempts=2)
def step(payload: Step, ctx: JobContext) -> dict[str, Any]:
    if payload.fail:
        raise PermanentError(f"step {payload.name} failed for good")
    before = [r["name"] for r in ctx.parent_results if r]
    return {"name": payload.name, "after": before}


class Summary(BaseModel):
    label: str


#: Every run of `summarize`: (job id, label, parents' counts, results read).
RUNS: list[dict[str, Any]] = []
_lock = threading.Lock()


@job(timeout_seconds=60, max_attempts=3)
def summarize(payload: Summary, ctx: JobContext) -> dict[str, Any]:
    parents = ctx.workflow.parents if ctx.workflow is not None else None
    results = ctx.parent_results
    run = {
        "job_id": ctx.job_id,
        "label": payload.label,
        "parents": parents.model_dump() if parents is not None else None,
        "results": sum(1 for r in results if r is not None),
    }
    with _lock:
        RUNS.append(run)
    return {"succeeded": run["parents"]["succeeded"] if parents else 0, "results": run["results"]}
