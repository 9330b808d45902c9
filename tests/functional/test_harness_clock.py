"""The harness's clock: `TestStack(..., clock=...)` stops time while the stack runs, `runner.attempt()`
is one attempt of each job delivered, and a retry comes back only when the test moves the clock past
its backoff, whatever the jitter drew (a 0 s backoff made retry tests flaky: issue 23, item 6)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from lambdajobs import testing
from lambdajobs.runtime.settings import ATTR_ATTEMPTS, ATTR_ERROR_TYPE
from lambdajobs.testing import ClockError, JobRunner, TestStack
from tests.functional.harness_jobs.retries import MAX_ATTEMPTS

JOBS = "tests.functional.harness_jobs"
JOB = "fails_then_succeeds"
START = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(JOBS, stack="clocked", clock=START) as clocked:
        yield clocked


@pytest.fixture
def runner(stack: TestStack) -> JobRunner:
    return stack.runner(JOB)


class Draw(random.Random):
    """A jitter source that always draws `value`: 0.0 is a 0 s backoff, 0.999 the longest."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def random(self) -> float:
        return self.value


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_a_job_that_fails_once_is_retrying_until_the_clock_passes_its_backoff(stack, runner):
    # GIVEN a job whose first attempt fails
    job_id = stack.enqueue(JOB, {"key": "once", "fail_first": 1})
    # WHEN it is delivered once
    first = runner.attempt()
    # THEN the outcome says: attempt 1, retrying, after the backoff the worker drew for attempt 1
    attempt = first.job(job_id)
    assert (attempt.attempt, attempt.state) == (1, "retrying")
    assert 0 <= attempt.retry_in_seconds <= runner.spec.backoff.ceiling(1)
    assert first.retrying == {job_id: attempt.retry_in_seconds}
    assert attempt.error == {"type": "ProviderDownError", "message": "attempt 1 failed"}
    assert stack.status(job_id).state == "retrying"
    # AND nothing comes back while the clock stands still
    assert runner.attempt() is None
    # WHEN the clock moves past the backoff
    stack.clock.advance_past_backoff()
    second = runner.attempt()
    # THEN the next attempt succeeds, and the record counts 2 attempts
    assert (second.job(job_id).attempt, second.succeeded) == (2, [job_id])
    status = stack.status(job_id)
    assert (status.state, status.attempts, status.result) == ("succeeded", 2, {"succeeded_on": 2})


@pytest.mark.parametrize(
    "jitter",
    [
        pytest.param(Draw(0.0), id="0s-backoff"),
        pytest.param(Draw(0.999), id="longest-backoff"),
        *(pytest.param(random.Random(seed), id=f"seed-{seed}") for seed in range(24)),
    ],
)
def test_the_retry_is_one_attempt_whatever_the_jitter_draws(stack, runner, jitter):
    # GIVEN a job whose first attempt fails, and a worker whose backoff draws from `jitter`
    runner.worker.rng = jitter
    job_id = stack.enqueue(JOB, {"key": "jitter", "fail_first": 1})
    # WHEN it is delivered, and the queue is then drained without moving the clock
    first = runner.attempt()
    again = runner.drain()
    # THEN it was attempted once and is retrying: even a 0 s backoff does not bring it back
    assert (first.job(job_id).attempt, first.job(job_id).state) == (1, "retrying")
    assert again == []
    assert stack.status(job_id).state == "retrying"
    # WHEN the clock moves past the backoff
    stack.clock.advance_past_backoff()
    # THEN attempt 2 runs, once, and succeeds
    second = runner.attempt()
    assert (second.job(job_id).attempt, second.succeeded) == (2, [job_id])
    assert runner.attempt() is None
    assert (stack.status(job_id).state, stack.status(job_id).attempts) == ("succeeded", 2)


