"""`JobRecordStore`'s writes and reads other than a run's acquire and its success: a failed run's
release (`delete_record`; what its record keeps of it: `lambdajobs.runtime.failures`), dead and
waiting records, a durable job's checkpoints and parks, progress, cancels, supersedes, and the
reads of a record that refused an acquire.

Split out of `lambdajobs.runtime.records`: `JobRecordStore` keeps each method's signature and
docstring and calls its function here (named alike, without a leading underscore), which takes the
store first; this module loads the first time one of them runs, so a worker's cold start whose first
record succeeds does not compile it. The functions call the store's own methods (`store.tally`,
`store._dead`, ...), so what replaces a method on the class (a test's mutation) still applies.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import (
    STATUS_CONSTANTS,
    DataRecord,
)

from lambdajobs.runtime import aws, lifecycle
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.context import JobCancelled
from lambdajobs.runtime.failures import failure_details
from lambdajobs.runtime.job_record import JobRecord, JobState
from lambdajobs.runtime.records import error_fields
from lambdajobs.runtime.settings import WORKFLOW_ID_PREFIX

if TYPE_CHECKING:
    from lambdajobs.runtime.records import JobRecordStore
    from lambdajobs.runtime.workflow_item import Tally


# -- JobRecordStore's methods (each takes the store first) -----------------------------------------


def held(store: JobRecordStore) -> JobRecord | None:
    item = getattr(store._local, "held", None)
    return JobRecord.from_item(item) if item else None


def delete_record(store: JobRecordStore, data: dict[str, Any], exception: Exception) -> None:
    # Powertools deletes the lock when the job raises. We keep the item (it is the job's status)
    # and release the lock by moving it to `retrying`, or to `dead` when the failure is final; a
    # run that never called the job (`RunNotStarted`) gives the lock back and uses no attempt.
    store._progress.pop(str(data["job_id"]), None)
    store._checkpointed.discard(str(data["job_id"]))
    if isinstance(exception, lifecycle.RunNotStarted):
        lifecycle.unstart(
            store.client,
            store.table,
            str(data["job_id"]),
            lock=store.lock_token(),
            attempt=int(data["attempt"]),
            index=store.config.job_index,
        )
        return
    state = lifecycle.after_failure(exception, int(data["attempt"]), int(data["max_attempts"]))
    acquired, _ = store.acquired()
    lifecycle.fail(
        store.client,
        store.table,
        str(data["job_id"]),
        str(data["job"]),
        state,
        error_fields(exception),
        release=True,
        ttl_seconds=store.config.record_ttl_seconds,
        lock=store.lock_token(),
        tally=store.tally(data.get("workflow")),
        index=store.config.job_index,
        details=failure_details(data, exception, state, acquired),
    )


def checkpoint(
    store: JobRecordStore, job_id: str, name: str, value: dict[str, Any], lock: int | None
) -> bool:
    store._checkpointed.add(job_id)  # from any thread: its success then updates the record
    return bool(
        aws.read_retrying(
            lambda: lifecycle.checkpoint(store.client, store.table, job_id, lock=lock, name=name, value=value)
        )
    )


def suspend(
    store: JobRecordStore, job_id: str, job: str, state: JobState, lock: int | None, wake_ms: int, **how: Any
) -> bool:
    return lifecycle.suspend(
        store.client,
        store.table,
        job_id,
        job,
        state,
        lock=lock,
        wake_ms=wake_ms,
        ttl_seconds=store.config.record_ttl_seconds,
        index=store.config.job_index,
        **how,
    )


def tally(store: JobRecordStore, workflow: Any) -> Tally | None:
    if workflow is None:
        return None
    if not isinstance(workflow, dict):
        workflow = {"id": workflow.id, "stage": workflow.stage}
    from lambdajobs.runtime.workflow_item import Tally  # workflow members only: not at a cold start

    key = WORKFLOW_ID_PREFIX + str(workflow["id"])
    return Tally(key, int(workflow["stage"]), store.config.record_ttl_seconds)


def complete(
    store: JobRecordStore, job_id: str, job: str, result_json: str, lock: int | None, tally: Tally | None
) -> None:
    lifecycle.succeed(
        store.client,
        store.table,
        job_id,
        result_json,
        lock=lock,
        tally=tally,
        job=job,
        index=store.config.job_index,
    )


def dead(store: JobRecordStore, job_id: str, job: str, error: dict[str, str], **how: Any) -> None:
    lifecycle.fail(
        store.client,
        store.table,
        job_id,
        job,
        JobState.DEAD,
        error,
        ttl_seconds=store.config.record_ttl_seconds,
        index=store.config.job_index,
        **how,
    )


def wait(store: JobRecordStore, job_id: str, job: str, until_iso: str) -> None:
    lifecycle.wait(
        store.client,
        store.table,
        job_id,
        job,
        until_iso,
        ttl_seconds=store.config.record_ttl_seconds,
        index=store.config.job_index,
    )


def set_progress(store: JobRecordStore, job_id: str, percent: float, message: str | None) -> None:
    try:
        lifecycle.report_progress(store.client, store.table, job_id, percent, message)
    except lifecycle.CancelRequested:
        raise JobCancelled(f"job '{job_id}' was cancelled") from None
    store._progress[job_id] = (percent, message)


def supersede(store: JobRecordStore, job_id: str, job: str) -> bool:
    return lifecycle.supersede(
        store.client,
        store.table,
        job_id,
        job,
        ttl_seconds=store.config.record_ttl_seconds,
        index=store.config.job_index,
    )


def cancel_requested(store: JobRecordStore, job_id: str) -> bool:
    response = store.client.get_item(
        TableName=store.table,
        Key=codec.key(job_id),
        ConsistentRead=True,
        ProjectionExpression="cancel_requested",
    )
    return "cancel_requested" in (response.get("Item") or {})


def settle_cancelled(
    store: JobRecordStore, job_id: str, job: str, lock: int | None, tally: Tally | None
) -> bool:
    return lifecycle.settle_cancelled(
        store.client,
        store.table,
        job_id,
        job,
        lock=lock,
        ttl_seconds=store.config.record_ttl_seconds,
        tally=tally,
        index=store.config.job_index,
    )


def read(store: JobRecordStore, job_id: str) -> JobRecord | None:
    item = store.get_item(job_id)
    return JobRecord.from_item(item) if item else None


def to_data_record(store: JobRecordStore, item: dict[str, Any]) -> DataRecord:
    run = getattr(store._local, "run", None) or {}
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
