"""Fixtures for the tests of this repository's example jobs (handlers/): the same harness a project
would use for its own jobs, `lambdajobs.testing.TestStack`, on the example jobs package."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import time_machine

from handlers import emails
from lambdajobs.testing import TestStack

EXAMPLE_JOBS = "handlers"


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(EXAMPLE_JOBS, stack="examples") as test_stack:
        yield test_stack


class RecordingSender:
    """Records every send instead of sending."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, to: str, subject: str, body: str) -> str:
        self.sent.append(to)
        return f"provider-{len(self.sent)}"


@pytest.fixture
def sender() -> Iterator[RecordingSender]:
    recording = RecordingSender()
    previous = emails.set_sender(recording)
    yield recording
    emails.set_sender(previous)


@pytest.fixture
def clock() -> Iterator[time_machine.Coordinates]:
    """A stopped clock for moto, Powertools and the worker; `clock.shift(seconds)` moves it."""
    with time_machine.travel(datetime(2026, 11, 29, 12, 0, tzinfo=UTC), tick=False) as traveller:
        yield traveller
