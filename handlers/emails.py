"""Email campaign jobs: one `send_email` job per recipient."""

from __future__ import annotations

import re
import uuid
from typing import Protocol

from pydantic import BaseModel, Field

from lambdajobs import JobContext, PermanentError, job

# Deliberately simple: one '@', a dot in the domain, no spaces. Real deliverability is the sender's job.
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SendEmail(BaseModel):
    to: str = Field(description="recipient address")
    subject: str = Field(max_length=998)
    body: str
    campaign_id: str | None = None


class TransientSendError(Exception):
    """The mail provider failed in a way that may pass (timeout, throttling, 5xx): retry."""


class Sender(Protocol):
    def send(self, to: str, subject: str, body: str) -> str:
        """Send one message; return the provider's message id. Raise TransientSendError to retry."""
        ...


def redact_address(address: str) -> str:
    """j***@e***.com: enough to tell messages apart in logs, not enough to identify anyone."""
    local, _, domain = address.partition("@")
    host, _, tld = domain.rpartition(".")
    return f"{local[:1]}***@{host[:1]}***.{tld}" if host else "***"


class LogSender:
    """The default sender: no network, logs one redacted line per message."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, to: str, subject: str, body: str) -> str:
        from lambdajobs.runtime.worker import logger

        message_id = uuid.uuid4().hex
        logger.info("email sent (log sender)", extra={"to": redact_address(to), "provider_id": message_id})
        self.sent.append(to)
        return message_id


_sender: Sender = LogSender()


def set_sender(sender: Sender) -> Sender:
    """Plug in a real sender (SES, an HTTP API); returns the previous one."""
    global _sender
    previous, _sender = _sender, sender
    return previous


def get_sender() -> Sender:
    return _sender


@job(timeout_seconds=30, max_attempts=5, max_concurrency=10, pii_fields=("to",))
def send_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
    if not _ADDRESS.match(payload.to):
        # Never echo the address: it is personal data, and this message lands in the DLQ reason.
        raise PermanentError("invalid recipient address: expected name@domain.tld")
    provider_id = get_sender().send(payload.to, payload.subject, payload.body)
    return {"provider_id": provider_id}
