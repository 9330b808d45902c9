"""Fakes for this project's example jobs (handlers/), shared by the tests of the example app."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from handlers import emails
from lambdajobs import PermanentError


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


class CrashAfterEnqueue:
    """`campaign_report`'s enqueue, which really sends, then fails the job as if its invocation died
    right after: the next `crashes` calls crash, every call is recorded (job ids)."""

    def __init__(self, crashes: int) -> None:
        self.crashes = crashes
        self.job_ids: list[str] = []
        self._enqueue = emails.enqueue

    def __call__(self, job: Any, payload: Any, **options: Any) -> str:
        job_id = self._enqueue(job, payload, **options)
        self.job_ids.append(job_id)
        if self.crashes > 0:
            self.crashes -= 1
            raise ConnectionResetError("invocation lost right after enqueueing the summary")
        return job_id


@contextmanager
def crash_after_enqueue(monkeypatch: pytest.MonkeyPatch, crashes: int = 1) -> Iterator[CrashAfterEnqueue]:
    """In the block, `campaign_report` fails `crashes` times just after enqueueing its summary."""
    fake = CrashAfterEnqueue(crashes)
    with monkeypatch.context() as patch:
        patch.setattr(emails, "enqueue", fake)
        yield fake


class BrokenEncoder:
    """An encoder for a source that can never be encoded (corrupt file): fails for good."""

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        self.calls += 1
        raise PermanentError(f"cannot decode the source for {fmt}: corrupt file")