def test_a_job_that_fails_every_attempt_is_dead_with_its_message_in_the_dlq(stack, runner):
    # GIVEN a job that fails every attempt
    job_id = stack.enqueue(JOB, {"key": "always", "fail_first": 99})
    # WHEN each attempt fails and the clock moves past each backoff
    for number in range(1, MAX_ATTEMPTS):
        outcome = runner.attempt()
        assert (outcome.job(job_id).attempt, outcome.job(job_id).state) == (number, "retrying")
        stack.clock.advance_past_backoff()
    last = runner.attempt()
    # THEN the last attempt (max_attempts) is dead, the message is in the DLQ with its reason
    assert (last.job(job_id).attempt, last.dead, last.retrying) == (MAX_ATTEMPTS, [job_id], {})
    assert last.job(job_id).retry_in_seconds is None
    assert runner.depth() == 0
    [dead] = runner.dlq_messages()
    attributes = {name: value["StringValue"] for name, value in dead["MessageAttributes"].items()}
    assert attributes[ATTR_ERROR_TYPE] == "ProviderDownError"
    assert attributes[ATTR_ATTEMPTS] == str(MAX_ATTEMPTS)
    status = stack.status(job_id)
    assert (status.state, status.attempts) == ("dead", MAX_ATTEMPTS)
    # AND nothing is waiting for a backoff any more
    with pytest.raises(ClockError, match="no retry is waiting"):
        stack.clock.advance_past_backoff()


def test_the_records_times_and_expiry_follow_the_clock(stack, runner):
    # GIVEN a job retried once, the clock moved past its backoff
    job_id = stack.enqueue(JOB, {"key": "times", "fail_first": 1})
    runner.worker.rng = Draw(0.999)  # the longest backoff of attempt 1: a move the times show
    delay = runner.attempt().job(job_id).retry_in_seconds
    assert stack.clock.due() == [START + timedelta(seconds=delay)]
    moved = stack.clock.advance_past_backoff()
    # WHEN its second attempt succeeds
    runner.attempt()
    # THEN the record's times are the clock's, not the wall's
    assert moved == START + timedelta(seconds=delay + 1) == stack.clock.now()
    status = stack.status(job_id)
    assert status.created_at == iso(START)
    assert status.started_at == status.finished_at == iso(moved)
    # AND its expiry (Powertools' idempotency record TTL) counts from the clock too
    item = stack.client("dynamodb").get_item(TableName=stack.config.table_name(), Key={"id": {"S": job_id}})
    assert int(item["Item"]["expiration"]["N"]) == int(moved.timestamp()) + stack.config.record_ttl_seconds


def test_the_clock_runs_again_when_the_stack_stops_even_after_a_failure():
    before = time.time()
    # GIVEN a stack on a stopped clock, in a test that fails
    with pytest.raises(RuntimeError, match="the test failed"), TestStack(JOBS, clock=START) as stack:
        assert time.time() == START.timestamp()
        stack.clock.advance(5)
        raise RuntimeError("the test failed")
    # THEN time is real again after it, and its clock can no longer be moved
    assert before <= time.time() < before + 60
    assert before <= datetime.now(UTC).timestamp() < before + 60
    with pytest.raises(ClockError, match="not running"):
        stack.clock.advance(1)


def test_a_stack_that_fails_to_start_leaves_the_clock_running(monkeypatch):
    before = time.time()

    def fail(*args, **kwargs):
        raise RuntimeError("provisioning failed")

    # GIVEN provisioning that fails after the clock stopped
    monkeypatch.setattr(testing, "provision", fail)
    # WHEN the stack starts
    with pytest.raises(RuntimeError, match="provisioning failed"):
        TestStack(JOBS, stack="clocked", clock=START).start()
    # THEN the clock was not left stopped
    assert before <= time.time() < before + 60


def test_a_stack_on_the_real_clock_says_how_to_get_one():
    with TestStack(JOBS, stack="real") as stack, pytest.raises(ClockError, match=r"clock=True"):
        stack.clock.advance(1)


def test_a_travel_inside_the_stack_is_refused_by_the_clock(stack):
    # GIVEN another time-machine travel started inside the stack's clock
    other = time_machine.travel(datetime(2031, 6, 1, tzinfo=UTC), tick=False)
    # THEN moving the stack's clock says that it would change nothing
    with other, pytest.raises(ClockError, match="another time-machine travel"):
        stack.clock.advance(1)
    with pytest.raises(ClockError, match="only moves forward"):
        stack.clock.advance(-1)
