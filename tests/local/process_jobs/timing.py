"""Jobs at their timeout's boundary: each run appends a line to the file its payload names (the effect
the tests count across processes), then sleeps as long as its payload says for that attempt."""

from __future__ import annotations

import json
import os
import time

from pydantic import BaseModel

from lambdajobs import JobContext, job


class Sleep(BaseModel):
    log: str
    #: seconds to sleep per attempt ("1": 5.0); an attempt not named sleeps none
    sleep: dict[str, float] = {}


def _run(payload: Sleep, ctx: JobContext) -> dict:
    line = {"job_id": ctx.job_id, "attempt": ctx.attempt, "pid": os.getpid(), "at": time.time()}
    with open(payload.log, "a", encoding="utf-8") as f:
        f.write(json.dumps({**line, "event": "start"}) + "\n")
    time.sleep(payload.sleep.get(str(ctx.attempt), 0.0))
    with open(payload.log, "a", encoding="utf-8") as f:
        f.write(json.dumps({**line, "event": "done"}) + "\n")
    return {"attempt": ctx.attempt, "function": os.environ.get("AWS_LAMBDA_FUNCTION_NAME")}


@job(timeout_seconds=1, max_attempts=3, max_concurrency=2, batch_size=1)
def sleepy(payload: Sleep, ctx: JobContext) -> dict:
    return _run(payload, ctx)


@job(timeout_seconds=1, max_attempts=1, max_concurrency=2, batch_size=1)
def sleepy_once(payload: Sleep, ctx: JobContext) -> dict:
    return _run(payload, ctx)
