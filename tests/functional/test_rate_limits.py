"""Rate limits across concurrent workers, on moto with a controlled clock: the limit holds in every
window, waiting never uses an attempt or dead-letters, per-key quotas hold per key, and jobs can share
a named limiter."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import DeclarationError, RateLimit
from lambdajobs.runtime.producer import enqueue_many
from lambdajobs.runtime.records import get_status, get_statuses
from lambdajobs.runtime.spec import job
from lambdajobs.runtime.worker import Worker
from lambdajobs.testing import isolated_registry
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
    # GIVEN 100 jobs limited to 50 a minute, and five workers taking them at once
    starts = Starts()
    runner = declare(starts.job(), name="limited", rate_limit="50/minute", max_attempts=1, batch_size=10)
    ids = [r.job_id for r in enqueue_many("limited", [Mail(n=i) for i in range(100)])]
    # WHEN they run for two and a half minutes of the clock
    run_concurrently(stack, "limited", clock, workers=5, seconds=150)
    # THEN every job ran once, at most 50 in any 60-second window
    assert len(starts.at) == 100
    assert starts.max_in_any_window(60) <= 50
    assert starts.max_in_any_window(60) >= 49  # and the limit was used, not just undershot
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
        when=lambda p: str(p.get("Key", {}).get("id", {}).get("S", "")).startswith("lambdajobs#ratelimit#"),
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


def test_copies_that_come_back_late_do_not_start_in_a_burst(stack, declare, clock):
    # GIVEN 30 jobs at 10 a minute, all but one handed back to wait for their slots
    starts = Starts()
    runner = declare(starts.job(), name="late", rate_limit="10/minute", max_attempts=1)
    enqueue_many("late", [Mail(n=i) for i in range(30)])
    runner.drain()
    # WHEN no worker polls for ten minutes (throttled, disabled, deploying), then they run again
    clock.shift(600)
    for _ in range(400):
        runner.drain()
        clock.shift(1)
    # THEN the late copies took fresh slots: still at most 10 in any minute
    assert len(starts.at) == 30
    assert starts.max_in_any_window(60) <= 10


@pytest.mark.parametrize(("count", "per"), [(3, "second"), (7, "minute"), (333, "second")])
def test_slots_never_fit_more_than_the_count_in_a_period(stack, count, per):
    # GIVEN a count that does not divide its period (in ms or us)
    from lambdajobs.runtime import ratelimit

    limit = ratelimit.checked("spaced", RateLimit(None, count, per))
    period_us = ratelimit.PERIODS[per] * 1_000_000
    # WHEN count + 1 slots are taken at one instant
    take = lambda: ratelimit.take_slot(  # noqa: E731
        stack.client("dynamodb"), stack.config.table_name(), limit, None, now_us=1_000_000_000
    )
    slots = [take()[0] for _ in range(count + 1)]
    # THEN the one past the count falls a whole period after the first, or later
    assert slots[count] - slots[0] >= period_us
    assert slots == sorted(set(slots))


def test_a_duplicate_of_a_finished_job_takes_no_slot(stack, declare, clock):
    # GIVEN a job that ran, at one an hour
    starts = Starts()
    runner = declare(starts.job(), name="once_an_hour", rate_limit="1/hour", max_attempts=1)
    [done] = enqueue_many("once_an_hour", [Mail(n=1)])
    runner.drain()
    # WHEN a duplicate of it arrives, then another job
    stack.enqueue("once_an_hour", Mail(n=1), job_id=done.job_id)
    runner.drain()
    [other] = enqueue_many("once_an_hour", [Mail(n=2)])
    runner.drain()
    # THEN the duplicate was answered from the record without a slot: the next job's slot is an hour
    # after the first run, not two
    status = get_status(other.job_id)
    assert status.state == "waiting"
    assert status.waiting_until == "2026-11-29T13:00:00.000Z"


def test_a_retry_takes_a_new_slot(stack, declare, clock):
    # GIVEN a job at one a minute that fails its first attempt
    calls: list[float] = []

    def flaky(payload: Mail) -> dict:
        calls.append(time.time())
        if len(calls) == 1:
            raise RuntimeError("provider busy")
        return {}

    from lambdajobs.runtime import Backoff

    runner = declare(
        flaky, name="flaky_limited", rate_limit="1/minute", max_attempts=3, backoff=Backoff.fixed(1)
    )
    enqueue_many("flaky_limited", [Mail(n=1)])
    for _ in range(180):
        runner.drain()
        clock.shift(1)
    # THEN its retry waited for a slot of its own, a minute after the first
    assert len(calls) == 2 and calls[1] - calls[0] >= 60


def test_a_redriven_job_reads_waiting_not_dead(stack, declare, clock):
    starts = Starts()
    runner = declare(starts.job(), name="redriven", rate_limit="1/hour", max_attempts=1)
    first, second = (r.job_id for r in enqueue_many("redriven", [Mail(n=1), Mail(n=2)]))
    runner.drain()
    waiting = second if get_status(second).state == "waiting" else first
    # GIVEN its record was dead before (a job that died, now redriven)
    from lambdajobs.runtime import lifecycle

    lifecycle.fail(
        stack.client("dynamodb"),
        stack.config.table_name(),
        waiting,
        "redriven",
        lifecycle.JobState.DEAD,
        {"type": "X", "message": "x"},
        release=False,
        ttl_seconds=3600,
        over_retrying=True,
    )
    assert get_status(waiting).state == "dead"
    clock.shift(16 * 60)
    stack.enqueue("redriven", Mail(n=9), job_id=waiting)
    runner.drain()
    assert get_status(waiting).state == "waiting"


def test_reserved_job_ids_and_mismatched_shared_limiters_are_refused(stack, declare):
    from lambdajobs.runtime import JobIdError

    declare(Starts().job(), name="reserved", rate_limit="5/second")
    with pytest.raises(JobIdError, match="reserved"):
        stack.enqueue("reserved", Mail(n=1), job_id="lambdajobs#ratelimit#reserved")
    declare(Starts().job(), name="api_a", rate_limit=RateLimit("api", 5, per="second"))
    with pytest.raises(DeclarationError, match="rate limiter 'api' is declared by job 'api_a'"):
        declare(Starts().job(), name="api_b", rate_limit=RateLimit("api", 6, per="second"))


def test_a_waiting_job_whose_hand_back_fails_on_its_last_attempt_ends_dead_not_waiting(stack, declare, clock):
    # GIVEN two jobs at one an hour, one attempt each; the second's hand-back cannot be sent
    starts = Starts()
    runner = declare(starts.job(), name="stranded", rate_limit="1/hour", max_attempts=1)
    ids = [r.job_id for r in enqueue_many("stranded", [Mail(n=1), Mail(n=2)])]
    faults = Faults(stack.client("sqs"))
    faults.fail("SendMessage", times=3)
    try:
        runner.drain()
    finally:
        faults.remove()
    # WHEN its message comes back (at its slot) past its last attempt: that receive counted
    clock.shift(3601)
    runner.drain()
    # THEN it is in the DLQ with the reason, and its record says dead, not waiting for ever
    states = {s.state for s in get_statuses(ids).values()}
    assert states == {"succeeded", "dead"}
    assert runner.depth(dlq=True) == 1


def test_a_slot_less_than_a_second_away_is_waited_for_in_place_on_the_real_clock(stack, declare):
    # GIVEN five jobs limited to 5 a second, in one batch (no stopped clock: the worker really waits)
    starts = Starts()
    runner = declare(starts.job(), name="quick", rate_limit="5/second", max_attempts=1)
    enqueue_many("quick", [Mail(n=i) for i in range(5)])
    # WHEN the batch is delivered once
    runner.poll()
    # THEN all five ran in that one delivery (each slot was under a second away: no hand-back) ...
    assert len(starts.at) == 5 and runner.depth() == 0
    # ... spread by the limiter over four fifths of a second (slots 0.2 s apart; each job begins a few
    # milliseconds after its slot, once its record's lock is taken)
    times = sorted(t for t, _ in starts.at)
    assert times[-1] - times[0] >= 0.7


# -- a waiting message delivered twice; a copy that comes back late (issue 25) -------------------------


def take_current_slot(stack, job_name: str) -> int:
    """Take the limiter's current slot, as an earlier job would: the next one is an interval away."""
    from lambdajobs.runtime import ratelimit
    from lambdajobs.runtime.spec import get_spec

    limit = get_spec(job_name).rate_limit
    slot, _ = ratelimit.take_slot(
        stack.client("dynamodb"), stack.config.table_name(), limit, None, salt=stack.config.stack
    )
    return slot


