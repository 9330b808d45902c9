"""Light record mode (`@job(record_mode="light")`): no lock, the job's record written once, at the end.

A job in the default mode ("full") takes its record as a lock before it runs (a PutItem, or an
UpdateItem on a later attempt) and writes its outcome into it after: 2 write units per success. A
light job instead:

1. reads its record once, eventually consistent (half a read unit; `read_record`): a job that already
   finished (succeeded, dead as a counted workflow member, cancelled, superseded), a copy of an attempt
   that already ran, or a full-mode run still holding the record (a deploy that switched modes) is not
   run: the same rule, `JobRecord.may_start`, and the same decisions (`gates.duplicate`,
   `gates.lock_held`) as the full mode's acquire;
2. runs the job, with nothing written;
3. writes the record once, with the same attributes a full-mode run leaves (state, attempts,
   result, times, what it keeps of its message: `JobRecord`), so `get_status`, the board and the CLI
   read it alike: a first attempt's success is one conditional PutItem that lands only where there
   is no record (1 write unit up to 1 KB); anything else is one conditional UpdateItem that never
   overwrites a finished record (`JobRecord.may_start_condition`, not fenced: a failure of a
   concurrent copy of the same attempt is overwritten by this run's success). A failure writes what
   its retry or dead letter needs (attempts, error, payload, traceback, history), then takes the
   full mode's decision (`gates.failed`): the same backoff, retries and dead letters.

The weaker guarantee: with no lock, two deliveries of one message at the same time (SQS is
at-least-once; a visibility timeout that expired) may both run the job. One success is recorded: the
first finished outcome written wins (a copy's failure, which reads `retrying`, is overwritten by
another copy's success), and the other copy's write is refused by its condition and counted
`JobDuplicate` (nothing else is written). A delivery after the record is written does not run the
job again (an eventually consistent read may, within about a second of the write, miss it: then that
run's write is refused the same way). No record exists while the job runs: its status reads
`pending` until it ends.

At run time: `ctx.progress` keeps the last report in memory and writes it with the outcome (nothing
is written while the job runs, and a report is no cancel check); `ctx.cancelled` reads the record
as in full mode (a cancel of a running light job records it `cancelled` at once, since no record
says it runs: the run stops at its next check, or its outcome is refused when it ends); `ctx.step`,
`ctx.sleep` and `ctx.wait_for_signal` need the record while the job runs and raise `PermanentError`
(the job is dead at once, with that reason: every attempt would fail the same way).

If the outcome cannot be written (DynamoDB refuses it after the SDK's and `aws.read_retrying`'s
tries), nothing is lost: the message is reported failed and comes back after the job's backoff, and
the job runs again (light mode's at-least-once); on the last attempt it reaches the DLQ with the
record marked dead.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools.metrics import MetricUnit
from pydantic import BaseModel

from lambdajobs.runtime import aws, gates, lifecycle
from lambdajobs.runtime import table as codec
from lambdajobs.runtime.context import JobCancelled, JobContext
from lambdajobs.runtime.delivery import Delivery, Mark, about
from lambdajobs.runtime.errors import PermanentError
from lambdajobs.runtime.gates import Cancel, DeadLetter, Decision, Done, HandBack, Retry, Run
from lambdajobs.runtime.job_record import (
    INDEXED_STATES,
    NAMES,
    NO_RECORD,
    JobIndex,
    JobRecord,
    JobState,
    index_key,
)
from lambdajobs.runtime.records import error_fields, failure_details

if TYPE_CHECKING:
    from lambdajobs.runtime.durable import Durable
    from lambdajobs.runtime.worker import Worker

__all__ = ["read_record", "run"]

#: What a reported progress is kept as until the outcome is written: (percent, message).
Progress = tuple[float, str | None]


def read_record(client: Any, table: str, job_id: str) -> JobRecord | None:
    """The job's record, eventually consistent (half the read units of a consistent read), or None."""
    item = client.get_item(TableName=table, Key=codec.key(job_id), ConsistentRead=False).get("Item")
    return JobRecord.from_item(item) if item else None


