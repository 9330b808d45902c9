"""The job lifecycle: the states a job record can be in, and every transition between them.

This module is the only writer of a job's state. The worker and the Powertools persistence layer
(`JobRecordStore`) call these functions; nothing else sets `state`.

    (none) --acquire--> running --succeed--> succeeded
                           |
                           +--fail(after_failure)--> retrying --acquire--> running ...
                           |                      `-> dead (PermanentError, or the last attempt)
    (none) --reject--> dead         (a message that can never run: invalid payload)
    (none)/retrying --wait--> waiting --acquire--> running   (its rate limit's slot is ahead)

Each transition is one conditional UpdateItem on the job's item (keyed on the job id), so concurrent
deliveries of one job cannot both hold it: at-least-once delivery, one run at a time.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from lambdajobs.runtime.errors import LambdaJobsError, PermanentError, RecordHeldError


class JobState(StrEnum):
    """The state of a job. A job not started yet (or an unknown id) reads as `pending`."""

    PENDING = "pending"
    RUNNING = "running"
    RETRYING = "retrying"
    WAITING = "waiting"
    SUCCEEDED = "succeeded"
    DEAD = "dead"

    @property
    def is_final(self) -> bool:
        return self in FINAL_STATES


FINAL_STATES: frozenset[JobState] = frozenset({JobState.SUCCEEDED, JobState.DEAD})


class JobIndex(StrEnum):
    """What the opt-in job index (`settings.JOB_INDEX`) holds; each mode's cost is per job, on top of
    the record's own two writes (DynamoDB charges one index write per entry put or deleted, two when
    an entry's key changes):

    - `off` (the default): no index, nothing written; jobs cannot be listed by state.
    - `finished`: `retrying`, `succeeded` and `dead` records. A job that succeeds at once costs 1 more
      write unit (its completion enters the index); each retry costs 2 more (it enters as
      `retrying`, and leaves when the next attempt starts).
    - `all`: `running` records too. A job that succeeds at once costs 3 more (it enters as
      `running`; completion moves it: a delete and a put); each retry costs 4 more (running to
      retrying, and back: each a delete and a put).

    A record whose last attempt crashed (SQS, not the worker, dead-letters its message) keeps the
    entry it had: none in `finished` mode, `running` in `all`; `get_status` reads it `dead`.
    """

    OFF = "off"
    FINISHED = "finished"
    ALL = "all"


#: The states each mode of the job index holds.
INDEXED_STATES: dict[JobIndex, frozenset[JobState]] = {
    JobIndex.OFF: frozenset(),
    JobIndex.FINISHED: frozenset({JobState.RETRYING, JobState.SUCCEEDED, JobState.DEAD}),
    JobIndex.ALL: frozenset({JobState.RUNNING, JobState.RETRYING, JobState.SUCCEEDED, JobState.DEAD}),
}


def index_key(job: str, state: JobState | str) -> str:
    """The job index's partition key of a job's records in `state`."""
    return f"{job}#{JobState(state).value}"


def _index(
    mode: str | None, job: str, state: JobState, sets: list[str], remove: list[str], values: dict[str, Any]
) -> None:
    """Add the job index's attributes to a state write: `ix`/`ix_at` when the mode indexes `state`,
    removed when it does not (a record leaving the index), or when the index is off (keys an earlier
    period with the index left behind would come back, stale, if it were turned on again; removing
    an attribute a record does not have writes nothing). Uses the write's `:now_iso` as the time the
    record entered the state. `mode` None (not known: no stack told the writer): nothing."""
    if not mode:
        return
    if job and state in INDEXED_STATES[JobIndex(mode)]:
        sets += ["ix = :ix", "ix_at = :now_iso"]
        values[":ix"] = {"S": index_key(job, state)}
    else:
        remove += ["ix", "ix_at"]


#: DynamoDB items are at most 400 KB; a job result is meant to be a small summary.
MAX_RESULT_BYTES = 32 * 1024
MAX_ERROR_CHARS = 1000


def after_failure(exc: BaseException, attempt: int, max_attempts: int) -> JobState:
    """The single decision between retry and dead: `dead` for a `PermanentError` or a failure on the
    last attempt (SQS would dead-letter the next receive anyway), else `retrying`."""
    if isinstance(exc, PermanentError) or attempt >= max_attempts:
        return JobState.DEAD
    return JobState.RETRYING


@dataclass(frozen=True)
class Tally:
    """Counting a workflow member's outcome in its workflow's item (`key`), stage `stage`, in the same
    transaction as the member's record write: per-member idempotence comes from the record, which
    keeps `wf_counted` (the outcome counted), so no outcome is counted twice and none is lost to a
    crash between the two writes."""

    key: str
    stage: int
    #: Renews the workflow item's expiry (the job records' TTL from now): a stage may stay open for days.
    ttl_seconds: int = 0

    def update(self, table: str, outcome: JobState, *, from_dead: bool = False) -> dict[str, Any]:
        """The workflow item's update: `ok_<stage>` or `dead_<stage>` up by one, and `done_<stage>`
        with it; `from_dead`: a member counted dead that succeeded after a redrive moves from dead to
        ok (`done` unchanged). The guard `done < total` refuses a count beyond the stage's members (and
        an item that is gone). Kept this short on purpose: every member of a workflow makes one."""
        i = self.stage
        values: dict[str, Any] = {":one": {"N": "1"}}
        if from_dead:
            values[":minus"], values[":zero"] = {"N": "-1"}, {"N": "0"}
            adds, condition = f"ok_{i} :one, dead_{i} :minus", f"dead_{i} > :zero"
        else:
            counter = "ok" if outcome is JobState.SUCCEEDED else "dead"
            adds, condition = f"{counter}_{i} :one, done_{i} :one", f"done_{i} < total_{i}"
        renew = ""
        if self.ttl_seconds:
            values[":exp"] = {"N": str(int(time.time()) + self.ttl_seconds)}
            renew = "SET expiration = :exp "
        return {
            "TableName": table,
            "Key": {"id": {"S": self.key}},
            "UpdateExpression": f"{renew}ADD {adds}",
            "ConditionExpression": condition,
            "ExpressionAttributeValues": values,
        }


def _and(*conditions: str | None) -> str:
    given = [c for c in conditions if c]
    return given[0] if len(given) == 1 else " AND ".join(f"({c})" for c in given)


def _apply(
    client: Any,
    table: str,
    job_id: str,
    *,
    sets: list[str],
    remove: list[str],
    condition: str | None,
    names: dict[str, str],
    values: dict[str, Any],
    tally: Tally | None,
    outcome: JobState,
) -> bool:
    """One conditional UpdateItem of a job record; with `tally`, together with the count of its
    outcome in the workflow's item, in one TransactWriteItems. Returns whether the record's write
    landed (False: its condition failed, the record moved on).

    The counted write: the record gets `wf_counted = <outcome>` only if it has none. A record already
    counted `dead` that now succeeds (redriven from the DLQ) moves from dead to ok. Anything else
    already counted, or a workflow item that is gone (expired) or full, gets the plain write: the job's
    own record is never held back by its workflow.

    Raises:
        ClientError: TransactionCanceledException for a transaction conflict or a throttle (transient:
            the caller tries again), or any other error of the calls.
    """
    key = {"id": {"S": job_id}}

    def record_update(
        extra_sets: list[str], extra_condition: str | None, extra: dict[str, Any]
    ) -> dict[str, Any]:
        expression = "SET " + ", ".join(sets + extra_sets)
        if remove:
            expression += " REMOVE " + ", ".join(remove)
        update: dict[str, Any] = {
            "TableName": table,
            "Key": key,
            "UpdateExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": {**values, **extra},
        }
        joined = _and(condition, extra_condition)
        if joined:
            update["ConditionExpression"] = joined
        return update

    if tally is not None:
        counted = {":wf_outcome": {"S": outcome.value}}
        attempts: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
            ("attribute_not_exists(wf_counted)", counted, tally.update(table, outcome))
        ]
        if outcome is JobState.SUCCEEDED:
            was_dead = {**counted, ":wf_dead": {"S": JobState.DEAD.value}}
            attempts.append(("wf_counted = :wf_dead", was_dead, tally.update(table, outcome, from_dead=True)))
        for extra_condition, extra, workflow_update in attempts:
            member = record_update(["wf_counted = :wf_outcome"], extra_condition, extra)
            try:
                client.transact_write_items(TransactItems=[{"Update": member}, {"Update": workflow_update}])
                return True
            except client.exceptions.TransactionCanceledException as exc:
                codes = [str(r.get("Code") or "None") for r in exc.response.get("CancellationReasons", [])]
                if any(code not in ("None", "ConditionalCheckFailed") for code in codes):
                    raise  # a conflict with another transaction, a throttle: try again later
                if codes[1:2] == ["ConditionalCheckFailed"] and codes[0] != "ConditionalCheckFailed":
                    break  # the workflow item is gone or the stage is full: not counted, plain write
    try:
        client.update_item(**record_update([], None, {}))
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def acquire(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    *,
    expiration: int,
    in_progress_expiration: int | None,
    attempt: int | None = None,
    max_attempts: int | None = None,
    redriven: bool = True,
    index: str | None = None,
    fresh: bool = False,
) -> dict[str, Any] | None:
    """pending/retrying/dead/expired -> running: take the job's lock and record the attempt. Returns
    the record as written when it was created here (the `fresh` PutItem), else None.

    `fresh`: the job most likely has no record yet (a message's first attempt): first one PutItem
    that only lands on no record (the same write units; a much shorter request, which on moto is
    several times cheaper), then, if a record is there, the UpdateItem below.

    `attempts` becomes the worker's attempt number (earlier copies' attempts plus this message's
    receive count), so a receive that did not run the job (handed back) is not counted, and a message
    redriven from the DLQ starts again at 1. Without `attempt`, the count goes up by one.

    Allowed when: no record yet; the record expired; an earlier attempt failed (retrying, or dead and
    now redriven); or a running lock whose invocation died (its in-progress expiry passed). A dead
    workflow member whose outcome was counted (`wf_counted`) is taken again only by a redriven message
    (`redriven`: it carries the reason the worker gave it in the DLQ): any other copy is a duplicate
    (a continuer's re-sent stage, SQS's at-least-once), and running it again would run a dead job again.

    Raises:
        RecordHeldError: another delivery holds it, or it already succeeded (with the record).
    """
    now = time.time()
    if fresh:
        created = _create(
            client, table, job_id, job, now, expiration, in_progress_expiration, attempt, max_attempts, index
        )
        if created is not None:
            return created
    values: dict[str, Any] = {
        ":job": {"S": job},
        ":running": {"S": JobState.RUNNING},
        ":retrying": {"S": JobState.RETRYING},
        ":waiting": {"S": JobState.WAITING},
        ":dead": {"S": JobState.DEAD},
        ":now_iso": {"S": now_iso()},
        ":exp": {"N": str(expiration)},
        ":now": {"N": str(int(now))},
        ":now_ms": {"N": str(int(now * 1000))},
    }
    sets = [
        "job = :job",
        "#state = :running",
        "started_at = :now_iso",
        "updated_at = :now_iso",
        "created_at = if_not_exists(created_at, :now_iso)",
        "expiration = :exp",
    ]
    if in_progress_expiration is not None:
        values[":ipe"] = {"N": str(in_progress_expiration)}
        sets.append("in_progress_expiration = :ipe")
    if max_attempts is not None:  # for `reconcile`: no extra write, the same update
        values[":max"] = {"N": str(max_attempts)}
        sets.append("max_attempts = :max")
    if attempt is not None:
        values[":attempt"] = {"N": str(attempt)}
        sets.append("attempts = :attempt")
        count = ""
    else:
        values[":one"] = {"N": "1"}
        count = " ADD attempts :one"
    remove = ["finished_at", "progress", "progress_message", "waiting_until"]
    _index(index, job, JobState.RUNNING, sets, remove, values)
    dead = "#state = :dead" if redriven else "(#state = :dead AND attribute_not_exists(wf_counted))"
    condition = (
        f"attribute_not_exists(id) OR expiration < :now OR #state IN (:retrying, :waiting) OR {dead} OR "
        "(#state = :running AND attribute_exists(in_progress_expiration) "
        "AND in_progress_expiration < :now_ms)"
    )
    try:
        client.update_item(
            TableName=table,
            Key={"id": {"S": job_id}},
            UpdateExpression="SET " + ", ".join(sets) + count + " REMOVE " + ", ".join(remove),
            ConditionExpression=condition,
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exc:
        raise RecordHeldError(exc.response.get("Item")) from exc
    return None


def _create(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    now: float,
    expiration: int,
    in_progress_expiration: int | None,
    attempt: int | None,
    max_attempts: int | None,
    index: str | None,
) -> dict[str, Any] | None:
    """The record of a job's first run, if it has none: the item written (the lock is taken), or
    None when a record is there (the caller's UpdateItem decides)."""
    stamp = now_iso()
    item: dict[str, Any] = {
        "id": {"S": job_id},
        "job": {"S": job},
        "state": {"S": JobState.RUNNING.value},
        "started_at": {"S": stamp},
        "updated_at": {"S": stamp},
        "created_at": {"S": stamp},
        "expiration": {"N": str(expiration)},
        "attempts": {"N": str(attempt if attempt is not None else 1)},
    }
    if in_progress_expiration is not None:
        item["in_progress_expiration"] = {"N": str(in_progress_expiration)}
    if max_attempts is not None:
        item["max_attempts"] = {"N": str(max_attempts)}
    if index and JobState.RUNNING in INDEXED_STATES[JobIndex(index)]:
        item["ix"], item["ix_at"] = {"S": index_key(job, JobState.RUNNING)}, {"S": stamp}
    try:
        client.put_item(TableName=table, Item=item, ConditionExpression="attribute_not_exists(id)")
    except client.exceptions.ConditionalCheckFailedException:
        return None
    return item


def succeed_created(
    client: Any,
    table: str,
    created: dict[str, Any],
    result_json: str,
    *,
    lock: int,
    progress: tuple[float, str | None] | None = None,
    index: str | None = None,
) -> bool:
    """running -> succeeded for a record this run created (`created`, as `acquire` returned it): the
    whole record in one PutItem that lands only while the record still carries this run's lock, so
    nothing another writer could have added is lost (a takeover changes the lock; the run's own
    progress comes back with `progress`). The same write units as `succeed`'s UpdateItem, a much
    shorter request. Returns whether it landed."""
    stamp = now_iso()
    job = created["job"]["S"]
    item = {k: v for k, v in created.items() if k not in ("in_progress_expiration", "ix", "ix_at")}
    item["state"] = {"S": JobState.SUCCEEDED.value}
    item["result"] = {"S": stored_result(result_json)}
    item["finished_at"] = {"S": stamp}
    if progress is not None:
        item["progress"] = {"N": repr(float(progress[0]))}
        if progress[1] is not None:
            item["progress_message"] = {"S": progress[1][:MAX_ERROR_CHARS]}
    if index and JobState.SUCCEEDED in INDEXED_STATES[JobIndex(index)]:
        item["ix"], item["ix_at"] = {"S": index_key(job, JobState.SUCCEEDED)}, {"S": stamp}
    try:
        client.put_item(
            TableName=table,
            Item=item,
            ConditionExpression="in_progress_expiration = :lock",
            ExpressionAttributeValues={":lock": {"N": str(lock)}},
        )
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def stored_result(result_json: str) -> str:
    """The result as stored: a result above 32 KB is replaced by a note."""
    size = len(result_json.encode())
    if size > MAX_RESULT_BYTES:
        return f'{{"omitted": "result of {size} bytes > {MAX_RESULT_BYTES}"}}'
    return result_json


def succeed(
    client: Any,
    table: str,
    job_id: str,
    result_json: str,
    *,
    lock: int | None = None,
    tally: Tally | None = None,
    job: str = "",
    index: str | None = None,
) -> bool:
    """running -> succeeded, with the result (JSON text; a result above 32 KB is replaced by a note).

    Kept short on purpose (every successful job makes one): the record keeps the expiry its acquire
    wrote (the TTL from the run's start, minutes from its end), and `finished_at` is its last change
    (`status_from_item` reads `updated_at` as the later of the two).

    `lock` is the in-progress expiry the run's acquire wrote: it identifies that run's lock. With it,
    the write only lands while the record still carries that lock (expired or not): a run that took
    the lock over since is not overwritten (it records its own outcome), and a second write of the
    same success changes nothing. With `tally` (a workflow member), the success is counted in the
    workflow's item in the same transaction. Returns whether the write landed.
    """
    stamp = now_iso()
    values: dict[str, Any] = {
        ":succeeded": {"S": JobState.SUCCEEDED},
        ":result": {"S": stored_result(result_json)},
        ":now_iso": {"S": stamp},
    }
    condition = None
    if lock is not None:
        values[":lock"] = {"N": str(lock)}
        condition = "in_progress_expiration = :lock"
    sets = ["#state = :succeeded", "#result = :result", "finished_at = :now_iso"]
    remove = ["in_progress_expiration"]
    _index(index, job, JobState.SUCCEEDED, sets, remove, values)  # `job`: the index key needs it
    return _apply(
        client,
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition=condition,
        names={"#state": "state", "#result": "result"},
        values=values,
        tally=tally,
        outcome=JobState.SUCCEEDED,
    )


def fail(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    state: JobState,
    error: dict[str, str],
    *,
    release: bool,
    ttl_seconds: int,
    lock: int | None = None,
    over_retrying: bool = False,
    tally: Tally | None = None,
    index: str | None = None,
) -> None:
    """running -> retrying/dead (`release=True`: the run that held the lock failed; with `lock`, only
    while the record still carries that run's lock), or (none) -> dead (`release=False`: a message that
    could never run, e.g. an invalid payload, or a copy past its last attempt).

    Never overwrites a success (a bad re-send of a finished job id is dead-lettered on its own), a live
    lock or a record another delivery is retrying: marking without releasing only touches no record, a
    dead one, or a `running` one whose lock has expired. If the condition fails the record moved on:
    not ours to change. With `tally` (a workflow member), a move to `dead` is counted in the
    workflow's item in the same transaction.
    """
    if state not in (JobState.RETRYING, JobState.DEAD):
        raise LambdaJobsError(f"fail() moves a job to retrying or dead, not {state}")
    stamp = now_iso()
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
        ":error": {"M": {"type": {"S": error["type"]}, "message": {"S": error["message"]}}},
        ":now_iso": {"S": stamp},
    }
    if state is JobState.DEAD:
        sets.append("finished_at = :now_iso")
    remove = ["in_progress_expiration"]
    _index(index, job, state, sets, remove, values)
    values[":running"] = {"S": JobState.RUNNING}
    if release:
        condition = "#state = :running"
        if lock is not None:
            condition += " AND in_progress_expiration = :lock"
            values[":lock"] = {"N": str(lock)}
    else:
        # A job that never ran still needs an expiry.
        sets.append("expiration = if_not_exists(expiration, :exp)")
        values[":exp"] = {"N": str(int(time.time()) + ttl_seconds)}
        values[":dead"] = {"S": JobState.DEAD}
        values[":now_ms"] = {"N": str(int(time.time() * 1000))}
        condition = (
            "attribute_not_exists(id) OR #state = :dead OR "
            "(#state = :running AND in_progress_expiration < :now_ms)"
        )
        if over_retrying:  # the message past its last attempt was the one retrying, or waiting
            condition += " OR #state IN (:retrying, :waiting)"
            values[":retrying"] = {"S": JobState.RETRYING}
            values[":waiting"] = {"S": JobState.WAITING}
    _apply(
        client,
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition=condition,
        names={"#state": "state", "#error": "error"},
        values=values,
        tally=tally if state is JobState.DEAD else None,
        outcome=JobState.DEAD,
    )


