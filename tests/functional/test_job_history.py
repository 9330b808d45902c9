"""A job's history in its record, on moto: the enqueue time, level, tenant and workflow kept by the
acquire; the payload, the scrubbed traceback and each failed attempt kept by the failure writes; all
of it without one more write request than before (a success writes exactly what it did)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lambdajobs.runtime import aws
from lambdajobs.runtime.job_record import MAX_HISTORY, MAX_STORED_PAYLOAD_BYTES, JobRecord, JobState
from lambdajobs.runtime.records import Attempt, JobStatus, failure_details, status_of
from lambdajobs.testing import TestStack
from tests.functional.record_jobs.lookups import MAX_ATTEMPTS

JOBS = "tests.functional.record_jobs"
START = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(JOBS, stack="history", clock=START) as clocked:
        yield clocked


class Writes:
    """Counts the job table's write requests (PutItem, UpdateItem, TransactWriteItems)."""

    def __init__(self) -> None:
        self.count = 0
        events = aws.client("dynamodb").meta.events
        for operation in ("PutItem", "UpdateItem", "TransactWriteItems", "DeleteItem"):
            events.register(f"before-call.dynamodb.{operation}", self._seen)

    def _seen(self, **_: Any) -> None:
        self.count += 1


def test_a_job_that_fails_twice_keeps_each_attempt_its_payload_and_a_scrubbed_traceback(stack):
    # GIVEN a job that fails its first two attempts with the customer's e-mail (a pii field) in the error
    payload = {"customer_id": "c-1", "email": "ada@example.com", "fail_first": 2}
    job_id = stack.enqueue("lookup", payload, tenant="acme")
    runner = stack.runner("lookup")
    # WHEN it runs three times (two failures, then a success)
    runner.attempt()
    status = stack.status(job_id)
    # THEN after the first failure the record has the payload, the traceback and one attempt
    assert status.state is JobState.RETRYING
    assert status.payload["customer_id"] == "c-1" and not status.payload_cut
    assert status.traceback is not None and "LookupFailedError" in status.traceback
    assert "ada@example.com" not in status.traceback and "*****" in status.traceback
    assert [(a.attempt, a.outcome, a.error_type) for a in status.history] == [
        (1, "retrying", "LookupFailedError")
    ]
    assert "ada@example.com" not in (status.history[0].error_message or "")
    stack.clock.advance_past_backoff()
    runner.attempt()
    stack.clock.advance_past_backoff()
    runner.attempt()
    status = stack.status(job_id)
    assert status.state is JobState.SUCCEEDED
    # AND every attempt is a row: two failures, then the success from the record itself
    rows = status.attempt_rows()
    assert [(r.attempt, r.outcome) for r in rows] == [(1, "retrying"), (2, "retrying"), (3, "succeeded")]
    assert all(r.started_at and r.ended_at for r in rows)
    assert rows[1].started_at > rows[0].ended_at  # each its own start, not the record's last
    # AND the enqueue, tenant and timings are known
    assert status.enqueued_at == "2030-01-01T09:00:00.000Z"
    assert status.tenant == "acme" and status.level is None and status.workflow is None
    assert status.queue_wait_seconds == 0.0
    assert status.run_seconds is not None and status.run_seconds >= 0


def test_a_success_writes_no_more_than_before_and_keeps_no_payload(stack):
    # GIVEN a job that succeeds at once
    job_id = stack.enqueue("lookup", {"customer_id": "c-2", "address": {"country": "NZ"}})
    writes = Writes()
    stack.runner("lookup").attempt()
    # THEN its record has no payload and no history, and the acquire kept the enqueue time
    status = stack.status(job_id)
    assert status.state is JobState.SUCCEEDED
    assert (status.payload, status.traceback, status.history) == (None, None, ())
    assert status.enqueued_at == "2030-01-01T09:00:00.000Z"
    assert [r.outcome for r in status.attempt_rows()] == ["succeeded"]
    # AND it took the record's two writes (acquire, complete) and its search entries' one batch, no
    # more (BatchWriteItem is not counted here: test_search.py counts it)
    assert writes.count == 2


def test_a_dead_job_keeps_its_last_failure_as_the_last_attempt(stack):
    job_id = stack.enqueue("lookup", {"customer_id": "c-3", "fail_always": True})
    runner = stack.runner("lookup")
    for _ in range(MAX_ATTEMPTS):
        runner.attempt()
        stack.clock.advance(5)
    status = stack.status(job_id)
    assert status.state is JobState.DEAD
    assert [(r.attempt, r.outcome) for r in status.attempt_rows()] == [
        (1, "retrying"),
        (2, "retrying"),
        (3, "dead"),
    ]


def test_a_payload_above_32_kb_is_kept_cut_and_masked(stack):
    # GIVEN a payload above 32 KB with an e-mail (a pii field)
    payload = {"customer_id": "c-4", "email": "ada@example.com", "fail_first": 1, "filler": "x" * 40_000}
    job_id = stack.enqueue("lookup", payload)
    stack.runner("lookup").attempt()
    # THEN its first 32 KB are kept, masked: a cut text cannot be masked by its reader
    status = stack.status(job_id)
    assert status.payload_cut is True
    assert isinstance(status.payload, str)
    assert len(status.payload.encode()) == MAX_STORED_PAYLOAD_BYTES
    assert status.payload.startswith('{"customer_id":"c-4","email":"*****"')
    assert "ada@example.com" not in status.payload


def test_a_job_with_priorities_records_its_level(stack):
    high = stack.enqueue("ranked", {"key": "h", "fail": True}, priority="high")
    low = stack.enqueue("ranked", {"key": "n"})
    stack.runner("ranked", priority="high").attempt()
    stack.runner("ranked").attempt()
    assert stack.status(high).level == "high"
    assert stack.status(high).state is JobState.DEAD
    assert stack.status(low).level == "normal"


