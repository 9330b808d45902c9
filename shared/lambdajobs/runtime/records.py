"""Job records in DynamoDB: one item per job id that is both the idempotency lock and the status.

Powertools idempotency writes its own item per key; a status record beside it would double the writes.
`JobRecordStore` is a Powertools persistence layer whose item *is* the job record, keyed on the job
id itself (not a hash), so `get_status(job_id)` is one GetItem and a successful job costs two writes:
acquire (running) and complete (succeeded).

The item is read through one codec and its rules through one type, `job_record.JobRecord` (its
attributes are listed in `lambdajobs.runtime.table`); every state is written by `lifecycle`.

The readers (`get_status`, `JobStatus`, `list_jobs`, `count_finished`, ...: `READERS`) live in
`lambdajobs.runtime.status` and are importable from here too: loaded on first use, so a worker's cold
start does not compile them. So do `JobRecordStore`'s writes and reads other than an acquire and a
success (failures, parks, cancels, progress, checkpoints, the reads of a refused acquire: each method
keeps its signature and docstring here), in `lambdajobs.runtime.store_ops`, and what a failed
attempt's write keeps of it (`failure_details`, `stored_fields`, `stored_payload`: importable from
here), in `lambdajobs.runtime.failures`.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.shared.json_encoder import Encoder
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer

from lambdajobs.runtime import aws, lazy, lifecycle, pii
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.errors import RecordHeldError
from lambdajobs.runtime.errors import WaitTimeoutError as WaitTimeoutError  # (wait_for's, imported from here)
from lambdajobs.runtime.job_record import JobState
from lambdajobs.runtime.lifecycle import MAX_ERROR_CHARS

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

    from lambdajobs.runtime.failures import failure_details as failure_details
    from lambdajobs.runtime.failures import stored_fields as stored_fields
    from lambdajobs.runtime.failures import stored_payload as stored_payload
    from lambdajobs.runtime.job_record import JobRecord
    from lambdajobs.runtime.status import BATCH_GET_TRIES as BATCH_GET_TRIES
    from lambdajobs.runtime.status import MAX_SCANNED_DEAD as MAX_SCANNED_DEAD
    from lambdajobs.runtime.status import NO_RECORD as NO_RECORD
    from lambdajobs.runtime.status import SIGNALS_ONLY as SIGNALS_ONLY
    from lambdajobs.runtime.status import Attempt as Attempt
    from lambdajobs.runtime.status import JobPage as JobPage
    from lambdajobs.runtime.status import JobStatus as JobStatus
    from lambdajobs.runtime.status import count_dead as count_dead
    from lambdajobs.runtime.status import count_dead_levels as count_dead_levels
    from lambdajobs.runtime.status import count_finished as count_finished
    from lambdajobs.runtime.status import entered_at as entered_at
    from lambdajobs.runtime.status import get_status as get_status
    from lambdajobs.runtime.status import get_statuses as get_statuses
    from lambdajobs.runtime.status import index_off_message as index_off_message
    from lambdajobs.runtime.status import list_dead as list_dead
    from lambdajobs.runtime.status import list_jobs as list_jobs
    from lambdajobs.runtime.status import listed_states as listed_states
    from lambdajobs.runtime.status import mark_purged as mark_purged
    from lambdajobs.runtime.status import purged_at as purged_at
    from lambdajobs.runtime.status import search as search
    from lambdajobs.runtime.status import status_from_item as status_from_item
    from lambdajobs.runtime.status import status_of as status_of
    from lambdajobs.runtime.status import wait_for as wait_for
    from lambdajobs.runtime.workflow_item import Tally


def error_fields(exc: BaseException) -> dict[str, str]:
    """An error as stored and logged: its type, and its message with the job's PII values masked."""
    return {"type": type(exc).__name__, "message": pii.scrub(str(exc))[:MAX_ERROR_CHARS]}


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
        return _ops().held(self)

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
        # Powertools' hook when the job raises: the record is kept (its status), its lock released as
        # `retrying` or `dead`, or given back when the job was never called (`store_ops.delete_record`)
        _ops().delete_record(self, data, exception)

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
        return _ops().checkpoint(self, job_id, name, value, lock)

    def suspend(
        self, job_id: str, job: str, state: JobState, lock: int | None, wake_ms: int, **how: Any
    ) -> bool:
        """Park a durable job (`lifecycle.suspend`)."""
        return _ops().suspend(self, job_id, job, state, lock, wake_ms, **how)

    def tally(self, workflow: Any) -> Tally | None:
        """How a workflow member's outcome is counted (`workflow`: the envelope's `workflow`, as a
        dict with `id` and `stage`, or its model); None for a job outside workflows."""
        return None if workflow is None else _ops().tally(self, workflow)

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
        _ops().complete(self, job_id, job, result_json, lock, tally)

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
        _ops().dead(self, job_id, job, error, **how)

    def wait(self, job_id: str, job: str, until_iso: str) -> None:
        """The job waits for its rate-limit slot at `until_iso` (reads `waiting`)."""
        _ops().wait(self, job_id, job, until_iso)

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
        _ops().set_progress(self, job_id, percent, message)

    def supersede(self, job_id: str, job: str) -> bool:
        """A debounced enqueue's record reads `superseded` (`lifecycle.supersede`)."""
        return _ops().supersede(self, job_id, job)

    def cancel_requested(self, job_id: str) -> bool:
        """Whether a cancel of the job is recorded (one consistent GetItem of that attribute)."""
        return _ops().cancel_requested(self, job_id)

    def settle_cancelled(self, job_id: str, job: str, lock: int | None, tally: Tally | None = None) -> bool:
        """End a cancelled job `cancelled` (`lifecycle.settle_cancelled`)."""
        return _ops().settle_cancelled(self, job_id, job, lock, tally)

    def get_item(self, job_id: str) -> dict[str, Any] | None:
        """The job's item as stored (one consistent GetItem), or None."""
        response = self.client.get_item(TableName=self.table, Key=codec.key(job_id), ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    def read(self, job_id: str) -> JobRecord | None:
        """The job's record (one consistent GetItem), or None when it has none."""
        return _ops().read(self, job_id)

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
        return _ops().to_data_record(self, item)


def _ops() -> Any:
    """`lambdajobs.runtime.store_ops`, where `JobRecordStore`'s writes and reads other than an acquire
    and a success are: imported by the first one that runs (a cold start's success does not)."""
    import lambdajobs.runtime.store_ops as store_ops  # (the cheapest form of the import once loaded)

    return store_ops


#: The status readers, defined in `lambdajobs.runtime.status` and loaded from there on first use
#: (`records.get_status`, `from lambdajobs.runtime.records import JobStatus`).
READERS = frozenset(
    {
        "Attempt",
        "BATCH_GET_TRIES",
        "JobPage",
        "JobStatus",
        "MAX_SCANNED_DEAD",
        "NO_RECORD",
        "SIGNALS_ONLY",
        "count_dead",
        "count_dead_levels",
        "count_finished",
        "entered_at",
        "get_status",
        "get_statuses",
        "index_off_message",
        "list_dead",
        "list_jobs",
        "listed_states",
        "mark_purged",
        "purged_at",
        "search",
        "status_from_item",
        "status_of",
        "wait_for",
    }
)
#: What a failed attempt's write keeps of it, defined in `lambdajobs.runtime.failures` and loaded
#: from there on first use (`from lambdajobs.runtime.records import stored_fields`).
FAILURE_FIELDS = frozenset({"failure_details", "stored_fields", "stored_payload"})


__getattr__ = lazy.exports(
    __name__,
    {
        **dict.fromkeys(READERS, "lambdajobs.runtime.status"),
        **dict.fromkeys(FAILURE_FIELDS, "lambdajobs.runtime.failures"),
    },
)
