"""The worker's gates and decisions on tables of deliveries: plain values, no AWS and no moto.

Each gate is a function of a `Delivery` (and of the facts it is handed: the job's record, the time left)
that returns a decision or None; these tests build deliveries from SQS records as Lambda hands them
over, and check the decision each gate takes."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from botocore.exceptions import ClientError
from pydantic import BaseModel

from lambdajobs.runtime import gates, ratelimit
from lambdajobs.runtime.delivery import CarriedSlot, Delivery, Mark, read
from lambdajobs.runtime.gates import DeadLetter, Done, HandBack, RecordSuccess, Retry, Run
from lambdajobs.runtime.job_record import JobRecord, JobState
from lambdajobs.runtime.settings import (
    ATTR_FAILED_AT,
    ATTR_PRIOR_ATTEMPTS,
    ATTR_RATE_SLOT,
    ATTR_REDRIVEN,
    ATTR_SETTLE,
)
from lambdajobs.runtime.spec import JobSpec, job
from lambdajobs.testing import isolated_registry

NOW_US = 1_800_000_000_000_000
SECOND = 1_000_000
ALLOW = ratelimit.START_ALLOWANCE_US  # a run starts by then after its slot


class Order(BaseModel):
    n: int


@pytest.fixture(scope="module")
def specs() -> dict[str, JobSpec]:
    with isolated_registry():

        def ship(payload: Order) -> dict:
            return {}

        return {
            "plain": job(name="ship", max_attempts=3)(ship).spec,
            "levels": job(name="ship_levels", priorities=("high", "low"))(ship).spec,
            "limited": job(name="ship_limited", rate_limit="10/second", max_attempts=3)(ship).spec,
        }


def record(
    body: Any, *, receives: int = 1, arn: str = "arn:aws:sqs:us-east-1:1:test-ship", **attributes: str
) -> SQSRecord:
    text = body if isinstance(body, str) else json.dumps(body)
    return SQSRecord(
        {
            "messageId": "m-1",
            "receiptHandle": "r-1",
            "body": text,
            "attributes": {"ApproximateReceiveCount": str(receives)},
            "messageAttributes": {
                name: {"dataType": "String", "stringValue": value} for name, value in attributes.items()
            },
            "eventSourceARN": arn,
        }
    )


def deliver(spec: JobSpec, body: Any = None, *, level: str | None = None, **options: Any) -> Delivery:
    envelope = body if body is not None else {"v": 1, "job": spec.name, "id": "j-1", "payload": {"n": 1}}
    return read(
        spec, record(envelope, **options), source_level=level, lookup=lambda name: _lookup(spec, name)
    )


def _lookup(spec: JobSpec, name: str) -> JobSpec:
    from lambdajobs.runtime.errors import UnknownJobError

    if name != spec.name:
        raise UnknownJobError(f"unknown job '{name}'")
    return spec


# -- decoding once -----------------------------------------------------------------------------------


def test_a_delivery_is_decoded_once_with_its_attempt_job_id_and_carried_slot(specs):
    d = deliver(specs["plain"], receives=2, **{ATTR_PRIOR_ATTEMPTS: "3", ATTR_RATE_SLOT: "5:123:ahead"})
    assert (d.attempt, d.receives, d.job_id, d.redriven) == (5, 2, "j-1", False)
    assert d.carried_slot == CarriedSlot(5, 123, ahead=True)
    assert d.payload == specs["plain"].payload_model(n=1) and d.invalid is None and d.unrunnable is None


def test_a_redrive_and_an_envelope_without_id_are_read_as_such(specs):
    d = deliver(
        specs["plain"],
        {"v": 1, "job": "ship", "payload": {"n": 1}},
        **{ATTR_FAILED_AT: "2026-01-01T00:00:00Z"},
    )
    assert d.redriven and d.job_id == "m-1"  # no id, no idempotency key: the message id


# -- the hand-back protocol -----------------------------------------------------------------------


def carrying(spec: JobSpec, outcome: Any) -> Delivery:
    return deliver(spec, **{ATTR_SETTLE: outcome if isinstance(outcome, str) else json.dumps(outcome)})


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        (
            {"v": 1, "action": "complete", "job_id": "j-1", "result": '{"ok": 1}', "lock": 7},
            RecordSuccess('{"ok": 1}', 7),
        ),
        (
            {
                "v": 1,
                "action": "dead_letter",
                "job_id": "j-1",
                "attempts": 2,
                "type": "E",
                "message": "m",
                "mark": "release",
                "lock": 7,
            },
            DeadLetter({"type": "E", "message": "m"}, 2, mark=Mark.DEAD_RUN, lock=7),
        ),
        # written before the protocol had a version: its marks read as what they did
        (
            {
                "action": "dead_letter",
                "job_id": "j-1",
                "attempts": 3,
                "type": "E",
                "message": "m",
                "mark": "bury",
            },
            DeadLetter({"type": "E", "message": "m"}, 3, mark=Mark.DEAD_PAST_LAST),
        ),
        (
            {
                "action": "dead_letter",
                "job_id": "j-1",
                "attempts": 1,
                "type": "E",
                "message": "m",
                "mark": "release",
                "lock": 9,
            },
            DeadLetter({"type": "E", "message": "m"}, 1, mark=Mark.DEAD_RUN, lock=9),
        ),
        (
            {
                "action": "dead_letter",
                "job_id": "j-1",
                "attempts": 1,
                "type": "E",
                "message": "m",
                "mark": "reject",
            },
            DeadLetter({"type": "E", "message": "m"}, 1, mark=Mark.DEAD_UNRUN),
        ),
        # a newer worker's outcome (a deploy in progress): neither run nor dropped, its outcome kept
        (
            {"v": 99, "action": "something-new", "job_id": "j-1", "at": 10**10},
            HandBack(
                gates.NEWER_WORKER_DELAY_SECONDS,
                "an outcome from a newer worker",
                keep_slot=False,
                keep_outcome=True,
            ),
        ),
    ],
)
def test_a_carried_outcome_is_recorded_not_run(specs, outcome, expected):
    assert gates.carried_outcome(carrying(specs["plain"], outcome)) == expected


@pytest.mark.parametrize(
    "outcome",
    [
        {"v": 1, "action": "complete", "job_id": "someone-else", "result": "{}"},  # another job's
        {"v": 1, "action": "explode", "job_id": "j-1"},  # not an action
        '{"action": "complete", "job_id": ',  # damaged
        "[1, 2]",
        {"v": 1, "action": "dead_letter", "job_id": "j-1", "attempts": -4},
        {"v": 1, "action": "dead_letter", "job_id": "j-1", "mark": "dead_run"},  # not a mark on the wire
        "[" * 100_000,  # nested too deeply for the parser
        {"v": 99, "action": "complete", "job_id": "someone-else"},  # a newer version, another job's
    ],
)
def test_a_forged_or_damaged_outcome_is_discarded_and_the_message_runs(specs, outcome):
    d = carrying(specs["plain"], outcome)
    assert d.carried is not None and d.carried.discarded
    assert gates.carried_outcome(d) is None


# -- the gates before a run -------------------------------------------------------------------------


def test_the_deadline_gate_hands_back_without_an_attempt(specs):
    d = deliver(specs["plain"])
    assert gates.deadline(d, lambda: "not started: 10 ms left") == HandBack(
        0, "not started: 10 ms left", metric="JobDeferred"
    )
    assert gates.deadline(d, lambda: None) is None


def test_an_envelope_that_cannot_run_here_is_dead_lettered(specs):
    undecodable = deliver(specs["plain"], "not json")
    decision = gates.unrunnable(undecodable)
    assert isinstance(decision, DeadLetter) and not decision.for_job and decision.mark is None
    other = deliver(specs["plain"], {"v": 1, "job": "elsewhere", "id": "j-1", "payload": {}})
    assert isinstance(gates.unrunnable(other), DeadLetter) and not gates.unrunnable(other).for_job
    # a workflow member's record is marked dead, so its stage does not wait for it for ever
    member = {
        "v": 1,
        "job": "elsewhere",
        "id": "w.0.0",
        "payload": {},
        "workflow": {"id": "w", "stage": 0, "index": 0},
    }
    decision = gates.unrunnable(deliver(specs["plain"], member))
    assert isinstance(decision, DeadLetter) and decision.for_job and decision.mark is Mark.DEAD_UNRUN
    assert gates.unrunnable(deliver(specs["plain"])) is None


def test_a_message_for_another_level_is_moved_there(specs):
    spec = specs["levels"]
    body = {"v": 1, "job": spec.name, "id": "j-1", "payload": {"n": 1}, "priority": "high"}
    warned: list[Any] = []
    d = deliver(spec, body, level=None)
    assert gates.routing(d, lambda level: f"url-{level}", lambda *a: warned.append(a)) == HandBack(
        0, "priority high", to="url-high"
    )
    assert gates.routing(deliver(spec, body, level="high"), lambda level: "x", warned.append) is None

    def unknown(level: str | None) -> str:
        raise KeyError(level)

    assert gates.routing(d, unknown, lambda *a: warned.append(a)) is None and len(warned) == 1


def test_an_invalid_payload_is_dead_at_once(specs):
    d = deliver(specs["plain"], {"v": 1, "job": "ship", "id": "j-1", "payload": {"n": "many"}})
    decision = gates.validation(d)
    assert isinstance(decision, DeadLetter) and decision.mark is Mark.DEAD_UNRUN
    assert decision.error["type"] == "PayloadValidationError"
    assert gates.validation(deliver(specs["plain"])) is None


NOW_MS = NOW_US // 1000


@pytest.mark.parametrize(
    ("record_", "expected"),
    [
        (None, DeadLetter),
        (JobRecord("j-1", state=JobState.RETRYING, attempts=3), DeadLetter),
        (JobRecord("j-1", state=JobState.SUCCEEDED, attempts=3), Done),
        (
            JobRecord("j-1", state=JobState.RUNNING, attempts=3, in_progress_expiration=NOW_MS + 5000),
            HandBack,
        ),
        (
            JobRecord("j-1", state=JobState.RUNNING, attempts=3, in_progress_expiration=NOW_MS - 5000),
            DeadLetter,
        ),
        # a copy of it waits for a slot this message does not carry: a duplicate
        (JobRecord("j-1", state=JobState.WAITING, waiting_until="2027-01-15T08:00:00.000Z"), Done),
    ],
)
def test_past_the_last_attempt(specs, record_, expected):
    d = deliver(specs["plain"], receives=4)
    assert d.attempt == 4 > specs["plain"].max_attempts
    decision = gates.past_last_attempt(d, record_, NOW_MS)
    assert isinstance(decision, expected)
    if isinstance(decision, DeadLetter):
        assert decision.mark is Mark.DEAD_PAST_LAST and decision.attempts == 3
        assert decision.error["type"] == "LastAttemptLostError"
    assert gates.past_last_attempt(deliver(specs["plain"], receives=3), record_, NOW_MS) is None


# -- the rate-limit gate --------------------------------------------------------------------------


class FakeLimiter:
    """The limiter as the gate sees it: slots handed out in order, and slots taken ahead."""

    def __init__(self, slots: list[int], *, stolen: tuple[int, ...] = (), fail: BaseException | None = None):
        self.slots, self.stolen, self.fail = list(slots), set(stolen), fail
        self.taken: list[int] = []

    def take(self, limit: Any, value: Any, *, ahead: bool) -> tuple[int, bool]:
        if self.fail:
            raise self.fail
        self.taken.append(self.slots.pop(0))
        return self.taken[-1], False

    def taken_ahead(self, limit: Any, value: Any, slot_us: int) -> bool:
        if self.fail:
            raise self.fail
        return slot_us in self.stolen


def rate_gate(
    d: Delivery, limiter: FakeLimiter, record_: JobRecord | None = None, *, room: bool = True
) -> Any:
    return ratelimit.gate(
        d,
        limiter,
        lambda: record_,
        now_us=NOW_US,
        room=lambda ms: room,
        warn=lambda *a: None,
        clock=lambda: NOW_US,
    )


THROTTLE = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "GetItem")


def test_a_rate_limit_gate_decides_from_the_slot(specs, monkeypatch):
    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", SECOND)
    spec = specs["limited"]
    # a slot now: run, not later than a second after it
    assert rate_gate(deliver(spec), FakeLimiter([NOW_US])) == Run(None, NOW_US + ALLOW)
    # half a second away: waited for here
    assert rate_gate(deliver(spec), FakeLimiter([NOW_US + SECOND // 2])) == Run(
        NOW_US + SECOND // 2, NOW_US + SECOND // 2 + ALLOW
    )
    # ... unless the invocation has no time for the wait
    decision = rate_gate(deliver(spec), FakeLimiter([NOW_US + SECOND // 2]), room=False)
    assert isinstance(decision, HandBack) and decision.slot == CarriedSlot(1, NOW_US + SECOND // 2)
    # a minute away: handed back, due at its slot, carrying it; the record reads waiting
    far = NOW_US + 60 * SECOND
    decision = rate_gate(deliver(spec), FakeLimiter([far]))
    assert decision == HandBack(
        59, "rate limited", slot=CarriedSlot(1, far), mark_waiting=True, metric="JobRateLimited"
    )


def test_a_carried_slot_is_used_by_its_own_attempt_only(specs, monkeypatch):
    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", SECOND)
    spec = specs["limited"]
    mine = deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US}"})
    assert rate_gate(mine, FakeLimiter([])) == Run(None, NOW_US + ALLOW)
    # taken ahead by a higher priority: a fresh slot instead
    limiter = FakeLimiter([NOW_US + 2 * SECOND], stolen=(NOW_US,))
    assert isinstance(rate_gate(mine, limiter), HandBack) and limiter.taken == [NOW_US + 2 * SECOND]
    # a slot another attempt took, or one more than a second past: a fresh slot
    for other in (
        deliver(spec, receives=2, **{ATTR_RATE_SLOT: f"1:{NOW_US}"}),
        deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US - 2 * SECOND}"}),
    ):
        limiter = FakeLimiter([NOW_US])
        assert rate_gate(other, limiter) == Run(None, NOW_US + ALLOW) and limiter.taken == [NOW_US]
    # still ahead: wait on for it, without taking another
    ahead = deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US + 30 * SECOND}"})
    decision = rate_gate(ahead, FakeLimiter([]))
    assert isinstance(decision, HandBack) and decision.slot == CarriedSlot(1, NOW_US + 30 * SECOND)


def test_a_rate_limit_gate_takes_no_slot_for_a_job_that_may_not_start(specs):
    spec = specs["limited"]
    for found in (
        JobRecord("j-1", state=JobState.SUCCEEDED, attempts=1),
        JobRecord("j-1", state=JobState.RUNNING, attempts=1, in_progress_expiration=NOW_MS + 60_000),
        JobRecord("j-1", state=JobState.RETRYING, attempts=1),  # attempt 1 already ran: fenced
    ):
        limiter = FakeLimiter([NOW_US])
        assert rate_gate(deliver(spec), limiter, found) == Run() and limiter.taken == []
    # a copy waits for another slot: this delivery is its duplicate, and is done
    waiting = JobRecord(
        "j-1", state=JobState.WAITING, waiting_until=CarriedSlot(1, NOW_US + 9 * SECOND).until_iso()
    )
    limiter = FakeLimiter([NOW_US])
    assert isinstance(rate_gate(deliver(spec), limiter, waiting), Done) and limiter.taken == []
    # ... but the copy carrying that very slot is the one that waits
    own = deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US + 9 * SECOND}"})
    assert isinstance(rate_gate(own, FakeLimiter([]), waiting), HandBack)


def test_a_limiter_that_cannot_be_used_hands_the_job_back_and_other_errors_raise(specs):
    spec = specs["limited"]
    assert rate_gate(deliver(spec), FakeLimiter([], fail=THROTTLE)) == HandBack(1, "rate limiter")
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "UpdateItem")
    with pytest.raises(ClientError):
        rate_gate(deliver(spec), FakeLimiter([], fail=denied))
    assert rate_gate(deliver(specs["plain"]), FakeLimiter([])) is None  # no rate limit: no gate


# -- after the run ------------------------------------------------------------------------------------


def test_after_a_failure_retry_or_dead(specs):
    spec, rng = specs["plain"], random.Random(1)
    retry = gates.failed(deliver(spec), RuntimeError("x"), 5, rng, unreleased=False)
    assert isinstance(retry, Retry) and retry.delay is not None and retry.metric == "JobRetried"
    last = gates.failed(deliver(spec, receives=3), RuntimeError("x"), 5, rng, unreleased=False)
    assert last == DeadLetter({"type": "RuntimeError", "message": "x"}, 3, lock=5)
    # the release write failed: the copy marks the run dead under its lock, then moves it
    stuck = gates.failed(deliver(spec, receives=3), RuntimeError("x"), 5, rng, unreleased=True)
    assert stuck == DeadLetter(
        {"type": "RuntimeError", "message": "x"}, 3, mark=Mark.DEAD_RUN, lock=5, mark_now=False
    )


def test_a_lock_not_taken_or_held_elsewhere_costs_no_attempt(specs):
    d, rng = deliver(specs["plain"]), random.Random(1)
    assert isinstance(gates.not_acquired(d, THROTTLE, rng), HandBack)
    denied = ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "UpdateItem")
    assert isinstance(gates.not_acquired(d, denied, rng), Retry)
    held = JobRecord("j-1", state=JobState.RUNNING, in_progress_expiration=NOW_MS + 4_500)
    decision = gates.lock_held(held)
    assert isinstance(decision, HandBack) and decision.reason == "lock held"
    assert isinstance(gates.lock_held(JobRecord("j-1", state=JobState.RUNNING)), Retry)
    assert gates.duplicate(JobRecord("j-1", state=JobState.SUCCEEDED)) == Done(
        "duplicate", metric="JobDuplicate", notify=True
    )


def test_a_newer_workers_outcome_waits_an_hour_then_goes_to_the_dlq(specs):
    written = 1_800_000_000
    d = carrying(specs["plain"], {"v": 2, "action": "complete", "job_id": "j-1", "at": written})
    assert isinstance(gates.carried_outcome(d, now=written + 3599), HandBack)
    late = gates.carried_outcome(d, now=written + 3601)
    assert isinstance(late, DeadLetter) and late.error["type"] == "UnknownOutcomeVersion"
    assert "protocol version 2" in late.error["message"] and late.mark is None


def test_waiting_elsewhere_is_a_later_slot_than_the_message_carries(specs):
    spec = specs["limited"]
    slot = CarriedSlot(1, NOW_US + 9 * SECOND)
    waiting = JobRecord("j-1", state=JobState.WAITING, waiting_until=slot.until_iso())
    assert gates.waits_elsewhere(deliver(spec), waiting)  # no slot: a duplicate
    earlier = deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US}"})
    assert gates.waits_elsewhere(earlier, waiting)
    # the copy that carries that slot, or a later one (its mark could not be written), is the live one
    assert not gates.waits_elsewhere(deliver(spec, **{ATTR_RATE_SLOT: slot.text()}), waiting)
    assert not gates.waits_elsewhere(deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US + 20 * SECOND}"}), waiting)
    # a DLQ redrive starts the job again, whatever the record waits for
    assert not gates.waits_elsewhere(deliver(spec, **{ATTR_FAILED_AT: "2026-01-01T00:00:00Z"}), waiting)
    assert not gates.waits_elsewhere(deliver(spec, **{ATTR_REDRIVEN: "1"}), waiting)
    assert not gates.waits_elsewhere(deliver(spec), JobRecord("j-1", state=JobState.RETRYING))


def test_a_fresh_slot_handed_back_for_lack_of_time_marks_the_record_waiting(specs, monkeypatch):
    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", SECOND)
    decision = rate_gate(deliver(specs["limited"]), FakeLimiter([NOW_US + SECOND // 2]), room=False)
    assert isinstance(decision, HandBack) and decision.mark_waiting


def test_past_the_last_attempt_a_running_record_without_a_lock_deadline_goes_to_the_dlq(specs):
    d = deliver(specs["plain"], receives=4)
    decision = gates.past_last_attempt(d, JobRecord("j-1", state=JobState.RUNNING, attempts=3), NOW_MS)
    assert isinstance(decision, DeadLetter) and decision.mark is Mark.DEAD_PAST_LAST


def test_a_carried_slot_the_limiter_read_made_late_takes_a_fresh_slot(specs, monkeypatch):
    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", SECOND)
    spec = specs["limited"]
    mine = deliver(spec, **{ATTR_RATE_SLOT: f"1:{NOW_US - 900_000}"})  # back 0.9 s after its slot
    fresh = NOW_US + 30 * SECOND
    # the read of the limiter took 0.2 s: past the slot's second, so not run on it
    late = ratelimit.gate(
        mine,
        FakeLimiter([fresh]),
        lambda: None,
        now_us=NOW_US,
        room=lambda ms: True,
        warn=lambda *a: None,
        clock=lambda: NOW_US + 200_000,
    )
    assert isinstance(late, HandBack) and late.slot == CarriedSlot(1, fresh) and late.mark_waiting
    # within the second after the read: run on it, starting by the allowance after it
    on_time = ratelimit.gate(
        mine,
        FakeLimiter([]),
        lambda: None,
        now_us=NOW_US,
        room=lambda ms: True,
        warn=lambda *a: None,
        clock=lambda: NOW_US + 50_000,
    )
    assert on_time == Run(None, NOW_US - 900_000 + ALLOW)
