"""`deliver`: sends one message through a pluggable sink; an invalid address fails permanently."""

from __future__ import annotations

import re
import uuid
from typing import Protocol

from pydantic import BaseModel

from lambdajobs import JobContext, PermanentError, job

# One '@', a dot in the domain, no spaces.
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class Message(BaseModel):
    to: str
    subject: str
    body: str
    campaign_id: str | None = None


class TransientError(Exception):
    """The sink failed in a way that may pass: the job is retried."""


class Sink(Protocol):
    def send(self, to: str, subject: str, body: str) -> str:
        """Send one message; return its id. Raise TransientError to have the job retried."""
        ...


class NullSink:
    """The default sink: accepts every message, keeps and logs nothing."""

    def send(self, to: str, subject: str, body: str) -> str:
        return uuid.uuid4().hex


_sink: Sink = NullSink()


def set_sink(sink: Sink) -> Sink:
    """Plug in a sink; returns the previous one."""
    global _sink
    previous, _sink = _sink, sink
    return previous


@job(timeout_seconds=30, max_attempts=5, max_concurrency=10, pii_fields=("to",))
def deliver(payload: Message, ctx: JobContext) -> dict[str, str]:
    if not _ADDRESS.match(payload.to):
        # Never echo the address: it is personal data, and this message lands in the DLQ reason.
        raise PermanentError("invalid recipient address: expected name@domain.tld")
    return {"provider_id": _sink.send(payload.to, payload.subject, payload.body)}
