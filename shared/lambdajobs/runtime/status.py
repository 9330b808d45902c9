"""Reading job records: a job's status (`get_status`, `get_statuses`, `wait_for`), listings of the job
index (`list_jobs`, `list_dead`, `search`), its counts (`count_dead`, `count_finished`, ...) and a DLQ's
purge marker.

Split out of `lambdajobs.runtime.records` (which keeps the worker's writes): a worker's cold start
compiles and runs only the writes, and these load when first read. Every name here is also importable
from `lambdajobs.runtime.records`, as before (`records.get_status`, `from lambdajobs.runtime.records
import JobStatus`): that module loads this one on first use of one of them.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import lifecycle
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import InvalidOptionError, JobIdError, JobIndexOffError, WaitTimeoutError
from lambdajobs.runtime.job_record import (
    FINAL_STATES,
    INDEXED_STATES,
    LISTED_STATES,
    PARKED_STATES,
    JobIndex,
    JobRecord,
    JobState,
    index_key,
)
from lambdajobs.runtime.lifecycle import REDRIVEN_ERROR
from lambdajobs.runtime.records import JobRecordStore
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    JOB_INDEX,
    JOB_INDEX_KEY,
    JOB_INDEX_SORT_KEY,
    PURGED_ID_PREFIX,
)

if TYPE_CHECKING:
    from lambdajobs.runtime.spec import JobSpec


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _moment(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _seconds(start: str | None, end: str | None) -> float | None:
    begun, ended = _moment(start), _moment(end)
    if begun is None or ended is None:
        return None
    return max(0.0, (ended - begun).total_seconds())


@dataclass(frozen=True)
class Attempt:
    """One attempt of a job: its number, when it started and ended (RFC 3339; `ended_at` None while it
    runs), its outcome (a `JobState` value: `retrying` or `dead` for a failed one, `succeeded`,
    `running`, ...) and, for a failure, the error's type and the start of its message."""

    attempt: int
    started_at: str | None
    ended_at: str | None
    outcome: str
    error_type: str | None = None
    error_message: str | None = None

    @property
    def seconds(self) -> float | None:
        """How long it ran (None: it has not ended, or a time is missing)."""
        return _seconds(self.started_at, self.ended_at)

    @classmethod
    def from_entry(cls, entry: dict[str, Any]) -> Attempt:
        """An attempt of a record's `history` (`JobRecord.history`)."""
        return cls(
            attempt=int(entry.get("attempt") or 0),
            started_at=_text_or_none(entry.get("started")),
            ended_at=_text_or_none(entry.get("ended")),
            outcome=str(entry.get("outcome") or ""),
            error_type=_text_or_none(entry.get("error_type")),
            error_message=_text_or_none(entry.get("error_message")),
        )


def _text_or_none(value: Any) -> str | None:
    return str(value) if value is not None else None


