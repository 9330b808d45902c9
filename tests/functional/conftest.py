"""Functional fixtures: moto in-process through `lambdajobs.testing`, resources provisioned from the
job specs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine

from handlers import emails
from lambdajobs.runtime.spec import load_jobs
from lambdajobs.testing import JobRunner, TestStack

JOBS_PACKAGE = "handlers"
load_jobs(JOBS_PACKAGE)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(JOBS_PACKAGE, stack="test") as test_stack:
        yield test_stack


def Runner(stack: TestStack, job: str) -> JobRunner:
    return stack.runner(job)


class RecordingSender:
    """Records every send; `flaky` addresses raise TransientSendError for their first `failures` sends."""

    def __init__(self, flaky: dict[str, int] | None = None) -> None:
        self.sent: list[str] = []
        self.flaky = dict(flaky or {})

    def send(self, to: str, subject: str, body: str) -> str:
        if self.flaky.get(to, 0) > 0:
            self.flaky[to] -= 1
            raise emails.TransientSendError("provider timed out")
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


@pytest.fixture
def emails_runner(stack: TestStack) -> JobRunner:
    return stack.runner("send_email")


@pytest.fixture
def declare(stack: TestStack) -> Iterator[Any]:
    """Declare test-only jobs for one test and provision their queues; the registry is restored after."""
    from lambdajobs.runtime.spec import isolated_registry, job

    with isolated_registry(keep=True):

        def declare_job(fn: Any = None, **options: Any) -> Any:
            def register(f: Any) -> JobRunner:
                spec = job(**options)(f).spec
                stack.add_job(spec)
                return stack.runner(spec.name)

            return register(fn) if fn is not None else register

        yield declare_job
