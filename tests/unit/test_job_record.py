"""The job record's rules: each predicate agrees with the condition expression it mirrors, on DynamoDB
(moto in-process), for a table of records; and the codec round-trips a record."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest

from lambdajobs.runtime import lifecycle
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.job_record import NAMES, NO_RECORD, Condition, JobRecord, JobState
from tests.conditions import TABLE, condition_table
from tests.conditions import passes as condition_passes

NOW = 1_800_000_000.25  # epoch s, as `time.time()` gives it
NOW_MS = int(NOW * 1000)
LOCK = NOW_MS + 60_000
ATTEMPT = 2  # the attempt under test: records below, at and above it


def running(**kw: Any) -> JobRecord:
    return JobRecord("r", job="j", state=JobState.RUNNING, attempts=1, expiration=int(NOW) + 3600, **kw)


def record(state: JobState | str, attempts: int = 0, **kw: Any) -> JobRecord:
    return JobRecord("r", job="j", state=state, attempts=attempts, expiration=int(NOW) + 3600, **kw)


RECORDS: dict[str, JobRecord] = {
    "no record": JobRecord.missing("r"),
    "expired TTL, live lock": replace(running(in_progress_expiration=LOCK), expiration=int(NOW) - 1),
    "TTL at now": replace(record(JobState.SUCCEEDED, 1), expiration=int(NOW)),
    "running, live lock": running(in_progress_expiration=LOCK),
    "running, lock expiring now": running(in_progress_expiration=NOW_MS),
    "running, expired lock": running(in_progress_expiration=NOW_MS - 1),
    "running, lock without deadline": running(),
    "running, expired lock, last attempt": replace(
        running(in_progress_expiration=NOW_MS - 1), attempts=2, max_attempts=2
    ),
    "running, expired lock, attempts left": replace(
        running(in_progress_expiration=NOW_MS - 1), max_attempts=2
    ),
    "running, live lock, last attempt": replace(
        running(in_progress_expiration=LOCK), attempts=2, max_attempts=2
    ),
    "succeeded": record(JobState.SUCCEEDED, 1, result='{"ok": true}'),
    "unknown state": record("paused", 1),
    "no state (progress only)": JobRecord("r", progress=50.0),
    **{
        f"{state.value}, attempts {label}": record(state, n)
        for state in (JobState.RETRYING, JobState.WAITING, JobState.DEAD)
        for label, n in (("none", 0), ("below", ATTEMPT - 1), ("equal", ATTEMPT), ("above", ATTEMPT + 1))
    },
    "dead, counted, attempts below": record(JobState.DEAD, ATTEMPT - 1, wf_counted="dead"),
    "dead, counted, attempts equal": record(JobState.DEAD, ATTEMPT, wf_counted="dead"),
    "succeeded, counted": record(JobState.SUCCEEDED, 1, wf_counted="succeeded"),
    # parked: the whole matrix for `sleeping`; `waiting_signal` shares its rule (one state list)
    **{
        f"sleeping, wake {when}, attempts {label}": record(JobState.SLEEPING, n, wake_at=wake)
        for when, wake in (("due", NOW_MS), ("ahead", NOW_MS + 1))
        for label, n in (("below", ATTEMPT - 1), ("equal", ATTEMPT), ("above", ATTEMPT + 1))
    },
    "waiting_signal, wake due, attempts equal": record(JobState.WAITING_SIGNAL, ATTEMPT, wake_at=NOW_MS),
    "sleeping, no wake-up": record(JobState.SLEEPING, ATTEMPT),
    "waiting for go": record(JobState.WAITING_SIGNAL, 1, wake_at=NOW_MS + 1, waiting_for="go"),
    "waiting for other": record(JobState.WAITING_SIGNAL, 1, wake_at=NOW_MS + 1, waiting_for="other"),
    "signal only (not started)": JobRecord("r", signals={"go": '{"a": 1}'}, expiration=int(NOW) + 3600),
    "running, live lock, go sent": running(in_progress_expiration=LOCK, signals={"go": '{"a": 1}'}),
    "running, live lock, other sent": running(in_progress_expiration=LOCK, signals={"other": "1"}),
    "dead, go sent": record(JobState.DEAD, 1, signals={"go": '{"a": 1}'}),
    # cancellation
    "cancelled": record(JobState.CANCELLED, 1, cancel_requested="2026-12-01T00:00:00.000Z"),
    "cancelled before it ran": record(JobState.CANCELLED, 0, cancel_requested="2026-12-01T00:00:00.000Z"),
    "cancelled, TTL expired": replace(
        record(JobState.CANCELLED, 0, cancel_requested="2026-12-01T00:00:00.000Z"), expiration=int(NOW) - 1
    ),
    "superseded": record(JobState.SUPERSEDED, 0),
    "running, live lock, cancel asked": running(
        in_progress_expiration=LOCK, cancel_requested="2026-12-01T00:00:00.000Z"
    ),
    "running, expired lock, cancel asked": running(
        in_progress_expiration=NOW_MS - 1, cancel_requested="2026-12-01T00:00:00.000Z"
    ),
    "retrying, cancel asked": record(JobState.RETRYING, 1, cancel_requested="2026-12-01T00:00:00.000Z"),
}


@pytest.fixture(scope="module")
def ddb() -> Iterator[Any]:
    with condition_table() as client:
        yield client


def passes(ddb: Any, rec: JobRecord, condition: Condition) -> bool:
    """Whether DynamoDB lets a conditional UpdateItem with `condition` through on the item `rec`."""
    item = rec.to_item() if rec.exists else None
    names = {**NAMES, **condition.names}
    return condition_passes(ddb, rec.job_id, item, condition.expression, condition.values, names)


def check(ddb: Any, predicate: Callable[[JobRecord], bool], condition: Condition) -> dict[str, bool]:
    """The predicate's answer for every record of the table, after checking DynamoDB's agrees."""
    answers = {}
    for name, rec in RECORDS.items():
        expected = predicate(rec)
        assert passes(ddb, rec, condition) is expected, f"{name}: the predicate says {expected}"
        answers[name] = expected
    return answers


def test_the_lock_is_live_until_its_expiry_and_expired_after_it(ddb):
    live = check(ddb, lambda r: r.lock_live(NOW_MS), JobRecord.lock_live_condition(NOW_MS))
    expired = check(ddb, lambda r: r.lock_expired(NOW_MS), JobRecord.lock_expired_condition(NOW_MS))
    # one boundary: expired once in_progress_expiration < now_ms; a lock without deadline stays live
    assert live["running, lock expiring now"] and not expired["running, lock expiring now"]
    assert live["running, lock without deadline"] and not expired["running, lock without deadline"]
    assert expired["running, expired lock"] and not live["running, expired lock"]
    assert not live["succeeded"] and not live["no record"]


@pytest.mark.parametrize("redriven", [False, True])
@pytest.mark.parametrize("attempt", [None, 1, ATTEMPT])
def test_may_start_is_what_the_acquire_condition_lets_through(ddb, attempt, redriven):
    answers = check(
        ddb,
        lambda r: r.may_start(NOW, attempt, redriven),
        JobRecord.may_start_condition(NOW, attempt, redriven),
    )
    for always in ("no record", "expired TTL, live lock", "running, expired lock", "retrying, attempts none"):
        assert answers[always], always
    for never in ("running, live lock", "running, lock without deadline", "succeeded", "unknown state"):
        assert not answers[never], never
    for cancelled in (
        "cancelled",
        "cancelled before it ran",
        "superseded",
        "running, expired lock, cancel asked",
    ):
        assert not answers[cancelled], cancelled  # a cancelled id never starts again (a redrive neither)
    assert not answers["retrying, cancel asked"] and answers["cancelled, TTL expired"]
    assert answers["dead, counted, attempts below"] is redriven  # a counted dead member: only a redrive
    check_parked(answers, attempt, redriven)
    if attempt == 1:  # the rows' attempts are about attempt 2: below is 1, at this attempt
        return check_first_attempt(answers, redriven)
    fenced = attempt is not None and not redriven
    for state in ("retrying", "waiting", "dead"):
        assert answers[f"{state}, attempts below"]
        assert answers[f"{state}, attempts equal"] is not fenced  # this attempt already ran
        assert answers[f"{state}, attempts above"] is not fenced


def check_parked(answers: dict[str, bool], attempt: int | None, redriven: bool) -> None:
    """A parked durable job starts again only once its wake-up is due, and never by an earlier
    attempt's copy (the copy that carries it has the attempt it was parked in)."""
    fenced = attempt is not None and not redriven
    for label in ("below", "equal", "above"):
        assert not answers[f"sleeping, wake ahead, attempts {label}"]  # a duplicate, early
    assert not answers["waiting for go"]  # (its wake-up, the wait's timeout, is ahead)
    assert answers["sleeping, wake due, attempts below"] is (not fenced or attempt >= ATTEMPT - 1)
    for state in ("sleeping", "waiting_signal"):
        assert answers[f"{state}, wake due, attempts equal"] is (not fenced or attempt >= ATTEMPT)
    assert answers["sleeping, wake due, attempts above"] is not fenced
    assert not answers["sleeping, no wake-up"]


