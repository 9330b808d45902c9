"""Contract tests: the event source emulator follows Lambda's documented SQS event source rules."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from moto import mock_aws

from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.runtime import aws

LAMBDA_RECORD_KEYS = {
    "messageId",
    "receiptHandle",
    "body",
    "attributes",
    "messageAttributes",
    "md5OfBody",
    "eventSource",
    "eventSourceARN",
    "awsRegion",
}


@pytest.fixture
def queue() -> Any:
    with mock_aws():
        aws.reset_clients()
        sqs = aws.client("sqs")
        dlq = sqs.create_queue(QueueName="contract-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        url = sqs.create_queue(
            QueueName="contract",
            Attributes={
                "VisibilityTimeout": "1",
                "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
            },
        )["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

        class Q:
            pass

        q = Q()
        q.url, q.arn, q.dlq = url, arn, dlq
        q.send = lambda n: [
            sqs.send_message(
                QueueUrl=url,
                MessageBody=f"m{i}",
                MessageAttributes={"kind": {"DataType": "String", "StringValue": "test"}},
            )["MessageId"]
            for i in range(n)
        ]
        q.depth = lambda u=url: sum(
            int(v)
            for v in sqs.get_queue_attributes(
                QueueUrl=u,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"].values()
        )
        yield q
        aws.reset_clients()


def mapping(queue, handler, **options) -> EventSourceMapping:
    defaults = dict(function_name="fn", timeout_seconds=5, batch_size=10, wait_seconds=1)
    defaults.update(options)
    return EventSourceMapping(queue_url=queue.url, queue_arn=queue.arn, handler=handler, **defaults)


def test_records_are_shaped_like_lambdas_sqs_event(queue):
    seen: list[dict] = []
    queue.send(2)
    mapping(queue, lambda event, ctx: seen.append(event)).poll_once()
    [event] = seen
    assert len(event["Records"]) == 2
    for record in event["Records"]:
        assert set(record) == LAMBDA_RECORD_KEYS
        assert record["eventSource"] == "aws:sqs"
        assert record["eventSourceARN"] == queue.arn and record["awsRegion"] == "us-east-1"
        assert record["attributes"]["ApproximateReceiveCount"] == "1"
        assert {"SentTimestamp", "ApproximateFirstReceiveTimestamp", "SenderId"} <= set(record["attributes"])
        assert record["messageAttributes"]["kind"]["stringValue"] == "test"
        assert record["messageAttributes"]["kind"]["dataType"] == "String"


def test_receives_long_poll(queue):
    waits: list[int] = []
    aws.client("sqs").meta.events.register(
        "provide-client-params.sqs.ReceiveMessage",
        lambda params, **_: waits.append(params["WaitTimeSeconds"]),
    )
    queue.send(1)
    mapping(queue, lambda e, c: None, wait_seconds=3).poll_once()
    assert waits and waits[0] == 3


def test_batch_size_and_window_gather_more_than_one_receive(queue):
    # GIVEN 25 messages and a mapping of batch size 25 with a 2 s window
    queue.send(25)
    sizes: list[int] = []
    # WHEN it gathers a batch THEN it keeps receiving (10 at a time) until the batch is full
    mapping(
        queue, lambda e, c: sizes.append(len(e["Records"])), batch_size=25, max_batching_window_seconds=2
    ).poll_once()
    assert sizes == [25]


def test_without_a_window_a_batch_is_one_receive(queue):
    queue.send(25)
    sizes: list[int] = []
    mapping(queue, lambda e, c: sizes.append(len(e["Records"])), batch_size=25).poll_once()
    assert sizes == [10]


def test_at_most_max_concurrency_batches_in_flight(queue):
    # GIVEN 40 messages and a handler that takes a while
    queue.send(40)
    in_flight, peak, lock = [0], [0], threading.Lock()

    def slow(event, ctx):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        time.sleep(0.3)
        with lock:
            in_flight[0] -= 1

    esm = mapping(queue, slow, batch_size=2, max_concurrency=3, wait_seconds=0)
    # WHEN the mapping runs until the queue is empty
    esm.start()
    deadline = time.monotonic() + 30
    while queue.depth() and time.monotonic() < deadline:
        time.sleep(0.1)
    esm.stop()
    # THEN batches ran concurrently, never more than 3 at once
    assert queue.depth() == 0
    assert peak[0] == 3 and esm.stats.max_in_flight == 3


def test_context_counts_down_from_the_timeout(queue):
    readings: list[int] = []

    def handler(event, ctx):
        readings.append(ctx.get_remaining_time_in_millis())
        time.sleep(0.2)
        readings.append(ctx.get_remaining_time_in_millis())

    queue.send(1)
    mapping(queue, handler, timeout_seconds=3).poll_once()
    assert 2800 < readings[0] <= 3000
    assert readings[1] <= readings[0] - 180


@pytest.mark.parametrize(
    "response",
    [None, {}, {"batchItemFailures": []}, {"batchItemFailures": None}],
    ids=["none", "empty", "empty-list", "null-list"],
)
def test_an_empty_response_deletes_the_whole_batch(queue, response):
    queue.send(3)
    outcome = mapping(queue, lambda e, c: response).poll_once()
    assert outcome.failed_ids == [] and queue.depth() == 0


def test_listed_failures_stay_and_successes_are_deleted(queue):
    ids = queue.send(3)
    outcome = mapping(queue, lambda e, c: {"batchItemFailures": [{"itemIdentifier": ids[1]}]}).poll_once()
    assert outcome.failed_ids == [ids[1]] and outcome.error is None
    assert queue.depth() == 1


def _fail_whole(queue, handler) -> None:
    queue.send(3)
    outcome = mapping(queue, handler).poll_once()
    assert sorted(outcome.failed_ids) == sorted(outcome.message_ids) and outcome.error
    assert queue.depth() == 3, "nothing may be deleted when the whole batch fails"


def test_an_exception_fails_the_whole_batch(queue):
    def boom(event, ctx):
        raise RuntimeError("boom")

    _fail_whole(queue, boom)


@pytest.mark.parametrize(
    "response",
    ["not json", ["a list"], {"batchItemFailures": "x"}],
    ids=["string", "list", "failures-not-list"],
)
def test_an_invalid_response_fails_the_whole_batch(queue, response):
    _fail_whole(queue, lambda e, c: response)


@pytest.mark.parametrize("identifier", ["", None])
def test_an_empty_identifier_fails_the_whole_batch(queue, identifier):
    _fail_whole(queue, lambda e, c: {"batchItemFailures": [{"itemIdentifier": identifier}]})


def test_an_identifier_not_in_the_batch_fails_the_whole_batch(queue):
    _fail_whole(queue, lambda e, c: {"batchItemFailures": [{"itemIdentifier": "not-in-batch"}]})


def test_an_invocation_past_its_timeout_fails_the_whole_batch(queue):
    def slow(event, ctx):
        time.sleep(0.5)

    queue.send(2)
    outcome = mapping(queue, slow, timeout_seconds=0.2).poll_once()
    assert "timed out" in outcome.error and queue.depth() == 2


def test_failing_records_reach_the_dlq_through_receive_counts(queue):
    # GIVEN a queue with maxReceiveCount 2 and a handler that fails every record
    [message_id] = queue.send(1)
    esm = mapping(
        queue, lambda e, c: {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in e["Records"]]}
    )
    # WHEN it is delivered until SQS gives up on it
    receives = []
    for _ in range(4):
        outcome = esm.poll_once()
        if outcome:
            receives.append(outcome.message_ids)
        time.sleep(1.1)  # the queue's visibility timeout
    # THEN it was received twice, then SQS moved it to the DLQ
    assert receives == [[message_id], [message_id]]
    assert queue.depth() == 0 and queue.depth(queue.dlq) == 1
