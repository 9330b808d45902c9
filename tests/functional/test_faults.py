"""Bookkeeping faults in the worker: a write of the job record or an SQS send fails (a throttle that
outlasted the SDK's retries) at the worst moment. Whatever fails, the job is not lost, does not run
again, a persistence error is never taken for the job's own error, and the record ends up telling the
truth. Faults are injected on the stack's own clients (`tests.faults`)."""

from __future__ import annotations

import time

import pytest
from pydantic import BaseModel

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import Backoff, PermanentError, lifecycle
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE, ATTR_PRIOR_ATTEMPTS, ATTR_SETTLE
from lambdajobs.runtime.worker import Worker
from tests.faults import ACQUIRE, COMPLETE, Faults, is_acquire, is_completion, is_release, to_queue

#: The worker's own tries of a failed bookkeeping call; Powertools' first call comes before them.
ALL_TRIES = 1 + 3


class Tick(BaseModel):
    n: int


def recorder(ran: list[int]):
    """A job function that records each run and returns its number."""

    def record(payload: Tick) -> dict:
        ran.append(payload.n)
        return {"n": payload.n}

    return record


def cancelled(ran: list[int]):
    """A job function that records each run and fails for good."""

    def permanent(payload: Tick) -> dict:
        ran.append(payload.n)
        raise PermanentError("the order was cancelled")

    return permanent


@pytest.fixture
def ddb_faults(stack):
    faults = Faults(stack.client("dynamodb"))
    yield faults
    faults.remove()


@pytest.fixture
def sqs_faults(stack):
    faults = Faults(stack.client("sqs"))
    yield faults
    faults.remove()


def dead_letter_type(runner) -> str:
    [dead] = runner.dlq_messages()
    return dead["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"]


# -- 1. the job returned, its completion write failed ------------------------------------------------


def test_a_completion_write_that_fails_on_the_last_attempt_is_recorded_later_not_dead_lettered(
    declare, ddb_faults, clock
):
    # GIVEN a job with one attempt, and a completion write that fails every time this invocation tries
    ran: list[int] = []

    def once(payload: Tick) -> dict:
        ran.append(payload.n)
        return {"n": payload.n}

    runner = declare(once, name="once", max_attempts=1)
    fault = ddb_faults.fail(COMPLETE, when=is_completion, times=ALL_TRIES)
    job_id = enqueue("once", Tick(n=1))
    # WHEN it runs
    outcome = runner.poll()
    # THEN the job's return is not taken for a failure: nothing is dead-lettered
    assert fault.hits == ALL_TRIES and ran == [1]
    assert outcome.failed_ids == [] and runner.depth(dlq=True) == 0
    # AND the outcome comes back with the message, which records it without running the job again
    clock.shift(2)
    assert runner.poll().failed_ids == []
    status = get_status(job_id)
    assert (status.state, status.result, status.attempts) == ("succeeded", {"n": 1}, 1)
    assert ran == [1]
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_completion_write_that_fails_once_is_written_again_in_the_same_invocation(
    declare, ddb_faults, clock
):
    runner = declare(recorder([]), name="quick", max_attempts=1)
    ddb_faults.fail(COMPLETE, when=is_completion, times=1)
    job_id = enqueue("quick", Tick(n=7))
    assert runner.poll().failed_ids == []
    assert get_status(job_id).state == "succeeded" and runner.depth() == 0


# -- 2. the lock could not be taken, or not released --------------------------------------------------


def test_a_failed_acquire_on_the_last_attempt_hands_the_message_back_without_using_the_attempt(
    declare, ddb_faults, clock
):
    ran: list[int] = []
    runner = declare(recorder(ran), name="single", max_attempts=1)
    fault = ddb_faults.fail(ACQUIRE, when=is_acquire, times=1)
    job_id = enqueue("single", Tick(n=1))
    # WHEN the lock's write fails on the only attempt
    outcome = runner.poll()
    # THEN the job did not run, and the message was neither failed nor dead-lettered
    assert fault.hits == 1 and ran == []
    assert outcome.failed_ids == [] and runner.depth(dlq=True) == 0
    # AND it comes back (after a backoff) still at attempt 1, and succeeds
    clock.shift(runner.spec.backoff.ceiling(1) + 1)
    assert runner.poll().failed_ids == []
    status = get_status(job_id)
    assert (status.state, status.attempts, ran) == ("succeeded", 1, [1])


