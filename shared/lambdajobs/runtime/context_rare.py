"""What `lambdajobs.runtime.context.JobContext` does that a run which only returns never calls (its
methods delegate to these, and import this module on first use: a cold start whose job takes no step
and reports no progress does not compile it): durable steps and their state, progress reports, cancel
checks, the parents' results of a workflow member, and the context's repr and equality."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.context import JobCancelled, JobContext
from lambdajobs.runtime.errors import LambdaJobsError, ProgressError

if TYPE_CHECKING:
    from lambdajobs.runtime.durable import Durable

#: Held while a run's durable state is built (`JobContext._durable_state`).
_BUILDING = threading.Lock()

#: The fields a JobContext compares (all, as a dataclass did) and shows (those a dataclass showed).
_COMPARED = (*JobContext.FIELDS, "_parent_results", "_cancelled", "_cancel_read_at", "_acquired", "_captured")
_SHOWN = ("job_id", "job", "attempt", "max_attempts", "scheduled_at", "workflow")


def context_repr(ctx: JobContext) -> str:
    shown = ", ".join(f"{name}={getattr(ctx, name)!r}" for name in _SHOWN)
    return f"{type(ctx).__qualname__}({shown})"


def context_eq(ctx: JobContext, other: object) -> bool:
    if other.__class__ is not ctx.__class__:
        return NotImplemented
    return tuple(getattr(ctx, name) for name in _COMPARED) == tuple(
        getattr(other, name) for name in _COMPARED
    )


def cancelled(ctx: JobContext) -> bool:
    if not ctx._cancelled and ctx.cancel_check is not None:
        now = time.monotonic()
        if now - ctx._cancel_read_at >= ctx.CANCEL_READ_SECONDS:
            ctx._cancel_read_at = now
            ctx._cancelled = bool(ctx.cancel_check())
    return ctx._cancelled


def parent_results(ctx: JobContext) -> list[Any]:
    if ctx._parent_results is None:
        parents = ctx.workflow.parents if ctx.workflow is not None else None
        if ctx.workflow is None or ctx.workflow.stage == 0 or parents is None:
            ctx._parent_results = []
        else:
            from lambdajobs.runtime.lifecycle import JobState
            from lambdajobs.runtime.records import get_statuses
            from lambdajobs.runtime.workflow import member_job_id

            stage, wid = ctx.workflow.stage - 1, ctx.workflow.id
            ids = [member_job_id(wid, stage, i) for i in range(parents.total)]
            found = get_statuses(ids, config=ctx.config)
            ctx._parent_results = [
                found[i].result if found[i].state is JobState.SUCCEEDED else None for i in ids
            ]
    return ctx._parent_results


def progress(ctx: JobContext, percent: float, message: str | None) -> None:
    if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
        raise ProgressError(f"progress percent must be a number from 0 to 100, got {percent!r}")
    if ctx.progress_sink is not None:
        try:
            ctx.progress_sink(ctx.job_id, float(percent), message)
        except JobCancelled:
            ctx._cancelled = True
            raise


def step(
    ctx: JobContext,
    name: str,
    fn: Callable[..., Any] | None,
    /,
    *args: Any,
    budget_seconds: float | None,
    **kwargs: Any,
) -> Any:
    if fn is None:
        return lambda function: ctx.step(name, function, *args, budget_seconds=budget_seconds, **kwargs)
    durable = ctx._durable_state()
    if durable is None:
        return fn(*args, **kwargs)
    return durable.step(name, fn, args, kwargs, budget_seconds)


def durable(ctx: JobContext, what: str) -> Durable:
    durable = ctx._durable_state()
    if durable is None:
        raise LambdaJobsError(
            f"{what} needs the lambdajobs worker (it parks the job between invocations); run the job "
            "through TestStack or lambdajobs dev, not by calling it directly."
        )
    return durable


def durable_state(ctx: JobContext) -> Durable | None:
    if ctx.durable is None and ctx.durable_factory is not None:
        with _BUILDING:  # a job's own threads may take their first step at once: one state
            if ctx.durable is None:
                taken = ctx._acquired
                reader = (lambda: taken) if ctx._captured else ctx.acquired_reader
                ctx.durable = ctx.durable_factory(reader or (lambda: (None, None)))
    return ctx.durable
