"""The job record as idempotency lock: in-progress expiry, concurrent duplicates, write cost."""

from __future__ import annotations

import pytest
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyItemAlreadyExistsError
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord
from pydantic import BaseModel

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import Backoff, aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import JobRecordStore, get_status
from tests.jobs.messages import Message

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


class InvocationKilled(BaseException):
    """Stands for Lambda killing the invocation: nothing after it runs, no cleanup."""


def message(to: str = "ada@example.com") -> Message:
    return Message(to=to, subject="Hi", body="Hello")


def invoke(runner, *, remaining_seconds: float = 30):
    got = aws.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    event = sqs_event(got["Messages"], queue_arn=runner.queues.queue_arn, region="us-east-1")
    return runner.handler(event, LambdaContext("test", remaining_seconds))


def test_lock_of_a_dead_invocation_expires_with_the_lambda_context(deliver_runner, sink, clock):
    # GIVEN an invocation that dies while running job "j1" (the lock stays "running")
    def die(to, subject, body):
        raise InvocationKilled

    sink.send = die
    enqueue("deliver", message(), job_id="j1")
    with pytest.raises(InvocationKilled):
        invoke(deliver_runner, remaining_seconds=30)
    assert get_status("j1").state == "running"
    del sink.send  # the sink works again
    # WHEN a duplicate of j1 arrives while the dead invocation's time has not run out
    enqueue("deliver", message(), job_id="j1")
    response = invoke(deliver_runner)
    # THEN nothing is sent, and the message is handed back (a copy, due when the dead invocation's
    # lock expires), so this receive costs no attempt
    assert response == {"batchItemFailures": []}
    assert sink.sent == []
    clock.shift(29)
    assert aws.client("sqs").receive_message(QueueUrl=deliver_runner.queues.queue_url).get("Messages") is None
    # WHEN it arrives again after the dead invocation's remaining time has passed
    clock.shift(2)
    response = invoke(deliver_runner)
    # THEN the expired lock is taken over and the job runs
    assert response == {"batchItemFailures": []}
    assert sink.sent == ["ada@example.com"]
    assert get_status("j1").state == "succeeded"


def test_a_successful_job_costs_two_dynamodb_writes(deliver_runner, sink, clock):
    # GIVEN a counter of DynamoDB write calls on the shared client
    calls: list[str] = []
    ddb = aws.client("dynamodb")
    ddb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    enqueue("deliver", message())
    # WHEN one job runs to success
    outcome = deliver_runner.poll()
    # THEN the lock and the status together cost two writes: acquire (the first attempt's record: a
    # PutItem that lands only where there is none) and complete (the record this run created, whole,
    # while it holds the run's lock)
    assert outcome.failed_ids == []
    assert [c for c in calls if c in WRITES] == ["PutItem", "PutItem"]


class Tick(BaseModel):
    n: int


def test_a_second_copy_of_an_attempt_that_ran_does_not_run_it_again(declare, clock):
    # GIVEN a job that always fails, with two attempts
    ran: list[int] = []

    def fails(payload: Tick) -> dict:
        ran.append(payload.n)
        raise RuntimeError("downstream unavailable")

    runner = declare(fails, name="fails_twice", max_attempts=2, backoff=Backoff.fixed(5))
    enqueue("fails_twice", Tick(n=1), job_id="twice-1")
    runner.poll()
    assert get_status("twice-1").state == "retrying" and ran == [1]
    # WHEN a second copy of that message arrives (SQS at-least-once: both receives are attempt 1)
    enqueue("fails_twice", Tick(n=1), job_id="twice-1")
    assert runner.poll().failed_ids == []
    # THEN it is not run: attempt 1 ran already, and the record is left as it was
    assert ran == [1]
    assert (get_status("twice-1").state, get_status("twice-1").attempts) == ("retrying", 1)
    # AND the first copy's second attempt is the job's last run: two runs for two attempts, not three
    clock.shift(6)
    runner.poll()
    assert ran == [1, 1] and get_status("twice-1").state == "dead"


def test_a_dead_job_id_sent_again_runs_again(declare, clock):
    # GIVEN a job id that ended dead (its one attempt failed)
    ran: list[int] = []
    down = [True]

    def flaky(payload: Tick) -> dict:
        ran.append(payload.n)
        if down[0]:
            raise RuntimeError("downstream unavailable")
        return {"sent": payload.n}

    runner = declare(flaky, name="sent_again", max_attempts=1)
    enqueue("sent_again", Tick(n=1), job_id="again-1")
    runner.poll()
    assert get_status("again-1").state == "dead" and ran == [1]
    # WHEN the producer sends the same job id again, once the downstream is back
    down[0] = False
    enqueue("sent_again", Tick(n=2), job_id="again-1")
    runner.poll()
    # THEN it runs again (a new message, its first attempt: not a copy of the attempt that ran)
    assert ran == [1, 2]
    assert (get_status("again-1").state, get_status("again-1").attempts) == ("succeeded", 1)


def acquire_as(store: JobRecordStore, run: dict) -> str | None:
    """The Powertools status the store gives the record that refused this acquire (None: it ran)."""
    try:
        store.save_inprogress(run, remaining_time_in_millis=30_000)
    except IdempotencyItemAlreadyExistsError as exc:
        return exc.old_data_record.status if exc.old_data_record else "(read the record)"
    return None


def test_a_refused_acquire_maps_to_what_powertools_should_do(stack, clock):
    from lambdajobs.runtime.job_record import JobState

    first, copy = JobRecordStore(stack.config), JobRecordStore(stack.config)
    run = {"job_id": "map-1", "job": "j", "attempt": 1, "max_attempts": 3, "redriven": False}
    # GIVEN attempt 1 runs
    assert acquire_as(first, run) is None
    # WHEN a copy arrives while its lock is live THEN the lock is held (the copy waits for it)
    assert acquire_as(copy, dict(run)) == "INPROGRESS"
    assert copy.held() is not None and copy.held().state == JobState.RUNNING
    # WHEN attempt 1 has failed and a copy of attempt 1 arrives THEN there is nothing for it to run
    first.delete_record(run, RuntimeError("flaky"))
    assert acquire_as(copy, dict(run)) == "COMPLETED"
    assert (copy.held().state, copy.held().attempts, copy.held_state()) == (JobState.RETRYING, 1, "retrying")
    # (and reading it again says the same: no acquire retry can succeed for this copy)
    assert copy.get_record(dict(run)).status == "COMPLETED"
    # WHEN attempt 2 runs and its invocation dies, a copy that was refused reads EXPIRED once the
    # lock is over: Powertools tries the acquire again, and that one takes the lock over
    assert acquire_as(first, {**run, "attempt": 2}) is None
    assert acquire_as(copy, {**run, "attempt": 2}) == "INPROGRESS"
    clock.shift(31)
    assert copy.get_record({**run, "attempt": 2}).status == "EXPIRED"
    assert acquire_as(copy, {**run, "attempt": 3}) is None
    # AND a success is COMPLETED, with its result
    copy._update_record(DataRecord("map-1", status="COMPLETED", response_data='{"ok": true}'))
    assert acquire_as(first, {**run, "attempt": 3}) == "COMPLETED"
    assert first.get_record(run).response_json_as_dict() == {"ok": True}
