"""Fixtures for the tests of this repository's example jobs (handlers/): the same harness a project
would use for its own jobs, `lambdajobs.testing.TestStack`, on the example jobs package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from lambdajobs.testing import TestStack
from tests.example_fakes import RecordingSender, recording_sender

EXAMPLE_JOBS = "handlers"


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(EXAMPLE_JOBS, stack="examples") as test_stack:
        yield test_stack


@pytest.fixture
def sender() -> Iterator[RecordingSender]:
    with recording_sender() as recording:
        yield recording
