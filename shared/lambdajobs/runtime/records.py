"""Job records in DynamoDB: one item per job id that is both the idempotency lock and the status.

Powertools idempotency writes its own item per key; a status record beside it would double the writes.
`JobRecordStore` is a Powertools persistence layer whose item *is* the job record, keyed on the job
id itself (not a hash), so `get_status(job_id)` is one GetItem and a successful job costs two writes:
acquire (running) and complete (succeeded).

The item is read through one codec and its rules through one type, `job_record.JobRecord` (its
attributes are listed in `lambdajobs.runtime.table`); every state is written by `lifecycle`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.shared.json_encoder import Encoder
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

from lambdajobs.runtime import aws, lifecycle, pii
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.context import JobCancelled
from lambdajobs.runtime.errors import (
    InvalidOptionError,
    JobIdError,
    JobIndexOffError,
    RecordHeldError,
    WaitTimeoutError,
)
from lambdajobs.runtime.job_record import (
    FINAL_STATES,
    INDEXED_STATES,
    LISTED_STATES,
    MAX_HISTORY,
    MAX_HISTORY_MESSAGE_CHARS,
    MAX_STORED_PAYLOAD_BYTES,
    MAX_TRACEBACK_CHARS,
    PARKED_STATES,
    JobIndex,
    JobRecord,
    JobState,
    index_key,
)
from lambdajobs.runtime.lifecycle import MAX_ERROR_CHARS, REDRIVEN_ERROR
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    JOB_INDEX,
    JOB_INDEX_KEY,
    JOB_INDEX_SORT_KEY,
    PURGED_ID_PREFIX,
    WORKFLOW_ID_PREFIX,
)

if TYPE_CHECKING:
    from lambdajobs.runtime.spec import JobSpec
    from lambdajobs.runtime.workflow_item import Tally


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def error_fields(exc: BaseException) -> dict[str, str]:
    """An error as stored and logged: its type, and its message with the job's PII values masked."""
    return {"type": type(exc).__name__, "message": pii.scrub(str(exc))[:MAX_ERROR_CHARS]}


def stored_payload(payload: Any, pii_fields: tuple[str, ...] = ()) -> tuple[str, bool]:
    """A payload as a failed attempt stores it: its JSON text (True: cut). Above
    `MAX_STORED_PAYLOAD_BYTES` it is cut, and masked first (`pii.mask_payload` with `pii_fields`):
    a cut payload's text no longer parses, so a reader could not mask it, and it could not be
    enqueued again anyway."""
    text = json.dumps(payload, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text.encode()) <= MAX_STORED_PAYLOAD_BYTES:
        return text, False
    masked = json.dumps(
        pii.mask_payload(payload, pii_fields), separators=(",", ":"), ensure_ascii=False, default=str
    )
    return masked.encode()[:MAX_STORED_PAYLOAD_BYTES].decode(errors="ignore"), True


