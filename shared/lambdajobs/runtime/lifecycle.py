"""The job lifecycle: the states a job record can be in, and every transition between them.

This module is the only writer of a job's state. The worker and the Powertools persistence layer
(`JobRecordStore`) call these functions; nothing else sets `state`.

    (none) --acquire--> running --succeed--> succeeded
                           |
                           +--fail(after_failure)--> retrying --acquire--> running ...
                           |                      `-> dead (PermanentError, or the last attempt)
                           +--unstart--> waiting   (the run gave its lock back before the job ran)
    (none) --reject--> dead         (a message that can never run: invalid payload)
    (none)/retrying --wait--> waiting --acquire--> running   (its rate limit's slot is ahead)
    running --suspend--> sleeping | waiting_signal --acquire (wake-up due)--> running   (durable jobs)

Each transition is one conditional UpdateItem on the job's item (keyed on the job id), so concurrent
deliveries of one job cannot both hold it: at-least-once delivery, one run at a time. The record and
its rules (each condition beside the predicate it mirrors) are `lambdajobs.runtime.job_record`'s;
requests are built with `lambdajobs.runtime.table`, so nothing here writes DynamoDB's wire format.

Here: `acquire` (its first run's PutItem; where a record is there, its UpdateItem is
`transitions.take`'s) and the success of a run that created its record (`succeed_created`). The helpers
the other writes share (`_apply`, `_index`, `_landed`: `SHARED`) live in
`lambdajobs.runtime.record_writes`, and the other transitions (`succeed` over a record the run did not
create, `fail`, `unstart`, `wait`, progress, a durable job's, cancels, `supersede`: `TRANSITIONS`) live
in `lambdajobs.runtime.transitions` and are importable from here too: loaded on first use, so a
worker's cold start whose first record succeeds does not compile them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import lazy
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.errors import PermanentError
from lambdajobs.runtime.job_record import (
    FINAL_STATES,
    INDEXED_STATES,
    NO_RECORD,
    JobIndex,
    JobState,
    holds_lock_condition,
    index_key,
    new_item,
    with_changes,
)

if TYPE_CHECKING:  # loaded on first use: not at a cold start whose first record succeeds
    from lambdajobs.runtime.record_writes import _apply as _apply
    from lambdajobs.runtime.record_writes import _index as _index
    from lambdajobs.runtime.record_writes import _landed as _landed
    from lambdajobs.runtime.transitions import cancel as cancel
    from lambdajobs.runtime.transitions import checkpoint as checkpoint
    from lambdajobs.runtime.transitions import deliver_signal as deliver_signal
    from lambdajobs.runtime.transitions import fail as fail
    from lambdajobs.runtime.transitions import reconcile as reconcile
    from lambdajobs.runtime.transitions import report_progress as report_progress
    from lambdajobs.runtime.transitions import settle_cancelled as settle_cancelled
    from lambdajobs.runtime.transitions import succeed as succeed
    from lambdajobs.runtime.transitions import supersede as supersede
    from lambdajobs.runtime.transitions import suspend as suspend
    from lambdajobs.runtime.transitions import unstart as unstart
    from lambdajobs.runtime.transitions import wait as wait
    from lambdajobs.runtime.transitions import wake as wake

__all__ = [
    "FINAL_STATES",
    "INDEXED_STATES",
    "MAX_ERROR_CHARS",
    "MAX_RESULT_BYTES",
    "REDRIVEN_ERROR",
    "CancelRequested",
    "JobIndex",
    "JobState",
    "RunNotStarted",
    "acquire",
    "after_failure",
    "cancel",
    "checkpoint",
    "deliver_signal",
    "fail",
    "index_key",
    "now_iso",
    "reconcile",
    "report_progress",
    "settle_cancelled",
    "stored_result",
    "succeed",
    "succeed_created",
    "supersede",
    "suspend",
    "unstart",
    "wait",
    "wake",
]


class RunNotStarted(Exception):  # not an `...Error`: a run that gives its lock back has not failed
    """Raised inside the idempotent function before the job function is called: the run gives its
    lock back and uses no attempt (`JobRecordStore.delete_record` calls `unstart`, not `fail`)."""


#: DynamoDB items are at most 400 KB; a job result is meant to be a small summary.
MAX_RESULT_BYTES = 32 * 1024
MAX_ERROR_CHARS = 1000


def after_failure(exc: BaseException, attempt: int, max_attempts: int) -> JobState:
    """The single decision between retry and dead: `dead` for a `PermanentError` or a failure on the
    last attempt (SQS would dead-letter the next receive anyway), else `retrying`."""
    if isinstance(exc, PermanentError) or attempt >= max_attempts:
        return JobState.DEAD
    return JobState.RETRYING


def now_iso() -> str:
    """Now, as records write times: RFC 3339 in UTC, to the millisecond (`2026-11-29T12:00:00.250Z`).

    What `datetime.now(UTC).isoformat(timespec="milliseconds")` writes (the clock read once, rounded
    to the microsecond as datetime rounds it), with the date and time of the second kept from the
    last call: every job writes two or three of these."""
    global _second
    moment = time.time()
    second = math.floor(moment)
    micros = round((moment - second) * 1_000_000)
    if micros >= 1_000_000:
        second, micros = second + 1, micros - 1_000_000
    cached = _second
    if cached[0] != second:
        cached = _second = (second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
    return f"{cached[1]}.{micros // 1000:03d}Z"


#: The second `now_iso` wrote last, and its date and time.
_second: tuple[float, str] = (-1.0, "")


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
    resumed: bool = False,
    about: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """pending/retrying/waiting/dead/expired/sleeping/waiting_signal -> running: take the job's lock
    and record the attempt. Returns (the item when it was created here by the `fresh` PutItem, else
    None; the record as written, with a durable job's checkpoints: the UpdateItem's new image, which
    costs no more write units).

    `resumed`: a durable job's copy that continues it (`durable.RESUME`): its progress stays (it carries
    across continuations); any other run starts with none.

    `about`: what the record keeps of the message, written in the same request (`enqueued_at`,
    `level`, `tenant`, `workflow`: `JobRecord`'s fields of those names; None values are left out).

    `fresh`: the job most likely has no record yet (a message's first attempt): first one PutItem
    that only lands on no record (the same write units; a much shorter request, which on moto is
    several times cheaper), then, if a record is there, the UpdateItem below.

    `attempts` becomes the worker's attempt number (earlier copies' attempts plus this message's
    receive count), so a receive that did not run the job (handed back) is not counted, and a message
    redriven from the DLQ starts again at 1. Without `attempt`, the count goes up by one.

    Allowed when (`JobRecord.may_start`): no record yet; the record expired; an earlier attempt
    failed (retrying, or dead and now redriven) or waited; or a running lock whose invocation died (its
    in-progress expiry passed). A dead workflow member whose outcome was counted (`wf_counted`) is
    taken again only by a redriven message (`redriven`: it carries the reason the worker gave it in the
    DLQ): any other copy is a duplicate (a continuer's re-sent stage, SQS's at-least-once), and running
    it again would run a dead job again. And an attempt number runs at most once (with `attempt`, not
    `redriven`): a retrying, waiting or dead record whose `attempts` is `attempt` or more already ran
    it (two copies of one message, both received).

    Raises:
        RecordHeldError: another delivery holds it, it already succeeded, or it refused this attempt
            (with the record's item).
    """
    now = time.time()
    if fresh:
        created = _create(
            client,
            table,
            job_id,
            job,
            now,
            expiration,
            in_progress_expiration,
            attempt,
            max_attempts,
            index,
            about,
        )
        if created is not None:
            return created, created
    import lambdajobs.runtime.transitions as transitions  # a record is there: loaded on first use

    return None, transitions.take(
        client,
        table,
        job_id,
        job,
        now,
        expiration,
        in_progress_expiration,
        attempt,
        max_attempts,
        redriven,
        index,
        resumed,
        about,
    )


#: The attributes of a parked durable job, removed when a run takes it again.
PARKED_FIELDS = ("wake_at", "waiting_for", "resume_body", "resume_queue", "resume_group")


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
    about: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The record of a job's first run, if it has none: the item written (the lock is taken), or
    None when a record is there (the caller's UpdateItem decides)."""
    stamp = now_iso()
    indexed = JobState.RUNNING in INDEXED_STATES[JobIndex(index or JobIndex.OFF)]
    item = new_item(
        job_id,
        job=job,
        state=JobState.RUNNING,
        started_at=stamp,
        updated_at=stamp,
        created_at=stamp,
        expiration=expiration,
        attempts=attempt if attempt is not None else 1,
        in_progress_expiration=in_progress_expiration,
        max_attempts=max_attempts,
        ix=index_key(job, JobState.RUNNING) if indexed else None,
        ix_at=stamp if indexed else None,
        **{k: v for k, v in (about or {}).items() if v is not None},
    )
    try:
        client.put_item(TableName=table, Item=item, ConditionExpression=NO_RECORD.expression)
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
    """running -> succeeded for a record this run created (`created`, the item `acquire` returned):
    the whole record in one PutItem that lands only while the record still carries this run's lock,
    so nothing another writer could have added is lost (a takeover changes the lock; the run's own
    progress comes back with `progress`). The same write units as `succeed`'s UpdateItem, a much
    shorter request. Returns whether it landed."""
    stamp = now_iso()
    indexed = JobState.SUCCEEDED in INDEXED_STATES[JobIndex(index or JobIndex.OFF)]
    job = codec.from_value(created["job"]) if "job" in created else ""
    changes: dict[str, Any] = {
        "state": JobState.SUCCEEDED,
        "result": stored_result(result_json),
        "finished_at": stamp,
        "in_progress_expiration": None,
        "ix": index_key(job, JobState.SUCCEEDED) if indexed else None,
        "ix_at": stamp if indexed else None,
    }
    if progress is not None:
        changes["progress"] = float(progress[0])
        if progress[1] is not None:
            changes["progress_message"] = progress[1][:MAX_ERROR_CHARS]
    # the item as written, changed in place of a decode and an encode of the whole record (it was
    # encoded by `JobRecord.to_item`: `JobRecord.with_changes` keeps its rules)
    done = with_changes(created, changes)
    held = holds_lock_condition(lock)
    try:
        client.put_item(
            TableName=table,
            Item=done,
            ConditionExpression=held.expression,
            ExpressionAttributeValues=codec.encode(held.values),
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


class CancelRequested(Exception):
    """A running job's write (its progress, a checkpoint) found a cancel recorded: the job stops."""


#: The error a reconciled record reads with: SQS, not the worker, dead-lettered the message.
REDRIVEN_ERROR = {
    "type": "MaxReceiveCountExceeded",
    "message": "the job's last attempt ended without its outcome recorded (the invocation crashed or "
    "timed out, or could not write the record); its message is in the DLQ, or goes there on its "
    "next receive",
}


class SignalArrived(Exception):
    """`suspend` for a signal wait found the signal already there (it arrived while the job ran)."""


#: The transitions defined in `lambdajobs.runtime.transitions`, loaded from there on first use
#: (`lifecycle.fail`, `from lambdajobs.runtime.lifecycle import cancel`).
TRANSITIONS = frozenset(
    {
        "cancel",
        "checkpoint",
        "deliver_signal",
        "fail",
        "reconcile",
        "report_progress",
        "settle_cancelled",
        "succeed",
        "supersede",
        "suspend",
        "unstart",
        "wait",
        "wake",
    }
)


#: The helpers the other writes share (the job index's attributes, a conditional UpdateItem, a
#: workflow member's counted write), defined in `lambdajobs.runtime.record_writes`: `lifecycle._apply`
#: is where the transitions and the light mode call them, and where a test replaces them.
SHARED = frozenset({"_apply", "_index", "_landed"})

_transition = lazy.exports(
    __name__,
    {
        **dict.fromkeys(TRANSITIONS, "lambdajobs.runtime.transitions"),
        **dict.fromkeys(SHARED, "lambdajobs.runtime.record_writes"),
    },
)


def __getattr__(name: str) -> Any:
    """A name of `TRANSITIONS` or `SHARED`, imported on first use, then kept as this module's attribute:
    a later use is a plain lookup (`succeed` after a retry, `checkpoint` at each step of a durable job,
    `_apply` in the light mode are on a record's path)."""
    value = globals()[name] = _transition(name)
    return value