def wait(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    until_iso: str,
    *,
    ttl_seconds: int,
    index: str | None = None,
) -> None:
    """(none)/retrying/waiting/dead -> waiting: the job's rate-limit slot is at `until_iso`; it has not
    run for this attempt (dead: a redriven job). Never touches a running or succeeded record."""
    values: dict[str, Any] = {
        ":job": {"S": job},
        ":waiting": {"S": JobState.WAITING},
        ":retrying": {"S": JobState.RETRYING},
        ":dead": {"S": JobState.DEAD},
        ":until": {"S": until_iso},
        ":now_iso": {"S": now_iso()},
        ":exp": {"N": str(int(time.time()) + ttl_seconds)},
    }
    sets = [
        "job = :job",
        "#state = :waiting",
        "waiting_until = :until",
        "updated_at = :now_iso",
        "created_at = if_not_exists(created_at, :now_iso)",
        "expiration = :exp",
    ]
    remove = ["finished_at"]
    _index(index, job, JobState.WAITING, sets, remove, values)
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(
            TableName=table,
            Key={"id": {"S": job_id}},
            UpdateExpression="SET " + ", ".join(sets) + " REMOVE " + ", ".join(remove),
            # a workflow member counted dead waits only when redriven (the worker checks before)
            ConditionExpression=(
                "attribute_not_exists(id) OR #state IN (:retrying, :waiting) "
                "OR (#state = :dead AND attribute_not_exists(wf_counted))"
            ),
            ExpressionAttributeNames={"#state": "state"},
            ExpressionAttributeValues=values,
        )