@dataclass(frozen=True)
class JobStatus:
    """What `get_status` returns. A job not started yet (or an unknown id) reads as `pending`."""

    job_id: str
    state: JobState
    job: str | None = None
    attempts: int = 0
    created_at: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    updated_at: str | None = None
    result: Any = None
    error: dict[str, str] | None = None
    progress: float | None = None
    progress_message: str | None = None
    #: For a `waiting` job: when its rate-limit slot comes (RFC 3339).
    waiting_until: str | None = None
    #: What a reader should know beyond the state: that a `pending` id has no record at all (not
    #: started yet, or unknown: nothing is written at enqueue), or why a record reads `dead` though
    #: the worker could not write it (see `JobRecord.reconciled_state`).
    note: str | None = None
    #: False: the job id has no record at all (`note` says what that may mean).
    has_record: bool = True
    #: A durable job's steps done, in order: name, duration (ms), end (`durable.StepInfo`).
    steps: tuple[Any, ...] = ()
    #: A `sleeping` or `waiting_signal` job: when it continues (RFC 3339), and the signal it waits for.
    wake_at: str | None = None
    waiting_for: str | None = None
    #: How many times the job was parked (sleeps, signal waits, continuations between invocations).
    suspensions: int = 0
    #: When a cancel of the job was recorded (RFC 3339): a `running` job with one is asked to stop.
    cancel_requested: str | None = None
    #: When the job was enqueued (RFC 3339): the envelope's `enqueued_at`, else SQS's SentTimestamp.
    enqueued_at: str | None = None
    #: The priority level whose queue ran it (jobs with priorities only).
    level: str | None = None
    #: Its fair-queue tenant (the message's `MessageGroupId`), if it had one.
    tenant: str | None = None
    #: A workflow member's place: {"id", "stage", "index"}.
    workflow: dict[str, Any] | None = None
    #: The payload as enqueued (unmasked: show it through `pii.mask_payload` with the job's
    #: `pii_fields`), kept once an attempt failed (None for a job that never failed); a payload
    #: above 32 KB is kept as the start of its JSON text, masked already (`payload_cut`).
    payload: Any = None
    payload_cut: bool = False
    #: The last failure's formatted traceback (PII-scrubbed, its last 8 KB).
    traceback: str | None = None
    #: Each failed attempt, oldest first (see `attempt_rows` for every attempt).
    history: tuple[Attempt, ...] = ()

    def attempt_rows(self) -> list[Attempt]:
        """Every attempt known, oldest first: the failed ones (`history`), then the current or last
        one from the record (`started_at`, `finished_at`, `state`) when it is not a failure already
        listed (a job running, succeeded, parked, cancelled, or one dead without running)."""
        rows = list(self.history)
        last = rows[-1] if rows else None
        if self.started_at and self.attempts and (last is None or last.started_at != self.started_at):
            ended = self.finished_at if self.state in FINAL_STATES else None
            error = self.error if self.state is JobState.DEAD else None
            rows.append(
                Attempt(
                    attempt=self.attempts,
                    started_at=self.started_at,
                    ended_at=ended,
                    outcome=self.state.value,
                    error_type=(error or {}).get("type"),
                    error_message=(error or {}).get("message"),
                )
            )
        return rows

    @property
    def queue_wait_seconds(self) -> float | None:
        """From enqueue to the first attempt's start (None: not known, or not started)."""
        first = self.history[0].started_at if self.history else self.started_at
        return _seconds(self.enqueued_at, first)

    @property
    def run_seconds(self) -> float | None:
        """How long the last attempt ran (None: it is still running, or has not started)."""
        rows = self.attempt_rows()
        return rows[-1].seconds if rows else None

    @property
    def described_state(self) -> str:
        """The state as people read it: `waiting for signal <name>` for a job in `waiting_signal`."""
        if self.state is JobState.WAITING_SIGNAL and self.waiting_for:
            return f"waiting for signal {self.waiting_for}"
        return self.state.value

    @property
    def done(self) -> bool:
        return self.state in FINAL_STATES


NO_RECORD = "no record: not started yet, or an unknown id (nothing is written at enqueue)"
SIGNALS_ONLY = "not started yet, or an unknown id: only signals sent to it are kept, for when it waits"


def status_of(job_id: str, record: JobRecord | None) -> JobStatus:
    """The status a reader sees of a job's record (None: no record), reconciled
    (`JobRecord.reconciled_state`): a state this version does not know reads `pending`."""
    if record is None:
        return JobStatus(job_id=job_id, state=JobState.PENDING, note=NO_RECORD, has_record=False)
    if record.state is None:  # only signals kept for a job that has not run: not a run's record
        return JobStatus(job_id=job_id, state=JobState.PENDING, note=SIGNALS_ONLY, has_record=False)
    state = record.reconciled_state(int(time.time() * 1000))
    reconciled = state is not (record.known_state or JobState.PENDING)
    return JobStatus(
        job_id=job_id,
        state=state,
        note=REDRIVEN_ERROR["message"] if reconciled else None,
        job=record.job,
        attempts=record.attempts,
        created_at=record.created_at,
        started_at=record.started_at,
        finished_at=record.finished_at,
        # a success writes `finished_at` alone: the later of the two is the record's last change
        updated_at=max(filter(None, (record.updated_at, record.finished_at)), default=None),
        result=json.loads(record.result) if record.result else None,
        error=dict(REDRIVEN_ERROR) if reconciled else record.error,
        progress=record.progress,
        progress_message=record.progress_message,
        waiting_until=record.waiting_until if state is JobState.WAITING else None,
        cancel_requested=record.cancel_requested,
        **_history_fields(record),
        **_durable_fields(record, state),
    )


