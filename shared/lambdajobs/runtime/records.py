"""Job records in DynamoDB: one item per job id that is both the idempotency lock and the status.

Powertools idempotency writes its own item per key; a status record beside it would double the writes.
`JobRecordStore` is a Powertools persistence layer whose item *is* the job record, keyed on the job
id itself (not a hash), so `get_status(job_id)` is one GetItem and a successful job costs two writes:
acquire (running) and complete (succeeded).

Item: id, job, state, attempts, created_at, started_at, finished_at, updated_at, result (JSON text),
error {type, message}, expiration (TTL, epoch s), in_progress_expiration (epoch ms).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyItemAlreadyExistsError,
    IdempotencyItemNotFoundError,
)
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

from lambdajobs.runtime import aws, pii
from lambdajobs.runtime.errors import LambdaJobsError, PermanentError
from lambdajobs.runtime.settings import ENV_TABLE, JOB_STATS_INDEX, record_ttl_seconds

State = Literal["pending", "running", "retrying", "succeeded", "dead"]
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "dead"})

#: DynamoDB items are at most 400 KB; a job result is meant to be a small summary.
MAX_RESULT_BYTES = 32 * 1024
MAX_ERROR_CHARS = 1000

_TO_POWERTOOLS = {"running": STATUS_CONSTANTS["INPROGRESS"], "succeeded": STATUS_CONSTANTS["COMPLETED"]}


def _now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def table_name() -> str:
    """The job table: `LAMBDAJOBS_TABLE` (CDK sets it on every worker), else the stack's manifest."""
    name = os.environ.get(ENV_TABLE)
    if name:
        return name
    from lambdajobs.runtime import manifest

    return manifest.stack_entry()["table"]


def error_fields(exc: BaseException) -> dict[str, str]:
    """An error as stored and logged: its type, and its message with the job's PII values masked."""
    return {"type": type(exc).__name__, "message": pii.scrub(str(exc))[:MAX_ERROR_CHARS]}


def is_final_failure(run: dict[str, Any], exc: BaseException) -> bool:
    """Whether a failure ends the job: a PermanentError, or a failure on the last attempt."""
    return isinstance(exc, PermanentError) or run["attempt"] >= run["max_attempts"]


