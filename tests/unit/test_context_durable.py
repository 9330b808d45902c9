"""A run's durable state built on first use (`JobContext.durable_factory`): a run that takes no step,
sleep or signal wait never builds it (nor loads `lambdajobs.runtime.durable`, at a cold start); one
that does gets it once, with what the run's acquire wrote as read on the run's own thread."""

from __future__ import annotations

import threading
from typing import Any

from lambdajobs.runtime.context import JobContext
from lambdajobs.runtime.durable import Durable


def context(built: list[Any], acquired: Any, writes: list[Any] | None = None) -> JobContext:
    ctx = JobContext(job_id="j1", job="job", attempt=1, max_attempts=3, logger=None)

    def write(lock: Any) -> bool:  # a checkpoint written under `lock`
        if writes is not None:
            writes.append(lock)
        return True

    def factory(reader: Any) -> Durable:
        durable = Durable(
            job_id="j1",
            job="job",
            timeout_seconds=30,
            max_duration_seconds=3600,
            margin_ms=500.0,
            remaining_ms=lambda: 30_000.0,
            acquired=reader,
            write=lambda name, value, lock: write(lock),
        )
        built.append(durable)
        return durable

    ctx.durable_factory, ctx.acquired_reader = factory, acquired
    return ctx


def test_a_run_that_takes_no_step_never_builds_its_durable_state():
    # GIVEN a run's context as the worker makes it (a factory, not a durable state)
    built: list[Any] = []
    ctx = context(built, lambda: ({"id": "j1"}, 7))
    # WHEN the worker captures what the acquire wrote and the job uses no step, sleep or wait
    ctx.capture()
    _ = ctx.step_key, ctx.is_last_attempt
    # THEN no durable state was built
    assert built == [] and ctx.durable is None


def test_the_first_step_builds_it_once_with_what_the_runs_own_thread_read():
    # GIVEN a store that keeps the acquire's item per thread (the run's thread has it, others do not)
    local = threading.local()
    local.acquired = (None, 7)  # no item yet: a first attempt
    built: list[Any] = []
    writes: list[Any] = []
    ctx = context(built, lambda: getattr(local, "acquired", (None, None)), writes)
    ctx.capture()  # on the run's own thread, before the job function runs
    # WHEN the job's first step runs on a thread of its own, and a second step on the run's thread
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(ctx.step("one", lambda: 1)))
    worker.start()
    worker.join()
    assert ctx.step("two", lambda: 2) == 2
    # THEN one durable state was built, and both checkpoints were written under the lock the run's
    # thread read (not the nothing the job's own thread would have read)
    assert got == [1] and len(built) == 1 and ctx.durable is built[0]
    assert writes == [7, 7]


def test_a_durable_state_the_worker_set_is_used_as_before():
    # GIVEN a context given its durable state directly (a test, the light mode's stand-in)
    built: list[Any] = []
    ctx = context(built, lambda: (None, None))
    ready = ctx.durable_factory(lambda: (None, None))  # type: ignore[misc]
    ctx.durable = ready
    # WHEN a step runs: THEN that state runs it, and the factory is not called again
    assert ctx.step("one", lambda: 1) == 1
    assert len(built) == 1 and ctx.durable is ready