def _history_fields(record: JobRecord) -> dict[str, Any]:
    payload: Any = record.payload
    if payload is not None and not record.payload_cut:
        with contextlib.suppress(ValueError):
            payload = json.loads(payload)
    return {
        "enqueued_at": record.enqueued_at,
        "level": record.level,
        "tenant": record.tenant,
        "workflow": record.workflow,
        "payload": payload,
        "payload_cut": bool(record.payload_cut),
        "traceback": record.traceback,
        "history": tuple(Attempt.from_entry(entry) for entry in record.history),
    }


def _durable_fields(record: JobRecord, state: JobState) -> dict[str, Any]:
    if not record.steps and not record.suspensions:
        return {}
    from lambdajobs.runtime.durable import iso_ms, steps_of

    parked = state in PARKED_STATES
    return {
        "steps": tuple(steps_of(record)),
        "wake_at": iso_ms(record.wake_at) if parked and record.wake_at is not None else None,
        "waiting_for": record.waiting_for if state is JobState.WAITING_SIGNAL else None,
        "suspensions": record.suspensions or 0,
    }


def status_from_item(job_id: str, item: dict[str, Any] | None) -> JobStatus:
    """The status of a job's item as read (None: no record)."""
    return status_of(job_id, JobRecord.from_item(item) if item else None)


def _store(config: StackConfig | None, store: JobRecordStore | None) -> JobRecordStore:
    return store if store is not None else JobRecordStore(config)


def get_status(
    job_id: str, *, config: StackConfig | None = None, store: JobRecordStore | None = None
) -> JobStatus:
    """The status of a job by id: state, attempts, timestamps, progress, result, last error.

    One consistent GetItem. Never raises for an unknown id: a job that has not started yet reads as
    `pending`. `config` defaults to the current configuration (`lambdajobs.runtime.config.current`).

    Raises:
        JobIdError: `job_id` is empty or not a string.
        StackNotFoundError: the stack's manifest (for the table name) is not there.

    Example:
        >>> status = get_status("order-42")
        >>> status.state, status.attempts, status.result
        ('succeeded', 1, {'provider_id': '...'})
    """
    if not isinstance(job_id, str) or not job_id:
        raise JobIdError(f"job_id must be a non-empty string, got {job_id!r}")
    found = _store(config, store)
    return status_from_item(job_id, found.get_item(job_id))


#: BatchGetItem calls for one batch of keys whose answers keep some unprocessed (backing off up to 1 s).
BATCH_GET_TRIES = 10