def check_first_attempt(answers: dict[str, bool], redriven: bool) -> None:
    """Attempt 1 of a retrying or waiting record that already ran attempt 1 is a copy of it (fenced);
    a dead job id sent again (a new message, attempt 1) runs again, as a DLQ redrive does."""
    for state in ("retrying", "waiting"):
        assert answers[f"{state}, attempts below"] is redriven
        assert answers[f"{state}, attempts equal"] is redriven
    for rows in ("below", "equal", "above"):
        assert answers[f"dead, attempts {rows}"]


def test_the_fence_refuses_a_second_copy_of_an_attempt_that_ran(ddb):
    # GIVEN a record whose attempt 2 failed (retrying)
    failed = record(JobState.RETRYING, 2)
    # THEN a copy of attempt 2 may not start it, attempt 3 may; a DLQ redrive (attempt 1) may too
    assert not failed.may_start(NOW, 2, redriven=False)
    assert failed.may_start(NOW, 3, redriven=False)
    assert failed.may_start(NOW, 1, redriven=True)
    assert not passes(ddb, failed, JobRecord.may_start_condition(NOW, 2, redriven=False))


@pytest.mark.parametrize("redriven", [False, True])
def test_counted_dead_is_its_condition(ddb, redriven):
    answers = check(ddb, lambda r: r.counted_dead(redriven), JobRecord.counted_dead_condition(redriven))
    assert answers["dead, counted, attempts equal"] is not redriven
    assert not answers["dead, attempts equal"] and not answers["succeeded, counted"]