def report_progress(client: Any, table: str, job_id: str, percent: float, message: str | None) -> None:
    """A running job's progress (not a state change: one UpdateItem of progress fields)."""
    sets = ["progress = :p", "updated_at = :now_iso"]
    values: dict[str, Any] = {":p": {"N": repr(float(percent))}, ":now_iso": {"S": now_iso()}}
    if message is not None:
        sets.append("progress_message = :m")
        values[":m"] = {"S": message[:MAX_ERROR_CHARS]}
    client.update_item(
        TableName=table,
        Key={"id": {"S": job_id}},
        UpdateExpression="SET " + ", ".join(sets),
        ExpressionAttributeValues=values,
    )


#: The error a reconciled record reads with: SQS, not the worker, dead-lettered the message.
REDRIVEN_ERROR = {
    "type": "MaxReceiveCountExceeded",
    "message": "the job's last attempt ended without its outcome recorded (the invocation crashed or "
    "timed out, or could not write the record); its message is in the DLQ, or goes there on its "
    "next receive",
}


def reconcile(
    state: JobState,
    attempts: int,
    max_attempts: int | None,
    in_progress_expiration_ms: int | None,
    now_ms: int,
) -> JobState:
    """The state a record really is in, for readers. A `running` record whose lock expired (its
    invocation is over: it crashed or timed out, nothing released it) with every attempt used can
    never run again: SQS dead-letters its message on the next receive. It reads `dead`
    (`REDRIVEN_ERROR`), without a write. Everything else reads as written."""
    if (
        state is JobState.RUNNING
        and max_attempts is not None
        and attempts >= max_attempts
        and in_progress_expiration_ms is not None
        and in_progress_expiration_ms < now_ms
    ):
        return JobState.DEAD
    return state
