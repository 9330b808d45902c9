"""The worker end to end on moto: enqueue -> SQS -> Lambda SQS event -> the real handler -> SQS."""

from __future__ import annotations

import json
from dataclasses import replace

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ATTEMPTS, ATTR_ERROR_TYPE, ATTR_REASON, ATTR_SETTLE
from lambdajobs.runtime.worker import Worker
from tests.jobs.media import Clip
from tests.jobs.messages import Message


def message(to: str = "ada@example.com") -> Message:
    return Message(to=to, subject="Spring sale", body="20% off", campaign_id="spring")


def receive_all(url: str) -> list[dict]:
    got = aws.client("sqs").receive_message(
        QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    )
    return list(got.get("Messages", []))


def test_enqueued_jobs_run_once_and_read_succeeded(deliver_runner, sink, clock):
    # GIVEN three jobs on the queue
    ids = [enqueue("deliver", message(f"user{i}@example.com")) for i in range(3)]
    # WHEN the event source delivers them to the worker
    outcome = deliver_runner.poll()
    # THEN all succeed, are deleted, and their records say so
    assert outcome.failed_ids == [] and len(outcome.message_ids) == 3
    assert sorted(sink.sent) == [f"user{i}@example.com" for i in range(3)]
    assert deliver_runner.depth() == 0
    for job_id in ids:
        status = get_status(job_id)
        assert status.state == "succeeded"
        assert status.attempts == 1
        assert status.result["provider_id"].startswith("provider-")
        assert status.finished_at is not None


def test_partial_failure_is_reported_by_message_id(deliver_runner, sink, clock):
    # GIVEN a batch of three where the provider fails for one recipient
    sink.flaky = {"flaky@example.com": 1}
    for to in ("a@example.com", "flaky@example.com", "b@example.com"):
        enqueue("deliver", message(to))
    messages = receive_all(deliver_runner.queues.queue_url)
    flaky_id = next(m["MessageId"] for m in messages if "flaky@" in m["Body"])
    event = sqs_event(messages, queue_arn=deliver_runner.queues.queue_arn, region="us-east-1")
    # WHEN the real handler runs the batch
    response = deliver_runner.handler(event, LambdaContext("test", 30))
    # THEN only the failed record is reported, by its message id
    assert response == {"batchItemFailures": [{"itemIdentifier": flaky_id}]}
    assert sorted(sink.sent) == ["a@example.com", "b@example.com"]


def test_failed_record_is_retried_and_succeeds(deliver_runner, sink, clock):
    # GIVEN a job whose first send fails transiently
    sink.flaky = {"flaky@example.com": 1}
    job_id = enqueue("deliver", message("flaky@example.com"))
    # WHEN it is delivered, fails, and comes back after its backoff delay
    first = deliver_runner.poll()
    assert first.failed_ids == first.message_ids
    retrying = get_status(job_id)
    assert retrying.state == "retrying"
    assert retrying.error == {"type": "TransientError", "message": "provider timed out"}
    clock.shift(deliver_runner.spec.backoff.ceiling(1) + 1)
    second = deliver_runner.poll()
    # THEN the second attempt succeeds and the record counts two attempts
    assert second.failed_ids == []
    status = get_status(job_id)
    assert (status.state, status.attempts) == ("succeeded", 2)
    assert sink.sent == ["flaky@example.com"]


def test_same_job_id_sent_twice_has_one_side_effect(deliver_runner, sink, clock):
    # GIVEN the same job id sent twice (a producer retry), in one batch and again later
    enqueue("deliver", message(), job_id="welcome-ada")
    enqueue("deliver", message(), job_id="welcome-ada")
    deliver_runner.drain()
    enqueue("deliver", message(), job_id="welcome-ada")
    deliver_runner.drain()
    # THEN the email went out once, every message is gone, and the record shows one run
    assert sink.sent == ["ada@example.com"]
    assert deliver_runner.depth() == 0 and deliver_runner.depth(dlq=True) == 0
    status = get_status("welcome-ada")
    assert (status.state, status.attempts) == ("succeeded", 1)


def test_permanent_error_goes_to_dlq_after_one_receive_with_reason(deliver_runner, sink, clock):
    # GIVEN a job whose recipient address is invalid (the job raises PermanentError)
    job_id = enqueue("deliver", message("not-an-address"))
    # WHEN it is delivered once
    outcome = deliver_runner.poll()
    # THEN it is not retried: gone from the queue, in the DLQ with its reason, the record dead
    assert outcome.failed_ids == []
    assert deliver_runner.depth() == 0
    [dead] = deliver_runner.dlq_messages()
    attrs = {k: v["StringValue"] for k, v in dead["MessageAttributes"].items()}
    assert attrs[ATTR_ERROR_TYPE] == "PermanentError"
    assert "invalid recipient address" in attrs[ATTR_REASON]
    assert "not-an-address" not in attrs[ATTR_REASON]  # the reason never echoes the address
    assert attrs[ATTR_ATTEMPTS] == "1"
    assert json.loads(dead["Body"])["id"] == job_id  # the body is kept for redrive
    status = get_status(job_id)
    assert status.state == "dead" and status.error["type"] == "PermanentError"
    assert sink.sent == []


def test_records_that_can_never_succeed_are_dead_lettered_at_once(deliver_runner, sink, clock):
    # GIVEN an undecodable body, an unknown job, an envelope of another job and an invalid payload
    sqs, url = aws.client("sqs"), deliver_runner.queues.queue_url
    bodies = {
        "EnvelopeError": "this is not json",
        "UnknownJobError": json.dumps({"v": 1, "job": "no_such_job", "payload": {}}),
        "PayloadValidationError": json.dumps({"v": 1, "job": "deliver", "id": "bad-1", "payload": {"to": 7}}),
    }
    for body in bodies.values():
        sqs.send_message(QueueUrl=url, MessageBody=body)
    # WHEN they are delivered once
    outcome = deliver_runner.poll()
    # THEN none is retried: all are in the DLQ with the reason's type
    assert outcome.failed_ids == []
    assert deliver_runner.depth() == 0
    got = {
        m["Body"]: m["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"]
        for m in deliver_runner.dlq_messages()
    }
    assert got == {body: error for error, body in bodies.items()}
    assert get_status("bad-1").state == "dead"


