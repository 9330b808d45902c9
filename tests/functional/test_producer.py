"""The producer on moto: validation before sending, batches with partial failures, the manifest."""

from __future__ import annotations

import json

import pytest

from lambdajobs.runtime import PayloadTooLargeError, PayloadValidationError, QueueNotFoundError, aws
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import MAX_MESSAGE_BYTES
from lambdajobs.runtime.producer import enqueue, enqueue_many
from tests.functional.conftest import JOBS_PACKAGE
from tests.jobs.messages import Message


def message(i: int) -> Message:
    return Message(to=f"user{i}@example.com", subject="News", body="Hello")


def all_bodies(url: str) -> list[dict]:
    sqs, bodies = aws.client("sqs"), []
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=300)
        if not got.get("Messages"):
            return bodies
        bodies += [json.loads(m["Body"]) for m in got["Messages"]]


class FailSomeEntries:
    """Wraps the SQS client: the first SendMessageBatch call drops `drop` entries and reports them in
    `Failed` (as SQS does, with HTTP 200); every other call passes through."""

    def __init__(self, real, drop: int) -> None:
        self.real, self.drop, self.calls = real, drop, 0

    def __getattr__(self, name):
        return getattr(self.real, name)

    def send_message_batch(self, QueueUrl, Entries):
        self.calls += 1
        if self.calls > 1 or not self.drop:
            return self.real.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)
        kept, dropped = Entries[self.drop :], Entries[: self.drop]
        response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=kept)
        response["Failed"] = [
            {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "try again"}
            for e in dropped
        ]
        return response


def test_enqueue_many_delivers_all_despite_partially_failed_batch(stack):
    # GIVEN an SQS client whose first batch call reports 3 entries as Failed
    flaky = FailSomeEntries(aws.client("sqs"), drop=3)
    aws.set_client("sqs", flaky)
    # WHEN 25 jobs are enqueued
    results = enqueue_many("deliver", [message(i) for i in range(25)])
    # THEN every item is reported sent and all 25 are on the queue exactly once
    assert results.ok and len(results) == 25 and flaky.calls == 4  # 3 chunks + 1 retry
    bodies = all_bodies(stack.provisioned.queues["deliver"].queue_url)
    assert sorted(b["id"] for b in bodies) == sorted(results.job_ids)
    assert len(set(results.job_ids)) == 25


def test_enqueue_many_reports_entries_that_keep_failing(stack):
    # GIVEN entries SQS rejects as the sender's fault (not retried)
    class SenderFault(FailSomeEntries):
        def send_message_batch(self, QueueUrl, Entries):
            response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=Entries[1:])
            response["Failed"] = [
                {"Id": Entries[0]["Id"], "SenderFault": True, "Code": "InvalidParameterValue"}
            ]
            return response

    aws.set_client("sqs", SenderFault(aws.client("sqs"), drop=1))
    # WHEN 12 jobs are enqueued (two chunks)
    results = enqueue_many("deliver", [message(i) for i in range(12)])
    # THEN the first entry of each chunk is reported failed with its code, the others sent
    assert [r.job_id for r in results.failed] == [results[0].job_id, results[10].job_id]
    assert all("InvalidParameterValue" in r.error for r in results.failed)
    assert len(all_bodies(stack.provisioned.queues["deliver"].queue_url)) == 10


def test_invalid_payload_sends_nothing(stack):
    # GIVEN a batch where one payload is invalid
    payloads = [message(0).model_dump(), {"to": "x@example.com"}, message(2).model_dump()]
    # WHEN it is enqueued THEN it raises, naming the job, and the queue stays empty
    with pytest.raises(PayloadValidationError, match="deliver"):
        enqueue_many("deliver", payloads)
    with pytest.raises(PayloadValidationError):
        enqueue("deliver", {"to": 42})
    assert all_bodies(stack.provisioned.queues["deliver"].queue_url) == []


def test_oversized_payload_is_refused_before_sending(stack):
    big = Message(to="a@example.com", subject="big", body="x" * MAX_MESSAGE_BYTES)
    with pytest.raises(PayloadTooLargeError, match="S3"):
        enqueue("deliver", big)
    assert all_bodies(stack.provisioned.queues["deliver"].queue_url) == []


def test_enqueue_many_splits_by_size(stack):
    # GIVEN five payloads of ~400 KB: at most two fit in one 1 MiB batch
    calls: list[int] = []
    aws.client("sqs").meta.events.register(
        "provide-client-params.sqs.SendMessageBatch", lambda params, **_: calls.append(len(params["Entries"]))
    )
    big = [Message(to=f"u{i}@example.com", subject="s", body="x" * 400_000) for i in range(5)]
    results = enqueue_many("deliver", big)
    assert results.ok and calls == [2, 2, 1]


def test_queue_is_found_through_the_stack_manifest(stack):
    # GIVEN a producer that knows only the stack's name (outside the stack's functions)
    producer = StackConfig(stack=stack.stack, jobs=JOBS_PACKAGE)
    # WHEN it enqueues THEN the URL comes from the manifest the stack published in SSM
    job_id = enqueue("deliver", message(1), config=producer)
    assert [b["id"] for b in all_bodies(stack.provisioned.queues["deliver"].queue_url)] == [job_id]
    # AND an unknown stack gives a clear error naming the job and the stack
    with pytest.raises(QueueNotFoundError, match="no queue for job 'deliver' in stack 'other'"):
        enqueue("deliver", message(2), config=StackConfig(stack="other"))


def test_the_environment_configures_a_producer_with_no_config(stack, monkeypatch):
    # GIVEN no configuration bound, and the variables CDK sets on a function (here: this stack's)
    from lambdajobs.runtime import config

    monkeypatch.setenv("LAMBDAJOBS_STACK", stack.stack)
    monkeypatch.setenv("LAMBDAJOBS_JOBS", JOBS_PACKAGE)
    token, fallback = config._current.set(None), config.set_process_default(None)
    try:
        # WHEN a producer enqueues with no config THEN it reaches the stack named in the environment
        job_id = enqueue("deliver", message(3))
    finally:
        config._current.reset(token)
        config.set_process_default(fallback)
    assert [b["id"] for b in all_bodies(stack.provisioned.queues["deliver"].queue_url)] == [job_id]


def test_a_thread_a_job_starts_enqueues_to_the_same_stack(stack, declare, clock):
    # GIVEN a job that enqueues from a thread of its own (a ContextVar is not inherited by threads)
    import threading

    sent: list[str] = []

    def fan_out(payload: Message) -> None:
        worker = threading.Thread(target=lambda: sent.append(enqueue("deliver", payload, job_id="fanned")))
        worker.start()
        worker.join()

    runner = declare(fan_out, name="fan_out")
    enqueue("fan_out", message(4))
    # WHEN it runs
    assert runner.poll().failed_ids == []
    # THEN the thread's enqueue reached this stack (not the environment's default stack, 'lambdajobs')
    assert sent == ["fanned"]
    assert [b["id"] for b in all_bodies(stack.provisioned.queues["deliver"].queue_url)] == ["fanned"]


def test_job_id_is_returned_and_sent(stack):
    assert enqueue("deliver", message(1), job_id="order-42") == "order-42"
    assert all_bodies(stack.provisioned.queues["deliver"].queue_url)[0]["id"] == "order-42"
