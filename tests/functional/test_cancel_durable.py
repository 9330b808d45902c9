"""Cancelling durable jobs on the harness's clock: a sleeping job (its wake-up schedule deleted), a job
waiting for a signal, and a running one stopped at its next step's checkpoint; and a signal's wake-up
that keeps the job's tenant."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lambdajobs import cancel, signal
from lambdajobs.errors import SignalRefusedError
from lambdajobs.testing import TestStack
from tests.functional.durable_jobs.steps import clocked_stack, ran


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with clocked_stack("cancel-durable") as clocked:
        yield clocked


def schedules(stack: TestStack) -> list[str]:
    found = stack.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)
    return [s["Name"] for s in found["Schedules"]]


def test_a_sleeping_job_cancelled_ends_cancelled_and_its_wake_up_schedule_is_deleted(stack):
    # GIVEN a job asleep for two hours (its wake-up is a one-time schedule)
    runner = stack.runner("napper")
    job_id = stack.enqueue("napper", {"seconds": 7200})
    runner.attempt()
    assert stack.status(job_id).state == "sleeping" and len(schedules(stack)) == 1
    # WHEN it is cancelled
    result = cancel(job_id, config=stack.config)
    # THEN it is cancelled at once, its schedule is gone, and nothing wakes it or runs it again
    assert (result.outcome, result.state) == ("cancelled", "sleeping")
    assert result.schedule_deleted is not None and schedules(stack) == []
    stack.clock.advance(7300)
    assert stack.run_schedules() == []
    assert runner.attempt() is None
    status = stack.status(job_id)
    assert status.state == "cancelled" and status.wake_at is None
    assert ran(job_id) == {"before": 1}


def test_a_job_waiting_for_a_signal_cancelled_takes_no_signal(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 600})
    runner.attempt()
    assert stack.status(job_id).state == "waiting_signal"
    assert cancel(job_id, config=stack.config).outcome == "cancelled"
    with pytest.raises(SignalRefusedError, match="has finished"):
        signal(job_id, "approval", {"approved": True}, config=stack.config)
    stack.clock.advance(700)  # its timeout's copy arrives, and is dropped
    runner.drain()
    assert stack.status(job_id).state == "cancelled"
    assert ran(job_id) == {"draft": 1}
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_running_durable_job_stops_at_the_checkpoint_after_its_cancel(stack):
    # GIVEN a job of four steps whose second step's work cancels it (an operator, meanwhile)
    runner = stack.runner("cancelled_midway")
    job_id = stack.enqueue("cancelled_midway", {})
    # WHEN it runs
    runner.drain()
    # THEN the checkpoint of step 2 is refused, so it stops there: steps 3 and 4 never run
    status = stack.status(job_id)
    assert status.state == "cancelled", status
    assert ran(job_id) == {"part-1": 1, "part-2": 1}
    assert [s.name for s in status.steps] == ["part-1"]
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_signal_wakes_a_job_with_its_tenant(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 600}, tenant="acme")
    runner.attempt()
    assert stack.status(job_id).state == "waiting_signal"
    assert signal(job_id, "approval", {"approved": True}, config=stack.config).woke
    woken = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    assert [m["Attributes"].get("MessageGroupId") for m in woken] == ["acme"]
