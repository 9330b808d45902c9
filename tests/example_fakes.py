"""Fakes for this project's example jobs (handlers/), shared by the tests of the example app."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from handlers import emails


class RecordingSender:
    """Records every send instead of sending; the next `failures` sends time out (retryable)."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.failures = 0

    def send(self, to: str, subject: str, body: str) -> str:
        if self.failures > 0:
            self.failures -= 1
            raise emails.TransientSendError("provider timed out")
        self.sent.append(to)
        return f"provider-{len(self.sent)}"


@contextmanager
def recording_sender() -> Iterator[RecordingSender]:
    """send_email's sender replaced by a RecordingSender inside the block."""
    recording = RecordingSender()
    previous = emails.set_sender(recording)
    try:
        yield recording
    finally:
        emails.set_sender(previous)
