"""Rate limits across concurrent workers, on moto with a controlled clock: the limit holds in every
window, waiting never uses an attempt or dead-letters, per-key quotas hold per key, and jobs can share
a named limiter."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import DeclarationError, RateLimit
from lambdajobs.runtime.producer import enqueue_many
from lambdajobs.runtime.records import get_status, get_statuses
from lambdajobs.runtime.spec import isolated_registry, job
from lambdajobs.runtime.worker import Worker
from tests.faults import Faults


class Mail(BaseModel):
    n: int
    tier: str = "standard"


class Starts:
    """When each job started (the controlled clock's time), per tier; thread-safe."""

    def __init__(self) -> None:
        self.at: list[tuple[float, str]] = []
        self._lock = threading.Lock()

    def job(self):
        def send(payload: Mail) -> dict:
            with self._lock:
                self.at.append((time.time(), payload.tier))
            return {}

        return send

    def max_in_any_window(self, seconds: float, tier: str | None = None) -> int:
        times = sorted(t for t, k in self.at if tier is None or k == tier)
        return max((sum(1 for u in times if t <= u < t + seconds) for t in times), default=0)


def run_concurrently(stack, job_name: str, clock, *, workers: int, seconds: int) -> None:
    """`workers` workers (each its own Worker, as separate Lambda instances are) poll the job's queue at
    once, every simulated second, for `seconds` seconds of the controlled clock."""
    runners = [stack.runner(job_name, worker=Worker(job_name, config=stack.config)) for _ in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for _ in range(seconds):
            list(pool.map(lambda runner: runner.drain(), runners))
            clock.shift(1)


def test_a_rate_limit_holds_across_five_concurrent_workers_without_using_attempts(stack, declare, clock):
    # GIVEN 300 jobs limited to 100 a minute, and five workers taking them at once
    starts = Starts()
    runner = declare(starts.job(), name="limited", rate_limit="100/minute", max_attempts=1, batch_size=10)
    ids = [r.job_id for r in enqueue_many("limited", [Mail(n=i) for i in range(300)])]
    # WHEN they run for four minutes of the clock
    run_concurrently(stack, "limited", clock, workers=5, seconds=240)
    # THEN every job ran once, at most 100 in any 60-second window
    assert len(starts.at) == 300
    assert starts.max_in_any_window(60) <= 100
    assert starts.max_in_any_window(60) >= 99  # and the limit was used, not just undershot
    # AND waiting used no attempt (max_attempts=1) and dead-lettered nothing
    statuses = get_statuses(ids)
    assert {s.state for s in statuses.values()} == {"succeeded"}
    assert {s.attempts for s in statuses.values()} == {1}
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_waiting_job_reads_waiting_until_its_slot(stack, declare, clock):
    starts = Starts()
    runner = declare(starts.job(), name="paced", rate_limit="1/minute", max_attempts=1)
    first, second = (r.job_id for r in enqueue_many("paced", [Mail(n=1), Mail(n=2)]))
    runner.drain()
    # THEN one ran; the other waits for its slot a minute later, not failed
    assert len(starts.at) == 1
    waiting = next(s for s in get_statuses([first, second]).values() if s.state != "succeeded")
    assert waiting.state == "waiting" and waiting.waiting_until is not None and not waiting.done
    # AND it does not come back before its slot, then runs
    clock.shift(58)
    assert runner.drain() == []
    clock.shift(3)
    runner.drain()
    assert len(starts.at) == 2
    assert {get_status(first).state, get_status(second).state} == {"succeeded"}


def test_per_key_quotas_hold_per_key(stack, declare, clock):
    # GIVEN premium customers at 20 a minute and everyone else at 5, through one job
    starts = Starts()
    limit = RateLimit("exports", 5, per="minute", key="tier", quotas={"premium": 20})
    declare(starts.job(), name="export", rate_limit=limit, max_attempts=1)
    enqueue_many("export", [Mail(n=i, tier="premium") for i in range(40)])
    enqueue_many("export", [Mail(n=100 + i, tier="standard") for i in range(10)])
    # WHEN three workers run them for two minutes
    run_concurrently(stack, "export", clock, workers=3, seconds=120)
    # THEN each tier keeps its own quota, and one does not eat the other's
    assert starts.max_in_any_window(60, "premium") == 20
    assert starts.max_in_any_window(60, "standard") == 5
    assert sum(1 for _, tier in starts.at if tier == "standard") == 10


def test_jobs_sharing_a_named_limiter_share_its_rate(stack, declare, clock):
    # GIVEN two jobs calling one API limited to 10 a minute
    starts = Starts()
    shared = RateLimit("partner-api", 10, per="minute")
    declare(starts.job(), name="sync_orders", rate_limit=shared, max_attempts=1)
    declare(starts.job(), name="sync_refunds", rate_limit=shared, max_attempts=1)
    enqueue_many("sync_orders", [Mail(n=i, tier="orders") for i in range(15)])
    enqueue_many("sync_refunds", [Mail(n=i, tier="refunds") for i in range(15)])
    orders, refunds = stack.runner("sync_orders"), stack.runner("sync_refunds")
    for _ in range(200):
        orders.drain()
        refunds.drain()
        clock.shift(1)
    # THEN together they stay within the one limit
    assert len(starts.at) == 30
    assert starts.max_in_any_window(60) <= 10


def test_a_limiter_that_cannot_be_written_hands_the_job_back(stack, declare, clock):
    starts = Starts()
    runner = declare(starts.job(), name="throttled", rate_limit="10/second", max_attempts=1)
    faults = Faults(stack.client("dynamodb"))
    limiter_write = faults.fail(
        "UpdateItem",
        when=lambda p: str(p.get("Key", {}).get("id", {}).get("S", "")).startswith("ratelimit#"),
        times=3,
    )
    try:
        [job_id] = (r.job_id for r in enqueue_many("throttled", [Mail(n=1)]))
        # WHEN the limiter's write is throttled every time this invocation tries
        outcome = runner.poll()
    finally:
        faults.remove()
    # THEN the job is handed back, not failed (its only attempt is intact), and runs next time
    assert limiter_write.hits >= 1 and outcome.failed_ids == [] and starts.at == []
    clock.shift(2)
    runner.drain()
    assert get_status(job_id).state == "succeeded" and len(starts.at) == 1


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("100/fortnight", "is not 'COUNT/PERIOD'"),
        ("0/minute", "positive integers"),
        (RateLimit("x", 5, per="minute", key="plan"), "is not a field of Mail"),
        (RateLimit("x", 5, per="minute", quotas={"premium": 9}), "quotas need key"),
        (RateLimit("x", 5, per="week"), "per='week'"),
    ],
)
def test_a_bad_rate_limit_is_refused_at_declaration(option, message):
    def send(payload: Mail) -> dict:
        return {}

    with isolated_registry(), pytest.raises(DeclarationError, match="job 'bad'") as excinfo:
        job(name="bad", rate_limit=option)(send)
    assert message in str(excinfo.value)


def test_a_job_that_waits_hours_for_its_slot_keeps_its_attempts_and_stays_out_of_the_dlq(
    stack, declare, clock
):
    # GIVEN three jobs limited to one an hour, with a single attempt each
    starts = Starts()
    runner = declare(starts.job(), name="hourly", rate_limit="1/hour", max_attempts=1)
    ids = [r.job_id for r in enqueue_many("hourly", [Mail(n=i) for i in range(3)])]
    # WHEN the workers poll every 15 minutes (the longest SQS delay) for three hours
    for _ in range(13):
        runner.drain()
        clock.shift(15 * 60)
    # THEN the last one waited two hours, coming back every 15 minutes, and still ran on attempt 1
    assert len(starts.at) == 3
    gaps = [b - a for (a, _), (b, _) in zip(sorted(starts.at), sorted(starts.at)[1:], strict=False)]
    assert all(gap >= 3600 for gap in gaps)
    statuses = get_statuses(ids)
    assert {(s.state, s.attempts) for s in statuses.values()} == {("succeeded", 1)}
    assert runner.depth(dlq=True) == 0
