"""Fixtures for the tests of this repository's example jobs (handlers/): the same harness a project
would use for its own jobs, `lambdajobs.testing.TestStack`, on the example jobs package."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from handlers import video
from lambdajobs.testing import TestStack
from tests.example_fakes import RecordingSender, recording_sender
from tests.examples.video_fakes import ClockedEncoder

EXAMPLE_JOBS = "handlers"
#: Where `clocked` stacks start their clock.
START = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(EXAMPLE_JOBS, stack="examples") as test_stack:
        yield test_stack


@pytest.fixture
def clocked() -> Iterator[TestStack]:
    """The example jobs on a stopped clock that the test moves (`clocked.clock`): durable jobs' waits,
    continuations and retries come back when the test moves past them."""
    with TestStack(EXAMPLE_JOBS, stack="examples", clock=START) as test_stack:
        yield test_stack


@pytest.fixture
def clocked_encoder(clocked: TestStack) -> Iterator[ClockedEncoder]:
    """transcode_video with an encoder whose encodes move `clocked`'s clock (an hour of video: 1, 2
    and 4 minutes in 720p, 1080p and 4k)."""
    encoder = ClockedEncoder(clocked.clock)
    previous = video.set_encoder(encoder)
    yield encoder
    video.set_encoder(previous)


@pytest.fixture
def sender() -> Iterator[RecordingSender]:
    with recording_sender() as recording:
        yield recording


@pytest.fixture
def instant_encoder() -> Iterator[video.SimulatedEncoder]:
    """transcode_video with an encoder that takes no time."""
    encoder = video.SimulatedEncoder(seconds_per_minute=0)
    previous = video.set_encoder(encoder)
    yield encoder
    video.set_encoder(previous)


@pytest.fixture
def settle(stack: TestStack, clock: Any) -> Callable[..., int]:
    """`settle("send_email", "campaign_report")`: deliver those jobs' queues and the workflow queue
    (the continuer) until all are empty, moving the stopped clock a second between rounds (rate-limit
    hand-backs and retries' backoff are delays); returns the rounds it took."""

    def run(*jobs: str, max_rounds: int = 120) -> int:
        runners = [stack.runner(job) for job in jobs]
        continuer = stack.continuer()
        sqs = stack.client("sqs")
        assert stack.provisioned is not None
        workflow_queue = stack.provisioned.workflow_queue_url
        for rounds in range(1, max_rounds + 1):
            for runner in runners:
                runner.drain()
            continuer.drain()
            attrs = sqs.get_queue_attributes(QueueUrl=workflow_queue, AttributeNames=["All"])["Attributes"]
            notices = sum(int(v) for k, v in attrs.items() if k.startswith("ApproximateNumberOfMessages"))
            if notices == 0 and all(runner.depth() == 0 for runner in runners):
                return rounds
            clock.shift(1)
        raise AssertionError(f"{jobs} still had messages after {max_rounds} rounds")

    return run
