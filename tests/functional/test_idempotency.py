"""The job record as idempotency lock: in-progress expiry, concurrent duplicates, write cost."""

from __future__ import annotations

import pytest

from handlers.emails import SendEmail
from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


class InvocationKilled(BaseException):
    """Stands for Lambda killing the invocation: nothing after it runs, no cleanup."""


def email(to: str = "ada@example.com") -> SendEmail:
    return SendEmail(to=to, subject="Hi", body="Hello")


def deliver(runner, *, remaining_seconds: float = 30):
    got = aws.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    event = sqs_event(got["Messages"], queue_arn=runner.queues.queue_arn, region="us-east-1")
    return runner.handler(event, LambdaContext("test", remaining_seconds))


def test_lock_of_a_dead_invocation_expires_with_the_lambda_context(emails_runner, sender, clock):
    # GIVEN an invocation that dies while running job "j1" (the lock stays "running")
    def die(to, subject, body):
        raise InvocationKilled

    sender.send = die
    enqueue("send_email", email(), job_id="j1")
    with pytest.raises(InvocationKilled):
        deliver(emails_runner, remaining_seconds=30)
    assert get_status("j1").state == "running"
    del sender.send  # the provider works again
    # WHEN a duplicate of j1 arrives while the dead invocation's time has not run out
    enqueue("send_email", email(), job_id="j1")
    response = deliver(emails_runner)
    # THEN it is reported failed (already in progress) and nothing is sent
    assert len(response["batchItemFailures"]) == 1
    assert sender.sent == []
    # WHEN it arrives again after the dead invocation's remaining time has passed
    clock.shift(emails_runner.spec.visibility_timeout_seconds + 1)
    response = deliver(emails_runner)
    # THEN the expired lock is taken over and the job runs
    assert response == {"batchItemFailures": []}
    assert sender.sent == ["ada@example.com"]
    assert get_status("j1").state == "succeeded"


def test_a_successful_job_costs_two_dynamodb_writes(emails_runner, sender, clock):
    # GIVEN a counter of DynamoDB write calls on the shared client
    calls: list[str] = []
    ddb = aws.client("dynamodb")
    ddb.meta.events.register("before-call.dynamodb", lambda model, **_: calls.append(model.name))
    enqueue("send_email", email())
    # WHEN one job runs to success
    outcome = emails_runner.poll()
    # THEN the lock and the status together cost two writes: acquire and complete
    assert outcome.failed_ids == []
    assert [c for c in calls if c in WRITES] == ["UpdateItem", "UpdateItem"]
