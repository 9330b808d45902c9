"""The gates' decisions a plain record's success never takes (`lambdajobs.runtime.gates` delegates to
these past each gate's first check, and imports this module on first use: a cold start whose record
succeeds does not compile it): a carried outcome's, a dead letter's, past the last attempt, a
continuation that is early, and the decisions after a run that did not start, failed or found its lock
held. Each name is importable from `lambdajobs.runtime.gates` too."""

from __future__ import annotations

import math
import random
import time
from typing import TYPE_CHECKING

from lambdajobs.runtime.delivery import PROTOCOL_VERSION, Delivery, Mark
from lambdajobs.runtime.errors import LastAttemptLostError
from lambdajobs.runtime.gates import (
    NEWER_WORKER_DELAY_SECONDS,
    NEWER_WORKER_PATIENCE_SECONDS,
    Cancel,
    DeadLetter,
    Decision,
    Done,
    HandBack,
    RecordSuccess,
    Retry,
    logger,
)
from lambdajobs.runtime.lifecycle import REDRIVEN_ERROR, JobState, after_failure
from lambdajobs.runtime.records import error_fields

if TYPE_CHECKING:
    from lambdajobs.runtime.job_record import JobRecord


def seconds_until(epoch_ms: int, now: float | None = None) -> int:
    """Whole seconds from now until `epoch_ms`, at least 1 (an SQS delay)."""
    now_ms = (time.time() if now is None else now) * 1000
    return max(1, math.ceil((epoch_ms - now_ms) / 1000))


# -- past each gate's first check (`gates.<gate>` makes it) ---------------------------------------------


def carried_outcome(d: Delivery, now: float | None = None) -> Decision:
    assert d.carried is not None
    if d.carried.newer is not None:
        age = (time.time() if now is None else now) - (d.carried.at or 0)
        if age < NEWER_WORKER_PATIENCE_SECONDS:
            return HandBack(
                NEWER_WORKER_DELAY_SECONDS,
                "an outcome from a newer worker",
                keep_slot=False,
                keep_outcome=True,
            )
        error = {
            "type": "UnknownOutcomeVersion",
            "message": f"the message carries an outcome of protocol version {d.carried.newer} "
            f"(this worker reads {PROTOCOL_VERSION}), written {age:.0f} s ago, and no newer worker took "
            "it; deploy the newer worker and redrive it (the job may run again)",
        }
        return DeadLetter(error, d.attempt)
    outcome = d.carried.outcome
    assert outcome is not None
    if outcome.action == "complete":
        return RecordSuccess(outcome.result, outcome.lock)
    return DeadLetter(outcome.error(), outcome.attempts or d.attempt, mark=outcome.mark, lock=outcome.lock)


def init_failed(d: Delivery, error: BaseException) -> Decision:
    named = d.job_id is not None and d.envelope is not None
    return DeadLetter(error_fields(error), d.attempt, mark=Mark.DEAD_UNRUN if named else None, for_job=named)


def unrunnable(d: Delivery) -> Decision:
    assert d.unrunnable is not None
    member = d.member is not None and d.job_id is not None and d.envelope is not None and bool(d.envelope.id)
    mark = Mark.DEAD_UNRUN if member else None
    return DeadLetter(error_fields(d.unrunnable), d.attempt, mark=mark, for_job=member)


def validation(d: Delivery) -> Decision:
    assert d.invalid is not None
    return DeadLetter(error_fields(d.invalid), d.attempt, mark=Mark.DEAD_UNRUN)


def waits_elsewhere(d: Delivery, record: JobRecord | None) -> bool:
    """Whether the job's record waits for a rate-limit slot later than any this message carries: a
    copy of it is in the queue, due at that slot (the record is marked `waiting` for a slot only once
    the copy carrying it was sent). This message is then a duplicate (SQS delivered it twice while it
    was handed back; a producer sent the job id again) and has nothing to do: the copy runs the job,
    and no attempt is spent on it. A DLQ redrive is never one (it starts the job again)."""
    if d.redriven or record is None or record.state != JobState.WAITING or record.waiting_until is None:
        return False
    return d.carried_slot is None or d.carried_slot.until_iso() < record.waiting_until


def past_last_attempt(d: Delivery, record: JobRecord | None, now_ms: int) -> Decision | None:
    """A message received after its last attempt (the queue keeps one spare receive): that attempt's
    invocation crashed or timed out. Unless the job succeeded after all (a duplicate) or a live run
    holds its record (wait for it), the message goes to the DLQ with that reason, its record dead."""
    if d.attempt <= d.spec.max_attempts:
        return None
    if record is not None and record.state == JobState.SUCCEEDED:
        return Done("a duplicate of a job that succeeded", metric="JobDuplicate", notify=True)
    if waits_elsewhere(d, record):
        return Done("a duplicate of a copy that waits for its slot", metric="JobDuplicate")
    expiry = record.in_progress_expiration if record is not None else None
    if record is not None and expiry is not None and record.lock_live(now_ms):
        return HandBack(seconds_until(expiry), "lock held")
    error = error_fields(LastAttemptLostError(REDRIVEN_ERROR["message"]))
    return DeadLetter(error, d.attempt - 1, mark=Mark.DEAD_PAST_LAST)