def test_settled_or_held_is_its_condition(ddb):
    answers = check(ddb, lambda r: r.settled_or_held(NOW_MS), JobRecord.settled_or_held_condition(NOW_MS))
    assert answers["succeeded"] and answers["running, live lock"]
    assert not answers["running, expired lock"] and not answers["retrying, attempts equal"]


@pytest.mark.parametrize("over_retrying", [False, True])
def test_may_mark_dead_is_the_condition_of_fail_without_release(ddb, over_retrying):
    answers = check(
        ddb,
        lambda r: r.may_mark_dead(over_retrying, NOW_MS),
        JobRecord.may_mark_dead_condition(over_retrying, NOW_MS),
    )
    assert answers["no record"] and answers["dead, attempts equal"] and answers["running, expired lock"]
    assert not answers["succeeded"] and not answers["running, live lock"]
    assert answers["retrying, attempts equal"] is over_retrying
    assert answers["waiting, attempts none"] is over_retrying


def test_may_wait_is_the_condition_of_wait(ddb):
    answers = check(ddb, lambda r: r.may_wait(), JobRecord.may_wait_condition())
    assert answers["no record"] and answers["retrying, attempts equal"] and answers["dead, attempts none"]
    assert not answers["running, expired lock"] and not answers["succeeded"]
    assert not answers["dead, counted, attempts below"]


@pytest.mark.parametrize("lock", [LOCK, NOW_MS - 1, 12345])
def test_holds_lock_and_may_release_are_their_conditions(ddb, lock):
    held = check(ddb, lambda r: r.holds_lock(lock), JobRecord.holds_lock_condition(lock))
    check(ddb, lambda r: r.may_release(lock), JobRecord.may_release_condition(lock))
    assert not held["running, lock without deadline"]
    assert held["running, live lock"] is (lock == LOCK)


def test_may_release_without_a_lock_is_any_running_record(ddb):
    answers = check(ddb, lambda r: r.may_release(None), JobRecord.may_release_condition(None))
    assert answers["running, lock without deadline"] and not answers["retrying, attempts equal"]


def test_counting_a_workflow_member_is_its_condition(ddb):
    check(ddb, lambda r: r.not_counted(), JobRecord.not_counted_condition())
    counted = check(ddb, lambda r: r.counted_as(JobState.DEAD), JobRecord.counted_as_condition(JobState.DEAD))
    assert counted["dead, counted, attempts equal"] and not counted["succeeded, counted"]