def run(worker: Worker, d: Delivery, go: Run, lambda_context: Any) -> Any:
    """Run a light job's delivery (see the module docstring) and carry out the decision it comes to."""
    return worker.effects.apply(d, _decide(worker, d, go, lambda_context))


def _decide(worker: Worker, d: Delivery, go: Run, lambda_context: Any) -> Decision:
    spec, job_id, store = d.spec, d.job_id, worker.store
    assert job_id is not None and d.payload is not None
    try:
        found = aws.read_retrying(read_record, store.client, store.table, job_id)
    except Exception as exc:  # as a lock not taken: handed back on a throttle, else this receive counts
        return gates.not_acquired(d, exc, worker.rng)
    now = time.time()
    if found is not None and not found.may_start(now, d.attempt, d.redriven):
        if found.lock_live(int(now * 1000)):  # a full-mode run holds it (the job's mode just changed)
            return gates.lock_held(found)
        return gates.duplicate(found)
    if go.start_by_us is not None and now * 1_000_000 > go.start_by_us:  # nothing taken to give back
        return HandBack(1, "missed its rate-limit slot", keep_slot=False)
    progress: list[Progress] = []
    ctx = _context(worker, d, job_id, lambda_context, progress)
    started_iso = lifecycle.now_iso()
    started = time.perf_counter()
    try:
        result = _call(spec, d.payload, ctx)
    except JobCancelled:  # the cancel wrote the record `cancelled` (a member's count is left to make)
        from lambdajobs.runtime.worker import logger

        logger.info("job cancelled while it ran; it stopped at a check")
        return Cancel(None, "cancelled while it ran", write=False)
    except Exception as exc:
        return _failed(worker, d, found, exc, started_iso, progress)
    finally:
        worker._metric("JobDuration", MetricUnit.Milliseconds, (time.perf_counter() - started) * 1000)
        if d.attempt == 1 and spec.searchable and not d.redriven:
            worker._search_entries(d, about(d))
    return _succeeded(worker, d, found, result, started_iso, progress)


def _call(spec: Any, payload: BaseModel, ctx: JobContext) -> Any:
    """The job function, its result made JSON now (as the full mode's `worker._execute`)."""
    result = spec.func(payload, ctx) if spec.takes_context else spec.func(payload)
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    return json.loads(json.dumps(result, default=str))


def _context(
    worker: Worker, d: Delivery, job_id: str, lambda_context: Any, progress: list[Progress]
) -> JobContext:
    """The run's `ctx`: progress kept for the outcome's write; no durable state (`_NoRecord`)."""

    def keep(_: str, percent: float, message: str | None) -> None:
        progress[:] = [(percent, message)]

    ctx = worker.job_context(d, job_id, lambda_context, keep)
    ctx.durable = cast("Durable", _NoRecord(d.spec.name))
    return ctx


class _NoRecord:
    """A light job's `ctx.durable`: steps, sleeps and signal waits need the job's record while it runs
    (checkpoints under its lock), which light mode does not keep. Each raises `PermanentError` (the
    job is dead at once with the reason: every attempt would fail alike)."""

    current = None

    def __init__(self, job: str) -> None:
        self.job = job

    def _refuse(self, what: str) -> PermanentError:
        return PermanentError(
            f"job '{self.job}': {what} needs the job's record while it runs, which record_mode='light' "
            f"does not keep; declare it with record_mode='full'."
        )

    def step(self, *_: Any) -> Any:
        raise self._refuse("ctx.step")

    def sleep(self, *_: Any) -> None:
        raise self._refuse("ctx.sleep")

    def wait_for_signal(self, *_: Any) -> Any:
        raise self._refuse("ctx.wait_for_signal")


# -- the one write ------------------------------------------------------------------------------------


