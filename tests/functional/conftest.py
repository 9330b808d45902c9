"""Functional fixtures: moto in-process, resources provisioned from the job specs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
import time_machine
from moto import mock_aws

import handlers  # noqa: F401  (declares every job)
from handlers import emails
from lambdajobs.local.emulator import BatchOutcome, poll_once
from lambdajobs.local.provision import Provisioned, provision
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import clear_manifest_cache
from lambdajobs.runtime.spec import get_spec, registered_jobs
from lambdajobs.runtime.worker import Worker


@pytest.fixture
def moto_aws() -> Iterator[None]:
    with mock_aws():
        aws.reset_clients()
        clear_manifest_cache()
        yield
    aws.reset_clients()
    clear_manifest_cache()


@pytest.fixture
def stack(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> Provisioned:
    provisioned = provision(registered_jobs(), stack="test")
    for key, value in provisioned.environment().items():
        monkeypatch.setenv(key, value)
    return provisioned


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


class Runner:
    """Runs a job's queue through the real worker the way Lambda's event source mapping would."""

    def __init__(self, provisioned: Provisioned, job: str) -> None:
        self.spec = get_spec(job)
        self.queues = provisioned.queues[job]
        self.worker = Worker(job)

    def handler(self, event: dict[str, Any], context: Any) -> Any:
        return self.worker.handle(event, context)

    def poll(self) -> BatchOutcome | None:
        return poll_once(
            queue_url=self.queues.queue_url,
            queue_arn=self.queues.queue_arn,
            handler=self.handler,
            function_name=f"test-{self.spec.name}",
            timeout_seconds=self.spec.timeout_seconds,
            batch_size=self.spec.batch_size,
        )

    def drain(self, max_batches: int = 100) -> list[BatchOutcome]:
        outcomes = []
        for _ in range(max_batches):
            outcome = self.poll()
            if outcome is None:
                break
            outcomes.append(outcome)
        return outcomes

    def depth(self, dlq: bool = False) -> int:
        url = self.queues.dlq_url if dlq else self.queues.queue_url
        attrs = aws.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def dlq_messages(self) -> list[dict[str, Any]]:
        got = aws.client("sqs").receive_message(
            QueueUrl=self.queues.dlq_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            VisibilityTimeout=0,
        )
        return list(got.get("Messages", []))


@pytest.fixture
def clock() -> Iterator[time_machine.Coordinates]:
    """A stopped clock for moto, Powertools and the worker; `clock.shift(seconds)` moves it."""
    with time_machine.travel(datetime(2026, 11, 29, 12, 0, tzinfo=UTC), tick=False) as traveller:
        yield traveller


@pytest.fixture
def emails_runner(stack: Provisioned) -> Runner:
    return Runner(stack, "send_email")


@pytest.fixture
def declare(stack: Provisioned, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Declare test-only jobs for one test and provision their queues; the registry is restored after."""
    from lambdajobs.local.provision import provision_queues
    from lambdajobs.runtime.settings import dlq_url_env, queue_url_env
    from lambdajobs.runtime.spec import isolated_registry, job

    with isolated_registry(keep=True):

        def declare_job(fn: Any = None, **options: Any) -> Any:
            def register(f: Any) -> Runner:
                spec = job(**options)(f).spec
                queues = provision_queues(spec, stack.stack)
                stack.queues[spec.name] = queues
                monkeypatch.setenv(queue_url_env(spec.name), queues.queue_url)
                monkeypatch.setenv(dlq_url_env(spec.name), queues.dlq_url)
                return Runner(stack, spec.name)

            return register(fn) if fn is not None else register

        yield declare_job
