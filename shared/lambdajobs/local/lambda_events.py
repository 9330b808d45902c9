"""Lambda's SQS event and context, built the way Lambda builds them, for calling the real handler."""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any


def _b64(value: Any) -> Any:
    return base64.b64encode(value).decode() if isinstance(value, bytes) else value


def _attribute(value: dict[str, Any]) -> dict[str, Any]:
    # ReceiveMessage answers StringValue/BinaryValue/DataType; Lambda's event uses lower camel case,
    # and carries binary values base64-encoded (boto3 hands us the decoded bytes).
    return {
        "stringValue": value.get("StringValue"),
        "binaryValue": _b64(value.get("BinaryValue")),
        "stringListValues": value.get("StringListValues", []),
        "binaryListValues": [_b64(v) for v in value.get("BinaryListValues", [])],
        "dataType": value.get("DataType", "String"),
    }


def sqs_record(message: dict[str, Any], *, queue_arn: str, region: str) -> dict[str, Any]:
    """One record of Lambda's SQS event from one ReceiveMessage message (received with all
    attributes and message attributes). `attributes` holds the system attributes as received, so a
    message sent with a `MessageGroupId` (a fair queue's tenant on a standard queue, or a FIFO
    group) carries it in `attributes.MessageGroupId`, as Lambda's record does."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": dict(message.get("Attributes", {})),
        "messageAttributes": {k: _attribute(v) for k, v in message.get("MessageAttributes", {}).items()},
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": region,
    }


def sqs_event(messages: list[dict[str, Any]], *, queue_arn: str, region: str) -> dict[str, Any]:
    return {"Records": [sqs_record(m, queue_arn=queue_arn, region=region) for m in messages]}


class LambdaContext:
    """A Lambda context whose remaining time counts down from the function timeout. Its deadline is
    on the wall clock, as Lambda's is, so a test clock (`TestStack(..., clock=True)`) moves it too."""

    def __init__(self, function_name: str, timeout_seconds: float, memory_mb: int = 256) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_mb
        self.aws_request_id = str(uuid.uuid4())
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{function_name}"
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.time() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.time()) * 1000))
