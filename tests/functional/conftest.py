"""Functional fixtures: moto in-process through `lambdajobs.testing`, resources provisioned from the
specs of the test jobs (`tests.jobs`), never from this repository's example jobs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lambdajobs.runtime.spec import load_jobs
from lambdajobs.testing import JobRunner, TestStack
from tests.jobs import media, messages

JOBS_PACKAGE = "tests.jobs"
load_jobs(JOBS_PACKAGE)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(JOBS_PACKAGE, stack="test") as test_stack:
        yield test_stack


class RecordingSink:
    """Records every send; `flaky` addresses raise TransientError for their first `failures` sends."""

    def __init__(self, flaky: dict[str, int] | None = None) -> None:
        self.sent: list[str] = []
        self.flaky = dict(flaky or {})

    def send(self, to: str, subject: str, body: str) -> str:
        if self.flaky.get(to, 0) > 0:
            self.flaky[to] -= 1
            raise messages.TransientError("provider timed out")
        self.sent.append(to)
        return f"provider-{len(self.sent)}"


@pytest.fixture
def sink() -> Iterator[RecordingSink]:
    recording = RecordingSink()
    previous = messages.set_sink(recording)
    yield recording
    messages.set_sink(previous)


@pytest.fixture
def use_encoder() -> Iterator[Callable[[media.Encoder], media.Encoder]]:
    """`use_encoder(fn)` plugs an encoder into `encode` for one test; the previous one comes back after."""
    previous = media.set_encoder(media.rename_encoder)
    yield media.set_encoder
    media.set_encoder(previous)


@pytest.fixture
def deliver_runner(stack: TestStack) -> JobRunner:
    return stack.runner("deliver")


@pytest.fixture
def declare(stack: TestStack) -> Iterator[Any]:
    """Declare test-only jobs for one test and provision their queues; the registry is restored after."""
    from lambdajobs.runtime.spec import job
    from lambdajobs.testing import isolated_registry

    with isolated_registry(keep=True):

        def declare_job(fn: Any = None, **options: Any) -> Any:
            def register(f: Any) -> JobRunner:
                spec = job(**options)(f).spec
                stack.add_job(spec)
                return stack.runner(spec.name)

            return register(fn) if fn is not None else register

        yield declare_job