def _record(
    worker: Worker,
    d: Delivery,
    found: JobRecord | None,
    state: JobState,
    started_iso: str,
    progress: list[Progress],
) -> JobRecord:
    """The record a run of `d` leaves in `state` (its result or error added by the caller): the
    attributes a full-mode run's acquire and outcome write (`lifecycle.acquire`, `succeed_created`)."""
    config, now_iso = worker.stack_config, lifecycle.now_iso()
    indexed = state in INDEXED_STATES[JobIndex(config.job_index or JobIndex.OFF)]
    record = JobRecord(
        job_id=str(d.job_id),
        job=d.spec.name,
        state=state,
        attempts=d.attempt,
        max_attempts=d.spec.max_attempts,
        created_at=(found.created_at if found is not None else None) or started_iso,
        started_at=started_iso,
        finished_at=now_iso if state.is_final else None,
        updated_at=now_iso,
        expiration=int(time.time()) + config.record_ttl_seconds,
        ix=index_key(d.spec.name, state) if indexed else None,
        ix_at=now_iso if indexed else None,
    )
    if progress:
        percent, message = progress[-1]
        limited = message[: lifecycle.MAX_ERROR_CHARS] if message is not None else None
        record = replace(record, progress=percent, progress_message=limited)
    return replace(record, **{k: v for k, v in about(d).items() if v is not None})


