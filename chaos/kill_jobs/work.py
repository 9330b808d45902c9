"""The kill soak's two jobs: one body (`run`), batches of 4 (`kill_batch`) or one record per
invocation (`kill_single`).

A run writes its side effects to a ledger the parent reads after the soak: a file whose path is in
the payload, one JSON line per event appended with a single `write` on an `O_APPEND` descriptor (a
short line: atomic across the worker processes). Per run, in order: `start` (job id, attempt, pid),
`effect` (the side effect), a little work (`work_seconds`: a kill may land between the effect and
the end), then what the payload's plan says for this attempt: sleep past the
job's timeout (`sleep_on`: the process is killed there, by the local stack, as Lambda kills a timed
out environment), or `raise` and raise (`raise_on`: a transient failure, retried with backoff);
else `done`, and return.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from pydantic import BaseModel

from lambdajobs import Backoff, JobContext, job

TIMEOUT_SECONDS = 2
MAX_ATTEMPTS = 5
BACKOFF = Backoff(base_seconds=1, max_seconds=2)


class PlannedFault(Exception):
    """A planned transient failure (the payload's `raise_on`): the worker retries it with backoff."""


class Planned(BaseModel):
    """A kill soak job's payload: where its ledger is, and what each attempt does."""

    ledger: str
    #: Every run's work after its effect, before it ends.
    work_seconds: float = 0.0
    #: Attempts that sleep `sleep_seconds` (past the timeout: killed there).
    sleep_on: list[int] = []
    sleep_seconds: float = 0.0
    #: Attempts that raise after their effect.
    raise_on: list[int] = []


def append(path: str, line: dict[str, Any]) -> None:
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def run(payload: Planned, ctx: JobContext) -> dict[str, Any]:
    mark = {"job_id": ctx.job_id, "attempt": ctx.attempt, "pid": os.getpid()}
    append(payload.ledger, {**mark, "event": "start", "t": round(time.time(), 3)})
    append(payload.ledger, {**mark, "event": "effect"})
    time.sleep(payload.work_seconds)
    if ctx.attempt in payload.sleep_on:
        time.sleep(payload.sleep_seconds)
    if ctx.attempt in payload.raise_on:
        append(payload.ledger, {**mark, "event": "raise"})
        raise PlannedFault(f"planned failure of attempt {ctx.attempt}")
    append(payload.ledger, {**mark, "event": "done", "t": round(time.time(), 3)})
    return {"attempt": ctx.attempt, "pid": os.getpid()}


@job(
    timeout_seconds=TIMEOUT_SECONDS,
    max_attempts=MAX_ATTEMPTS,
    batch_size=4,
    max_concurrency=3,
    backoff=BACKOFF,
)
def kill_batch(payload: Planned, ctx: JobContext) -> dict[str, Any]:
    return run(payload, ctx)


@job(
    timeout_seconds=TIMEOUT_SECONDS,
    max_attempts=MAX_ATTEMPTS,
    batch_size=1,
    max_concurrency=2,
    backoff=BACKOFF,
)
def kill_single(payload: Planned, ctx: JobContext) -> dict[str, Any]:
    return run(payload, ctx)