def test_a_failed_release_leaves_a_stale_lock_that_costs_no_attempt(declare, ddb_faults, clock):
    # GIVEN a job that fails once then works, with two attempts, and a release write that fails
    calls: list[int] = []

    def flaky(payload: Tick) -> dict:
        calls.append(payload.n)
        if len(calls) == 1:
            raise RuntimeError("downstream unavailable")
        return {}

    runner = declare(flaky, name="flaky", max_attempts=2, backoff=Backoff.fixed(5))
    ddb_faults.fail("UpdateItem", when=is_release, times=ALL_TRIES)
    job_id = enqueue("flaky", Tick(n=1))
    # WHEN attempt 1 fails and its lock cannot be released
    assert runner.poll().failed_ids
    assert get_status(job_id).state == "running"
    # AND attempt 2 arrives after the backoff, while that stale lock still holds
    clock.shift(6)
    outcome = runner.poll()
    # THEN it is handed back, not failed: no attempt is used, nothing runs, nothing is dead-lettered
    assert outcome.failed_ids == [] and calls == [1] and runner.depth(dlq=True) == 0
    # AND once the stale lock expires, attempt 2 runs and succeeds
    clock.shift(runner.spec.timeout_seconds + 1)
    assert runner.poll().failed_ids == []
    status = get_status(job_id)
    assert (status.state, status.attempts, calls) == ("succeeded", 2, [1, 1])
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_failed_release_on_the_last_attempt_dead_letters_with_the_jobs_error(declare, ddb_faults, clock):
    def always(payload: Tick) -> dict:
        raise RuntimeError("downstream unavailable")

    runner = declare(always, name="always", max_attempts=1)
    ddb_faults.fail("UpdateItem", when=is_release, times=ALL_TRIES)
    job_id = enqueue("always", Tick(n=1))
    outcome = runner.poll()
    # THEN the message goes back with the record's mark and the move still to make
    assert outcome.failed_ids == [] and runner.depth(dlq=True) == 0
    # AND the copy makes both: the message is in the DLQ with the job's own error (not the
    # persistence layer's), and the record reads dead with it
    clock.shift(2)
    assert runner.poll().failed_ids == []
    assert dead_letter_type(runner) == "RuntimeError"
    status = get_status(job_id)
    assert (status.state, status.error["type"], status.note) == ("dead", "RuntimeError", None)


# -- 3. a lock held by another delivery ------------------------------------------------------------------


def test_a_copy_meeting_a_live_lock_on_its_last_receive_is_not_dead_lettered(stack, declare, clock):
    ran: list[int] = []
    runner = declare(recorder(ran), name="held", max_attempts=1)
    enqueue("held", Tick(n=1), job_id="held-1")
    # GIVEN another invocation holds the job's lock for 60 more seconds
    table, ddb = stack.config.table_name(), stack.client("dynamodb")
    now = time.time()
    lifecycle.acquire(
        ddb,
        table,
        "held-1",
        "held",
        expiration=int(now) + 3600,
        in_progress_expiration=int(now * 1000) + 60_000,
    )
    # WHEN this copy arrives on its only receive
    outcome = runner.poll()
    # THEN it is handed back until the lock expires, not failed (which would dead-letter it)
    assert outcome.failed_ids == [] and ran == []
    clock.shift(30)
    assert runner.poll() is None
    # AND when the holder has succeeded meanwhile, the copy is a duplicate: done, not run, not dead
    lifecycle.succeed(ddb, table, "held-1", "{}")
    clock.shift(31)
    assert runner.poll().failed_ids == []
    assert ran == [] and runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_copy_received_after_its_last_attempt_is_dead_with_the_reason(stack, declare, clock):
    # GIVEN a handed-back copy whose last attempt's invocation died (its next receive is past the end)
    ran: list[int] = []
    runner = declare(recorder(ran), name="lost", max_attempts=1)
    body = '{"v": 1, "job": "lost", "id": "lost-1", "payload": {"n": 1}}'
    attributes = {ATTR_PRIOR_ATTEMPTS: {"DataType": "Number", "StringValue": "1"}}
    stack.client("sqs").send_message(
        QueueUrl=runner.queues.queue_url, MessageBody=body, MessageAttributes=attributes
    )
    # WHEN it arrives
    assert runner.poll().failed_ids == []
    # THEN it is not run: it goes to the DLQ with the reason, and the record reads dead
    assert ran == [] and dead_letter_type(runner) == "LastAttemptLostError"
    assert get_status("lost-1").state == "dead"
    [dead] = runner.dlq_messages()
    assert ATTR_PRIOR_ATTEMPTS not in dead["MessageAttributes"]  # a redrive starts again at attempt 1


