"""Jobs made of steps, sleeps and signal waits. Each step notes that it ran (`RAN`), and a step that
"takes" minutes moves the test's clock (`WORK.clock`), so time is compressed, not waited for."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from lambdajobs import JobContext, job
from lambdajobs.errors import SignalTimeoutError

if TYPE_CHECKING:  # the harness is the test's, never a job module's import (it brings moto)
    from lambdajobs.testing import TestStack


@dataclass
class Work:
    """What the test gives the jobs: its clock (moved by a step's duration), and what ran."""

    clock: Any = None
    ran: list[tuple[str, str]] = field(default_factory=list)
    #: (job id, step after which the invocation crashes): the test's injected crash.
    crash_after: set[tuple[str, str]] = field(default_factory=set)

    def run(self, job_id: str, step: str, seconds: float) -> str:
        self.ran.append((job_id, step))
        if self.clock is not None and seconds:
            self.clock.advance(seconds)
        return f"{step} done"


WORK = Work()


def ran(job_id: str) -> Counter[str]:
    """How many times each step of `job_id` ran."""
    return Counter(step for j, step in WORK.ran if j == job_id)


@contextmanager
def clocked_stack(stack: str) -> Iterator[TestStack]:
    """A TestStack of these jobs on a stopped clock (2030-01-01 09:00 UTC), whose steps move it."""
    from lambdajobs.testing import TestStack

    with TestStack(__package__, stack=stack, clock=datetime(2030, 1, 1, 9, 0, tzinfo=UTC)) as clocked:
        WORK.clock, WORK.ran, WORK.crash_after = clocked.clock, [], set()
        try:
            yield clocked
        finally:
            WORK.clock = None


class Crash(BaseException):
    """The invocation dies (the test turns it into an invocation error): nothing after it runs."""


class Steps(BaseModel):
    steps: int = 6
    step_seconds: float = 240
    budget_seconds: float | None = None


@job(timeout_seconds=300, max_attempts=3)
def six_steps(payload: Steps, ctx: JobContext) -> dict:
    results = []
    for n in range(1, payload.steps + 1):
        name = f"encode-{n}"
        results.append(
            ctx.step(
                name, WORK.run, ctx.job_id, name, payload.step_seconds, budget_seconds=payload.budget_seconds
            )
        )
        ctx.progress(100 * n / payload.steps, name)
        if (ctx.job_id, name) in WORK.crash_after:
            WORK.crash_after.discard((ctx.job_id, name))
            raise Crash(name)
    return {"results": results}


class Nap(BaseModel):
    seconds: float = 7200


@job(timeout_seconds=60)
def napper(payload: Nap, ctx: JobContext) -> dict:
    before = ctx.step("before", WORK.run, ctx.job_id, "before", 0)
    ctx.sleep(payload.seconds)
    after = ctx.step("after", WORK.run, ctx.job_id, "after", 0)
    return {"before": before, "after": after}


class Approval(BaseModel):
    timeout_seconds: float = 3600


@job(timeout_seconds=60)
def approver(payload: Approval, ctx: JobContext) -> dict:
    ctx.step("draft", WORK.run, ctx.job_id, "draft", 0)
    try:
        decision = ctx.wait_for_signal("approval", timeout_seconds=payload.timeout_seconds)
    except SignalTimeoutError:
        decision = {"approved": False, "why": "timeout"}
    if decision.get("approved"):
        ctx.step("publish", WORK.run, ctx.job_id, "publish", 0)
    return {"decision": decision}


class Twice(BaseModel):
    pass


@job(timeout_seconds=30, max_attempts=2)
def same_name_twice(payload: Twice, ctx: JobContext) -> None:
    ctx.step("a", WORK.run, ctx.job_id, "a", 0)
    ctx.step("a", WORK.run, ctx.job_id, "a", 0)


def _flaky(job_id: str) -> str:
    WORK.ran.append((job_id, "flaky"))
    if sum(1 for j, s in WORK.ran if j == job_id and s == "flaky") == 1:
        raise RuntimeError("the first call fails")
    return "ok"


@job(timeout_seconds=30, max_attempts=3)
def fails_in_a_step(payload: Twice, ctx: JobContext) -> dict:
    first = ctx.step("first", WORK.run, ctx.job_id, "first", 0)
    second = ctx.step("second", _flaky, ctx.job_id)
    return {"first": first, "second": second, "key": ctx.step("key", lambda: ctx.step_key)}


class Budget(BaseModel):
    budget_seconds: float = 0
    size: int = 10


@job(timeout_seconds=30, max_attempts=3)
def budgeted(payload: Budget, ctx: JobContext) -> dict:
    """A step with a declared budget (none fits a 30 s invocation above 27 s), and a result of
    `size` characters (above 32 KB, a checkpoint refuses it)."""
    budget = payload.budget_seconds or None
    value = ctx.step("big", lambda: "x" * payload.size, budget_seconds=budget)
    return {"size": len(value)}


class Long(BaseModel):
    naps: int = 3
    seconds: float = 3600


@job(timeout_seconds=60, max_duration_seconds=7200)
def bounded(payload: Long, ctx: JobContext) -> dict:
    """Sleeps of an hour each, inside a max_duration of 2 hours: the third is refused."""
    for n in range(payload.naps):
        ctx.step(f"before-{n}", WORK.run, ctx.job_id, f"before-{n}", 0)
        ctx.sleep(payload.seconds)
    return {"naps": payload.naps}


class Level(BaseModel):
    seconds: float = 5


@job(timeout_seconds=30, priorities=("high", "normal"), rate_limit="1/minute")
def urgent_nap(payload: Level, ctx: JobContext) -> dict:
    """A durable job with priority levels and a rate limit: its continuation stays on its level and
    takes no new slot."""
    ctx.step("one", WORK.run, ctx.job_id, "one", 0)
    ctx.sleep(payload.seconds)
    ctx.step("two", WORK.run, ctx.job_id, "two", 0)
    return {"ok": True}


class Pool(BaseModel):
    fail_first: bool = True


@job(timeout_seconds=60, max_attempts=3)
def pooled(payload: Pool, ctx: JobContext) -> dict:
    """Steps called from threads of the job's own: checkpointed under the run's lock all the same."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(ctx.step, fmt, WORK.run, ctx.job_id, fmt, 0) for fmt in ("720p", "1080p")]
        results = sorted(f.result() for f in futures)
    if payload.fail_first and ctx.attempt == 1:
        raise RuntimeError("the attempt fails after its steps")
    return {"results": results}


class Batch(BaseModel):
    work_seconds: float = 0
    budget_seconds: float | None = None


@job(timeout_seconds=30, batch_size=2)
def batched(payload: Batch, ctx: JobContext) -> dict:
    """A step that moves the clock by `work_seconds`, or declares a budget: two in one batch."""
    ctx.step(
        "only", WORK.run, ctx.job_id, "only", payload.work_seconds, budget_seconds=payload.budget_seconds
    )
    return {"ok": True}


@job(timeout_seconds=60, max_attempts=3)
def cancelled_midway(payload: Twice, ctx: JobContext) -> dict:
    """Four steps; the second one's work cancels the job (an operator, while it runs)."""
    from lambdajobs import cancel

    def work(n: int) -> str:
        if n == 2:
            cancel(ctx.job_id, config=ctx.config)
        return WORK.run(ctx.job_id, f"part-{n}", 0)

    return {"parts": [ctx.step(f"part-{n}", work, n) for n in range(1, 5)]}
