"""The job lifecycle's transitions other than a job's first run and its success: an acquire that finds
a record there (`take`, for `lifecycle.acquire`), a success written over a record this run did not
create (`succeed`: a retry's, a workflow member's, a durable job's), a failure (`fail`), a run giving
its lock back (`unstart`), waiting for a rate-limit slot (`wait`), progress, a durable job's
checkpoints, parking and signals, cancels, and a debounced enqueue's `superseded`.

Split out of `lambdajobs.runtime.lifecycle` (which keeps `acquire`, a created record's success
`succeed_created`, and the helpers every write shares): a worker's cold start compiles only those, and
these load the first time one is used. Each transition here (`lifecycle.TRANSITIONS`) is importable from
`lambdajobs.runtime.lifecycle`, as before (`lifecycle.fail`): that module loads this one on first use
of one of them. The shared helpers are called through `lifecycle` (`lifecycle._apply`, ...), so what
replaces them there (a test's mutation) applies here too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import lifecycle
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.errors import LambdaJobsError, RecordHeldError
from lambdajobs.runtime.job_record import (
    FINAL_STATES,
    NAMES,
    PARKED_STATES,
    STEP_PREFIX,
    Condition,
    JobRecord,
    JobState,
    holds_lock_condition,
)
from lambdajobs.runtime.lifecycle import (
    MAX_ERROR_CHARS,
    PARKED_FIELDS,
    CancelRequested,
    SignalArrived,
    stored_result,
)

if TYPE_CHECKING:  # workflow members only: not loaded at a cold start
    from lambdajobs.runtime.workflow_item import Tally


def take(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    now: float,
    expiration: int,
    in_progress_expiration: int | None,
    attempt: int | None,
    max_attempts: int | None,
    redriven: bool,
    index: str | None,
    resumed: bool,
    about: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """`lifecycle.acquire` where a record is there (its `fresh` PutItem did not land, or it made none):
    one UpdateItem under `JobRecord.may_start`'s condition; the record as written (its new image).

    Raises:
        RecordHeldError: the record refused it (with the record's item).
    """
    allowed = JobRecord.may_start_condition(now, attempt, redriven)
    values: dict[str, Any] = {
        **allowed.values,
        ":job": job,
        ":now_iso": lifecycle.now_iso(),
        ":exp": expiration,
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
        values[":ipe"] = in_progress_expiration
        sets.append("in_progress_expiration = :ipe")
    if max_attempts is not None:  # for `reconcile`: no extra write, the same update
        values[":max"] = max_attempts
        sets.append("max_attempts = :max")
    adds = []
    if attempt is not None:
        values[":attempt"] = attempt
        sets.append("attempts = :attempt")
    else:
        values[":one"] = 1
        adds.append("attempts :one")
    remove = ["finished_at", "waiting_until", *PARKED_FIELDS]
    if not resumed:
        remove += ["progress", "progress_message"]
    lifecycle._index(index, job, JobState.RUNNING, sets, remove, values)
    names = dict(NAMES)
    _set_each(about, sets, names, values)
    request = codec.update(
        table,
        job_id,
        sets=sets,
        adds=adds,
        remove=remove,
        condition=allowed.expression,
        values=values,
        names=names,
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
        ReturnValues="ALL_NEW",
    )
    try:
        written = client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException as exc:
        raise RecordHeldError(exc.response.get("Item")) from exc
    return dict(written.get("Attributes") or {})


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
    the write only lands while the record still carries that lock (expired or not;
    `JobRecord.holds_lock`): a run that took the lock over since is not overwritten (it records its
    own outcome), and a second write of the same success changes nothing. With `tally` (a workflow
    member), the success is counted in the workflow's item in the same transaction. Returns whether
    the write landed.
    """
    values: dict[str, Any] = {
        ":succeeded": JobState.SUCCEEDED.value,
        ":result": stored_result(result_json),
        ":now_iso": lifecycle.now_iso(),
    }
    condition = None
    if lock is not None:
        held = holds_lock_condition(lock)
        values.update(held.values)
        condition = held.expression
    sets = ["#state = :succeeded", "#result = :result", "finished_at = :now_iso"]
    remove = ["in_progress_expiration"]
    lifecycle._index(index, job, JobState.SUCCEEDED, sets, remove, values)  # `job`: the index key needs it
    return lifecycle._apply(
        client,
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition=condition,
        names={**NAMES, "#result": "result"},
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
    details: Mapping[str, Any] | None = None,
) -> None:
    """running -> retrying/dead (`release=True`: the run that held the lock failed; with `lock`, only
    while the record still carries that run's lock: `JobRecord.may_release`), or (none) -> dead
    (`release=False`: a message that could never run, e.g. an invalid payload, or a copy past its last
    attempt: `JobRecord.may_mark_dead`).

    Never overwrites a success (a bad re-send of a finished job id is dead-lettered on its own), a live
    lock or a record another delivery is retrying: marking without releasing only touches no record, a
    dead one, or a `running` one whose lock has expired. If the condition fails the record moved on:
    not ours to change. With `tally` (a workflow member), a move to `dead` is counted in the
    workflow's item in the same transaction.

    `details`: what the failure keeps beside its error, in the same write (`payload`, `payload_cut`,
    `traceback`, `history`: `JobRecord`'s fields of those names, as the run that failed built them).
    """
    if state not in (JobState.RETRYING, JobState.DEAD):
        raise LambdaJobsError(f"fail() moves a job to retrying or dead, not {state}")
    sets = [
        "job = :job",
        "#state = :state",
        "#error = :error",
        "updated_at = :now_iso",
        "created_at = if_not_exists(created_at, :now_iso)",
    ]
    values: dict[str, Any] = {
        ":job": job,
        ":state": state.value,
        ":error": {"type": error["type"], "message": error["message"]},
        ":now_iso": lifecycle.now_iso(),
    }
    if state is JobState.DEAD:
        sets.append("finished_at = :now_iso")
    remove = ["in_progress_expiration"]
    lifecycle._index(index, job, state, sets, remove, values)
    if release:
        allowed = JobRecord.may_release_condition(lock)
    else:
        # A job that never ran still needs an expiry.
        sets.append("expiration = if_not_exists(expiration, :exp)")
        values[":exp"] = int(time.time()) + ttl_seconds
        allowed = JobRecord.may_mark_dead_condition(over_retrying, int(time.time() * 1000))
    names = {**NAMES, "#error": "error"}
    _set_each(details, sets, names, values)
    lifecycle._apply(
        client,
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition=allowed.expression,
        names=names,
        values={**values, **allowed.values},
        tally=tally if state is JobState.DEAD else None,
        outcome=JobState.DEAD,
    )


def unstart(
    client: Any, table: str, job_id: str, *, lock: int | None, attempt: int, index: str | None = None
) -> bool:
    """running -> waiting: the run that took the lock gives it back before the job ran (see
    `RunNotStarted`), using no attempt: `attempts` goes back to `attempt - 1` (removed at 0), so the
    message's next copy, attempt `attempt` again, may start it. Only while the record still carries
    this run's lock (`JobRecord.may_release`; `lock` None: a lock without a deadline, while running).
    Returns whether it landed (False: the record moved on, not ours to change)."""
    values: dict[str, Any] = {":waiting": JobState.WAITING.value, ":now_iso": lifecycle.now_iso()}
    sets = ["#state = :waiting", "updated_at = :now_iso"]
    remove = ["in_progress_expiration"]
    if attempt > 1:
        values[":attempts"] = attempt - 1
        sets.append("attempts = :attempts")
    else:
        remove.append("attempts")
    lifecycle._index(index, "", JobState.WAITING, sets, remove, values)  # no mode indexes `waiting`
    allowed = JobRecord.may_release_condition(lock)
    request = codec.update(
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition=allowed.expression,
        values={**values, **allowed.values},
        names=NAMES,
    )
    return lifecycle._landed(client, request)


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
    run for this attempt (dead: a redriven job). Never touches a running or succeeded record
    (`JobRecord.may_wait`)."""
    # a workflow member counted dead waits only when redriven (the worker checks before)
    allowed = JobRecord.may_wait_condition()
    values: dict[str, Any] = {
        **allowed.values,
        ":job": job,
        ":until": until_iso,
        ":now_iso": lifecycle.now_iso(),
        ":exp": int(time.time()) + ttl_seconds,
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
    lifecycle._index(index, job, JobState.WAITING, sets, remove, values)
    request = codec.update(
        table, job_id, sets=sets, remove=remove, condition=allowed.expression, values=values, names=NAMES
    )
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(**request)


def report_progress(client: Any, table: str, job_id: str, percent: float, message: str | None) -> None:
    """A running job's progress (not a state change: one UpdateItem of progress fields), refused once
    a cancel is recorded (the write is the job's free check for one).

    Raises:
        CancelRequested: the job was cancelled (nothing was written).
    """
    sets = ["progress = :p", "updated_at = :now_iso"]
    values: dict[str, Any] = {":p": float(percent), ":now_iso": lifecycle.now_iso()}
    if message is not None:
        sets.append("progress_message = :m")
        values[":m"] = message[:MAX_ERROR_CHARS]
    request = codec.update(
        table, job_id, sets=sets, values=values, condition="attribute_not_exists(cancel_requested)"
    )
    if not lifecycle._landed(client, request):
        raise CancelRequested(job_id)


def reconcile(
    state: JobState,
    attempts: int,
    max_attempts: int | None,
    in_progress_expiration_ms: int | None,
    now_ms: int,
) -> JobState:
    """The state a record really is in, for readers (`JobRecord.reconciled_state`). A `running`
    record whose lock expired (its invocation is over: it crashed or timed out, nothing released it)
    with every attempt used can never run again: SQS dead-letters its message on the next receive. It
    reads `dead` (`REDRIVEN_ERROR`), without a write. Everything else reads as written."""
    record = JobRecord(
        job_id="",
        state=state,
        attempts=attempts,
        max_attempts=max_attempts,
        in_progress_expiration=in_progress_expiration_ms,
    )
    return JobState.DEAD if record.lost_last_attempt(now_ms) else state


# -- durable jobs (`lambdajobs.runtime.durable`) ----------------------------------------------------


def checkpoint(
    client: Any, table: str, job_id: str, *, lock: int | None, name: str, value: dict[str, Any]
) -> bool:
    """A durable job's step (or sleep, or signal wait) is done: its checkpoint (`step:<name>`) in the
    record, one UpdateItem, only while the record still carries this run's lock (a run that lost its
    lock writes nothing: the run that took it over replays from what is checkpointed). Returns whether
    it landed."""
    sets = ["#step = :step", "updated_at = :now_iso"]
    values: dict[str, Any] = {":step": value, ":now_iso": lifecycle.now_iso()}
    allowed = JobRecord.may_release_condition(lock)
    request = codec.update(
        table,
        job_id,
        sets=sets,
        condition=f"({allowed.expression}) AND attribute_not_exists(cancel_requested)",
        values={**values, **allowed.values},
        names={**NAMES, "#step": STEP_PREFIX + name},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    try:
        client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException as exc:
        old = JobRecord.from_item(exc.response.get("Item") or codec.key(job_id))
        if old.cancel_requested is not None and old.may_release(lock):
            raise CancelRequested(job_id) from exc
        return False
    return True


def suspend(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    state: JobState,
    *,
    lock: int | None,
    wake_ms: int,
    ttl_seconds: int,
    signal: str | None = None,
    resume_body: str | None = None,
    resume_queue: str | None = None,
    resume_group: str | None = None,
    index: str | None = None,
) -> bool:
    """running -> sleeping/waiting_signal: a durable job parks until `wake_ms` (epoch ms), its lock
    released and its attempt kept (a copy of its message, or a one-time schedule, is due then: the
    caller sends it first). The record's expiry is renewed to the record TTL after the wake-up, so a
    parked job never expires. Only while the record carries this run's lock; for a signal wait
    (`signal`), only while that signal has not arrived. Returns whether it landed.

    Raises:
        SignalArrived: the signal is there already (the caller wakes the job at once instead).
    """
    if state not in PARKED_STATES:
        raise LambdaJobsError(f"suspend() parks a job as sleeping or waiting_signal, not {state}")
    sets = [
        "#state = :state",
        "wake_at = :wake",
        "updated_at = :now_iso",
        "expiration = :exp",
    ]
    values: dict[str, Any] = {
        ":state": state.value,
        ":wake": wake_ms,
        ":now_iso": lifecycle.now_iso(),
        ":exp": wake_ms // 1000 + ttl_seconds,
        ":one": 1,
    }
    remove = ["in_progress_expiration", "waiting_for", "resume_body", "resume_queue", "resume_group"]
    allowed = JobRecord.may_park_condition(lock, signal)
    if signal is not None:
        sets += ["waiting_for = :signal", "resume_body = :body", "resume_queue = :queue"]
        remove = ["in_progress_expiration", "resume_group"]
        values.update({":signal": signal, ":body": resume_body or "", ":queue": resume_queue or ""})
        if resume_group:  # the message's fair-queue tenant, for the signal's wake-up
            sets.append("resume_group = :group")
            remove.remove("resume_group")
            values[":group"] = resume_group
    lifecycle._index(index, job, state, sets, remove, values)
    request = codec.update(
        table,
        job_id,
        sets=sets,
        adds=["suspensions :one"],
        remove=remove,
        condition=allowed.expression,
        values={**values, **allowed.values},
        names={**NAMES, **allowed.names},
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    try:
        client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException as exc:
        old = JobRecord.from_item(exc.response.get("Item") or codec.key(job_id))
        if signal is not None and old.may_release(lock) and not old.may_park(lock, signal):
            raise SignalArrived(signal) from exc
        return False
    return True


def deliver_signal(
    client: Any, table: str, job_id: str, name: str, data_json: str, *, ttl_seconds: int
) -> JobRecord:
    """Keep a signal for a job (`signal:<name>`, its data as JSON text) until the job waits for it: on
    its record, which it creates if the job has not run yet (nothing is written at enqueue), with the
    record TTL. The same signal sent again with the same data changes nothing. Returns the record as
    written.

    Raises:
        SignalRefusedError: the job has finished (succeeded or dead), or already has this signal with
            other data.
    """
    from lambdajobs.runtime.errors import SignalRefusedError

    allowed = JobRecord.may_take_signal_condition(name, data_json)
    values: dict[str, Any] = {
        **allowed.values,
        ":now_iso": lifecycle.now_iso(),
        ":exp": int(time.time()) + ttl_seconds,
    }
    request = codec.update(
        table,
        job_id,
        sets=[
            "#signal = :signal_data",
            "expiration = if_not_exists(expiration, :exp)",
            "signaled_at = :now_iso",
        ],
        condition=allowed.expression,
        values=values,
        names={**NAMES, **allowed.names},
        ReturnValues="ALL_NEW",
        ReturnValuesOnConditionCheckFailure="ALL_OLD",
    )
    try:
        written = client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException as exc:
        old = JobRecord.from_item(exc.response.get("Item") or codec.key(job_id))
        if old.known_state in FINAL_STATES:
            raise SignalRefusedError(
                f"job '{job_id}' has finished ({old.known_state.value}); signal '{name}' is refused: a "
                "finished job waits for nothing."
            ) from exc
        raise SignalRefusedError(
            f"job '{job_id}' already has signal '{name}' with other data; a signal is delivered once: "
            "send it under another name."
        ) from exc
    return JobRecord.from_item(written["Attributes"])


def wake(client: Any, table: str, job_id: str, name: str) -> int | None:
    """A job in `waiting_signal` for `name` is due now: the signal came. Returns its wake-up (epoch
    ms), or None: it is not waiting for that signal (it woke meanwhile, or never waited for it)."""
    now_ms = int(time.time() * 1000)
    allowed = JobRecord.waits_for_signal_condition(name)
    request = codec.update(
        table,
        job_id,
        sets=["wake_at = :now_ms", "updated_at = :now_iso"],
        condition=allowed.expression,
        values={**allowed.values, ":now_ms": now_ms, ":now_iso": lifecycle.now_iso()},
        names=NAMES,
    )
    return now_ms if lifecycle._landed(client, request) else None


# -- cancellation (`lambdajobs.runtime.cancellation`) -------------------------------------------------------


def _cancel_write(
    job_id: str,
    job: str,
    *,
    table: str,
    condition: Condition,
    ttl_seconds: int,
    index: str | None,
    reason: str,
) -> dict[str, Any]:
    """The clauses of a write that ends a job `cancelled` (see `cancel` and `settle_cancelled`)."""
    sets = [
        "#state = :cancelled",
        "cancel_requested = if_not_exists(cancel_requested, :now_iso)",
        "finished_at = :now_iso",
        "updated_at = :now_iso",
        "created_at = if_not_exists(created_at, :now_iso)",
        "expiration = :exp",
        "#error = :error",
    ]
    values: dict[str, Any] = {
        **condition.values,
        ":cancelled": JobState.CANCELLED.value,
        ":now_iso": lifecycle.now_iso(),
        ":exp": int(time.time()) + ttl_seconds,
        ":error": {"type": "JobCancelled", "message": reason[:MAX_ERROR_CHARS]},
    }
    if job:
        sets.append("job = if_not_exists(job, :job)")
        values[":job"] = job
    remove = ["in_progress_expiration", *PARKED_FIELDS]
    lifecycle._index(index, job, JobState.CANCELLED, sets, remove, values)
    return {
        "sets": sets,
        "remove": remove,
        "condition": condition.expression,
        "names": {**NAMES, "#error": "error", **condition.names},
        "values": values,
    }


def cancel(
    client: Any,
    table: str,
    job_id: str,
    *,
    job: str = "",
    ttl_seconds: int,
    index: str | None = None,
    reason: str = "cancelled",
) -> tuple[str, JobRecord]:
    """Record a cancel of job `job_id`. Returns what happened and the record as it was before:

    - `"cancelled"`: the job ends `cancelled` now (`JobRecord.may_cancel`: it had not run, was
      retrying, waiting or parked, or its run's invocation is over); a record is created for an id
      with none (nothing is written at enqueue), kept for the record TTL, and the message is dropped
      when it arrives;
    - `"requested"`: a live run holds it: it is asked to stop (`cancel_requested`) and does at its
      next check; no copy starts it again;
    - `"finished"`: it had finished (succeeded, dead, cancelled or superseded): nothing changed.

    One conditional UpdateItem (two for a running job); tried again if the record moved between.
    """
    for _ in range(5):
        now_ms = int(time.time() * 1000)
        write = _cancel_write(
            job_id,
            job,
            table=table,
            condition=JobRecord.may_cancel_condition(now_ms),
            ttl_seconds=ttl_seconds,
            index=index,
            reason=reason,
        )
        request = codec.update(
            table, job_id, **write, ReturnValues="ALL_OLD", ReturnValuesOnConditionCheckFailure="ALL_OLD"
        )
        try:
            written = client.update_item(**request)
            old = written.get("Attributes")
            return "cancelled", JobRecord.from_item(old) if old else JobRecord.missing(job_id)
        except client.exceptions.ConditionalCheckFailedException as exc:
            record = JobRecord.from_item(exc.response.get("Item") or codec.key(job_id))
        newer_state = record.exists and record.state is not None and record.known_state is None
        if record.known_state in FINAL_STATES or newer_state:  # (a newer version's state: left alone)
            return "finished", record
        if record.lock_live(now_ms):
            if record.cancel_requested is not None:
                return "requested", record
            asked = JobRecord.may_ask_cancel_condition(now_ms)
            request = codec.update(
                table,
                job_id,
                sets=["cancel_requested = :now_iso", "updated_at = :now_iso"],
                condition=asked.expression,
                values={**asked.values, ":now_iso": lifecycle.now_iso()},
                names=NAMES,
            )
            if lifecycle._landed(client, request):
                return "requested", record
    raise RecordHeldError(None)


def settle_cancelled(
    client: Any,
    table: str,
    job_id: str,
    job: str,
    *,
    lock: int | None,
    ttl_seconds: int,
    tally: Tally | None = None,
    index: str | None = None,
) -> bool:
    """A cancelled job ends `cancelled`: the run that holds `lock` stopped at a check (`lock` given:
    only while the record carries it), or a copy found a cancel recorded on a record that has not
    finished (`lock` None: `JobRecord.may_cancel`). A workflow member is counted dead in its
    workflow (its stage goes on without it). Returns whether it landed."""
    now_ms = int(time.time() * 1000)
    if lock is not None:
        condition = JobRecord.may_release_condition(lock)
    else:  # (a record cancelled already: only a workflow member's count is left to make)
        cancellable = JobRecord.may_cancel_condition(now_ms)
        condition = Condition(
            f"{cancellable.expression} OR #state = :was_cancelled",
            {**cancellable.values, ":was_cancelled": JobState.CANCELLED.value},
        )
    write = _cancel_write(
        job_id,
        job,
        table=table,
        condition=condition,
        ttl_seconds=ttl_seconds,
        index=index,
        reason="cancelled" if lock is None else "cancelled while it ran: it stopped at its next check",
    )
    return lifecycle._apply(client, table, job_id, **write, tally=tally, outcome=JobState.DEAD)


def supersede(
    client: Any, table: str, job_id: str, job: str, *, ttl_seconds: int, index: str | None = None
) -> bool:
    """(none) -> superseded: a debounced enqueue that a later enqueue of its key replaced never runs.
    Written only where the job has no record, or one without a state (signals kept): never over a
    run's. Returns whether it landed."""
    sets = [
        "job = :job",
        "#state = :superseded",
        "created_at = if_not_exists(created_at, :now_iso)",
        "finished_at = :now_iso",
        "updated_at = :now_iso",
        "expiration = if_not_exists(expiration, :exp)",
    ]
    values: dict[str, Any] = {
        ":job": job,
        ":superseded": JobState.SUPERSEDED.value,
        ":now_iso": lifecycle.now_iso(),
        ":exp": int(time.time()) + ttl_seconds,
    }
    remove: list[str] = []
    lifecycle._index(index, job, JobState.SUPERSEDED, sets, remove, values)
    request = codec.update(
        table,
        job_id,
        sets=sets,
        remove=remove,
        condition="attribute_not_exists(id) OR attribute_not_exists(#state)",
        values=values,
        names=NAMES,
    )
    return lifecycle._landed(client, request)


def _set_each(
    attributes: Mapping[str, Any] | None, sets: list[str], names: dict[str, str], values: dict[str, Any]
) -> None:
    """SET clauses for each attribute of `attributes` that has a value (through `#names`: `level`, say,
    is a DynamoDB reserved word): what a write records beside the state, in the same request."""
    for name, value in (attributes or {}).items():
        if value is not None:
            sets.append(f"#a_{name} = :a_{name}")
            names[f"#a_{name}"] = name
            values[f":a_{name}"] = value
