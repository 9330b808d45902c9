"""Durable jobs on the harness: steps run once through continuations, crashes and retries; sleeps
and signal waits park the job with no compute and continue it; duplicates neither run nor wake it.
Time is the harness's clock (`TestStack(..., clock=True)`): a step of 4 minutes moves it by 4 minutes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lambdajobs import signal
from lambdajobs.errors import SignalRefusedError
from lambdajobs.testing import TestStack
from tests.functional.durable_jobs.steps import WORK, Crash, clocked_stack, ran


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with clocked_stack("durable") as clocked:
        yield clocked


def crashing(handle: Any) -> Any:
    """The worker's handler, with a job's `Crash` turned into what Lambda sees: the invocation died."""

    def handler(event: dict[str, Any], context: Any) -> Any:
        try:
            return handle(event, context)
        except Crash as crash:
            raise RuntimeError(f"the invocation crashed after {crash}") from None

    return handler


def test_six_four_minute_steps_in_five_minute_invocations_run_once_each_through_a_crash(stack):
    # GIVEN a job of 6 steps of 4 minutes each, whose function times out at 5 minutes, and an
    # invocation that crashes between steps 3 and 4 (after step 3's checkpoint)
    runner = stack.runner("six_steps")
    runner.worker.handle = crashing(runner.worker.handle)  # type: ignore[method-assign]
    job_id = stack.enqueue("six_steps", {})
    WORK.crash_after.add((job_id, "encode-3"))
    invocations = 0
    # WHEN the test delivers until the job is done, moving the clock past each wake-up
    for _ in range(30):
        if runner.attempt() is not None:
            invocations += 1
        status = stack.status(job_id)
        if status.done:
            break
        if status.state in ("sleeping", "waiting_signal"):
            stack.clock.advance_past_wake()
        else:  # the crash: its message comes back after the visibility timeout
            stack.clock.advance(runner.spec.visibility_timeout_seconds + 1)
    # THEN it succeeded, each step ran exactly once, in more invocations than one
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {f"encode-{n}": 1 for n in range(1, 7)}
    assert status.result == {"results": [f"encode-{n} done" for n in range(1, 7)]}
    assert [s.name for s in status.steps] == [f"encode-{n}" for n in range(1, 7)]
    assert all(s.duration_ms == 240_000 for s in status.steps)
    assert invocations >= 6  # one step per 5-minute invocation, plus the crash's
    assert status.suspensions == 4  # after steps 1, 2, 4 and 5 (the crash ended the third invocation)
    assert status.attempts == 2  # the crash used one attempt; continuations use none
    assert status.progress == 100.0


def test_a_two_hour_sleep_continues_through_a_one_time_schedule(stack):
    runner = stack.runner("napper")
    job_id = stack.enqueue("napper", {"seconds": 7200})
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "sleeping"
    assert status.wake_at == "2030-01-01T11:00:00.000Z"
    assert runner.depth() == 0  # no message waits in SQS: the schedule holds the wake-up
    schedules = stack.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)
    assert len(schedules["Schedules"]) == 1
    # a duplicate of the job's message, delivered while it sleeps, neither runs nor wakes it
    stack.enqueue("napper", {"seconds": 7200}, job_id=job_id)
    runner.attempt()
    assert stack.status(job_id).state == "sleeping" and ran(job_id) == {"before": 1}
    # nothing fires before its time
    stack.clock.advance(7100)
    assert stack.run_schedules() == []
    stack.clock.advance_past_wake()
    assert stack.run_schedules() == [job_id]
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"before": 1, "after": 1}
    assert status.attempts == 1


def test_a_signal_wakes_a_waiting_job_and_returns_its_data(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 3600})
    runner.attempt()
    status = stack.status(job_id)
    assert (status.state, status.waiting_for) == ("waiting_signal", "approval")
    assert status.described_state == "waiting for signal approval"
    result = signal(job_id, "approval", {"approved": True, "by": "ada"})
    assert result.woke
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert status.result == {"decision": {"approved": True, "by": "ada"}}
    assert ran(job_id) == {"draft": 1, "publish": 1}
    with pytest.raises(SignalRefusedError, match=r"has finished \(succeeded\)"):
        signal(job_id, "approval", {"approved": False})


def test_a_signal_sent_before_the_job_starts_is_returned_when_it_waits(stack):
    runner = stack.runner("approver")
    job_id = "early-bird"
    assert not signal(job_id, "approval", {"approved": True}).woke
    early = stack.status(job_id)
    assert early.state == "pending" and not early.has_record and "signals" in (early.note or "")
    stack.enqueue("approver", {}, job_id=job_id)
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert status.result == {"decision": {"approved": True}}


def test_a_wait_past_its_timeout_raises_in_the_job(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 600})
    runner.attempt()
    stack.clock.advance_past_wake()
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert status.result == {"decision": {"approved": False, "why": "timeout"}}
    assert ran(job_id) == {"draft": 1}


def test_a_step_name_used_twice_fails_the_job_naming_it(stack):
    job_id = stack.enqueue("same_name_twice", {})
    stack.runner("same_name_twice").attempt()
    status = stack.status(job_id)
    assert status.state == "dead"
    assert status.error["type"] == "StepError" and "step 'a' twice" in status.error["message"]


def test_a_failed_step_is_retried_and_the_steps_before_it_are_replayed(stack):
    runner = stack.runner("fails_in_a_step")
    job_id = stack.enqueue("fails_in_a_step", {})
    assert runner.attempt().job(job_id).state == "retrying"
    stack.clock.advance_past_backoff()
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"first": 1, "flaky": 2}
    assert status.result["key"] == f"{job_id}:key"


def test_durable_jobs_as_chord_members_and_chain_step_park_and_the_workflow_goes_on_when_they_finish(stack):
    from lambdajobs import chain, chord, sig
    from lambdajobs.runtime.workflow import member_job_id

    # GIVEN a chord of two sleeping members whose callback is a job of steps, then a chain step after it
    wid = chain(
        chord(
            [sig("napper", {"seconds": 120}), sig("napper", {"seconds": 600})], sig("six_steps", {"steps": 2})
        ),
        sig("approver", {"timeout_seconds": 60}),
    ).enqueue()
    members = [member_job_id(wid, 0, i) for i in range(2)]
    # WHEN the members run, they park: the stage is not complete, and nothing after it is sent
    stack.runner("napper").attempt()
    assert [stack.status(m).state for m in members] == ["sleeping", "sleeping"]
    stack.continuer().drain()
    assert stack.runner("six_steps").depth() == 0
    # ... and the workflow goes on only once both have woken and finished
    for _ in range(12):
        for job in ("napper", "six_steps", "approver"):
            stack.runner(job).drain()
        stack.continuer().drain()
        if stack.workflow(wid).state != "running":
            break
        if stack.clock.due("wake"):
            stack.clock.advance_past_wake()
    assert stack.workflow(wid).state == "succeeded", stack.workflow(wid)
    callback = member_job_id(wid, 1, 0)
    assert stack.status(callback).result == {"results": ["encode-1 done", "encode-2 done"]}
    assert ran(callback) == {"encode-1": 1, "encode-2": 1}
    assert all(ran(m) == {"before": 1, "after": 1} for m in members)
    last = stack.status(member_job_id(wid, 2, 0))
    assert last.result == {"decision": {"approved": False, "why": "timeout"}}


@pytest.mark.parametrize("fail_first", [True, False])
def test_steps_called_from_the_jobs_own_threads_are_checkpointed_and_never_run_again(stack, fail_first):
    runner = stack.runner("pooled")
    job_id = stack.enqueue("pooled", {"fail_first": fail_first})
    runner.attempt()
    if fail_first:
        assert stack.status(job_id).state == "retrying"
        assert {s.name for s in stack.status(job_id).steps} == {"720p", "1080p"}
        stack.clock.advance_past_backoff()
        runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"720p": 1, "1080p": 1}
    assert {s.name for s in status.steps} == {"720p", "1080p"}  # the success kept the checkpoints


def test_a_budget_that_the_time_left_cannot_hold_waits_for_a_fresh_invocation_even_as_a_runs_first_step(
    stack,
):
    # GIVEN a batch of two: the first record's step takes 20 s of a 30 s invocation, the second
    # record's step declares 20 s
    first = stack.enqueue("batched", {"work_seconds": 20})
    second = stack.enqueue("batched", {"budget_seconds": 20})
    stack.runner("batched").attempt()
    # THEN the second did not start its step with 10 s left: it continues in a fresh invocation
    assert stack.status(first).state == "succeeded"
    assert stack.status(second).state == "sleeping" and ran(second) == {}
    stack.clock.advance_past_wake()
    stack.runner("batched").attempt()
    assert stack.status(second).state == "succeeded" and ran(second) == {"only": 1}