def _batch_items(
    store: JobRecordStore, job_ids: list[str], projection: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """The items of these ids (those that exist), in BatchGetItem calls of 100 keys; `projection`:
    only these attributes (and `id`), which a caller that needs two of them parses much faster."""
    found: dict[str, dict[str, Any]] = {}
    unique = list(dict.fromkeys(job_ids))
    shape: dict[str, Any] = {"ConsistentRead": True}
    if projection:
        names = {f"#p{i}": name for i, name in enumerate(("id", *projection))}
        shape |= {"ProjectionExpression": ", ".join(names), "ExpressionAttributeNames": names}
    for start in range(0, len(unique), 100):
        keys = [codec.key(j) for j in unique[start : start + 100]]
        request: dict[str, Any] = {store.table: {"Keys": keys, **shape}}
        for tries in range(BATCH_GET_TRIES):
            response = store.client.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(store.table, []):
                found[codec.item_id(item)] = item
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            time.sleep(min(1.0, 0.05 * 2**tries))  # keys left unread when throttled: back off
        else:  # never read as "no record": say it could not be read (a throttle: try again later)
            from botocore.exceptions import ClientError

            error = {"Code": "ProvisionedThroughputExceededException", "Message": "keys left unprocessed"}
            raise ClientError({"Error": error}, "BatchGetItem")
    return found


def get_statuses(
    job_ids: list[str], *, config: StackConfig | None = None, store: JobRecordStore | None = None
) -> dict[str, JobStatus]:
    """Statuses of many jobs in BatchGetItem calls (100 keys each); unknown ids read as pending."""
    found_store = _store(config, store)
    found = _batch_items(found_store, job_ids)
    return {j: status_from_item(j, found.get(j)) for j in dict.fromkeys(job_ids)}


def wait_for(
    job_id: str,
    timeout_seconds: float = 60.0,
    *,
    poll_seconds: float = 1.0,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> JobStatus:
    """Poll `get_status` until the job is `succeeded` or `dead`, and return that status.

    Raises:
        WaitTimeoutError: still not final after `timeout_seconds` (`.status` is the last one seen).
        JobIdError: `job_id` is empty or not a string.

    Example:
        >>> job_id = enqueue("send_email", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"})
        >>> wait_for(job_id, timeout_seconds=30).state
        'succeeded'
    """
    found_store = _store(config, store)
    deadline = time.monotonic() + timeout_seconds
    while True:
        status = get_status(job_id, store=found_store)
        if status.done:
            return status
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeoutError(status, timeout_seconds)
        time.sleep(min(poll_seconds, left))


def _index_mode(store: JobRecordStore) -> JobIndex:
    return JobIndex(store.config.job_index_mode())


def listed_states(
    config: StackConfig | None = None, *, store: JobRecordStore | None = None
) -> list[JobState]:
    """The states whose records `list_jobs` can list in this stack (none with the job index off)."""
    held = INDEXED_STATES[_index_mode(_store(config, store))]
    return [s for s in LISTED_STATES if s in held]


def index_off_message(stack: str, mode: str, wanted: str) -> str:
    """How to turn the job index on (or to `all`), for the error, the board and `lambdajobs jobs`."""
    if mode == JobIndex.FINISHED:
        return (
            f"{wanted} needs the job index in mode 'all' (stack '{stack}' indexes finished and retrying "
            "jobs only): set job_index='all' on the stack (cdk deploy -c job_index=all); it costs 3 "
            "write units per job instead of 1."
        )
    return (
        f"{wanted} needs the job index in mode 'finished' (stack '{stack}' indexes dead jobs only, its "
        "mode 'off'): set job_index='finished' on the stack (cdk deploy -c job_index=finished). It "
        "costs every job of the stack 1 write unit ($0.63 per million jobs, us-east-1 on-demand)."
    )


def _require(store: JobRecordStore, state: JobState, wanted: str) -> None:
    mode = _index_mode(store)
    if state not in INDEXED_STATES[mode]:
        raise JobIndexOffError(index_off_message(store.config.stack, mode, wanted))


@dataclass(frozen=True)
class JobPage:
    """One page of `list_jobs`, `list_dead` or `search`: statuses newest first, and the cursor of the
    next page (None: last)."""

    items: list[JobStatus]
    cursor: str | None


def _encode_cursor(key: dict[str, Any] | None) -> str | None:
    if not key:
        return None
    flat = codec.decode(key)
    return base64.urlsafe_b64encode(json.dumps(flat, separators=(",", ":")).encode()).decode()


def _decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        flat = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return codec.encode({str(name): str(value) for name, value in flat.items()})
    except (ValueError, AttributeError) as exc:
        raise InvalidOptionError(
            f"cursor {cursor!r} is not one list_jobs gave; start from the first page."
        ) from exc


def _when(moment: datetime | str) -> str:
    """A time as the index's sort key holds it (RFC 3339 UTC, to the millisecond)."""
    if isinstance(moment, str):
        parsed = _moment(moment)
        if parsed is None:
            raise InvalidOptionError(f"{moment!r} is not a time; give an RFC 3339 time or a datetime.")
        moment = parsed
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _iso(moment.astimezone(UTC))


def _index_query(
    store: JobRecordStore,
    partition: str,
    *,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    after: datetime | str | None = None,
    limit: int = 25,
    cursor: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One Query of the job index's partition `partition`, newest first: entries in [since, until)
    (times to the millisecond), or after `after` (excluded)."""
    values: dict[str, Any] = {":ix": partition}
    conditions = []
    if after is not None:
        values[":after"] = _when(after)
        conditions.append("#at > :after")
    if since is not None and until is not None:
        values[":since"], values[":until"] = _when(since), _before(until)
        conditions.append("#at BETWEEN :since AND :until")
    elif since is not None:
        values[":since"] = _when(since)
        conditions.append("#at >= :since")
    elif until is not None:
        values[":until"] = _when(until)
        conditions.append("#at < :until")
    if len(conditions) > 1:  # one sort key condition at most: `after` with a range narrows `since`
        raise InvalidOptionError("give `after` or a time range (since, until), not both.")
    request: dict[str, Any] = {
        "TableName": store.table,
        "IndexName": JOB_INDEX,
        "KeyConditionExpression": " AND ".join(["#ix = :ix", *conditions]),
        "ExpressionAttributeNames": {
            "#ix": JOB_INDEX_KEY,
            **({"#at": JOB_INDEX_SORT_KEY} if conditions else {}),
        },
        "ExpressionAttributeValues": codec.encode(values),
        "ScanIndexForward": False,
        **extra,
    }
    if "Select" not in extra:
        request["Limit"] = max(1, min(int(limit), 100))
    if cursor:
        request["ExclusiveStartKey"] = _decode_cursor(cursor)
    return request


def _before(until: datetime | str) -> str:
    moment = _moment(_when(until))
    assert moment is not None
    return _iso(moment - timedelta(milliseconds=1))


def _page_of(store: JobRecordStore, response: dict[str, Any], id_of: Callable[[str], str] = str) -> JobPage:
    ids = [id_of(codec.item_id(item)) for item in response.get("Items", [])]
    statuses = get_statuses(ids, store=store)
    return JobPage(items=[statuses[i] for i in ids], cursor=_encode_cursor(response.get("LastEvaluatedKey")))


def list_jobs(
    job: str,
    state: JobState | str,
    *,
    limit: int = 25,
    cursor: str | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> JobPage:
    """A job's records in `state`, newest first: one Query on the job index (no table scan) and one
    BatchGetItem, so each status comes from the same reader as `get_status` (a record that moved on
    since the index saw it shows its state now). `since`/`until`: only records that entered `state`
    in [since, until) (datetimes, naive ones read as UTC, or RFC 3339 text).

    Raises:
        JobIndexOffError: the stack's job index does not hold `state` (mode 'off' holds `dead`
            only); the message says how to turn it on.
        ValueError: `state` is not a job state.
    """
    found_store = _store(config, store)
    wanted = JobState(state)
    _require(found_store, wanted, f"listing {wanted.value} jobs")
    request = _index_query(
        found_store, index_key(job, wanted), since=since, until=until, limit=limit, cursor=cursor
    )
    return _page_of(found_store, found_store.client.query(**request))


#: Index entries `list_dead` reads at most per call when it filters by level (a page may then be short,
#: with a cursor to go on).
MAX_SCANNED_DEAD = 1000


def _level_matches(status: JobStatus, level: str | None) -> bool:
    return level is None or status.level == level


def list_dead(
    job: str,
    *,
    level: str | None = None,
    after: datetime | str | None = None,
    limit: int = 50,
    cursor: str | None = None,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> JobPage:
    """`job`'s dead records, newest first, from the job index (which holds them in every mode): what
    the worker recorded when it dead-lettered each job, read with no message received. `after`: only
    records that died after then (a queue's last purge: `purged_at`). `level`: only the records of
    that priority level's name (a job with priorities; the job's own queue is its lowest level's
    name); None: every level.

    One Query and one BatchGetItem per page; filtered by level, up to `MAX_SCANNED_DEAD` entries are
    read for one page (a short page then comes with a cursor to go on).
    """
    found_store = _store(config, store)
    partition = index_key(job, JobState.DEAD)
    if level is None:
        request = _index_query(found_store, partition, after=after, limit=limit, cursor=cursor)
        return _page_of(found_store, found_store.client.query(**request))
    wanted = max(1, min(int(limit), 100))
    items: list[JobStatus] = []
    scanned = 0
    while len(items) < wanted and scanned < MAX_SCANNED_DEAD:
        request = _index_query(found_store, partition, after=after, limit=100, cursor=cursor)
        response = found_store.client.query(**request)
        entries = response.get("Items", [])
        scanned += len(entries)
        # the entries' levels first (a projection), then only the matching records whole
        levels = _batch_items(found_store, [codec.item_id(e) for e in entries], ("level",))
        ids = [i for i in map(codec.item_id, entries) if codec.decode(levels.get(i)).get("level") == level]
        statuses = get_statuses(ids, store=found_store)
        for entry in entries:
            status = statuses.get(codec.item_id(entry))
            if status is not None and _level_matches(status, level) and status.state is JobState.DEAD:
                items.append(status)
            cursor = _encode_cursor(entry)
            if len(items) >= wanted:
                break
        if len(items) < wanted and not response.get("LastEvaluatedKey"):
            return JobPage(items=items, cursor=None)
    return JobPage(items=items, cursor=cursor)


def count_dead(
    job: str,
    *,
    level: str | None = None,
    after: datetime | str | None = None,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> int:
    """How many of `job`'s records are dead (that died after `after`, of priority level `level`): a
    counting Query on the job index, in every mode; with `level`, `count_dead_levels`."""
    found_store = _store(config, store)
    if level is not None:
        return count_dead_levels(job, {level: after}, store=found_store)[level]
    request = _index_query(found_store, index_key(job, JobState.DEAD), after=after, Select="COUNT")
    total = 0
    while True:
        response = found_store.client.query(**request)
        total += int(response.get("Count", 0))
        if not response.get("LastEvaluatedKey"):
            return total
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def count_dead_levels(
    job: str,
    afters: Mapping[str | None, datetime | str | None],
    *,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> dict[str | None, int]:
    """How many of `job`'s dead records each priority level of `afters` holds, counting only those
    that died after its time (its queue's last purge; None: all): one pass over the index's dead
    entries, whose records are read for their state and level alone (BatchGetItem per 100; DynamoDB
    still counts each item's whole size in read units)."""
    found_store = _store(config, store)
    since = {name: _when(moment) if moment is not None else "" for name, moment in afters.items()}
    counts: dict[str | None, int] = dict.fromkeys(afters, 0)
    request = _index_query(found_store, index_key(job, JobState.DEAD))
    del request["Limit"]  # a page of keys as big as DynamoDB answers (1 MB): few round trips
    while True:
        response = found_store.client.query(**request)
        entered = {
            codec.item_id(entry): str(codec.from_value(entry[JOB_INDEX_SORT_KEY]))
            for entry in response.get("Items", [])
        }
        for item_id, item in _batch_items(found_store, list(entered), ("state", "level")).items():
            values = codec.decode(item)
            level = values.get("level")
            if values.get("state") == JobState.DEAD.value and level in counts:
                counts[level] += entered[item_id] > since[level]
        if not response.get("LastEvaluatedKey"):
            return counts
        request["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _purge_marker(queue_key: str) -> str:
    return PURGED_ID_PREFIX + queue_key


def mark_purged(
    queue_key: str, *, config: StackConfig | None = None, store: JobRecordStore | None = None
) -> str:
    """Record that a queue (its `settings.queue_key`: `<job>` or `<job>@<level>`; a DLQ's listing reads
    its source queue's key) was purged now: a DLQ listing (`list_dead(after=purged_at(...))`) shows
    only records that died after. One PutItem, kept 14 days (a DLQ's retention: no message older is
    left). Returns the time recorded (RFC 3339)."""
    found_store = _store(config, store)
    stamp = lifecycle.now_iso()
    found_store.client.put_item(
        TableName=found_store.table,
        Item=codec.encode(
            {
                "id": _purge_marker(queue_key),
                "purged_at": stamp,
                "expiration": int(time.time()) + DLQ_RETENTION_SECONDS,
            }
        ),
    )
    return stamp


def purged_at(
    queue_key: str, *, config: StackConfig | None = None, store: JobRecordStore | None = None
) -> str | None:
    """When the queue was last purged (`mark_purged`), or None. One consistent GetItem."""
    found_store = _store(config, store)
    response = found_store.client.get_item(
        TableName=found_store.table, Key=codec.key(_purge_marker(queue_key)), ConsistentRead=True
    )
    value = codec.decode(response.get("Item")).get("purged_at")
    return str(value) if value is not None else None


def search(
    spec: JobSpec | str,
    field: str,
    value: Any,
    *,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    limit: int = 25,
    cursor: str | None = None,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> JobPage:
    """The jobs of `spec` (a job or its name) whose searchable `field` (`@job(searchable=...)`; the
    tenant is `TENANT_FIELD`) had `value` when enqueued, newest first; `since`/`until`: enqueued in
    [since, until). One Query on the job index and one BatchGetItem per page. A field that is also a
    `pii_fields` field is matched by its exact value's digest. Jobs enqueued before the field was
    declared searchable (or whose first attempt has not started) are not found.

    Raises:
        InvalidOptionError: `field` is not one of the job's searchable fields (the message names them).
        UnknownJobError: no job of that name is declared.
    """
    from lambdajobs.runtime import search as entries
    from lambdajobs.runtime.spec import ensure_loaded, get_spec

    found_store = _store(config, store)
    if isinstance(spec, str):  # a name: known once the stack's jobs package is loaded (as enqueue)
        ensure_loaded(found_store.config.jobs)
        found_spec = get_spec(spec)
    else:
        found_spec = spec
    if field not in found_spec.searchable:
        declared = ", ".join(found_spec.searchable) or "none"
        raise InvalidOptionError(
            f"job '{found_spec.name}' has no searchable field {field!r} (declared: {declared}); "
            f"declare it with @job(searchable=(...))."
        )
    text = entries.value_text(value)
    if text is None:
        return JobPage(items=[], cursor=None)
    indexed = entries.index_value(text, hashed=field in found_spec.pii_fields, salt=found_store.config.stack)
    request = _index_query(
        found_store,
        entries.index_key(found_spec.name, field, indexed),
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return _page_of(found_store, found_store.client.query(**request), lambda i: entries.job_id_of(i, field))


def _index_range(
    store: JobRecordStore, job: str, state: JobState, since: datetime, until: datetime, **extra: Any
) -> Any:
    """The pages of a Query on the job index: `job`'s records that entered `state` in [since, until)."""
    paginator = store.client.get_paginator("query")
    return paginator.paginate(
        TableName=store.table,
        IndexName=JOB_INDEX,
        KeyConditionExpression="#ix = :ix AND #at BETWEEN :since AND :until",
        ExpressionAttributeNames={"#ix": JOB_INDEX_KEY, "#at": JOB_INDEX_SORT_KEY},
        ExpressionAttributeValues=codec.encode(
            {
                ":ix": index_key(job, state),
                ":since": _iso(since.astimezone(UTC)),
                # [since, until): times are to the millisecond, so BETWEEN up to the millisecond before
                ":until": _iso((until - timedelta(milliseconds=1)).astimezone(UTC)),
            }
        ),
        **extra,
    )


def entered_at(
    job: str,
    state: JobState | str,
    since: datetime,
    until: datetime,
    *,
    limit: int = 10_000,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> list[datetime]:
    """When `job`'s records now in `state` entered it, within [since, until), newest first, at most
    `limit`: the job index's sort keys alone (a per-minute chart reads no record).

    Raises:
        JobIndexOffError: the stack's job index does not hold `state`.
    """
    found_store = _store(config, store)
    wanted = JobState(state)
    _require(found_store, wanted, f"the times of {wanted.value} jobs")
    pages = _index_range(
        found_store, job, wanted, since, until, ProjectionExpression="#at", ScanIndexForward=False
    )
    found: list[datetime] = []
    for page in pages:
        for item in page.get("Items", []):
            entered = str(codec.from_value(item[JOB_INDEX_SORT_KEY]))
            found.append(datetime.fromisoformat(entered.replace("Z", "+00:00")))
            if len(found) >= limit:
                return found
    return found


def count_finished(
    job: str,
    since: datetime,
    until: datetime,
    *,
    config: StackConfig | None = None,
    store: JobRecordStore | None = None,
) -> dict[str, int]:
    """How many jobs named `job` finished (succeeded or dead) in [since, until), as
    `{"succeeded": n, "dead": n}`. A job that declares `uses=("job_stats",)` may call it (its role's
    grants). Where the figures come from, by the stack:

    - job index `finished` or `all`: a counting Query on the index per state (no table scan; a job
      retried since it died counts where it is now);
    - job index `off` (the default), on AWS: the worker's CloudWatch metrics, `JobSucceeded` and
      `JobDeadLettered` (one GetMetricData call; `lambdajobs.runtime.job_metrics`), which every job
      emits anyway: the stack's other jobs pay nothing for this one's counts. Counted by the minute the
      worker flushed them, both ends of the window rounded down to the minute, and visible a few
      minutes after (EMF extraction is asynchronous);
    - job index `off` on the local stack (its own endpoint: no CloudWatch metrics there): from the
      records, the dead ones on the index (which holds them in every mode) and the succeeded ones by a
      counting Scan of the table (free locally; never on AWS).
    """
    found_store = _store(config, store)
    if JobState.SUCCEEDED in INDEXED_STATES[_index_mode(found_store)]:
        counts = {JobState.SUCCEEDED.value: 0, JobState.DEAD.value: 0}
        for state in (JobState.SUCCEEDED, JobState.DEAD):
            pages = _index_range(found_store, job, state, since, until, Select="COUNT")
            counts[state.value] = sum(int(page.get("Count", 0)) for page in pages)
        return counts
    if _local_endpoint(found_store.config):
        return _count_records(found_store, job, since, until)
    from lambdajobs.runtime import job_metrics  # job_stats only: never at a cold start

    return job_metrics.finished_counts(job, since, until, found_store.config)


def _local_endpoint(config: StackConfig) -> bool:
    """The stack is reached at an endpoint of its own: the local stack (`StackConfig.endpoint_url`, or
    boto3's own `AWS_ENDPOINT_URL`, as its functions' processes reach it), whose CloudWatch holds no
    metric of the worker's (no CloudWatch Logs there to extract the EMF lines)."""
    import os

    return bool(config.endpoint_url or os.environ.get("AWS_ENDPOINT_URL"))


def _count_records(store: JobRecordStore, job: str, since: datetime, until: datetime) -> dict[str, int]:
    """`count_finished` from the records, with the job index off (the local stack): the dead on the
    index, the succeeded by a counting Scan on `finished_at` (what the index's entry would hold)."""
    pages = _index_range(store, job, JobState.DEAD, since, until, Select="COUNT")
    dead = sum(int(page.get("Count", 0)) for page in pages)
    scanned = store.client.get_paginator("scan").paginate(
        TableName=store.table,
        Select="COUNT",
        FilterExpression="#job = :job AND #state = :state AND finished_at BETWEEN :since AND :until",
        ExpressionAttributeNames={"#job": "job", "#state": "state"},  # both reserved words
        ExpressionAttributeValues=codec.encode(
            {
                ":job": job,
                ":state": JobState.SUCCEEDED.value,
                ":since": _iso(since.astimezone(UTC)),
                ":until": _iso((until - timedelta(milliseconds=1)).astimezone(UTC)),
            }
        ),
    )
    succeeded = sum(int(page.get("Count", 0)) for page in scanned)
    return {JobState.SUCCEEDED.value: succeeded, JobState.DEAD.value: dead}
