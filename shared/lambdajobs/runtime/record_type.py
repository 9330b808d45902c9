"""`JobRecord`, the job record's type: a record as read (`from_item`) or to be written (`to_item`), and
each rule about a record, its predicate beside the condition expression it mirrors (see
`lambdajobs.runtime.job_record`, where the states, the `Condition` type and the item's attributes are).

Split out of `lambdajobs.runtime.job_record`, which keeps what every job's writes need (a first run's
item: `new_item`; its success: `with_changes`, `holds_lock_condition`; no record is made for them):
this module loads the first time `JobRecord` is used (a record read, a condition of a write other
than a first run's acquire and success), so a worker's cold start whose first record succeeds neither
compiles it nor defines the dataclass. `JobRecord` is importable from `lambdajobs.runtime.job_record`
too, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from lambdajobs.runtime import job_record
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.job_record import (
    _AS_STORED,
    _ATTRIBUTES,
    FINAL_STATES,
    PARKED_STATES,
    SIGNAL_PREFIX,
    STEP_PREFIX,
    Condition,
    JobState,
)
from lambdajobs.runtime.table import Item


def _states(*states: JobState) -> dict[str, str]:
    return {f":{s.value}": s.value for s in states}


#: A condition no item passes (what a rule that cannot hold for these arguments is written as).
_NEVER = "attribute_exists(id) AND attribute_not_exists(id)"

_LOCK_LIVE = (
    "#state = :running AND (attribute_not_exists(in_progress_expiration) "
    "OR in_progress_expiration >= :now_ms)"
)
_LOCK_EXPIRED = (
    "#state = :running AND attribute_exists(in_progress_expiration) AND in_progress_expiration < :now_ms"
)
#: An attempt number runs at most once: a record that already ran this attempt (or a later one) is
#: not started by it again (two copies of one message, both received: SQS's at-least-once).
_FENCE = "attribute_not_exists(attempts) OR attempts < :attempt"


def _state_of(text: Any) -> JobState | str | None:
    if text is None:
        return None
    try:
        return JobState(str(text))
    except ValueError:  # a state written by a newer version: kept as its text
        return str(text)


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None


def _text(value: Any) -> str | None:
    return str(value) if value is not None else None


def _map(value: Any) -> dict[str, Any] | None:
    return dict(value) if isinstance(value, dict) else None


def _prefixed(values: Mapping[str, Any], prefix: str, kind: type) -> dict[str, Any]:
    return {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix) and isinstance(v, kind)}


@dataclass(frozen=True)
class JobRecord:
    """A job record as read (`from_item`) or to be written (`to_item`); every attribute but `job_id`
    (the item's `id`) is named as in the item. Times are RFC 3339 text to the millisecond.

    A record that is not there is `JobRecord.missing(job_id)` (`exists` False): each predicate
    answers for it as its condition does for no item."""

    job_id: str
    job: str | None = None
    #: A `JobState`, or the text of a state this version does not know; None: the item has none.
    state: JobState | str | None = None
    #: The last attempt that started (0: none).
    attempts: int = 0
    max_attempts: int | None = None
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str | None = None
    #: The job's result as JSON text (see `lifecycle.stored_result`).
    result: str | None = None
    #: The last failure: {"type": ..., "message": ...}.
    error: dict[str, str] | None = None
    progress: float | None = None
    progress_message: str | None = None
    #: A rate-limited job's slot (RFC 3339).
    waiting_until: str | None = None
    #: The record's TTL (epoch s).
    expiration: int | None = None
    #: The running attempt's lock: its invocation's deadline (epoch ms), also the lock's token.
    in_progress_expiration: int | None = None
    #: A workflow member's outcome already counted in its workflow's item (a `JobState` value).
    wf_counted: str | None = None
    #: The job index's keys (`index_key`, and when the record entered its state).
    ix: str | None = None
    ix_at: str | None = None
    #: A durable job's checkpoints, by step name (`step:<name>` attributes; see `durable.Checkpoint`):
    #: each a map of its result (`r`, JSON text), duration (`ms`) and end (`at`).
    steps: dict[str, dict[str, Any]] | None = None
    #: Signals sent to the job and not yet consumed or consumed (`signal:<name>`: the data as JSON text).
    signals: dict[str, str] | None = None
    #: A parked job's wake-up (epoch ms): its copy or its schedule is due then.
    wake_at: int | None = None
    #: A job in `waiting_signal`: the signal's name.
    waiting_for: str | None = None
    #: A job in `waiting_signal`: its message's body and queue, for the signal's wake-up.
    resume_body: str | None = None
    resume_queue: str | None = None
    #: ... and its fair-queue tenant (`MessageGroupId`), if it had one.
    resume_group: str | None = None
    #: How many times the job was parked (sleeps, signal waits, continuations).
    suspensions: int | None = None
    #: When a cancel of the job was recorded (RFC 3339): no run starts it any more, and a running one
    #: stops at its next check (`lambdajobs.runtime.cancellation`).
    cancel_requested: str | None = None
    #: When the job was enqueued (RFC 3339): the envelope's `enqueued_at`, else SQS's SentTimestamp.
    enqueued_at: str | None = None
    #: The priority level whose queue ran it (a job with priorities only).
    level: str | None = None
    #: Its fair-queue tenant (the message's `MessageGroupId`).
    tenant: str | None = None
    #: A workflow member's place: {"id", "stage", "index"}.
    workflow: dict[str, Any] | None = None
    #: The envelope's payload as JSON text, stored by a failed attempt's write only (a success costs
    #: nothing more); cut above `MAX_STORED_PAYLOAD_BYTES` (`payload_cut`).
    payload: str | None = None
    payload_cut: bool | None = None
    #: The last failure's formatted traceback, PII-scrubbed, its last `MAX_TRACEBACK_CHARS`.
    traceback: str | None = None
    #: Each failed attempt, oldest first (at most `MAX_HISTORY`): {"attempt", "started", "ended",
    #: "outcome", "error_type", "error_message"}.
    history: tuple[dict[str, Any], ...] = ()
    #: False: no item (`missing`).
    exists: bool = True

    # -- codec --------------------------------------------------------------------------------------

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> JobRecord:
        """The record of an item as DynamoDB returns it (attribute values)."""
        v = codec.decode(item)
        error = v.get("error")
        progress = v.get("progress")
        return cls(
            job_id=str(v.get("id", "")),
            job=_text(v.get("job")),
            state=_state_of(v.get("state")),
            attempts=int(v.get("attempts") or 0),
            max_attempts=_int(v.get("max_attempts")),
            created_at=_text(v.get("created_at")),
            started_at=_text(v.get("started_at")),
            finished_at=_text(v.get("finished_at")),
            updated_at=_text(v.get("updated_at")),
            result=_text(v.get("result")),
            error={str(k): str(x) for k, x in error.items()} if isinstance(error, dict) else None,
            progress=float(progress) if progress is not None else None,
            progress_message=_text(v.get("progress_message")),
            waiting_until=_text(v.get("waiting_until")),
            expiration=_int(v.get("expiration")),
            in_progress_expiration=_int(v.get("in_progress_expiration")),
            wf_counted=_text(v.get("wf_counted")),
            ix=_text(v.get("ix")),
            ix_at=_text(v.get("ix_at")),
            steps=_prefixed(v, STEP_PREFIX, dict) or None,
            signals=_prefixed(v, SIGNAL_PREFIX, str) or None,
            wake_at=_int(v.get("wake_at")),
            waiting_for=_text(v.get("waiting_for")),
            resume_body=_text(v.get("resume_body")),
            resume_queue=_text(v.get("resume_queue")),
            resume_group=_text(v.get("resume_group")),
            suspensions=_int(v.get("suspensions")),
            cancel_requested=_text(v.get("cancel_requested")),
            enqueued_at=_text(v.get("enqueued_at")),
            level=_text(v.get("level")),
            tenant=_text(v.get("tenant")),
            workflow=_map(v.get("workflow")),
            payload=_text(v.get("payload")),
            payload_cut=bool(v.get("payload_cut")) or None,
            traceback=_text(v.get("traceback")),
            history=tuple(h for h in (v.get("history") or ()) if isinstance(h, dict)),
        )

    def to_item(self) -> Item:
        """The item (attribute values); attributes the record does not have are left out."""
        values: dict[str, Any] = {"id": self.job_id}
        for name in _ATTRIBUTES:
            values[name] = getattr(self, name)
        for name, checkpoint in (self.steps or {}).items():
            values[STEP_PREFIX + name] = checkpoint
        for name, data in (self.signals or {}).items():
            values[SIGNAL_PREFIX + name] = data
        for name, stored in _AS_STORED.items():
            values[name] = stored(values[name])
        return codec.encode(values)

    #: The item of `JobRecord(job_id, **attributes)` without making the record (`job_record.new_item`).
    new_item = staticmethod(job_record.new_item)
    #: An item with some attributes changed, without decoding it (`job_record.with_changes`).
    with_changes = staticmethod(job_record.with_changes)

    @classmethod
    def missing(cls, job_id: str = "") -> JobRecord:
        """The record of a job id that has no item."""
        return cls(job_id=job_id, exists=False)

    @property
    def known_state(self) -> JobState | None:
        """The state, if this version knows it."""
        return self.state if isinstance(self.state, JobState) else None

    # -- the lock -----------------------------------------------------------------------------------

    def lock_live(self, now_ms: int) -> bool:
        """A running record whose lock has not expired (a lock without a deadline never does)."""
        ipe = self.in_progress_expiration
        return self.state == JobState.RUNNING and (ipe is None or ipe >= now_ms)

    @staticmethod
    def lock_live_condition(now_ms: int) -> Condition:
        return Condition(_LOCK_LIVE, {**_states(JobState.RUNNING), ":now_ms": now_ms})

    def lock_expired(self, now_ms: int) -> bool:
        """A running record whose lock expired: its invocation is over (it crashed or timed out)."""
        ipe = self.in_progress_expiration
        return self.state == JobState.RUNNING and ipe is not None and ipe < now_ms

    @staticmethod
    def lock_expired_condition(now_ms: int) -> Condition:
        return Condition(_LOCK_EXPIRED, {**_states(JobState.RUNNING), ":now_ms": now_ms})

    def holds_lock(self, lock: int) -> bool:
        """The record still carries the lock `lock` (a run's in-progress expiry), expired or not."""
        return self.in_progress_expiration == lock

    holds_lock_condition = staticmethod(job_record.holds_lock_condition)

    def may_release(self, lock: int | None) -> bool:
        """The run that holds the lock may release it (fail, unstart): the record is running, and
        with `lock`, still carries that run's lock."""
        return self.state == JobState.RUNNING and (lock is None or self.holds_lock(lock))

    @staticmethod
    def may_release_condition(lock: int | None) -> Condition:
        running = Condition("#state = :running", _states(JobState.RUNNING))
        if lock is None:
            return running
        held = JobRecord.holds_lock_condition(lock)
        return Condition(f"{running.expression} AND {held.expression}", {**running.values, **held.values})

    # -- starting a run -----------------------------------------------------------------------------

    def may_start(self, now: float, attempt: int | None = None, redriven: bool = True) -> bool:
        """Whether an acquire at `now` (epoch s) by attempt `attempt` may take this record
        (`lifecycle.acquire`): no record, or one with no state yet (a signal sent before the job ran);
        a parked durable job whose wake-up is due (by a copy of this attempt or a later one: an
        earlier attempt's copy is a duplicate, and so is any copy before the wake-up); its TTL
        expired; it is retrying or waiting; it is dead (a
        workflow member counted dead only for a DLQ redrive: `redriven`); or a running one whose lock
        expired. Fenced (`attempt` given, not `redriven`): a retrying, waiting or dead record that
        already started attempt `attempt` or a later one is not started again by it (a copy of an
        attempt that ran), but for a dead record and a first attempt: the job id sent again, which
        runs again (as a DLQ redrive does).

        Not fenced: a running record whose lock expired (a crashed run: its own message comes back
        with a higher receive count), and a redriven message, whose attempts start again at 1 while
        the record may keep the numbering of before the redrive (a redriven job that waited for its
        rate limit's slot, a record SQS dead-lettered while it read `retrying`)."""
        if not self.exists or (self.expiration is not None and self.expiration < int(now)):
            return True
        if self.cancel_requested is not None:  # cancelled: no copy starts it again
            return False
        if self.state is None:  # a record a signal made before the job first ran
            return True
        if self.state in PARKED_STATES:  # a durable job's wake-up is due; never an earlier attempt's copy
            due = self.wake_at is not None and self.wake_at <= int(now * 1000)
            return due and (attempt is None or redriven or self.attempts <= attempt)
        fenced = attempt is not None and not redriven and self.attempts >= attempt
        if self.state in (JobState.RETRYING, JobState.WAITING):
            return not fenced
        if self.state == JobState.DEAD:
            sent_again = attempt == 1  # a dead job id sent again (a new message): it runs again
            return (redriven or self.wf_counted is None) and not (fenced and not sent_again)
        return self.lock_expired(int(now * 1000))

    @staticmethod
    def may_start_condition(now: float, attempt: int | None = None, redriven: bool = True) -> Condition:
        values = {
            **_states(
                JobState.RUNNING,
                JobState.RETRYING,
                JobState.WAITING,
                JobState.DEAD,
                JobState.SLEEPING,
                JobState.WAITING_SIGNAL,
            ),
            ":now": int(now),
            ":now_ms": int(now * 1000),
        }
        fence = parked_fence = ""
        if attempt is not None and not redriven:
            values[":attempt"] = attempt
            fence = f" AND ({_FENCE})"
            parked_fence = " AND (attribute_not_exists(attempts) OR attempts <= :attempt)"
        dead = "#state = :dead" if redriven else "#state = :dead AND attribute_not_exists(wf_counted)"
        dead_fence = fence if attempt != 1 else ""  # a dead job id sent again runs again
        expression = (
            f"attribute_not_exists(id) OR expiration < :now OR (attribute_not_exists(cancel_requested) "
            f"AND (attribute_not_exists(#state) "
            f"OR (#state IN (:retrying, :waiting){fence}) "
            f"OR ({dead}{dead_fence}) OR ({_LOCK_EXPIRED}) "
            f"OR (#state IN (:sleeping, :waiting_signal) AND wake_at <= :now_ms{parked_fence})))"
        )
        return Condition(expression, values)

    def counted_dead(self, redriven: bool) -> bool:
        """A workflow member counted dead (`wf_counted`), and the message is not a DLQ redrive: no
        copy may run it again, nor take a rate-limit slot for it."""
        return not redriven and self.state == JobState.DEAD and self.wf_counted is not None

    @staticmethod
    def counted_dead_condition(redriven: bool) -> Condition:
        if redriven:
            return Condition(_NEVER, {})
        return Condition("#state = :dead AND attribute_exists(wf_counted)", _states(JobState.DEAD))

    def settled_or_held(self, now_ms: int) -> bool:
        """Finished successfully, or held by a live run: a copy has nothing to start."""
        return self.state == JobState.SUCCEEDED or self.lock_live(now_ms)

    @staticmethod
    def settled_or_held_condition(now_ms: int) -> Condition:
        live = JobRecord.lock_live_condition(now_ms)
        return Condition(
            f"#state = :succeeded OR ({live.expression})", {**_states(JobState.SUCCEEDED), **live.values}
        )

    # -- other transitions --------------------------------------------------------------------------

    def may_mark_dead(self, over_retrying: bool, now_ms: int) -> bool:
        """A message that can never run may mark the record dead without holding its lock
        (`lifecycle.fail(release=False)`): no record, a dead one, or a running one whose lock
        expired; with `over_retrying` (the message past its last attempt was the one retrying or
        waiting) a retrying or waiting one too. Never a success or a live lock."""
        if not self.exists or self.state == JobState.DEAD or self.lock_expired(now_ms):
            return True
        return over_retrying and self.state in (JobState.RETRYING, JobState.WAITING)

    @staticmethod
    def may_mark_dead_condition(over_retrying: bool, now_ms: int) -> Condition:
        values = {**_states(JobState.DEAD, JobState.RUNNING), ":now_ms": now_ms}
        expression = f"attribute_not_exists(id) OR #state = :dead OR ({_LOCK_EXPIRED})"
        if over_retrying:
            values.update(_states(JobState.RETRYING, JobState.WAITING))
            expression += " OR #state IN (:retrying, :waiting)"
        return Condition(expression, values)

    def may_wait(self) -> bool:
        """A job that has not run for this attempt may wait for its rate limit's slot
        (`lifecycle.wait`): no record, a retrying or waiting one, or a dead one (a redriven job) that
        is not a workflow member counted dead. Never a running or succeeded record."""
        if not self.exists or self.state in (JobState.RETRYING, JobState.WAITING):
            return True
        return self.state == JobState.DEAD and self.wf_counted is None

    @staticmethod
    def may_wait_condition() -> Condition:
        return Condition(
            "attribute_not_exists(id) OR #state IN (:retrying, :waiting) "
            "OR (#state = :dead AND attribute_not_exists(wf_counted))",
            _states(JobState.RETRYING, JobState.WAITING, JobState.DEAD),
        )

    def not_counted(self) -> bool:
        """A workflow member's outcome not counted yet in its workflow's item."""
        return self.wf_counted is None

    @staticmethod
    def not_counted_condition() -> Condition:
        return Condition("attribute_not_exists(wf_counted)", {})

    def counted_as(self, outcome: JobState) -> bool:
        """A workflow member whose outcome was counted as `outcome`."""
        return self.wf_counted == outcome

    @staticmethod
    def counted_as_condition(outcome: JobState) -> Condition:
        return Condition("wf_counted = :wf_counted_as", {":wf_counted_as": outcome.value})

    # -- durable jobs -------------------------------------------------------------------------------

    def may_park(self, lock: int | None, signal: str | None = None) -> bool:
        """The run that holds the lock may park the job (`lifecycle.suspend`): as `may_release`, and
        for a signal wait, only while that signal has not arrived (else it wakes at once instead)."""
        return self.may_release(lock) and (signal is None or signal not in (self.signals or {}))

    @staticmethod
    def may_park_condition(lock: int | None, signal: str | None = None) -> Condition:
        release = JobRecord.may_release_condition(lock)
        if signal is None:
            return release
        return Condition(
            f"({release.expression}) AND attribute_not_exists(#signal)",
            release.values,
            {"#signal": SIGNAL_PREFIX + signal},
        )

    def may_take_signal(self, name: str, data: str) -> bool:
        """A signal may be kept for the job (`lifecycle.deliver_signal`): it has not finished (no record,
        or one without a state, counts as not started), and has no signal of that name, or the same."""
        if self.exists and self.known_state in FINAL_STATES:
            return False
        held = (self.signals or {}).get(name)
        return held is None or held == data

    @staticmethod
    def may_take_signal_condition(name: str, data: str) -> Condition:
        return Condition(
            "(attribute_not_exists(#state) OR NOT #state IN (:succeeded, :dead, :cancelled, :superseded)) "
            "AND (attribute_not_exists(#signal) OR #signal = :signal_data)",
            {**_states(*sorted(FINAL_STATES)), ":signal_data": data},
            {"#signal": SIGNAL_PREFIX + name},
        )

    def waits_for_signal(self, name: str) -> bool:
        """A job parked in `waiting_signal` for signal `name` (`lifecycle.wake` makes it due now)."""
        return self.state == JobState.WAITING_SIGNAL and self.waiting_for == name

    @staticmethod
    def waits_for_signal_condition(name: str) -> Condition:
        return Condition(
            "#state = :waiting_signal AND waiting_for = :signal_name",
            {**_states(JobState.WAITING_SIGNAL), ":signal_name": name},
        )

    # -- cancellation -------------------------------------------------------------------------------

    def may_cancel(self, now_ms: int) -> bool:
        """A cancel may end the job at once (`lifecycle.cancel`): no record (or an expired one), one
        with no state yet (signals kept), a job retrying, waiting or parked, or a running one whose
        lock expired (its invocation is over). Never a finished job or a live run (that one is asked
        to stop: `may_ask_cancel`)."""
        if not self.exists or (self.expiration is not None and self.expiration < now_ms // 1000):
            return True
        if self.state is None or self.state in (JobState.RETRYING, JobState.WAITING, *PARKED_STATES):
            return True
        return self.lock_expired(now_ms)

    @staticmethod
    def may_cancel_condition(now_ms: int) -> Condition:
        values = {
            **_states(
                JobState.RUNNING,
                JobState.RETRYING,
                JobState.WAITING,
                JobState.SLEEPING,
                JobState.WAITING_SIGNAL,
            ),
            ":now": now_ms // 1000,
            ":now_ms": now_ms,
        }
        expression = (
            "attribute_not_exists(id) OR expiration < :now OR attribute_not_exists(#state) "
            f"OR #state IN (:retrying, :waiting, :sleeping, :waiting_signal) OR ({_LOCK_EXPIRED})"
        )
        return Condition(expression, values)

    def may_ask_cancel(self, now_ms: int) -> bool:
        """A live run may be asked to stop (`cancel_requested`), once."""
        return self.lock_live(now_ms) and self.cancel_requested is None

    @staticmethod
    def may_ask_cancel_condition(now_ms: int) -> Condition:
        live = JobRecord.lock_live_condition(now_ms)
        return Condition(f"({live.expression}) AND attribute_not_exists(cancel_requested)", live.values)

    # -- for readers --------------------------------------------------------------------------------

    def lost_last_attempt(self, now_ms: int) -> bool:
        """A running record whose lock expired with every attempt used: nothing released it (the
        invocation crashed or timed out) and it can never run again; SQS dead-letters its message on
        the next receive."""
        return (
            self.lock_expired(now_ms)
            and self.max_attempts is not None
            and self.attempts > 0
            and self.attempts >= self.max_attempts
        )

    @staticmethod
    def lost_last_attempt_condition(now_ms: int) -> Condition:
        expired = JobRecord.lock_expired_condition(now_ms)
        return Condition(f"{expired.expression} AND attempts >= max_attempts", expired.values)

    def reconciled_state(self, now_ms: int) -> JobState:
        """The state the record really is in, for readers: `dead` for a lost last attempt (see
        `lost_last_attempt`; it reads `lifecycle.REDRIVEN_ERROR`, without a write), `pending` for no
        record, no state or a state this version does not know; else the state as written."""
        if not self.exists or self.known_state is None:
            return JobState.PENDING
        if self.lost_last_attempt(now_ms):
            return JobState.DEAD
        return self.known_state


# `job_record._ATTRIBUTES` (what `to_item` and `with_changes` write) names the item's attributes as
# the record's fields, in their order
assert (
    tuple(f.name for f in fields(JobRecord) if f.name not in ("job_id", "exists", "steps", "signals"))
    == _ATTRIBUTES
), "job_record._ATTRIBUTES is not JobRecord's fields"
