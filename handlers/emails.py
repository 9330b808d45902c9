"""Email campaign jobs: one `send_email` job per recipient.

The mail provider accepts at most 20 messages a second from this account (its quota), whoever sends
them: every worker of `send_email` shares one rate limiter, so a campaign of any size never gets
"rate limit exceeded". Premium customers' mail goes at `priority="high"`: its own queue with twice
the concurrency, and it does not wait behind a campaign's backlog for the limiter either.
"""

from __future__ import annotations

import re
import uuid
from typing import Protocol

from pydantic import BaseModel, Field

from lambdajobs import JobContext, PermanentError, RateLimit, job

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


#: The provider's sending quota (per account: every job that sends mail shares it by name).
MAIL_PROVIDER_QUOTA = RateLimit("mail_provider", 20, per="second")


@job(
    timeout_seconds=30,
    max_attempts=5,
    max_concurrency=10,
    pii_fields=("to",),
    rate_limit=MAIL_PROVIDER_QUOTA,
    priorities=("high", "normal"),
)
def send_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
    if not _ADDRESS.match(payload.to):
        # Never echo the address: it is personal data, and this message lands in the DLQ reason.
        raise PermanentError("invalid recipient address: expected name@domain.tld")
    provider_id = get_sender().send(payload.to, payload.subject, payload.body)
    return {"provider_id": provider_id}
