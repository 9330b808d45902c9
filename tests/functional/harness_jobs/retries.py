"""`fails_then_succeeds`: fails its first `fail_first` attempts, then succeeds; backoff from 1 s with
full jitter, so a retry's delay is 0 s about half the time (the case that made retry tests flaky)."""

from __future__ import annotations

from pydantic import BaseModel

from lambdajobs import Backoff, JobContext, job

MAX_ATTEMPTS = 3


class Flaky(BaseModel):
    key: str
    fail_first: int = 1  # attempts that fail before one succeeds


class ProviderDownError(Exception):
    """A failure that may pass: the job is retried."""


@job(timeout_seconds=30, max_attempts=MAX_ATTEMPTS, backoff=Backoff(base_seconds=1, max_seconds=4))
def fails_then_succeeds(payload: Flaky, ctx: JobContext) -> dict[str, int]:
    if ctx.attempt <= payload.fail_first:
        raise ProviderDownError(f"attempt {ctx.attempt} failed")
    return {"succeeded_on": ctx.attempt}