def deliver_twice_at_once(stack, runner, clock) -> None:
    """SQS delivers the queue's one message twice, both receives before either is deleted (at-least-once:
    the second receive's count is 2), in one batch."""
    from lambdajobs.local.lambda_events import LambdaContext, sqs_event

    sqs = stack.client("sqs")
    receive = {
        "QueueUrl": runner.queues.queue_url,
        "AttributeNames": ["All"],
        "MessageAttributeNames": ["All"],
    }
    first = sqs.receive_message(**receive, VisibilityTimeout=0)["Messages"]
    clock.shift(0.1)  # (moto shows a message made visible "now" once the clock moves)
    second = sqs.receive_message(**receive, VisibilityTimeout=30)["Messages"]
    assert [m["MessageId"] for m in first] == [m["MessageId"] for m in second]
    assert second[0]["Attributes"]["ApproximateReceiveCount"] == "2"
    event = sqs_event(first + second, queue_arn=runner.queues.queue_arn, region="us-east-1")
    response = runner.handler(event, LambdaContext(runner.spec.name, 30))
    # the batch response, as Lambda applies it (the worker deleted what it handed back already)
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    for message in first + second:
        if message["MessageId"] not in failed:
            with contextlib.suppress(Exception):
                sqs.delete_message(QueueUrl=runner.queues.queue_url, ReceiptHandle=message["ReceiptHandle"])


