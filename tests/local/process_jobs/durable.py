"""A durable job at its timeout's boundary: steps that each fill most of an invocation (so the job
continues in a fresh one between them), a sleep, and a wait for a signal. Each step appends a line to
the file its payload names: the effect the test counts across processes."""

from __future__ import annotations

import json
import os
import time

from pydantic import BaseModel

from lambdajobs import JobContext, job


class Steps(BaseModel):
    log: str
    steps: int = 4
    seconds: float = 0.9
    #: The process dies (as an invocation that crashed) right after this step's checkpoint, once.
    crash_after: str | None = None


def _step(log: str, job_id: str, name: str, seconds: float) -> str:
    time.sleep(seconds)
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps({"job_id": job_id, "step": name, "pid": os.getpid()}) + "\n")
    return name


@job(timeout_seconds=2, max_attempts=2, batch_size=1)
def durable_steps(payload: Steps, ctx: JobContext) -> dict:
    done = []
    for n in range(payload.steps):
        done.append(ctx.step(f"s{n}", _step, payload.log, ctx.job_id, f"s{n}", payload.seconds))
        crashed = f"{payload.log}.crashed"
        if payload.crash_after == f"s{n}" and not os.path.exists(crashed):
            open(crashed, "w").close()  # a marker: crash once
            os._exit(17)  # the invocation dies between two steps: no release, no reply
    ctx.progress(90, "steps done")
    ctx.sleep(1)
    data = ctx.wait_for_signal("go", timeout_seconds=60)
    return {"done": done, "data": data}
