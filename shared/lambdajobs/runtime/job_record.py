"""The job record: one typed value for the job table's item of a job id, its codec, and its rules.

The item is the job's idempotency lock and its status at once (its attributes are listed in
`lambdajobs.runtime.table`). `JobRecord.from_item` / `to_item` are the one codec between that item
and the code; every writer (`lambdajobs.runtime.lifecycle`) and reader (`lambdajobs.runtime.records`)
goes through it.

Each rule about a record is written twice on purpose, side by side: a predicate on the record as read
(`JobRecord.may_start(...)`), and the condition expression the transition writes with, which DynamoDB
evaluates on the item as stored (`JobRecord.may_start_condition(...)`, a `Condition`: the expression
and its `:placeholder` values as Python values; `#state` is `NAMES`'). A unit test puts a table of
items into DynamoDB and checks each pair agrees on every one, so the Python reading of a record never
drifts from what the table enforces.

One boundary for the lock: a running record's lock is expired once `in_progress_expiration <
now_ms` (epoch ms), live until then; a running record without one (no Lambda context registered) is
held until its TTL expires.

Attempt numbers start at 1 (`lambdajobs.runtime.worker.attempt_of`); a record without `attempts`
reads 0, and no writer stores 0 (`lifecycle.unstart` removes the attribute instead).

Here: the states, the job index's modes, `Condition`, and what every job's own writes need without
making a record (its first run's item, `new_item`; its success's, `with_changes` and
`holds_lock_condition`). `JobRecord` itself (the dataclass, its codec and its rules) lives in
`lambdajobs.runtime.record_type` and is importable from here too: loaded on first use, so a worker's
cold start whose first record succeeds neither compiles it nor defines the dataclass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from lambdajobs.runtime import lazy
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.table import Item

if TYPE_CHECKING:
    from lambdajobs.runtime.record_type import JobRecord as JobRecord


class JobState(StrEnum):
    """The state of a job. A job not started yet (or an unknown id) reads as `pending`."""

    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    #: A durable job between invocations: asleep (`ctx.sleep`), or continuing in a fresh invocation
    #: (`wake_at` says when); no compute is used meanwhile (`lambdajobs.runtime.durable`).
    SLEEPING = "sleeping"
    #: A durable job parked in `ctx.wait_for_signal` until its signal (`waiting_for`) or its timeout.
    WAITING_SIGNAL = "waiting_signal"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    #: Cancelled (`lambdajobs.cancel`) before it ran, while it was parked or retrying, or at a check
    #: of a running job (`ctx.cancelled`): it never runs (again) under this id.
    CANCELLED = "cancelled"
    #: A debounced enqueue that a later enqueue of its key replaced within the window: never run.
    SUPERSEDED = "superseded"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES: frozenset[JobState] = frozenset(
    {JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.SUPERSEDED}
)
#: A durable job parked between invocations: its lock released, a copy of its message (or a one-time
#: schedule) due at its `wake_at`.
PARKED_STATES: frozenset[JobState] = frozenset({JobState.SLEEPING, JobState.WAITING_SIGNAL})


class JobIndex(StrEnum):
    """What the job index (`settings.JOB_INDEX`, in every stack) holds; each mode's cost is per job,
    on top of the record's own two writes (DynamoDB charges one index write per entry put or deleted,
    two when an entry's key changes):

    - `off` (the default): `dead` records only. A job that succeeds costs nothing more; a job that
      dies costs 1 more write unit (its entry), so dead letters can be listed without receiving them.
      Jobs cannot be listed in any other state.
    - `finished`: `retrying`, `succeeded`, `dead`, `cancelled` and `superseded` records. A job that
      succeeds at once costs 1 more write unit (its completion enters the index); each retry costs 2
      more (it enters as `retrying`, and leaves when the next attempt starts).
    - `all`: `running`, `sleeping` and `waiting_signal` records too. A job that succeeds at once
      costs 3 more (it enters as `running`; completion moves it: a delete and a put); each retry
      costs 4 more (running to retrying, and back: each a delete and a put).

    A record whose last attempt crashed (SQS, not the worker, dead-letters its message) keeps the
    entry it had: none in `off` and `finished` modes, `running` in `all`; `get_status` reads it `dead`.
    Searchable fields (`@job(searchable=...)`) add entries of their own, in every mode: 2 write units
    per field per job (`lambdajobs.runtime.search`).
    """

    OFF = "off"
    FINISHED = "finished"
    ALL = "all"


#: Every state the job index can hold (in its mode "all"), in the order lists show them.
LISTED_STATES: tuple[JobState, ...] = (
    JobState.RUNNING,
    JobState.RETRYING,
    JobState.SLEEPING,
    JobState.WAITING_SIGNAL,
    JobState.SUCCEEDED,
    JobState.DEAD,
    JobState.CANCELLED,
    JobState.SUPERSEDED,
)

#: The states each mode of the job index holds.
INDEXED_STATES: dict[JobIndex, frozenset[JobState]] = {
    JobIndex.OFF: frozenset({JobState.DEAD}),
    JobIndex.FINISHED: frozenset(
        {JobState.RETRYING, JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED, JobState.SUPERSEDED}
    ),
    JobIndex.ALL: frozenset(LISTED_STATES),
}


def index_key(job: str, state: JobState | str) -> str:
    """The job index's partition key of a job's records in `state`."""
    return f"{job}#{JobState(state).value}"


#: The attribute names the conditions use: `state` is a DynamoDB reserved word.
NAMES: dict[str, str] = {"#state": "state"}


class Condition(NamedTuple):
    """A condition expression, the Python values of its `:placeholders`, and the attribute names of
    its `#names` beyond `NAMES` (an attribute the condition is about, such as a signal's)."""

    expression: str
    values: dict[str, Any]
    names: dict[str, str] = {}


#: The condition of a write that only lands where there is no record: a job's first run.
NO_RECORD = Condition("attribute_not_exists(id)", {})

#: A stored payload above this (its JSON text) is cut (`payload_cut`): an item is at most 400 KB, and
#: each of its later writes costs a write unit per KB.
MAX_STORED_PAYLOAD_BYTES = 32 * 1024
#: The last characters of a failure's traceback kept on the record.
MAX_TRACEBACK_CHARS = 8 * 1024
#: Failed attempts kept in `history` (the oldest dropped first): bounded by `max_attempts`, and across
#: DLQ redrives by this.
MAX_HISTORY = 25
#: An error message in a history entry: its first characters.
MAX_HISTORY_MESSAGE_CHARS = 200


#: The attribute name prefixes of a durable job's checkpoints and of the signals sent to it.
STEP_PREFIX = "step:"
SIGNAL_PREFIX = "signal:"


#: The item's attributes named as the record's fields (`id`, the checkpoints and signals are written
#: apart), in `JobRecord.to_item`'s order: its fields' order but `job_id`, `exists`, `steps` and
#: `signals` (`lambdajobs.runtime.record_type` checks it when it defines the class).
_ATTRIBUTES: tuple[str, ...] = (
    "job",
    "state",
    "attempts",
    "max_attempts",
    "created_at",
    "started_at",
    "finished_at",
    "updated_at",
    "result",
    "error",
    "progress",
    "progress_message",
    "waiting_until",
    "expiration",
    "in_progress_expiration",
    "wf_counted",
    "ix",
    "ix_at",
    "wake_at",
    "waiting_for",
    "resume_body",
    "resume_queue",
    "resume_group",
    "suspensions",
    "cancel_requested",
    "enqueued_at",
    "level",
    "tenant",
    "workflow",
    "payload",
    "payload_cut",
    "traceback",
    "history",
)
_ATTRIBUTE_NAMES = frozenset(_ATTRIBUTES)
#: How `to_item` writes the attributes that it does not write as they are (None: left out).
_AS_STORED: dict[str, Callable[[Any], Any]] = {
    "attempts": lambda v: v or None,
    "history": lambda v: list(v or ()) or None,
    "payload_cut": lambda v: True if v else None,
    "progress": lambda v: float(v) if v is not None else None,
}


def new_item(job_id: str, **attributes: Any) -> Item:
    """The item of `JobRecord(job_id, **attributes)` (as `to_item` writes it) without making the
    record: every job's first write makes one. Only attributes of the item (not `steps`, `signals`,
    `exists`)."""
    return with_changes({"id": codec.to_value(job_id)}, attributes)


def with_changes(item: Item, changes: Mapping[str, Any]) -> Item:
    """An item `to_item` wrote, with the attributes in `changes` (named as `JobRecord`'s fields;
    None: the attribute is removed) written as `to_item` writes them: the item of
    `replace(JobRecord.from_item(item), **changes)` without decoding and encoding the whole record
    (every successful job's last write makes one)."""
    changed = dict(item)
    for name, value in changes.items():
        if name not in _ATTRIBUTE_NAMES:
            raise TypeError(f"with_changes: '{name}' is not an attribute of a job record's item")
        value = _AS_STORED[name](value) if name in _AS_STORED else value
        if value is None:
            changed.pop(name, None)
        elif type(value) is str:  # most of them: as `codec.to_value` writes it, without the call
            changed[name] = {"S": value}
        else:
            changed[name] = codec.to_value(value)
    return changed


def holds_lock_condition(lock: int) -> Condition:
    """`JobRecord.holds_lock`'s condition: the item still carries the lock `lock`."""
    return Condition("in_progress_expiration = :lock", {":lock": lock})


#: `JobRecord`, the record's type: defined in `lambdajobs.runtime.record_type`, loaded from there on
#: first use (`from lambdajobs.runtime.job_record import JobRecord`, `job_record.JobRecord`).
__getattr__ = lazy.exports(__name__, {"JobRecord": "lambdajobs.runtime.record_type"})