# -- 4. a PermanentError whose mark could not be written -------------------------------------------------


def test_a_permanent_error_stays_permanent_when_marking_it_dead_fails(declare, ddb_faults, clock):
    ran: list[int] = []
    runner = declare(cancelled(ran), name="permanent", max_attempts=5)
    ddb_faults.fail("UpdateItem", when=is_release, times=ALL_TRIES)
    job_id = enqueue("permanent", Tick(n=1))
    outcome = runner.poll()
    # THEN it is not retried: its copy marks the record dead and moves it to the DLQ with its own error
    assert outcome.failed_ids == [] and ran == [1]
    clock.shift(2)
    assert runner.poll().failed_ids == []
    assert dead_letter_type(runner) == "PermanentError" and ran == [1]
    assert get_status(job_id).state == "dead"


def test_a_dead_mark_that_fails_once_is_written_again(declare, ddb_faults, clock):
    runner = declare(cancelled([]), name="permanent2", max_attempts=5)
    ddb_faults.fail("UpdateItem", when=is_release, times=1)
    job_id = enqueue("permanent2", Tick(n=1))
    runner.poll()
    status = get_status(job_id)
    assert status.state == "dead" and status.error["type"] == "PermanentError"


# -- the move to the DLQ fails -------------------------------------------------------------------------


def test_a_failed_move_to_the_dlq_is_made_later_without_running_the_job_again(declare, sqs_faults, clock):
    ran: list[int] = []
    runner = declare(cancelled(ran), name="unmovable", max_attempts=5)
    fault = sqs_faults.fail("SendMessage", when=to_queue(runner.queues.dlq_url), times=3)
    job_id = enqueue("unmovable", Tick(n=1))
    # WHEN the job fails for good and every try to move it to the DLQ fails
    assert runner.poll().failed_ids == []
    assert fault.hits == 3 and runner.depth(dlq=True) == 0
    # THEN the message comes back with the move still to make, and makes it without running the job
    clock.shift(2)
    assert runner.poll().failed_ids == []
    assert dead_letter_type(runner) == "PermanentError"
    assert ran == [1] and runner.depth() == 0
    assert get_status(job_id).state == "dead"


def test_when_no_copy_can_be_sent_either_the_record_is_reported_failed(declare, sqs_faults, clock):
    runner = declare(recorder([]), name="stuck", max_attempts=5)
    enqueue("stuck", Tick(n=1))
    ddb_faults = Faults(runner.stack.client("dynamodb"))
    ddb_faults.fail(ACQUIRE, when=is_acquire, times=1)
    sqs_faults.fail("SendMessage", times=3)
    try:
        outcome = runner.poll()
    finally:
        ddb_faults.remove()
    # THEN the message stays on its queue (reported failed): SQS still has it, nothing is lost
    assert outcome.failed_ids == outcome.message_ids
    assert runner.depth() == 1