def copies_waiting(stack, runner) -> int:
    attributes = stack.client("sqs").get_queue_attributes(
        QueueUrl=runner.queues.queue_url, AttributeNames=["ApproximateNumberOfMessagesDelayed"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessagesDelayed"])


def run_for(runner, clock, seconds: int) -> None:
    for _ in range(seconds):
        runner.drain()
        clock.shift(1)


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
def test_a_waiting_message_received_twice_uses_no_attempt(stack, declare, clock, max_attempts):
    # GIVEN a rate-limited job whose next slot is 3 s away
    ran: list[int] = []

    def twice(payload: Mail) -> dict:
        ran.append(payload.n)
        return {}

    runner = declare(twice, name="twice", rate_limit="20/minute", max_attempts=max_attempts)
    take_current_slot(stack, "twice")
    [job] = enqueue_many("twice", [Mail(n=1)])
    # WHEN SQS delivers its message twice at once, while it waits for its slot
    deliver_twice_at_once(stack, runner, clock)
    # THEN one copy waits for the slot, not two (the second receive is a duplicate of the first's copy)
    assert copies_waiting(stack, runner) == 1 and runner.depth() == 1
    run_for(runner, clock, 30)
    # THEN it ran once, on its first attempt, and nothing reached the DLQ
    assert ran == [1]
    status = get_status(job.job_id)
    assert (status.state, status.attempts) == ("succeeded", 1)
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_failing_waiting_message_received_twice_runs_max_attempts_times(stack, declare, clock):
    # GIVEN a rate-limited job that always fails, with two attempts, its next slot 3 s away
    ran: list[int] = []

    def fails(payload: Mail) -> dict:
        ran.append(payload.n)
        raise RuntimeError("provider down")

    runner = declare(fails, name="twicefails", rate_limit="20/minute", max_attempts=2)
    take_current_slot(stack, "twicefails")
    [job] = enqueue_many("twicefails", [Mail(n=1)])
    # WHEN its message is delivered twice at once, while it waits for its slot
    deliver_twice_at_once(stack, runner, clock)
    assert copies_waiting(stack, runner) == 1 and runner.depth() == 1
    run_for(runner, clock, 120)
    # THEN it ran exactly twice and left one message in the DLQ; its record says dead after 2 attempts
    assert ran == [1, 1]
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1
    status = get_status(job.job_id)
    assert (status.state, status.attempts) == ("dead", 2)


def test_a_copy_whose_limiter_read_makes_it_late_takes_a_fresh_slot(stack, declare, clock):
    # GIVEN a job waiting for its slot a minute away (1 a minute), handed back carrying that slot
    starts = Starts()
    runner = declare(starts.job(), name="tardy", rate_limit="1/minute", max_attempts=1)
    slot_us = take_current_slot(stack, "tardy") + 60_000_000
    [job] = enqueue_many("tardy", [Mail(n=1)])
    runner.drain()
    assert get_status(job.job_id).state == "waiting" and starts.at == []
    # WHEN its copy comes back 0.95 s after its slot and the limiter read takes 0.2 s
    clock.move_to(datetime_of(slot_us + 950_000))
    ddb = stack.client("dynamodb")
    slow = slow_limiter_reads(ddb, clock, seconds=0.2)
    try:
        runner.drain()
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.GetItem", slow)
    # THEN it did not start 1.15 s after its slot (beyond the documented second): it took a fresh slot
    assert all(
        t * 1_000_000 <= slot_us + 1_000_000 or t * 1_000_000 >= slot_us + 60_000_000 for t, _ in starts.at
    )
    run_for(runner, clock, 70)
    [(started, _)] = starts.at
    assert started * 1_000_000 >= slot_us + 60_000_000
    # AND the slot it gave up cost no attempt: it ran once, on attempt 1 of 1, nothing dead-lettered
    status = get_status(job.job_id)
    assert (status.state, status.attempts) == ("succeeded", 1)
    assert runner.depth(dlq=True) == 0


def datetime_of(epoch_us: int):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch_us / 1_000_000, UTC)


def slow_limiter_reads(ddb, clock, *, seconds: float):
    """A before-call hook: each read of a rate limiter's item takes `seconds` of the clock."""
    from lambdajobs.runtime.ratelimit import ITEM_PREFIX

    def slow(params, **_: object) -> None:
        if str(params.get("Key", {}).get("id", {}).get("S", "")).startswith(ITEM_PREFIX):
            clock.shift(seconds)

    ddb.meta.events.register("before-parameter-build.dynamodb.GetItem", slow)
    return slow


def test_a_slot_taken_ahead_on_a_slow_limiter_is_judged_at_the_time_it_is_taken(
    stack, declare, clock, monkeypatch
):
    # GIVEN a limiter with a backlog of reserved slots (20 a second, 5 s of them), whose every read
    # takes 0.15 s, and a higher-priority job whose gate began 0.15 s before it takes its slot
    from lambdajobs.runtime import ratelimit
    from lambdajobs.runtime.spec import get_spec

    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", 1_000_000)  # as deployed (the stopped clock's is 0)
    declare(Starts().job(), name="ahead", rate_limit="20/second", max_attempts=1)
    limit = get_spec("ahead").rate_limit
    ddb, table = stack.client("dynamodb"), stack.config.table_name()
    for _ in range(100):
        ratelimit.take_slot(ddb, table, limit, None, salt=stack.config.stack)
    began = int(time.time() * 1_000_000)
    clock.shift(0.15)  # (its record's read)
    slow = slow_limiter_reads(ddb, clock, seconds=0.15)
    try:
        # WHEN it takes a slot ahead of the queue
        limiter = ratelimit.Limiter(ddb, table, salt=stack.config.stack)
        slot, stole = limiter.take(limit, None, ahead=True)
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.GetItem", slow)
    # THEN it got one ahead of the backlog (not a RateLimitBusyError after 30 tries of a slot judged
    # against the time the gate began), far enough ahead for its holder to see it taken
    taken_at = time.time() * 1_000_000
    assert stole and slot >= taken_at + ratelimit.INLINE_WAIT_US + ratelimit.CLOCK_SKEW_US
    assert slot < began + 5_000_000
