"""The baseline: a send_email worker as a Powertools user writes it by hand (no lambdajobs).

One SQS-triggered function: `BatchProcessor` with `process_partial_response` (partial batch failures),
`idempotent_function` with the stock `DynamoDBPersistenceLayer` keyed on the job id (the envelope's
`id`), the payload validated with pydantic, one JSON `Logger` line and one metric per record (flushed
by `log_metrics`). The work is send_email's with its default sink (`handlers.emails.LogSender`): check
the address, make a provider id, log one redacted line; no email leaves. The payload model is a copy
of `handlers.emails.SendEmail`, so this module imports nothing from lambdajobs or the project.

It reads the messages lambdajobs' producer sends (`{"v", "job", "id", "payload", "enqueued_at"}`), so
both sides of a comparison run the very same messages. Configuration comes from the environment, as
on Lambda: `IDEMPOTENCY_TABLE` (a table with the string hash key `id`, as Powertools documents).
"""

from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from pydantic import BaseModel, Field

logger = Logger(service="send_email")
metrics = Metrics(namespace="BenchBaseline", service="send_email")
processor = BatchProcessor(event_type=EventType.SQS)
persistence = DynamoDBPersistenceLayer(table_name=os.environ.get("IDEMPOTENCY_TABLE", "idempotency"))
idempotency = IdempotencyConfig(event_key_jmespath="id", expires_after_seconds=7 * 86_400)

_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SendEmail(BaseModel):
    to: str = Field(description="recipient address")
    subject: str = Field(max_length=998)
    body: str
    campaign_id: str | None = None


class InvalidRecipientError(Exception):
    """Not an address: retrying will not help."""


def redact_address(address: str) -> str:
    local, _, domain = address.partition("@")
    host, _, tld = domain.rpartition(".")
    return f"{local[:1]}***@{host[:1]}***.{tld}" if host else "***"


@idempotent_function(data_keyword_argument="job", persistence_store=persistence, config=idempotency)
def send_email(job: dict[str, Any], payload: SendEmail) -> dict[str, str]:
    if not _ADDRESS.match(payload.to):
        raise InvalidRecipientError("invalid recipient address: expected name@domain.tld")
    provider_id = uuid.uuid4().hex
    logger.info("email sent", extra={"to": redact_address(payload.to), "provider_id": provider_id})
    metrics.add_metric(name="EmailSent", unit=MetricUnit.Count, value=1)
    return {"provider_id": provider_id}


def record_handler(record: SQSRecord) -> dict[str, str]:
    message = json.loads(record.body)
    payload = SendEmail.model_validate(message["payload"])  # a bad payload fails before the lock
    return send_email(job=message, payload=payload)


@metrics.log_metrics
@logger.inject_lambda_context
def lambda_handler(event: dict[str, Any], context: Any) -> Any:
    idempotency.register_lambda_context(context)
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