def test_history_keeps_its_last_entries_only():
    # GIVEN a record whose history is full
    full = tuple(
        {"attempt": n, "started": f"2030-01-01T09:00:{n:02d}.000Z", "outcome": "retrying"}
        for n in range(1, MAX_HISTORY + 1)
    )
    acquired = JobRecord(job_id="j", job="lookup", started_at="2030-01-01T10:00:00.000Z", history=full)
    # WHEN one more attempt fails
    details = failure_details(
        {"attempt": 26, "payload": {"a": 1}}, ValueError("boom"), JobState.RETRYING, acquired.to_item()
    )
    # THEN the oldest entry is dropped, the new one is last, with the run's start
    assert len(details["history"]) == MAX_HISTORY
    assert details["history"][0]["attempt"] == 2
    assert details["history"][-1]["attempt"] == 26
    assert details["history"][-1]["started"] == "2030-01-01T10:00:00.000Z"
    assert details["payload"] == '{"a":1}' and details["payload_cut"] is None


def test_the_record_codec_round_trips_the_history_fields():
    record = JobRecord(
        job_id="j",
        job="lookup",
        state=JobState.DEAD,
        enqueued_at="2030-01-01T09:00:00.000Z",
        level="high",
        tenant="acme",
        workflow={"id": "wf-1", "stage": 1, "index": 0},
        payload='{"a":1}',
        payload_cut=True,
        traceback="Traceback ...",
        history=({"attempt": 1, "outcome": "dead", "error_type": "ValueError"},),
    )
    assert JobRecord.from_item(record.to_item()) == record
    status = status_of("j", record)
    assert status.payload == '{"a":1}'  # cut: kept as its text
    assert status.history == (Attempt(1, None, None, "dead", "ValueError", None),)


def test_queue_wait_is_from_enqueue_to_the_first_start():
    status = JobStatus(
        job_id="j",
        state=JobState.SUCCEEDED,
        attempts=2,
        enqueued_at="2030-01-01T09:00:00.000Z",
        started_at="2030-01-01T09:01:00.000Z",
        finished_at="2030-01-01T09:01:02.500Z",
        history=(Attempt(1, "2030-01-01T09:00:30.000Z", "2030-01-01T09:00:31.000Z", "retrying"),),
    )
    assert status.queue_wait_seconds == 30.0
    assert status.run_seconds == 2.5
    assert [r.attempt for r in status.attempt_rows()] == [1, 2]
    assert (START + timedelta(seconds=1)).tzinfo is UTC


def test_a_record_at_every_bound_stays_far_below_dynamodbs_400_kb():
    # GIVEN a record with everything at its bound: payload, traceback, a full history of long messages,
    # the largest result and an error
    from lambdajobs.runtime.job_record import MAX_HISTORY_MESSAGE_CHARS, MAX_TRACEBACK_CHARS
    from lambdajobs.runtime.lifecycle import MAX_ERROR_CHARS, MAX_RESULT_BYTES

    entry = {
        "attempt": 99,
        "started": "2030-01-01T09:00:00.000Z",
        "ended": "2030-01-01T09:00:01.000Z",
        "outcome": "retrying",
        "error_type": "E" * 100,
        "error_message": "m" * MAX_HISTORY_MESSAGE_CHARS,
    }
    record = JobRecord(
        job_id="j" * 512,
        job="lookup",
        state=JobState.DEAD,
        result="r" * MAX_RESULT_BYTES,
        error={"type": "E" * 100, "message": "m" * MAX_ERROR_CHARS},
        payload="p" * MAX_STORED_PAYLOAD_BYTES,
        traceback="t" * MAX_TRACEBACK_CHARS,
        history=tuple(entry for _ in range(MAX_HISTORY)),
        workflow={"id": "w" * 128, "stage": 1, "index": 2},
    )
    # THEN its size (names and values, as DynamoDB counts it, roughly) is under 100 KB
    size = len(json.dumps(record.to_item()).encode())
    assert size < 100 * 1024, size


def test_a_message_that_never_ran_keeps_its_payload_level_and_enqueue_time_in_its_dead_record(stack):
    # GIVEN a message of the high level whose payload the job refuses (a producer that skipped the check)
    body = {
        "v": 1,
        "job": "ranked",
        "id": "bad-1",
        "payload": {"nokey": 1},
        "enqueued_at": "2030-01-01T08:59:00Z",
        "priority": "high",
    }
    stack.client("sqs").send_message(
        QueueUrl=stack.config.queue_url("ranked", "high"), MessageBody=json.dumps(body)
    )
    # WHEN the worker dead-letters it without running it
    stack.runner("ranked", priority="high").attempt()
    # THEN its dead record says what it was: payload, level, enqueue time (no attempt ran)
    status = stack.status("bad-1")
    assert status.state is JobState.DEAD and status.error["type"] == "PayloadValidationError"
    assert status.payload == {"nokey": 1}
    assert (status.level, status.enqueued_at) == ("high", "2030-01-01T08:59:00.000Z")
    assert status.history == () and status.attempt_rows() == []


def test_the_runs_payload_is_not_copied_by_powertools_and_is_stored_on_failure():
    import copy

    from lambdajobs.runtime.records import Uncopied

    payload = {"a": [1, 2, 3]}
    run = {"attempt": 1, "payload": Uncopied(payload)}
    assert copy.deepcopy(run)["payload"].value is payload  # Powertools deep-copies the run
    details = failure_details(run, ValueError("x"), JobState.RETRYING, None)
    assert details["payload"] == '{"a":[1,2,3]}'
