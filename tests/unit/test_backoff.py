"""Retry delays: exponential growth, jitter bounds, the cap, and declaration checks."""

from __future__ import annotations

import itertools
import random

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import Backoff, DeclarationError
from lambdajobs.runtime.backoff import MAX_DELAY_SECONDS
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry


class P(BaseModel):
    x: int = 0


def test_without_jitter_delays_double_until_the_cap():
    backoff = Backoff(base_seconds=10, max_seconds=300, jitter="none")
    assert [backoff.delay(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


@pytest.mark.parametrize("jitter,low_fraction", [("full", 0.0), ("equal", 0.5)])
def test_jittered_delays_stay_within_bounds_and_grow(jitter, low_fraction):
    rng = random.Random(7)
    backoff = Backoff(base_seconds=5, max_seconds=600, jitter=jitter)
    means = []
    for attempt in range(1, 10):
        top = backoff.ceiling(attempt)
        samples = [backoff.delay(attempt, rng) for _ in range(400)]
        assert all(round(low_fraction * top) <= s <= top for s in samples), attempt
        means.append(sum(samples) / len(samples))
        # jitter spreads delays over the range rather than piling them at one value
        assert len(set(samples)) > min(top, 20) / 2
    # the average delay grows with each attempt until the cap
    capped_from = next(n for n in range(1, 10) if backoff.ceiling(n) == 600)
    assert all(a < b for a, b in itertools.pairwise(means[:capped_from]))


def test_default_backoff_suits_a_third_party_api():
    backoff = Backoff()
    assert (backoff.base_seconds, backoff.max_seconds, backoff.jitter) == (10, 600, "full")
    assert [backoff.ceiling(n) for n in (1, 2, 3, 7, 50)] == [10, 20, 40, 600, 600]


def test_delay_never_exceeds_the_sqs_visibility_maximum():
    backoff = Backoff(base_seconds=3600, max_seconds=MAX_DELAY_SECONDS, jitter="none")
    assert backoff.delay(1000) == MAX_DELAY_SECONDS


def test_fixed_delay():
    assert {Backoff.fixed(30).delay(n) for n in range(1, 20)} == {30}


@pytest.mark.parametrize(
    "backoff",
    [
        Backoff(base_seconds=60, max_seconds=30),
        Backoff(base_seconds=1, max_seconds=MAX_DELAY_SECONDS + 1),
        Backoff(base_seconds=-1, max_seconds=10),
        Backoff(jitter="sometimes"),  # type: ignore[arg-type]
    ],
)
def test_bad_backoff_fails_at_declaration(backoff):
    with isolated_registry(), pytest.raises(DeclarationError, match="job 'flaky'"):

        @job(backoff=backoff)
        def flaky(payload: P) -> None: ...