def test_no_record_is_its_condition(ddb):
    answers = check(ddb, lambda r: not r.exists, NO_RECORD)
    assert [name for name, yes in answers.items() if yes] == ["no record"]


def test_a_lost_last_attempt_reads_dead_for_readers(ddb):
    lost = check(ddb, lambda r: r.lost_last_attempt(NOW_MS), JobRecord.lost_last_attempt_condition(NOW_MS))
    assert [name for name, yes in lost.items() if yes] == ["running, expired lock, last attempt"]
    states = {name: r.reconciled_state(NOW_MS) for name, r in RECORDS.items()}
    assert states["running, expired lock, last attempt"] is JobState.DEAD
    assert states["running, live lock, last attempt"] is JobState.RUNNING
    assert states["unknown state"] is JobState.PENDING and states["no record"] is JobState.PENDING
    assert states["no state (progress only)"] is JobState.PENDING
    # lifecycle.reconcile is the same rule, for callers that hold the fields
    assert lifecycle.reconcile(JobState.RUNNING, 2, 2, NOW_MS - 1, NOW_MS) is JobState.DEAD
    assert lifecycle.reconcile(JobState.RUNNING, 1, 2, NOW_MS - 1, NOW_MS) is JobState.RUNNING


def test_the_codec_round_trips_every_attribute():
    full = JobRecord(
        job_id="order-42",
        job="send_email",
        state=JobState.SUCCEEDED,
        attempts=3,
        max_attempts=5,
        created_at="2026-11-29T12:00:00.000Z",
        started_at="2026-11-29T12:00:01.000Z",
        finished_at="2026-11-29T12:00:02.000Z",
        updated_at="2026-11-29T12:00:01.500Z",
        result='{"provider_id": "p-1"}',
        error={"type": "RuntimeError", "message": "flaky"},
        progress=50.0,
        progress_message="half way",
        waiting_until="2026-11-29T12:01:00.000Z",
        expiration=1_800_003_600,
        in_progress_expiration=LOCK,
        wf_counted="succeeded",
        ix="send_email#succeeded",
        ix_at="2026-11-29T12:00:02.000Z",
    )
    item = full.to_item()
    assert JobRecord.from_item(item) == full
    assert (
        item["attempts"] == {"N": "3"}
        and item["progress"] == {"N": "50.0"}
        and item["id"] == {"S": "order-42"}
    )
    assert item["error"] == {"M": {"type": {"S": "RuntimeError"}, "message": {"S": "flaky"}}}
    # attributes a record does not have are not written, and read back as absent
    bare = JobRecord("order-43", state="paused", progress=12.5)
    assert set(bare.to_item()) == {"id", "state", "progress"}
    assert JobRecord.from_item(bare.to_item()) == bare  # a state this version does not know stays text


def test_with_changes_writes_the_item_of_the_changed_record():
    # GIVEN the item of a running record (as a first run's acquire writes it) and of a fuller one
    running = JobRecord(
        job_id="order-44",
        job="send_email",
        state=JobState.RUNNING,
        attempts=1,
        started_at="2026-11-29T12:00:01.000Z",
        in_progress_expiration=LOCK,
        ix="send_email#running",
        steps={"charge": {"r": "1"}},
        enqueued_at="2026-11-29T12:00:00.000Z",
    )
    fuller = replace(running, progress=10.0, progress_message="a tenth", payload_cut=True)
    changes: list[dict[str, Any]] = [
        {"state": JobState.SUCCEEDED, "result": "null", "in_progress_expiration": None, "ix": None},
        {"progress": 50, "progress_message": "half way", "ix_at": "2026-11-29T12:00:02.000Z"},
        {"attempts": 0, "history": (), "payload_cut": False, "progress": None},
        {"history": ({"attempt": 1},), "error": {"type": "E", "message": "m"}, "payload_cut": 1},
    ]
    for record in (running, fuller):
        for change in changes:
            # THEN the changed item is the changed record's item, attribute for attribute
            expected = replace(record, **change).to_item()
            assert JobRecord.with_changes(record.to_item(), change) == expected, change
    # AND a name that is not one of the item's attributes is refused (not written under a wrong name)
    for name in ("job_id", "steps", "exists", "nope"):
        with pytest.raises(TypeError):
            JobRecord.with_changes(running.to_item(), {name: "x"})
    # AND a new record's item is the record's, without making the record
    fields = {k: v for k, v in vars(fuller).items() if k not in ("job_id", "steps", "signals", "exists")}
    assert JobRecord.new_item("order-44", **fields) == replace(fuller, steps=None).to_item()
    assert JobRecord.new_item("order-45", attempts=0, history=()) == {"id": {"S": "order-45"}}