class Uncopied:
    """A value in the run that Powertools' deep copy of it leaves as it is: the payload, read only when
    an attempt fails (a copy per run would cost every job for the few that fail)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __deepcopy__(self, memo: dict[int, Any]) -> Uncopied:
        return self


class RunData(dict[str, Any]):
    """The run the worker hands Powertools' idempotency utility (`JobRecordStore`'s `data`), which
    deep-copies it before the job runs: the worker's own, built for this call and changed by nobody,
    so the copy is the run itself (a deep copy of its keys and values was a twentieth of a successful
    record's CPU)."""

    def __deepcopy__(self, memo: dict[int, Any]) -> RunData:
        return self


def stored_fields(payload: Any) -> dict[str, Any]:
    """A payload as a dead write keeps it (`stored_payload`): `payload`, and `payload_cut` when cut."""
    text, cut = stored_payload(payload, pii.current_fields())
    return {"payload": text, "payload_cut": True if cut else None}


def failure_details(
    run: dict[str, Any], exc: BaseException, outcome: JobState, acquired: dict[str, Any] | None
) -> dict[str, Any]:
    """What a failed attempt's write keeps beside its error (`lifecycle.fail`'s `details`): the payload
    (`run["payload"]`, the envelope's; masked if cut: `stored_payload`), the traceback (scrubbed of
    the record's PII values: `pii` is bound while the job runs; its last `MAX_TRACEBACK_CHARS`), and
    the history with this attempt appended (the record as this run's acquire wrote it: `acquired`),
    its last `MAX_HISTORY`."""
    before = JobRecord.from_item(acquired) if acquired else None
    error = error_fields(exc)
    entry = {
        "attempt": int(run.get("attempt") or 0),
        "started": before.started_at if before is not None else None,
        "ended": lifecycle.now_iso(),
        "outcome": outcome.value,
        "error_type": error["type"],
        "error_message": error["message"][:MAX_HISTORY_MESSAGE_CHARS],
    }
    details: dict[str, Any] = {
        "traceback": pii.scrub("".join(traceback.format_exception(exc)))[-MAX_TRACEBACK_CHARS:],
        "history": [*(before.history if before is not None else ()), entry][-MAX_HISTORY:],
    }
    if "payload" in run:
        payload = run["payload"]
        details.update(stored_fields(payload.value if isinstance(payload, Uncopied) else payload))
    return details


class IdempotencyConfigPerThread(IdempotencyConfig):
    """IdempotencyConfig whose registered Lambda context is per thread: the local stack runs several
    invocations of one worker at once, and each lock must expire with its own invocation."""

    def __init__(self, **options: Any) -> None:
        self._local = threading.local()
        super().__init__(**options)

    @property
    def lambda_context(self) -> Any:
        return getattr(self._local, "context", None)

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._local.context = value


class JobRecordStore(BasePersistenceLayer):
    """Powertools persistence layer writing one job-record item per job id.

    The data Powertools hands us is the `run` dict the worker builds: job_id, job, attempt,
    max_attempts. The idempotency key is the job id itself, so producers and operators read status
    by job id with no knowledge of the worker's function name. Every state it writes goes through
    `lambdajobs.runtime.lifecycle`.
    """

    def __init__(
        self, config: StackConfig | None = None, *, table: str | None = None, client: Any = None
    ) -> None:
        super().__init__()
        self.config = resolve(config)
        self._table = table
        self._client = client
        # The run being acquired, per thread: the local event source runs batches concurrently.
        self._local = threading.local()
        #: A running job's last progress, by job id, until its success writes it into the record.
        self._progress: dict[str, tuple[float, str | None]] = {}
        #: The running durable jobs that wrote a checkpoint (any thread of theirs), by job id.
        self._checkpointed: set[str] = set()

    @property
    def table(self) -> str:
        return self._table or self.config.table_name()

    @property
    def client(self) -> Any:
        return self._client or self.config.client("dynamodb")

    # -- Powertools hooks ---------------------------------------------------------------------------

    def configure(
        self, config: IdempotencyConfig, function_name: str | None = None, key_prefix: str | None = None
    ) -> None:
        # Powertools configures the store on every call and keeps its first configuration; each call
        # also names the function from the environment, for a key this store does not use (its key
        # is the job id): only the first call does anything
        if not self.configured:
            super().configure(config, function_name, key_prefix)

    def _get_hashed_idempotency_key(self, data: dict[str, Any]) -> str | None:
        # The job id is already unique and producer-chosen: use it verbatim as the key (no hash,
        # no function-name prefix), so get_status(job_id) can read it directly.
        return str(data["job_id"])

    def save_inprogress(self, data: dict[str, Any], remaining_time_in_millis: int | None = None) -> None:
        # _put_record only receives the DataRecord; keep the run (job name, attempt) at hand for it.
        self._local.run = data
        self._local.held = None
        self._local.lock = None
        if self.use_local_cache or self.payload_validation_enabled:  # (never ours: Powertools' path)
            super().save_inprogress(data, remaining_time_in_millis)
            return
        # What Powertools' save_inprogress does with our configuration, without its DataRecord, its
        # debug line and its datetime arithmetic (every job takes its lock here): the record's
        # expiry, and the lock's (the invocation's deadline, epoch ms)
        now = time.time()
        if remaining_time_in_millis is None:
            warnings.warn(
                "Couldn't determine the remaining time left. "
                "Did you call register_lambda_context on IdempotencyConfig?",
                stacklevel=2,
            )
        self._acquire(
            str(self._get_hashed_idempotency_key(data)),  # the key Powertools would use (the job id)
            int(now + self.expires_after_seconds),
            int(now * 1000 + remaining_time_in_millis) if remaining_time_in_millis is not None else None,
        )

    def save_success(self, data: dict[str, Any], result: Any) -> None:
        if self.use_local_cache or self.payload_validation_enabled:  # (never ours: Powertools' path)
            super().save_success(data, result)
            return
        # Powertools' save_success with our configuration, without its DataRecord and debug line
        key = str(self._get_hashed_idempotency_key(data))  # the key Powertools would use (the job id)
        self._succeed(key, json.dumps(result, cls=Encoder, sort_keys=True))

    def lock_token(self) -> int | None:
        """The lock this thread's last acquire took (or tried to take): its in-progress expiry."""
        return getattr(self._local, "lock", None)

    def held(self) -> JobRecord | None:
        """The record that refused this thread's last acquire (None: it was not refused): a live
        lock (`lock_live`), a success, or a record that has nothing for this copy to run (a workflow
        member counted dead, an attempt that already ran: `JobRecord.may_start`)."""
        item = getattr(self._local, "held", None)
        return JobRecord.from_item(item) if item else None

    def held_state(self) -> str | None:
        """The state of the record that just refused this thread's acquire (None: it was not refused)."""
        record = self.held()
        return str(record.state) if record is not None and record.state is not None else None

    def held_lock_expiry_ms(self) -> int | None:
        """When the lock that just refused this thread's acquire expires (epoch ms), if it has a
        deadline: the holder's invocation deadline."""
        record = self.held()
        return record.in_progress_expiration if record is not None else None

    def _put_record(self, data_record: DataRecord) -> None:
        self._acquire(
            data_record.idempotency_key,
            int(data_record.expiry_timestamp or 0),
            data_record.in_progress_expiry_timestamp,
        )

    def _acquire(self, job_id: str, expiration: int, lock: int | None) -> None:
        """Take the job's lock for this thread's run (`lifecycle.acquire`): the record expires at
        `expiration` (epoch s), the lock at `lock` (epoch ms: the invocation's deadline)."""
        run = getattr(self._local, "run", None) or {}
        # The lock this run takes is identified by its in-progress expiry (epoch ms): later writes of
        # this run's outcome land only while the record still carries it.
        self._local.lock = lock
        self._local.created = self._local.acquired = None
        try:
            self._local.created, self._local.acquired = lifecycle.acquire(
                self.client,
                self.table,
                job_id,
                str(run.get("job", "")),
                expiration=expiration,
                in_progress_expiration=lock,
                attempt=int(run["attempt"]) if "attempt" in run else None,
                max_attempts=int(run["max_attempts"]) if "max_attempts" in run else None,
                redriven=bool(run.get("redriven", True)),
                index=self.config.job_index,
                # a message's first attempt: most likely no record yet (a duplicate, a redrive or a
                # rate-limited job that waited finds one, and pays one more write unit)
                fresh=run.get("attempt") == 1 and not run.get("resumed"),
                resumed=bool(run.get("resumed")),
                about=run.get("about"),
            )
        except RecordHeldError as exc:
            self._local.held = exc.item  # for the worker: what refused it (`held`)
            old = self._to_data_record(exc.item) if exc.item else None
            raise IdempotencyItemAlreadyExistsError(old_data_record=old) from exc

    def _update_record(self, data_record: DataRecord) -> None:
        self._succeed(data_record.idempotency_key, data_record.response_data or "null")

    def _succeed(self, job_id: str, result_json: str) -> None:
        """Record the success of this thread's run (`lifecycle.succeed_created`, else `succeed`)."""
        run = getattr(self._local, "run", None) or {}
        created, lock = getattr(self._local, "created", None), self.lock_token()
        progress = self._progress.pop(str(run.get("job_id")), None)
        checkpointed = str(run.get("job_id")) in self._checkpointed  # (a rewrite would drop them)
        self._checkpointed.discard(str(run.get("job_id")))
        if created is not None and lock is not None and run.get("workflow") is None and not checkpointed:
            # this run wrote the record: its success rewrites it whole, while the lock is still its own
            lifecycle.succeed_created(
                self.client,
                self.table,
                created,
                result_json,
                lock=lock,
                progress=progress,
                index=self.config.job_index,
            )
            return
        lifecycle.succeed(
            self.client,
            self.table,
            job_id,
            result_json,
            lock=self.lock_token(),
            tally=self.tally((getattr(self._local, "run", None) or {}).get("workflow")),
            job=str((getattr(self._local, "run", None) or {}).get("job", "")),
            index=self.config.job_index,
        )

    def delete_record(self, data: dict[str, Any], exception: Exception) -> None:
        # Powertools deletes the lock when the job raises. We keep the item (it is the job's status)
        # and release the lock by moving it to `retrying`, or to `dead` when the failure is final; a
        # run that never called the job (`RunNotStarted`) gives the lock back and uses no attempt.
        self._progress.pop(str(data["job_id"]), None)
        self._checkpointed.discard(str(data["job_id"]))
        if isinstance(exception, lifecycle.RunNotStarted):
            lifecycle.unstart(
                self.client,
                self.table,
                str(data["job_id"]),
                lock=self.lock_token(),
                attempt=int(data["attempt"]),
                index=self.config.job_index,
            )
            return
        state = lifecycle.after_failure(exception, int(data["attempt"]), int(data["max_attempts"]))
        acquired, _ = self.acquired()
        lifecycle.fail(
            self.client,
            self.table,
            str(data["job_id"]),
            str(data["job"]),
            state,
            error_fields(exception),
            release=True,
            ttl_seconds=self.config.record_ttl_seconds,
            lock=self.lock_token(),
            tally=self.tally(data.get("workflow")),
            index=self.config.job_index,
            details=failure_details(data, exception, state, acquired),
        )

    def _delete_record(self, data_record: DataRecord) -> None:  # pragma: no cover - see delete_record
        raise NotImplementedError("JobRecordStore keeps records; delete_record marks them instead")

    def _get_record(self, idempotency_key: str) -> DataRecord:
        # Powertools reads the record when the refusal did not return it
        item = self.get_item(idempotency_key)
        if item is None:
            raise IdempotencyItemNotFoundError
        self._local.held = item
        return self._to_data_record(item)

    # -- lambdajobs ---------------------------------------------------------------------------------

    def acquired(self) -> tuple[dict[str, Any] | None, int | None]:
        """The item as this thread's last acquire wrote it (with a durable job's checkpoints; not
        decoded: most runs never read it), and the lock it took."""
        return getattr(self._local, "acquired", None), self.lock_token()

    def checkpoint(self, job_id: str, name: str, value: dict[str, Any], lock: int | None) -> bool:
        """A durable job's checkpoint, under the run's `lock` (`lifecycle.checkpoint`); tried again on
        a throttle or a service error. Returns whether it landed (False: the lock was lost)."""
        self._checkpointed.add(job_id)  # from any thread: its success then updates the record
        return bool(
            aws.read_retrying(
                lambda: lifecycle.checkpoint(
                    self.client, self.table, job_id, lock=lock, name=name, value=value
                )
            )
        )

    def suspend(
        self, job_id: str, job: str, state: JobState, lock: int | None, wake_ms: int, **how: Any
    ) -> bool:
        """Park a durable job (`lifecycle.suspend`)."""
        return lifecycle.suspend(
            self.client,
            self.table,
            job_id,
            job,
            state,
            lock=lock,
            wake_ms=wake_ms,
            ttl_seconds=self.config.record_ttl_seconds,
            index=self.config.job_index,
            **how,
        )

    def tally(self, workflow: Any) -> Tally | None:
        """How a workflow member's outcome is counted (`workflow`: the envelope's `workflow`, as a
        dict with `id` and `stage`, or its model); None for a job outside workflows."""
        if workflow is None:
            return None
        if not isinstance(workflow, dict):
            workflow = {"id": workflow.id, "stage": workflow.stage}
        from lambdajobs.runtime.workflow_item import Tally  # workflow members only: not at a cold start

        key = WORKFLOW_ID_PREFIX + str(workflow["id"])
        return Tally(key, int(workflow["stage"]), self.config.record_ttl_seconds)

    def reject(
        self,
        job_id: str,
        job: str,
        error: dict[str, str],
        retrying: bool = False,
        tally: Tally | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        """A message that can never run (invalid payload, or past its last attempt): its record becomes
        `dead` with the reason (`error_fields`), unless a live run holds it or it succeeded; a
        `retrying` or `waiting` record too with `retrying=True` (the message past its last attempt is
        the one that was retrying or waiting). `details`: what the record keeps of the message, in
        the same write (`delivery.about`, and the payload: `stored_fields`)."""
        self._dead(job_id, job, error, release=False, over_retrying=retrying, tally=tally, details=details)

    def complete(
        self,
        job_id: str,
        job: str,
        result_json: str,
        lock: int | None,
        tally: Tally | None = None,
    ) -> None:
        """Record the success of a run of `job` that held `lock` (a run whose own completion write
        failed)."""
        lifecycle.succeed(
            self.client,
            self.table,
            job_id,
            result_json,
            lock=lock,
            tally=tally,
            job=job,
            index=self.config.job_index,
        )

    def bury(
        self,
        job_id: str,
        job: str,
        error: dict[str, str],
        lock: int | None,
        tally: Tally | None = None,
    ) -> None:
        """Record as dead the run that held `lock` (a run whose own release write failed)."""
        self._dead(job_id, job, error, release=True, lock=lock, tally=tally)

    def _dead(self, job_id: str, job: str, error: dict[str, str], **how: Any) -> None:
        ttl = self.config.record_ttl_seconds
        lifecycle.fail(
            self.client,
            self.table,
            job_id,
            job,
            JobState.DEAD,
            error,
            ttl_seconds=ttl,
            index=self.config.job_index,
            **how,
        )

    def wait(self, job_id: str, job: str, until_iso: str) -> None:
        """The job waits for its rate-limit slot at `until_iso` (reads `waiting`)."""
        lifecycle.wait(
            self.client,
            self.table,
            job_id,
            job,
            until_iso,
            ttl_seconds=self.config.record_ttl_seconds,
            index=self.config.job_index,
        )

    def forget_progress(self, job_id: str) -> None:
        """A run that parked: its progress and checkpoints are on the record, nothing is left to write
        with a success."""
        self._progress.pop(job_id, None)
        self._checkpointed.discard(job_id)

    def set_progress(self, job_id: str, percent: float, message: str | None = None) -> None:
        """Persist a running job's progress (one UpdateItem); the last one stays on its success.

        Raises:
            JobCancelled: a cancel of the job was recorded (the write is refused: the job stops).
        """
        try:
            lifecycle.report_progress(self.client, self.table, job_id, percent, message)
        except lifecycle.CancelRequested:
            raise JobCancelled(f"job '{job_id}' was cancelled") from None
        self._progress[job_id] = (percent, message)

    def supersede(self, job_id: str, job: str) -> bool:
        """A debounced enqueue's record reads `superseded` (`lifecycle.supersede`)."""
        return lifecycle.supersede(
            self.client,
            self.table,
            job_id,
            job,
            ttl_seconds=self.config.record_ttl_seconds,
            index=self.config.job_index,
        )

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel of the job is recorded (one consistent GetItem of that attribute)."""
        response = self.client.get_item(
            TableName=self.table,
            Key=codec.key(job_id),
            ConsistentRead=True,
            ProjectionExpression="cancel_requested",
        )
        return "cancel_requested" in (response.get("Item") or {})

    def settle_cancelled(self, job_id: str, job: str, lock: int | None, tally: Tally | None = None) -> bool:
        """End a cancelled job `cancelled` (`lifecycle.settle_cancelled`)."""
        return lifecycle.settle_cancelled(
            self.client,
            self.table,
            job_id,
            job,
            lock=lock,
            ttl_seconds=self.config.record_ttl_seconds,
            tally=tally,
            index=self.config.job_index,
        )

    def get_item(self, job_id: str) -> dict[str, Any] | None:
        """The job's item as stored (one consistent GetItem), or None."""
        response = self.client.get_item(TableName=self.table, Key=codec.key(job_id), ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def read(self, job_id: str) -> JobRecord | None:
        """The job's record (one consistent GetItem), or None when it has none."""
        item = self.get_item(job_id)
        return JobRecord.from_item(item) if item else None

    def reader(self, job_id: str | None) -> Callable[[], JobRecord | None]:
        """A reader of the job's record that reads it (consistently) when first asked, then answers
        from what it read: the worker's gates ask for the record at most once per delivery. A read
        that fails on a throttle or a service error is tried again (`aws.TRIES`); then it raises."""
        read: list[JobRecord | None] = []

        def record() -> JobRecord | None:
            if not read and job_id is not None:
                read.append(aws.read_retrying(self.read, job_id))
            return read[0] if read else None

        return record

    def _to_data_record(self, item: dict[str, Any]) -> DataRecord:
        """The record that refused this thread's acquire, as Powertools' statuses: EXPIRED only when
        an acquire now may take it (it moved on since, or its lock just expired: Powertools retries the
        acquire on EXPIRED), INPROGRESS for a live lock, COMPLETED for a success (its result is the
        answer) and for a record with nothing for this copy to run: a workflow member counted dead, an
        attempt that already ran (`JobRecord.may_start`'s fence). A state this version does not know
        reads as held (INPROGRESS): the message comes back, it is never answered as done.
        """
        run = getattr(self._local, "run", None) or {}
        record = JobRecord.from_item(item)
        now = time.time()
        attempt = int(run["attempt"]) if "attempt" in run else None
        if record.may_start(now, attempt, bool(run.get("redriven", True))):
            status = STATUS_CONSTANTS["EXPIRED"]
        elif record.lock_live(int(now * 1000)) or (record.exists and record.known_state is None):
            # a state this version does not know (a newer one's): held, never taken for done
            status = STATUS_CONSTANTS["INPROGRESS"]
        else:
            status = STATUS_CONSTANTS["COMPLETED"]
        return DataRecord(
            idempotency_key=record.job_id,
            status=status,
            expiry_timestamp=record.expiration or None,
            in_progress_expiry_timestamp=record.in_progress_expiration or None,
            response_data=record.result or "",
        )


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