class JobRecordStore(BasePersistenceLayer):
    """Powertools persistence layer writing one job-record item per job id.

    The data Powertools hands us is the `run` dict the worker builds: job_id, job, attempt,
    max_attempts. The idempotency key is the job id itself, so producers and operators read status
    by job id with no knowledge of the worker's function name.
    """

    def __init__(self, table: str | None = None, client: Any = None) -> None:
        super().__init__()
        self._table = table
        self._client = client
        # The run being acquired, per thread: the local event source runs batches concurrently.
        self._local = threading.local()

    @property
    def table(self) -> str:
        return self._table or table_name()

    @property
    def client(self) -> Any:
        return self._client or aws.client("dynamodb")

    # -- Powertools hooks ---------------------------------------------------------------------------

    def _get_hashed_idempotency_key(self, data: dict[str, Any]) -> str | None:
        # The job id is already unique and producer-chosen: use it verbatim as the key (no hash,
        # no function-name prefix), so get_status(job_id) can read it directly.
        return str(data["job_id"])

    def save_inprogress(self, data: dict[str, Any], remaining_time_in_millis: int | None = None) -> None:
        # _put_record only receives the DataRecord; keep the run (job name, attempt) at hand for it.
        self._local.run = data
        super().save_inprogress(data, remaining_time_in_millis)

    def _put_record(self, data_record: DataRecord) -> None:
        run = getattr(self._local, "run", None) or {}
        now = _now()
        values: dict[str, Any] = {
            ":job": {"S": str(run.get("job", ""))},
            ":running": {"S": "running"},
            ":retrying": {"S": "retrying"},
            ":dead": {"S": "dead"},
            ":one": {"N": "1"},
            ":now_iso": {"S": _iso(now)},
            ":exp": {"N": str(data_record.expiry_timestamp)},
            ":now": {"N": str(int(now.timestamp()))},
            ":now_ms": {"N": str(int(now.timestamp() * 1000))},
        }
        sets = [
            "job = :job",
            "#state = :running",
            "started_at = :now_iso",
            "updated_at = :now_iso",
            "created_at = if_not_exists(created_at, :now_iso)",
            "expiration = :exp",
        ]
        if data_record.in_progress_expiry_timestamp is not None:
            values[":ipe"] = {"N": str(data_record.in_progress_expiry_timestamp)}
            sets.append("in_progress_expiration = :ipe")
        # Acquire when: no record yet; the record expired; an earlier attempt failed (retrying, or
        # dead and now redriven); or a running lock whose invocation died (its expiry passed).
        condition = (
            "attribute_not_exists(id) OR expiration < :now OR #state IN (:retrying, :dead) OR "
            "(#state = :running AND attribute_exists(in_progress_expiration) "
            "AND in_progress_expiration < :now_ms)"
        )
        try:
            self.client.update_item(
                TableName=self.table,
                Key={"id": {"S": data_record.idempotency_key}},
                UpdateExpression=(
                    "SET "
                    + ", ".join(sets)
                    + " ADD attempts :one REMOVE finished_at, progress, progress_message"
                ),
                ConditionExpression=condition,
                ExpressionAttributeNames={"#state": "state"},
                ExpressionAttributeValues=values,
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except self.client.exceptions.ConditionalCheckFailedException as exc:
            item = exc.response.get("Item")
            old = self._to_data_record(item) if item else None
            raise IdempotencyItemAlreadyExistsError(old_data_record=old) from exc

    def _update_record(self, data_record: DataRecord) -> None:
        result = data_record.response_data or "null"
        if len(result.encode()) > MAX_RESULT_BYTES:
            result = json.dumps({"omitted": f"result of {len(result.encode())} bytes > {MAX_RESULT_BYTES}"})
        now_iso = _iso(_now())
        self.client.update_item(
            TableName=self.table,
            Key={"id": {"S": data_record.idempotency_key}},
            UpdateExpression=(
                "SET #state = :succeeded, #result = :result, finished_at = :now_iso, "
                "updated_at = :now_iso, expiration = :exp REMOVE in_progress_expiration"
            ),
            ExpressionAttributeNames={"#state": "state", "#result": "result"},
            ExpressionAttributeValues={
                ":succeeded": {"S": "succeeded"},
                ":result": {"S": result},
                ":now_iso": {"S": now_iso},
                ":exp": {"N": str(data_record.expiry_timestamp)},
            },
        )

    def delete_record(self, data: dict[str, Any], exception: Exception) -> None:
        # Powertools deletes the lock when the job raises. We keep the item (it is the job's status)
        # and release the lock by moving it to `retrying`, or to `dead` when the failure is final.
        state: State = "dead" if is_final_failure(data, exception) else "retrying"
        self.mark(str(data["job_id"]), str(data["job"]), state, exception, lock_released=True)

    def _delete_record(self, data_record: DataRecord) -> None:  # pragma: no cover - see delete_record
        raise NotImplementedError("JobRecordStore keeps records; delete_record marks them instead")

    def _get_record(self, idempotency_key: str) -> DataRecord:
        item = self.get_item(idempotency_key)
        if item is None:
            raise IdempotencyItemNotFoundError
        return self._to_data_record(item)

    # -- lambdajobs ---------------------------------------------------------------------------------

    def mark(
        self,
        job_id: str,
        job: str,
        state: State,
        exception: BaseException,
        *,
        lock_released: bool = False,
    ) -> None:
        """Record a failure: `retrying` (another attempt will come) or `dead` (no more attempts)."""
        now_iso = _iso(_now())
        err = error_fields(exception)
        sets = [
            "job = :job",
            "#state = :state",
            "#error = :error",
            "updated_at = :now_iso",
            "created_at = if_not_exists(created_at, :now_iso)",
        ]
        values: dict[str, Any] = {
            ":job": {"S": job},
            ":state": {"S": state},
            ":error": {"M": {"type": {"S": err["type"]}, "message": {"S": err["message"]}}},
            ":now_iso": {"S": now_iso},
        }
        if state == "dead":
            sets.append("finished_at = :now_iso")
        if not lock_released:
            # A job that never ran (invalid payload): the record still needs an expiry.
            sets.append("expiration = if_not_exists(expiration, :exp)")
            values[":exp"] = {"N": str(int(time.time()) + record_ttl_seconds())}
        # Never overwrite a success (a bad re-send of a finished job id is dead-lettered on its own);
        # releasing a lock only touches a record that is still running.
        if lock_released:
            condition = "#state = :running"
            values[":running"] = {"S": "running"}
        else:
            condition = "attribute_not_exists(id) OR #state <> :succeeded"
            values[":succeeded"] = {"S": "succeeded"}
        # If the condition fails the record moved on (succeeded, or taken over): not ours to change.
        with contextlib.suppress(self.client.exceptions.ConditionalCheckFailedException):
            self.client.update_item(
                TableName=self.table,
                Key={"id": {"S": job_id}},
                UpdateExpression="SET " + ", ".join(sets) + " REMOVE in_progress_expiration",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#state": "state", "#error": "error"},
                ExpressionAttributeValues=values,
            )

    def set_progress(self, job_id: str, percent: float, message: str | None = None) -> None:
        """Persist a running job's progress (one UpdateItem)."""
        sets = ["progress = :p", "updated_at = :now_iso"]
        values: dict[str, Any] = {":p": {"N": repr(float(percent))}, ":now_iso": {"S": _iso(_now())}}
        if message is not None:
            sets.append("progress_message = :m")
            values[":m"] = {"S": message[:MAX_ERROR_CHARS]}
        self.client.update_item(
            TableName=self.table,
            Key={"id": {"S": job_id}},
            UpdateExpression="SET " + ", ".join(sets),
            ExpressionAttributeValues=values,
        )

    def get_item(self, job_id: str) -> dict[str, Any] | None:
        response = self.client.get_item(TableName=self.table, Key={"id": {"S": job_id}}, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    @staticmethod
    def _to_data_record(item: dict[str, Any]) -> DataRecord:
        state = item.get("state", {}).get("S", "")
        ipe = item.get("in_progress_expiration", {}).get("N")
        return DataRecord(
            idempotency_key=item["id"]["S"],
            # retrying/dead never fail the acquire condition; anything unexpected reads as expired,
            # which makes Powertools retry the acquire.
            status=_TO_POWERTOOLS.get(state, STATUS_CONSTANTS["EXPIRED"]),
            expiry_timestamp=int(item.get("expiration", {}).get("N", "0")) or None,
            in_progress_expiry_timestamp=int(ipe) if ipe else None,
            response_data=item.get("result", {}).get("S", ""),
        )


@dataclass(frozen=True)
class JobStatus:
    """What `get_status` returns. A job not started yet (or an unknown id) reads as `pending`."""

    job_id: str
    state: State
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

    @property
    def done(self) -> bool:
        return self.state in FINAL_STATES


def status_from_item(job_id: str, item: dict[str, Any] | None) -> JobStatus:
    if not item:
        return JobStatus(job_id=job_id, state="pending")

    def s(name: str) -> str | None:
        value = item.get(name, {}).get("S")
        return str(value) if value is not None else None

    result_text = s("result")
    err = item.get("error", {}).get("M")
    return JobStatus(
        job_id=job_id,
        state=s("state") or "pending",  # type: ignore[arg-type]
        job=s("job"),
        attempts=int(item.get("attempts", {}).get("N", "0")),
        created_at=s("created_at"),
        started_at=s("started_at"),
        finished_at=s("finished_at"),
        updated_at=s("updated_at"),
        result=json.loads(result_text) if result_text else None,
        error={k: v["S"] for k, v in err.items()} if err else None,
        progress=float(item["progress"]["N"]) if "progress" in item else None,
        progress_message=s("progress_message"),
    )


def get_status(job_id: str, *, store: JobRecordStore | None = None) -> JobStatus:
    """The status of a job by id: state, attempts, timestamps, result, last error. Never raises for
    an unknown id: a job that has not started yet reads as `pending`."""
    if not isinstance(job_id, str) or not job_id:
        raise ValueError(f"job_id must be a non-empty string, got {job_id!r}")
    store = store or JobRecordStore()
    return status_from_item(job_id, store.get_item(job_id))


def get_statuses(job_ids: list[str], *, store: JobRecordStore | None = None) -> dict[str, JobStatus]:
    """Statuses of many jobs in BatchGetItem calls (100 keys each); unknown ids read as pending."""
    store = store or JobRecordStore()
    found: dict[str, dict[str, Any]] = {}
    unique = list(dict.fromkeys(job_ids))
    for start in range(0, len(unique), 100):
        request: dict[str, Any] = {
            store.table: {
                "Keys": [{"id": {"S": j}} for j in unique[start : start + 100]],
                "ConsistentRead": True,
            }
        }
        while request:
            response = store.client.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(store.table, []):
                found[item["id"]["S"]] = item
            request = response.get("UnprocessedKeys") or {}
    return {j: status_from_item(j, found.get(j)) for j in unique}


def wait_for(
    job_id: str,
    timeout_seconds: float = 60.0,
    *,
    poll_seconds: float = 1.0,
    store: JobRecordStore | None = None,
) -> JobStatus:
    """Poll `get_status` until the job is `succeeded` or `dead`; raise WaitTimeoutError after
    `timeout_seconds` (the error carries the last status seen)."""
    store = store or JobRecordStore()
    deadline = time.monotonic() + timeout_seconds
    while True:
        status = get_status(job_id, store=store)
        if status.done:
            return status
        left = deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeoutError(status, timeout_seconds)
        time.sleep(min(poll_seconds, left))


class WaitTimeoutError(LambdaJobsError, TimeoutError):
    """`wait_for` gave up; `.status` is the last status seen."""

    def __init__(self, status: JobStatus, timeout_seconds: float) -> None:
        super().__init__(
            f"job '{status.job_id}' is still {status.state} after {timeout_seconds:g} s; "
            f"wait longer or check it with get_status."
        )
        self.status = status


def count_finished(
    job: str, since: datetime, until: datetime, *, store: JobRecordStore | None = None
) -> dict[str, int]:
    """How many jobs named `job` finished (succeeded or dead) in [since, until): one Query on the
    job-stats index per page, no table scan."""
    store = store or JobRecordStore()
    counts = {"succeeded": 0, "dead": 0}
    paginator = store.client.get_paginator("query")
    pages = paginator.paginate(
        TableName=store.table,
        IndexName=JOB_STATS_INDEX,
        KeyConditionExpression="job = :job AND finished_at BETWEEN :since AND :until",
        ExpressionAttributeValues={
            ":job": {"S": job},
            ":since": {"S": _iso(since.astimezone(UTC))},
            ":until": {"S": _iso(until.astimezone(UTC))},
        },
        ProjectionExpression="#state",
        ExpressionAttributeNames={"#state": "state"},
    )
    for page in pages:
        for item in page.get("Items", []):
            state = item.get("state", {}).get("S")
            if state in counts:
                counts[state] += 1
    return counts