def test_a_handed_back_envelope_without_id_keeps_its_job_id(stack, declare, clock):
    # GIVEN a producer that sends no `id` (the job id is then the message id), and that job's lock held
    ran: list[int] = []
    runner = declare(recorder(ran), name="anonymous", max_attempts=3)
    sent = stack.client("sqs").send_message(
        QueueUrl=runner.queues.queue_url, MessageBody='{"v": 1, "job": "anonymous", "payload": {"n": 1}}'
    )
    job_id = sent["MessageId"]
    table, ddb = stack.config.table_name(), stack.client("dynamodb")
    now = time.time()
    lifecycle.acquire(
        ddb,
        table,
        job_id,
        "anonymous",
        expiration=int(now) + 3600,
        in_progress_expiration=int(now * 1000) + 10_000,
    )
    # WHEN the message is handed back and its copy (a new message id) runs after the lock expired
    assert runner.poll().failed_ids == [] and ran == []
    clock.shift(11)
    assert runner.poll().failed_ids == []
    # THEN the copy ran as the same job: the original id's record succeeded, and the job ran once
    assert ran == [1]
    assert get_status(job_id).state == "succeeded"


# -- found in review: locks, loops, expiry, trust ------------------------------------------------------


def hold_lock(stack, job_id: str, job: str, seconds: float) -> int:
    """Another delivery takes the job's lock for `seconds`; returns that lock (its expiry, ms)."""
    now = time.time()
    lock = int(now * 1000) + int(seconds * 1000)
    lifecycle.acquire(
        stack.client("dynamodb"),
        stack.config.table_name(),
        job_id,
        job,
        expiration=int(now) + 3600,
        in_progress_expiration=lock,
    )
    return lock


def send_copy(stack, runner, body: str, **attributes: str) -> None:
    """A message as the worker's hand-back would send it, with these attributes."""
    stack.client("sqs").send_message(
        QueueUrl=runner.queues.queue_url,
        MessageBody=body,
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    )


def test_a_copy_past_its_last_attempt_does_not_break_a_live_lock(stack, declare, clock):
    # GIVEN a copy past its last attempt, while a re-send of the same job id runs (a live lock)
    ran: list[int] = []
    runner = declare(recorder(ran), name="late", max_attempts=1)
    hold_lock(stack, "late-1", "late", 30)
    send_copy(
        stack,
        runner,
        '{"v": 1, "job": "late", "id": "late-1", "payload": {"n": 1}}',
        **{ATTR_PRIOR_ATTEMPTS: "1"},
    )
    # WHEN it arrives
    assert runner.poll().failed_ids == []
    # THEN the live run keeps its record and its lock: the copy waits for it, nothing is dead-lettered
    assert get_status("late-1").state == "running" and runner.depth(dlq=True) == 0
    item = stack.client("dynamodb").get_item(TableName=stack.config.table_name(), Key={"id": {"S": "late-1"}})
    assert "in_progress_expiration" in item["Item"]
    assert ran == []


def test_an_acquire_error_that_waiting_cannot_fix_reaches_the_dlq(declare, ddb_faults, clock):
    # GIVEN a table the worker may not write (access denied, not a throttle)
    ran: list[int] = []
    runner = declare(recorder(ran), name="denied", max_attempts=2, backoff=Backoff.fixed(5))
    ddb_faults.fail(ACQUIRE, when=is_acquire, times=99, code="AccessDeniedException")
    enqueue("denied", Tick(n=1))
    # WHEN it is delivered again and again
    for _ in range(4):
        runner.poll()
        clock.shift(6)
    # THEN each receive counted: after max_attempts SQS moved it to the DLQ (not handed back for ever)
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1 and ran == []


