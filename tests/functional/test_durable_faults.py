"""Durable jobs under faults and races: every failure of a checkpoint, of the copy that continues a
parked job or of the park itself leaves nothing lost, no checkpointed step run again, and a record that
tells the truth; a signal racing a wait's timeout resumes the job once; an early copy waits, a
duplicate is dropped. Faults are injected on the worker's own clients (tests/faults.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lambdajobs import signal
from lambdajobs.runtime.settings import ATTR_PRIOR_ATTEMPTS, ATTR_RESUME
from lambdajobs.testing import JobRunner, TestStack
from tests.faults import Faults, carries_resume, is_checkpoint, is_park
from tests.functional.durable_jobs.steps import clocked_stack, ran


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with clocked_stack("durablef") as clocked:
        yield clocked


def settle(stack: TestStack, runner: JobRunner, job_id: str, rounds: int = 20) -> Any:
    """Deliver until the job is done, moving the clock to whatever it waits for."""
    for _ in range(rounds):
        runner.attempt()
        stack.run_schedules()
        status = stack.status(job_id)
        if status.done:
            return status
        due = stack.clock.due()
        stack.clock.advance_to(due[0]) if due else stack.clock.advance(runner.spec.visibility_timeout_seconds)
        stack.clock.advance(1)
    raise AssertionError(f"job {job_id} did not settle: {stack.status(job_id)}")


def test_a_throttled_checkpoint_is_written_again_and_the_step_runs_once(stack):
    runner = stack.runner("napper")
    faults = Faults(runner.worker.stack_config.client("dynamodb"))
    rule = faults.fail("UpdateItem", when=is_checkpoint, times=2)
    job_id = stack.enqueue("napper", {"seconds": 30})
    status = settle(stack, runner, job_id)
    assert rule.hits == 2
    assert status.state == "succeeded" and status.attempts == 1
    assert ran(job_id) == {"before": 1, "after": 1}


def test_a_checkpoint_that_cannot_be_written_fails_the_attempt_and_only_that_step_runs_again(stack):
    # GIVEN a job whose first step is checkpointed, and whose second step's checkpoint fails for good
    runner = stack.runner("napper")
    faults = Faults(runner.worker.stack_config.client("dynamodb"))

    def second(params: dict[str, Any]) -> bool:
        return is_checkpoint(params) and params["ExpressionAttributeNames"]["#step"] == "step:after"

    rule = faults.fail("UpdateItem", when=second, times=1, code="ValidationException")
    job_id = stack.enqueue("napper", {"seconds": 30})
    status = settle(stack, runner, job_id)
    # THEN the attempt failed and the next one ran again only the step whose checkpoint was lost
    assert rule.hits == 1
    assert status.state == "succeeded" and status.attempts == 2
    assert ran(job_id) == {"before": 1, "after": 2}


def test_a_copy_that_cannot_be_sent_brings_the_message_back_and_the_job_goes_on_from_its_checkpoints(stack):
    runner = stack.runner("napper")
    faults = Faults(runner.worker.stack_config.client("sqs"))
    rule = faults.fail("SendMessage", when=carries_resume, times=10)
    job_id = stack.enqueue("napper", {"seconds": 30})
    runner.attempt()
    # the record still says running (the park was not written: no copy carries the job)
    assert rule.hits >= 1 and stack.status(job_id).state == "running"
    faults.remove()
    status = settle(stack, runner, job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"before": 1, "after": 1}
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_park_that_cannot_be_written_is_taken_over_by_its_copy_at_the_runs_deadline(stack):
    runner = stack.runner("napper")
    faults = Faults(runner.worker.stack_config.client("dynamodb"))
    rule = faults.fail("UpdateItem", when=is_park, times=10, code="ValidationException")
    job_id = stack.enqueue("napper", {"seconds": 5})
    runner.attempt()
    assert rule.hits == 1 and stack.status(job_id).state == "running"  # the lock holds: its copy waits
    faults.remove()
    status = settle(stack, runner, job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"before": 1, "after": 1}
    assert status.attempts == 1  # the copy carried the attempt on; waiting for the lock used none


def test_a_signal_that_races_the_waits_timeout_resumes_the_job_once(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 600})
    runner.attempt()
    # WHEN the timeout's copy is due and the signal comes at the same moment
    stack.clock.advance_past_wake()
    assert signal(job_id, "approval", {"approved": True}).woke
    assert runner.depth() == 2  # the timeout's copy and the signal's
    for _ in range(3):
        runner.attempt()
        stack.clock.advance(60)
    # THEN the job resumed once, with one of the two outcomes, and the other copy was dropped
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert status.result["decision"] in ({"approved": True}, {"approved": False, "why": "timeout"})
    assert ran(job_id)["draft"] == 1 and ran(job_id)["publish"] <= 1
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_signal_that_comes_while_the_job_runs_to_its_wait_wakes_it_at_once(stack):
    runner = stack.runner("approver")
    job_id = stack.enqueue("approver", {"timeout_seconds": 3600})
    client = runner.worker.stack_config.client("dynamodb")
    sent: list[bool] = []

    def signal_first(params: dict[str, Any], **_: Any) -> None:  # just before the park is written
        if is_park(params) and not sent:
            sent.append(signal(job_id, "approval", {"approved": True, "late": True}).woke)

    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", signal_first)
    try:
        runner.attempt()
    finally:
        client.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", signal_first)
    assert sent == [False]  # it was not waiting yet: kept for its wait
    status = stack.status(job_id)
    assert status.state == "sleeping"  # not waiting for the signal it has: continuing in a second
    stack.clock.advance_past_wake()
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert status.result == {"decision": {"approved": True, "late": True}}


def test_a_copy_of_a_parked_job_is_dropped_and_its_wake_up_copy_early_waits(stack):
    runner = stack.runner("napper")
    job_id = stack.enqueue("napper", {"seconds": 300})
    runner.attempt()
    status = stack.status(job_id)
    assert status.state == "sleeping"
    record = runner.worker.store.read(job_id)
    assert record is not None and record.wake_at is not None
    queue = runner.queues.queue_url
    body = f'{{"v":1,"job":"napper","id":"{job_id}","payload":{{"seconds":300}}}}'
    sqs = stack.client("sqs")
    # a duplicate (no wake-up of its own) delivered while the job sleeps: dropped, nothing runs
    sqs.send_message(QueueUrl=queue, MessageBody=body)
    # the wake-up's copy delivered early (a clock's difference): handed back until its wake-up
    sqs.send_message(
        QueueUrl=queue,
        MessageBody=body,
        MessageAttributes={
            ATTR_RESUME: {"DataType": "Number", "StringValue": str(record.wake_at)},
            ATTR_PRIOR_ATTEMPTS: {"DataType": "Number", "StringValue": "0"},
        },
    )
    runner.attempt()
    assert stack.status(job_id).state == "sleeping" and ran(job_id) == {"before": 1}
    assert runner.depth() == 2  # the job's own copy, and the early one handed back; the duplicate gone
    status = settle(stack, runner, job_id)
    assert status.state == "succeeded" and ran(job_id) == {"before": 1, "after": 1}
    assert runner.depth() == 0


def test_a_step_whose_budget_fits_no_invocation_fails_the_job_with_that_reason(stack):
    job_id = stack.enqueue("budgeted", {"budget_seconds": 29})
    stack.runner("budgeted").attempt()
    status = stack.status(job_id)
    assert status.state == "dead" and status.error["type"] == "StepError"
    assert "would never fit any invocation" in status.error["message"]


def test_a_step_result_above_the_limit_fails_the_job_naming_the_limit(stack):
    job_id = stack.enqueue("budgeted", {"size": 40_000})
    stack.runner("budgeted").attempt()
    status = stack.status(job_id)
    assert status.state == "dead" and "32768-byte limit" in status.error["message"]


def test_a_sleep_past_max_duration_is_refused(stack):
    runner = stack.runner("bounded")
    job_id = stack.enqueue("bounded", {})
    status = settle(stack, runner, job_id)
    assert status.state == "dead" and status.error["type"] == "StepError"
    assert "max_duration_seconds" in status.error["message"]
    # the second sleep would end 1 s after the 2 hours from its first start
    assert ran(job_id) == {"before-0": 1, "before-1": 1}


def test_a_continuation_stays_on_its_priority_level_and_takes_no_new_rate_limit_slot(stack):
    high = stack.runner("urgent_nap", priority="high")
    job_id = stack.enqueue("urgent_nap", {"seconds": 5}, priority="high")
    high.attempt()
    assert stack.status(job_id).state == "sleeping"
    assert high.depth() == 1  # its copy is on the high level's queue
    stack.clock.advance_past_wake()
    high.attempt()
    # it ran within seconds of the first start: a new slot of its 1/minute limit would be a minute away
    status = stack.status(job_id)
    assert status.state == "succeeded", status
    assert ran(job_id) == {"one": 1, "two": 1}


def test_an_unknown_signal_name_or_bad_data_is_refused_with_one_line(stack):
    from lambdajobs.errors import StepError

    with pytest.raises(StepError, match="non-empty string"):
        signal("job-1", "", {})
    with pytest.raises(StepError, match="not JSON"):
        signal("job-1", "go", object())
    assert stack.status("job-1").state == "pending"  # nothing was written


def test_a_run_whose_lock_was_taken_over_stops_at_its_next_checkpoint_and_dead_letters_nothing(stack):
    # GIVEN a run whose lock another delivery takes over (its invocation taken for dead) mid-run
    runner = stack.runner("napper")
    job_id = stack.enqueue("napper", {"seconds": 30})
    client = runner.worker.stack_config.client("dynamodb")
    table = runner.worker.store.table

    def take_over(params: dict[str, Any], **_: Any) -> None:
        if is_checkpoint(params):
            client.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", take_over)
            client.update_item(
                TableName=table,
                Key={"id": {"S": job_id}},
                UpdateExpression="SET in_progress_expiration = :other",
                ExpressionAttributeValues={":other": {"N": "1"}},
            )

    client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", take_over)
    runner.attempt()
    # THEN it stops without an outcome: not dead, nothing in the DLQ, its message handed back
    assert stack.status(job_id).state == "running"
    assert runner.depth(dlq=True) == 0 and runner.depth() == 1
    assert ran(job_id) == {"before": 1}
