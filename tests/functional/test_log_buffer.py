"""A successful job writes no log line; a failing one writes every line that explains it, and only
its own (lambdajobs.runtime.logbuffer), whatever `_X_AMZN_TRACE_ID` says."""

from __future__ import annotations

import contextvars
import io
import json
import logging
import os
import threading
import time

import pytest
from pydantic import BaseModel

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import Backoff, JobContext, logbuffer
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status


class Step(BaseModel):
    name: str
    fail: bool = False
    email: str = "jane.doe@example.com"


#: Set by a test: both runs wait here after their first line, so their lines interleave.
MEET: list[threading.Barrier] = []


def logged_step(payload: Step, ctx: JobContext) -> dict:
    ctx.logger.info(f"starting {payload.name}", extra={"email": payload.email})
    for barrier in MEET:
        barrier.wait(timeout=10)
    ctx.logger.info(f"halfway {payload.name}")
    if payload.fail:
        raise RuntimeError(f"{payload.name} broke")
    return {"done": payload.name}


@pytest.fixture
def worker_logs():
    """The worker logger's lines, as they would reach CloudWatch Logs, parsed."""
    stream = io.StringIO()
    handlers = logging.getLogger("lambdajobs").handlers
    previous = [h.setStream(stream) for h in handlers]

    def lines() -> list[dict]:
        return [json.loads(line) for line in stream.getvalue().splitlines() if line.startswith('{"level"')]

    yield lines
    for handler, old in zip(handlers, previous, strict=True):
        handler.setStream(old)


@pytest.fixture
def runner(declare):
    return declare(logged_step, pii_fields=("email",), max_attempts=2, backoff=Backoff.fixed(0))


def messages_of(runner) -> list[dict]:
    got = runner.stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return list(got.get("Messages", []))


def test_a_success_writes_no_line_and_a_failure_its_own_lines_in_order(runner, clock, worker_logs):
    # GIVEN a batch of three records whose middle one fails, with no _X_AMZN_TRACE_ID (the local stack)
    os.environ.pop("_X_AMZN_TRACE_ID", None)
    ids = [enqueue("logged_step", Step(name=n, fail=n == "b")) for n in ("a", "b", "c")]
    # WHEN the worker runs the batch
    runner.poll()
    lines = worker_logs()
    by_job = {i: [(x["level"], x["message"]) for x in lines if x.get("correlation_id") == i] for i in ids}
    # THEN the successes wrote no line: their own were dropped, and none says they succeeded
    assert by_job[ids[0]] == []
    assert by_job[ids[2]] == []
    assert [get_status(i).state for i in (ids[0], ids[2])] == ["succeeded", "succeeded"]
    # AND the failure wrote its own lines, in the order logged, before the line that says it failed
    assert by_job[ids[1]] == [
        ("INFO", "starting b"),
        ("INFO", "halfway b"),
        ("WARNING", "job failed; will retry"),
    ]
    # AND the lines written late keep their record's keys and have its personal data masked
    starting = next(x for x in lines if x["message"] == "starting b")
    assert (starting["job"], starting["attempt"], starting["email"]) == ("logged_step", 1, "*****")
    assert "jane.doe@example.com" not in json.dumps(lines)
    assert get_status(ids[1]).state == "retrying"


def test_every_line_is_written_with_buffer_logs_off(declare, clock, worker_logs):
    # GIVEN a job declared with buffer_logs=False
    loud = declare(logged_step, name="loud_step", buffer_logs=False)
    job_id = enqueue("loud_step", Step(name="x"))
    # WHEN it succeeds
    loud.poll()
    # THEN its own lines were written too, then the success
    assert [x["message"] for x in worker_logs() if x.get("correlation_id") == job_id] == [
        "starting x",
        "halfway x",
        "job succeeded",
    ]


def warned_step(payload: Step, ctx: JobContext) -> dict:
    ctx.logger.info(f"starting {payload.name}")
    ctx.logger.warning("the provider is slow")
    ctx.logger.info(f"done {payload.name}")
    return {"done": payload.name}


def test_a_success_that_warned_writes_its_lines_and_ends_with_its_outcome(declare, clock, worker_logs):
    # GIVEN a job that logs a warning on its way to succeeding
    declared = declare(warned_step)
    job_id = enqueue("warned_step", Step(name="w"))
    # WHEN it succeeds
    declared.poll()
    # THEN the line kept before the warning is written before it, later lines at once, then the outcome
    assert [(x["level"], x["message"]) for x in worker_logs() if x.get("correlation_id") == job_id] == [
        ("INFO", "starting w"),
        ("WARNING", "the provider is slow"),
        ("INFO", "done w"),
        ("INFO", "job succeeded"),
    ]