def test_a_dlq_that_cannot_be_written_keeps_the_message_on_its_queue(stack, deliver_runner, sink, clock):
    # GIVEN a permanent failure while the DLQ cannot be written (a worker configured with a missing DLQ)
    own = stack.config.queues["deliver"]
    broken = stack.config.with_resources(
        queues={**stack.config.queues, "deliver": replace(own, dlq_url=own.url + "-missing")}
    )
    deliver_runner = stack.runner("deliver", worker=Worker("deliver", config=broken))
    enqueue("deliver", message("not-an-address"))
    # WHEN it is delivered, twice
    deliver_runner.poll()
    clock.shift(2)
    deliver_runner.poll()
    # THEN the message is still on its queue, with the move to the DLQ still to make: not lost
    clock.shift(2)
    assert deliver_runner.depth() == 1
    [copy] = receive_all(deliver_runner.queues.queue_url)
    assert json.loads(copy["MessageAttributes"][ATTR_SETTLE]["StringValue"])["type"] == "PermanentError"


def test_last_attempt_failure_is_dead_lettered_with_reason(deliver_runner, sink, clock):
    # GIVEN a job whose provider always fails
    sink.flaky = {"down@example.com": 99}
    job_id = enqueue("deliver", message("down@example.com"))
    # WHEN it is delivered max_attempts times
    for attempt in range(1, deliver_runner.spec.max_attempts + 1):
        outcome = deliver_runner.poll()
        assert outcome is not None, f"attempt {attempt} was not delivered"
        clock.shift(deliver_runner.spec.visibility_timeout_seconds + 1)
    # THEN the last failure moves it to the DLQ with the reason, and the record is dead
    assert outcome.failed_ids == []
    assert deliver_runner.depth() == 0
    [dead] = deliver_runner.dlq_messages()
    assert dead["MessageAttributes"][ATTR_ATTEMPTS]["StringValue"] == "5"
    assert dead["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "TransientError"
    status = get_status(job_id)
    assert (status.state, status.attempts) == ("dead", 5)
    assert status.error["type"] == "TransientError"


def test_envelope_without_id_uses_the_message_id(deliver_runner, sink, clock):
    # GIVEN a producer in another language that sends an envelope without an id
    body = json.dumps({"v": 1, "job": "deliver", "payload": message().model_dump()})
    message_id = aws.client("sqs").send_message(QueueUrl=deliver_runner.queues.queue_url, MessageBody=body)[
        "MessageId"
    ]
    # WHEN it runs
    deliver_runner.poll()
    # THEN its status is readable by the SQS message id
    assert get_status(message_id).state == "succeeded"


def test_unknown_job_id_reads_pending(stack):
    assert get_status("never-sent").state == "pending"


def test_metrics_per_job_are_emitted_as_emf(deliver_runner, sink, clock, capsys):
    # GIVEN one job that succeeds and one that is dead-lettered
    enqueue("deliver", message("ok@example.com"))
    enqueue("deliver", message("not-an-address"))
    # WHEN the worker runs them
    deliver_runner.poll()
    # THEN one EMF document carries the counts and the duration, with the job and the stack as
    # dimensions (staging and prod in one account do not mix)
    [emf] = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert (emf["job"], emf["stack"]) == ("deliver", "test")
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "LambdaJobs"
    assert sorted(emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"][0]) == ["job", "service", "stack"]
    assert (emf["JobSucceeded"], emf["JobFailed"], emf["JobDeadLettered"]) == ([1.0], [1.0], [1.0])
    assert len(emf["JobDuration"]) == 2


def test_the_job_dimension_follows_the_queue(stack, sink, clock, capsys):
    # GIVEN one worker process serving two jobs in turn (as the local stack does)
    enqueue("deliver", message())
    stack.runner("deliver").poll()
    first = capsys.readouterr().out
    enqueue("encode", Clip(video_id="v", source_uri="s3://x/v.mov"))
    stack.runner("encode").poll()
    second = capsys.readouterr().out
    emf = [json.loads(line) for line in (first + second).splitlines() if line.startswith('{"_aws"')]
    assert [e["job"] for e in emf] == ["deliver", "encode"]


def test_dead_lettering_keeps_the_message_attributes_binary_included(deliver_runner, sink, clock):
    # GIVEN a message with a string and a binary attribute that can never succeed
    body = json.dumps(
        {"v": 1, "job": "deliver", "payload": {"to": "not-an-address", "subject": "s", "body": "b"}}
    )
    aws.client("sqs").send_message(
        QueueUrl=deliver_runner.queues.queue_url,
        MessageBody=body,
        MessageAttributes={
            "tenant": {"DataType": "String", "StringValue": "acme"},
            "trace": {"DataType": "Binary", "BinaryValue": b"\x00\x01trace"},
        },
    )
    # WHEN it is dead-lettered THEN its attributes arrive unchanged beside the reason
    deliver_runner.poll()
    [dead] = deliver_runner.dlq_messages()
    attrs = dead["MessageAttributes"]
    assert attrs["tenant"]["StringValue"] == "acme"
    assert attrs["trace"]["BinaryValue"] == b"\x00\x01trace"
    assert attrs[ATTR_ERROR_TYPE]["StringValue"] == "PermanentError"