def _put_new(worker: Worker, record: JobRecord) -> JobRecord | None:
    """A first attempt's record, whole, in one PutItem that lands only where there is no record (1
    write unit up to 1 KB). Returns None when it landed, else the record that refused it."""
    client = worker.store.client
    try:
        client.put_item(
            TableName=worker.store.table,
            Item=record.to_item(),
            ConditionExpression=NO_RECORD.expression,
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
    except client.exceptions.ConditionalCheckFailedException as exc:
        return JobRecord.from_item(exc.response.get("Item") or codec.key(record.job_id))
    return None


#: The attributes the update rewrites from the record (the rest are left as an earlier write put them:
#: `history` and `error` of earlier attempts, signals, a cancel, a workflow member's count).
_REWRITTEN = (
    "job",
    "attempts",
    "max_attempts",
    "started_at",
    "updated_at",
    "expiration",
    "result",
    "error",
    "progress",
    "progress_message",
    "enqueued_at",
    "level",
    "tenant",
    "workflow",
    "payload",
    "payload_cut",
    "traceback",
    "history",
)


def _update(worker: Worker, d: Delivery, record: JobRecord, tally: Any) -> bool:
    """The record's outcome over an earlier one (a later attempt, a redriven job, a workflow member):
    one UpdateItem that never overwrites a finished record nor a live full-mode lock
    (`JobRecord.may_start_condition`, not fenced); with `tally` (a workflow member's outcome), counted
    in its workflow's item in the same transaction (`lifecycle._apply`, as the full mode). Returns
    whether it landed."""
    values = codec.decode(record.to_item())
    state = JobState(str(values["state"]))
    sets = ["#state = :state", "created_at = if_not_exists(created_at, :created_at)"]
    names = dict(NAMES)
    written: dict[str, Any] = {
        ":state": state.value,
        ":created_at": values.get("created_at"),
        ":now_iso": values.get("updated_at"),
    }
    for name in _REWRITTEN:
        if values.get(name) is not None:
            sets.append(f"#a_{name} = :a_{name}")
            names[f"#a_{name}"] = name
            written[f":a_{name}"] = values[name]
    remove = ["in_progress_expiration", "waiting_until", *lifecycle.PARKED_FIELDS]
    if state.is_final:
        sets.append("finished_at = :now_iso")
    else:
        remove.append("finished_at")
    if record.progress is None:  # the full mode's acquire removes an earlier run's progress too
        remove += ["progress", "progress_message"]
    lifecycle._index(worker.stack_config.job_index, d.spec.name, state, sets, remove, written)
    if not any(":now_iso" in clause for clause in sets):  # (DynamoDB refuses an unused value)
        del written[":now_iso"]
    allowed = JobRecord.may_start_condition(time.time(), None, d.redriven)
    return lifecycle._apply(
        worker.store.client,
        worker.store.table,
        record.job_id,
        sets=sets,
        remove=remove,
        condition=allowed.expression,
        names=names,
        values={**written, **allowed.values},
        tally=tally,
        outcome=state,
    )


def _write(worker: Worker, d: Delivery, found: JobRecord | None, record: JobRecord) -> JobRecord | None:
    """Write the run's record once: None when it landed, else the record that refused it (finished
    by a concurrent copy, cancelled). Raises what DynamoDB raised after `aws.read_retrying`'s tries."""
    member = d.member is not None
    if found is None and not member and d.attempt == 1 and not d.redriven:
        refused = aws.read_retrying(_put_new, worker, record)
        if refused is None:
            return None
        if not refused.may_start(time.time(), None, d.redriven):
            return refused
        found = refused  # a record the read did not see (eventually consistent), still open: update it
    outcome = record.known_state
    tally = worker.store.tally(d.member) if outcome in (JobState.SUCCEEDED, JobState.DEAD) else None
    if aws.read_retrying(_update, worker, d, record, tally):
        return None
    now = aws.read_retrying(read_record, worker.store.client, worker.store.table, record.job_id)
    return now or JobRecord.missing(record.job_id)


def _refused(refusing: JobRecord) -> Decision:
    """The run's write was refused: the record finished meanwhile (a concurrent copy's outcome, or a
    cancel). Nothing else is written."""
    from lambdajobs.runtime.worker import logger

    if refusing.cancel_requested is not None or refusing.known_state is JobState.CANCELLED:
        logger.info("the job was cancelled while it ran; its outcome is not recorded")
        return Cancel(None, "cancelled while it ran", write=False)
    logger.info(
        "a concurrent copy of the job recorded its outcome first; this run's is not recorded",
        extra={"state": refusing.state},
    )
    return Done("a concurrent duplicate", metric="JobDuplicate", notify=True)


def _succeeded(
    worker: Worker,
    d: Delivery,
    found: JobRecord | None,
    result: Any,
    started_iso: str,
    progress: list[Progress],
) -> Decision:
    from lambdajobs.runtime.worker import _Outcome, logger

    record = _record(worker, d, found, JobState.SUCCEEDED, started_iso, progress)
    record = replace(record, result=lifecycle.stored_result(json.dumps(result, sort_keys=True)))
    try:
        refusing = _write(worker, d, found, record)
    except Exception as exc:  # nothing lost: the message comes back and the job runs again
        logger.warning(
            "could not record the job's success; its message comes back and the job runs again",
            extra={"error": error_fields(exc)},
        )
        return Retry(exc, d.spec.backoff.delay(d.attempt, worker.rng), metric="JobFailed")
    if refusing is not None:
        return _refused(refusing)
    return worker._returned(_Outcome(started=True, returned=True, result=result), result)


def _failed(
    worker: Worker,
    d: Delivery,
    found: JobRecord | None,
    exc: Exception,
    started_iso: str,
    progress: list[Progress],
) -> Decision:
    """The job raised: its record says so (retrying or dead, as `lifecycle.after_failure` decides),
    then the full mode's decision (`gates.failed`): retried after its backoff, or dead-lettered."""
    from lambdajobs.runtime.worker import logger

    state = lifecycle.after_failure(exc, d.attempt, d.spec.max_attempts)
    record = _record(worker, d, found, state, started_iso, progress)
    run = {"attempt": d.attempt, "payload": d.raw_payload}
    acquired = replace(found or JobRecord(job_id=record.job_id), started_at=started_iso).to_item()
    details = failure_details(run, exc, state, acquired)
    record = replace(
        record,
        error=error_fields(exc),
        traceback=details.get("traceback"),
        history=tuple(details.get("history") or ()),
        payload=details.get("payload"),
        payload_cut=details.get("payload_cut"),
    )
    unwritten: Exception | None = None
    try:
        refusing = _write(worker, d, found, record)
    except Exception as write_error:
        refusing, unwritten = None, write_error
    if refusing is not None:
        return _refused(refusing)
    worker._count("JobFailed", 1)
    decision = gates.failed(d, exc, None, worker.rng, unreleased=False)
    if unwritten is not None:
        logger.warning("could not record the job's failure", extra={"error": error_fields(unwritten)})
        if isinstance(decision, DeadLetter):  # marked dead with the move (no lock: over its own retrying)
            return decision._replace(mark=Mark.DEAD_PAST_LAST)
    return decision