#: Set by a test: the stopped clock, moved an hour on by the job after its kept line.
CLOCK: list = []


def placed_step(payload: Step, ctx: JobContext) -> dict:
    try:
        raise ValueError("first try went wrong")
    except ValueError:
        ctx.logger.info("recovered", exc_info=True, stage="one")  # kept: its exception taken now
    for clock in CLOCK:
        clock.shift(3600)
    ctx.logger.debug("a debug line", extra={"detail": 1})  # below the logger's level: never written
    raise RuntimeError("then it broke")


def test_a_kept_line_is_written_as_it_was_logged(declare, clock, worker_logs):
    # GIVEN a job that logs an INFO line with its exception and a key, then fails later
    declared = declare(placed_step, max_attempts=2, backoff=Backoff.fixed(0))
    job_id = enqueue("placed_step", Step(name="p"))
    logged_at = time.strftime("%Y-%m-%d %H:%M", time.gmtime())  # the stopped clock: the call's time
    CLOCK.append(clock)  # the job moves it an hour on after the line: it is written an hour later
    try:
        declared.poll()
    finally:
        CLOCK.clear()
    lines = [x for x in worker_logs() if x.get("correlation_id") == job_id]
    line = next(x for x in lines if x["message"] == "recovered")
    # THEN it says where and when it was logged, with its exception and its keys, as logged
    assert line["location"].startswith("placed_step:")
    assert "ValueError: first try went wrong" in line["exception"]
    assert (line["stage"], line["job"], line["attempt"]) == ("one", "placed_step", 1)
    assert line["timestamp"].startswith(logged_at)
    assert not lines[-1]["timestamp"].startswith(logged_at), lines[-1]  # the failure's line: later
    # AND a line below the logger's level was neither kept nor written
    assert not [x for x in worker_logs() if x["message"] == "a debug line"]


def test_buffer_logs_must_be_a_bool(declare):
    from lambdajobs.runtime.errors import DeclarationError

    with pytest.raises(DeclarationError, match=r"buffer_logs='no'; use True or False"):
        declare(logged_step, name="odd_step", buffer_logs="no")


def test_lines_are_kept_per_thread(runner, clock, worker_logs):
    # GIVEN two batches handled at once on two threads (the local stack), one failing, one not
    ok = enqueue("logged_step", Step(name="ok"))
    bad = enqueue("logged_step", Step(name="bad", fail=True))
    batch = messages_of(runner)
    events = [
        sqs_event(
            [m for m in batch if f'"{name}"' in m["Body"]],
            queue_arn=runner.queues.queue_arn,
            region="us-east-1",
        )
        for name in ("ok", "bad")
    ]
    MEET.append(threading.Barrier(2))  # each run logs its first line before either goes on

    responses: list[dict] = []

    def run(event: dict) -> None:
        try:
            responses.append(runner.handler(event, LambdaContext("test", 30)))
        finally:
            MEET.clear()

    # each thread in a copy of the test's context (the stack's configuration), as the local stack runs them
    threads = [threading.Thread(target=contextvars.copy_context().run, args=(run, e)) for e in events]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = worker_logs()
    assert sorted(len(r["batchItemFailures"]) for r in responses) == [0, 1], (responses, events)
    # THEN the failing batch wrote its lines, the succeeding one none
    assert [x["message"] for x in lines if x.get("correlation_id") == ok] == []
    assert [x["message"] for x in lines if x.get("correlation_id") == bad] == [
        "starting bad",
        "halfway bad",
        "job failed; will retry",
    ]


class Many(BaseModel):
    n: int


def test_a_record_keeps_at_most_max_lines_and_says_how_many_went(monkeypatch, declare, clock, worker_logs):
    monkeypatch.setattr(logbuffer, "MAX_LINES", 3)

    def chatty(payload: Many, ctx: JobContext) -> None:
        for i in range(payload.n):
            ctx.logger.info(f"line {i}")
        raise RuntimeError("after many lines")

    runner = declare(chatty, max_attempts=2, backoff=Backoff.fixed(0))
    job_id = enqueue("chatty", Many(n=5))
    runner.poll()
    messages = [x["message"] for x in worker_logs() if x.get("correlation_id") == job_id]
    assert messages == [
        "2 earlier log lines of this record were not kept (at most 3 are)",
        "line 2",
        "line 3",
        "line 4",
        "job failed; will retry",
    ]