def test_the_codec_reads_what_the_lifecycle_writes(ddb):
    # GIVEN a record written by acquire, then by a failure (through DynamoDB)
    ddb.delete_item(TableName=TABLE, Key=codec.key("written"))
    lifecycle.acquire(
        ddb,
        TABLE,
        "written",
        "j",
        expiration=int(NOW) + 60,
        in_progress_expiration=LOCK,
        attempt=1,
        max_attempts=3,
    )
    lifecycle.fail(
        ddb,
        TABLE,
        "written",
        "j",
        JobState.RETRYING,
        {"type": "E", "message": "m"},
        release=True,
        ttl_seconds=60,
        lock=LOCK,
    )
    item = ddb.get_item(TableName=TABLE, Key=codec.key("written"), ConsistentRead=True)["Item"]
    # THEN the record reads it typed, and writes it back as stored
    rec = JobRecord.from_item(item)
    assert (rec.state, rec.attempts, rec.max_attempts, rec.in_progress_expiration) == (
        JobState.RETRYING,
        1,
        3,
        None,
    )
    assert rec.error == {"type": "E", "message": "m"}
    assert rec.to_item() == item


@pytest.mark.parametrize("signal", [None, "go"])
def test_may_park_is_the_condition_of_suspend(ddb, signal):
    answers = check(ddb, lambda r: r.may_park(LOCK, signal), JobRecord.may_park_condition(LOCK, signal))
    assert answers["running, live lock"] and answers["running, live lock, other sent"]
    # a signal wait does not park over the signal it waits for: it arrived while the job ran
    assert answers["running, live lock, go sent"] is (signal is None)
    assert not answers["sleeping, wake due, attempts equal"] and not answers["succeeded"]


def test_may_take_signal_is_the_condition_of_deliver_signal(ddb):
    answers = check(
        ddb,
        lambda r: r.may_take_signal("go", '{"a": 1}'),
        JobRecord.may_take_signal_condition("go", '{"a": 1}'),
    )
    assert answers["no record"] and answers["waiting for go"] and answers["running, live lock"]
    assert answers["signal only (not started)"] and answers["running, live lock, go sent"]  # the same again
    assert not answers["succeeded"] and not answers["dead, go sent"] and not answers["dead, attempts equal"]
    other = check(
        ddb,
        lambda r: r.may_take_signal("go", '{"b": 2}'),
        JobRecord.may_take_signal_condition("go", '{"b": 2}'),
    )
    assert not other["running, live lock, go sent"]  # other data under a name already sent


def test_waits_for_signal_is_the_condition_of_wake(ddb):
    answers = check(ddb, lambda r: r.waits_for_signal("go"), JobRecord.waits_for_signal_condition("go"))
    assert answers["waiting for go"] and not answers["waiting for other"] and not answers["no record"]


def test_may_cancel_and_may_ask_cancel_are_the_conditions_of_cancel(ddb):
    now = check(ddb, lambda r: r.may_cancel(NOW_MS), JobRecord.may_cancel_condition(NOW_MS))
    ask = check(ddb, lambda r: r.may_ask_cancel(NOW_MS), JobRecord.may_ask_cancel_condition(NOW_MS))
    # ended at once: not started, retrying, waiting, parked, a run whose invocation is over
    for name in (
        "no record",
        "signal only (not started)",
        "retrying, attempts none",
        "waiting, attempts equal",
        "sleeping, wake ahead, attempts equal",
        "waiting for go",
        "running, expired lock",
        "retrying, cancel asked",
        "cancelled, TTL expired",
    ):
        assert now[name] and not ask[name], name
    # a live run is asked to stop, once
    assert ask["running, live lock"] and not now["running, live lock"]
    assert not ask["running, live lock, cancel asked"] and not now["running, live lock, cancel asked"]
    # finished: left as it is
    for name in ("succeeded", "dead, attempts equal", "cancelled", "superseded", "unknown state"):
        assert not now[name] and not ask[name], name
