"""Lambda's SQS event source mapping, emulated: receive a batch, call the real handler, apply the
documented partial batch response rules. (moto's own Lambda trigger delivers one record per call,
ignores batchItemFailures and needs Docker.)

Rules (AWS docs, "Handling errors for an SQS event source"): the batch succeeds when the response is
empty/null or its `batchItemFailures` is empty/null; the listed records fail; the whole batch fails
when the handler raises, the response is malformed, or an identifier is empty or not in the batch.
Failed records are not deleted: they come back after their visibility timeout, and SQS redrive moves
them to the DLQ after maxReceiveCount receives.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lambdajobs.lambda_events import LambdaContext, sqs_event
from shared import aws

Handler = Callable[[dict[str, Any], Any], Any]


@dataclass
class BatchOutcome:
    message_ids: list[str]
    failed_ids: list[str] = field(default_factory=list)
    response: Any = None
    error: str | None = None  # why the whole batch failed, if it did

    @property
    def succeeded_ids(self) -> list[str]:
        failed = set(self.failed_ids)
        return [m for m in self.message_ids if m not in failed]


def failed_ids(response: Any, message_ids: list[str]) -> tuple[list[str], str | None]:
    """The records to keep, per the partial batch response rules; (all, reason) when the whole batch fails."""
    if response is None or response == {}:
        return [], None
    if not isinstance(response, dict):
        return list(message_ids), f"response is a {type(response).__name__}, not an object"
    items = response.get("batchItemFailures")
    if items is None or items == []:
        return [], None
    if not isinstance(items, list):
        return list(message_ids), "batchItemFailures is not a list"
    known = set(message_ids)
    failed: list[str] = []
    for item in items:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier:
            return list(message_ids), "an itemIdentifier is empty or missing"
        if identifier not in known:
            return list(message_ids), f"itemIdentifier {identifier!r} is not in the batch"
        failed.append(identifier)
    return failed, None


def poll_once(
    *,
    queue_url: str,
    queue_arn: str,
    handler: Handler,
    function_name: str,
    timeout_seconds: float,
    batch_size: int = 10,
    wait_seconds: int = 0,
    region: str = "us-east-1",
) -> BatchOutcome | None:
    """Receive one batch (at most 10 per ReceiveMessage), invoke the handler, delete the successes."""
    sqs = aws.client("sqs")
    messages = sqs.receive_message(
        QueueUrl=queue_url,
        MaxNumberOfMessages=max(1, min(10, batch_size)),
        WaitTimeSeconds=wait_seconds,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    ).get("Messages", [])
    if not messages:
        return None
    ids = [m["MessageId"] for m in messages]
    outcome = BatchOutcome(message_ids=ids)
    context = LambdaContext(function_name, timeout_seconds)
    try:
        outcome.response = handler(sqs_event(messages, queue_arn=queue_arn, region=region), context)
    except Exception as exc:  # an invocation error fails the whole batch
        outcome.failed_ids, outcome.error = list(ids), f"handler raised {type(exc).__name__}: {exc}"
        return outcome
    outcome.failed_ids, outcome.error = failed_ids(outcome.response, ids)
    done = set(outcome.succeeded_ids)
    entries = [
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]}
        for i, m in enumerate(messages)
        if m["MessageId"] in done
    ]
    if entries:
        sqs.delete_message_batch(QueueUrl=queue_url, Entries=entries)
    return outcome
