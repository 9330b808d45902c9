"""The job record as idempotency lock: in-progress expiry, concurrent duplicates, write cost."""

from __future__ import annotations

import pytest

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
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