def test_an_outcome_recorded_by_a_copy_keeps_the_records_ttl(stack, declare, ddb_faults, clock):
    # GIVEN a success whose completion write failed, its copy handled by a worker that never ran a job
    runner = declare(recorder([]), name="ttl", max_attempts=1)
    ddb_faults.fail(COMPLETE, when=is_completion, times=ALL_TRIES)
    job_id = enqueue("ttl", Tick(n=1))
    runner.poll()
    fresh = stack.runner("ttl", worker=Worker("ttl", config=stack.config))
    clock.shift(2)
    assert fresh.poll().failed_ids == []
    # THEN the record keeps the stack's record TTL, not Powertools' one-hour default
    item = stack.client("dynamodb").get_item(TableName=stack.config.table_name(), Key={"id": {"S": job_id}})
    expiration = int(item["Item"]["expiration"]["N"])
    assert item["Item"]["state"]["S"] == "succeeded"
    assert expiration >= time.time() + stack.config.record_ttl_seconds - 60


def test_a_late_success_does_not_overwrite_a_run_that_took_the_lock_over(stack, declare, ddb_faults, clock):
    # GIVEN a success whose completion write failed, so its outcome rides on a copy
    runner = declare(recorder([]), name="takeover", max_attempts=3)
    ddb_faults.fail(COMPLETE, when=is_completion, times=ALL_TRIES)
    job_id = enqueue("takeover", Tick(n=1))
    runner.poll()
    # AND before the copy is handled, that run's lock expired and another delivery took the job over
    clock.shift(runner.spec.timeout_seconds + 1)
    their_lock = hold_lock(stack, job_id, "takeover", 60)
    # WHEN the copy records its outcome
    runner.poll()
    # THEN the live run is not overwritten: it keeps its lock and records its own outcome
    item = stack.client("dynamodb").get_item(TableName=stack.config.table_name(), Key={"id": {"S": job_id}})
    assert item["Item"]["state"]["S"] == "running"
    assert int(item["Item"]["in_progress_expiration"]["N"]) == their_lock


def test_a_handed_back_original_is_deleted_at_once(stack, declare, clock):
    # GIVEN a job whose lock is held, delivered by an invocation that dies right after handing it back
    ran: list[int] = []
    runner = declare(recorder(ran), name="gone", max_attempts=1)
    enqueue("gone", Tick(n=1), job_id="gone-1")
    hold_lock(stack, "gone-1", "gone", 10)
    got = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    event = sqs_event(got, queue_arn=runner.queues.queue_arn, region="us-east-1")
    runner.handler(event, LambdaContext("gone", 30))  # the batch response is never applied
    # THEN only the copy is left: the original did not wait for the batch response to be deleted
    clock.shift(11)
    assert runner.depth() == 1
    assert runner.poll().failed_ids == [] and ran == [1]
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_an_outcome_for_another_job_id_is_ignored(stack, declare, clock):
    # GIVEN a message whose settle attribute names another job id (forged, or damaged)
    ran: list[int] = []
    runner = declare(recorder(ran), name="forged", max_attempts=3)
    settle = '{"action": "complete", "job_id": "someone-else", "result": "{}"}'
    send_copy(
        stack, runner, '{"v": 1, "job": "forged", "id": "mine", "payload": {"n": 1}}', **{ATTR_SETTLE: settle}
    )
    # WHEN it is handled
    runner.poll()
    clock.shift(1)
    runner.poll()
    # THEN the outcome is not recorded for anyone; the message ran as the job it is
    assert get_status("someone-else").state == "pending"
    assert get_status("mine").state == "succeeded" and ran == [1]


def test_a_dead_lettered_original_is_deleted_at_once(stack, declare, clock):
    # GIVEN a job that fails for good, delivered by an invocation that dies right after moving it
    ran: list[int] = []
    runner = declare(cancelled(ran), name="doomed", max_attempts=3)
    enqueue("doomed", Tick(n=1))
    got = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, AttributeNames=["All"], MessageAttributeNames=["All"]
    )["Messages"]
    event = sqs_event(got, queue_arn=runner.queues.queue_arn, region="us-east-1")
    runner.handler(event, LambdaContext("doomed", 30))  # the batch response is never applied
    # THEN the original is gone with the move: it cannot come back to run again and be moved twice
    clock.shift(6 * 30 + 1)
    assert runner.poll() is None
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1 and ran == [1]