def resumes_early(d: Delivery, record: JobRecord | None, now_ms: int) -> Decision | None:
    """The copy that continues a parked durable job, arrived before the record's wake-up (a clock's
    difference, or a signal's wake-up that met an older record): it waits for the wake-up, where any
    other copy of a parked job is a duplicate (the acquire refuses it, and it is dropped)."""
    from lambdajobs.runtime.job_record import PARKED_STATES

    if d.resume_wake is None or record is None or record.known_state not in PARKED_STATES:
        return None
    wake = record.wake_at
    if wake is None or wake <= now_ms or d.resume_wake != wake:
        return None
    return HandBack(seconds_until(wake, now_ms / 1000), "its wake-up is ahead", keep_slot=False, resume=wake)


# -- after the run ------------------------------------------------------------------------------------


def duplicate(held: JobRecord | None) -> Decision:
    """The run did not start: the record answered (the job succeeded; a workflow member died; or this
    copy's attempt already ran, and the copy that ran it carries the job on)."""
    state = held.state if held is not None else None
    if held is not None and held.cancel_requested is not None and state != JobState.SUCCEEDED:
        logger.info("the job was cancelled; its message is dropped")
        return Cancel(None, "cancelled before it ran", write=state != JobState.CANCELLED)
    if state == JobState.SUCCEEDED:
        logger.info("duplicate delivery of a job that already succeeded; not run again")
    elif held is not None and held.known_state in (JobState.SLEEPING, JobState.WAITING_SIGNAL):
        logger.info("a copy of a parked durable job; its wake-up continues it, not this copy")
    elif state == JobState.DEAD and held is not None and held.wf_counted:
        logger.info("duplicate delivery of a workflow member that died; not run again (redrive it)")
    else:
        logger.info("a copy of an attempt that already ran; not run again", extra={"state": state})
    return Done("duplicate", metric="JobDuplicate", notify=True)


def lock_held(held: JobRecord | None) -> Decision:
    """Another delivery holds the job's lock: a concurrent copy, or this worker's own earlier
    invocation whose outcome write failed. Neither costs an attempt: the message comes back when the
    lock expires (at the holder's invocation deadline)."""
    from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

    expiry_ms = held.in_progress_expiration if held is not None else None
    if expiry_ms is None:  # a lock without a deadline (no Lambda context registered)
        logger.info("job already running elsewhere; will retry")
        return Retry(IdempotencyAlreadyInProgressError("the job's lock is held"))
    wait = seconds_until(expiry_ms)
    logger.info("job already running elsewhere; handing the message back", extra={"retry_in_seconds": wait})
    return HandBack(wait, "lock held")


def not_acquired(d: Delivery, exc: Exception, rng: random.Random) -> Decision:
    """The job never started: taking its lock failed. A throttle or a service error is not an attempt:
    the message is handed back for later. Anything else (access denied, a missing table, a record the
    worker cannot read) would fail every time: that receive counts, so the message reaches the DLQ
    after `max_attempts` instead of coming back for ever."""
    from lambdajobs.runtime.aws import transient

    delay = d.spec.backoff.delay(d.attempt, rng)
    if transient(exc):
        logger.warning(
            "could not take the job's lock; handing the message back", extra={"error": error_fields(exc)}
        )
        return HandBack(delay, "acquire")
    logger.error("could not take the job's lock; will retry", extra={"error": error_fields(exc)})
    return Retry(exc, delay, metric="JobFailed")


def failed(
    d: Delivery, error: BaseException, lock: int | None, rng: random.Random, *, unreleased: bool
) -> Decision:
    """The job raised `error`: dead (a `PermanentError`, or its last attempt) or retried after its
    backoff. `unreleased`: the release write failed, so the record still reads `running` (marked dead
    with the move to the DLQ; a retry's lock holds until that invocation's deadline)."""
    if after_failure(error, d.attempt, d.spec.max_attempts) is JobState.DEAD:
        logger.warning("job failed for good", extra={"error": error_fields(error)})
        mark = Mark.DEAD_RUN if unreleased else None  # the record would read `running`
        return DeadLetter(error_fields(error), d.attempt, mark=mark, lock=lock, mark_now=not unreleased)
    if unreleased:
        logger.warning("could not record the job's failure; its lock holds until that invocation's deadline")
    delay = d.spec.backoff.delay(d.attempt, rng)
    logger.warning("job failed; will retry", extra={"error": error_fields(error), "retry_in_seconds": delay})
    return Retry(error, delay, metric="JobRetried")
