"""Shared fixtures. Every AWS call in tests goes to moto in-process; never to real AWS."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import time_machine

#: `make test` runs the suite on every core: one work unit per module, longest first (tests/parallel.py).
pytest_plugins = ["tests.parallel"]

# Synth records which stack holds each job in lambdajobs.stacks.json beside pyproject.toml
# (lambdajobs.cdk.layout); the apps tests synthesize record theirs in a file of the test session's.
os.environ["LAMBDAJOBS_STACKS_FILE"] = os.path.join(
    tempfile.mkdtemp(prefix="lambdajobs-stacks-"), "stacks.json"
)

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(autouse=True)
def _no_real_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in FAKE_AWS_ENV.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    # Powertools idempotency is on; keep its logs quiet and its metrics namespace fixed.
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "LambdaJobs")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[time_machine.Coordinates]:
    """A stopped clock for moto, Powertools and the worker; `clock.shift(seconds)` moves it. A worker
    cannot wait for a rate-limit slot on a stopped clock, so every wait is a hand-back while it runs
    (its waits in place are tested on the real clock)."""
    from lambdajobs.runtime import ratelimit

    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", 0)
    with time_machine.travel(datetime(2026, 11, 29, 12, 0, tzinfo=UTC), tick=False) as traveller:
        yield traveller
