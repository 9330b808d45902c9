"""The worker's decisions, as values, and the gates that take them before a run.

Each gate is a function of a `Delivery` (and of what it reads through the ports it is given: the job's
record, the time left in the invocation) that returns a decision, or None to let the next gate look.
No gate writes anything: `lambdajobs.runtime.effects` carries out what a decision says (SQS sends,
record writes, the move to the DLQ), and `lambdajobs.runtime.worker` runs the gates in order:

    carried outcome -> deadline -> unrunnable -> routing -> validation -> past the last attempt
        -> rate limit (lambdajobs.runtime.ratelimit.gate) -> run (the lock is taken by the run)

The decisions:

- `Run`: run the job now (or at its rate-limit slot, less than a second away), starting by a deadline.
- `HandBack`: send a copy of the message back to its queue after a delay and delete the original: a
  receive that does not run the job costs no attempt. What the copy carries goes with it.
- `DeadLetter`: move the message to the DLQ with its reason, marking the job's record dead first.
- `RecordSuccess`: the job ran and returned; its success is left to write.
- `Retry`: report the record failed and let SQS bring it back after a delay: that receive counts.
- `Done`: nothing left to do (a duplicate, a success); a workflow member's stage is checked.
- `Park`: a durable job sleeps, waits for a signal or continues in a fresh invocation.
- `Cancel`: a cancelled job ends `cancelled` (its message dropped, or its run stopped at a check).
- `Supersede`: a debounced enqueue that a later one of its key replaced: recorded, never run.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from lambdajobs.runtime.delivery import PROTOCOL_VERSION, CarriedOutcome, CarriedSlot, Delivery, Mark
from lambdajobs.runtime.errors import LastAttemptLostError
from lambdajobs.runtime.lifecycle import REDRIVEN_ERROR, JobState, after_failure
from lambdajobs.runtime.records import error_fields

if TYPE_CHECKING:
    from lambdajobs.runtime.job_record import JobRecord

logger = logging.getLogger(__name__)

#: A copy written by a newer worker (a deploy in progress) comes back after this long, for a newer
#: worker to take: neither run nor dropped here.
NEWER_WORKER_DELAY_SECONDS = 10
#: ... for this long after it was written; then no newer worker is coming (a rollback, a forged
#: version): it goes to the DLQ with that reason, for an operator.
NEWER_WORKER_PATIENCE_SECONDS = 3600


class Run(NamedTuple):
    """Run the job: at `start_at_us` (epoch µs: wait for it here; None: now), and not after
    `start_by_us` (None: no limit). A run that would start later gives its lock back (a `HandBack`)."""

    start_at_us: int | None = None
    start_by_us: int | None = None


class HandBack(NamedTuple):
    """Send a copy back to the job's queue (or to queue URL `to`: another priority level's) after
    `delay` seconds; the copy carries `outcome`, or the rate-limit `slot` (None with `keep_slot`: the
    one this message carries, if any). `mark_waiting`: the job's record reads `waiting` for that slot
    (written once the copy is sent)."""

    delay: int
    reason: str
    slot: CarriedSlot | None = None
    keep_slot: bool = True
    outcome: CarriedOutcome | None = None
    #: The copy carries the outcome this message carries, as it was sent (a newer worker's).
    keep_outcome: bool = False
    to: str | None = None
    mark_waiting: bool = False
    metric: str | None = None
    #: The copy continues a parked durable job due at this wake-up (epoch ms): `ATTR_RESUME`.
    resume: int | None = None


class DeadLetter(NamedTuple):
    """Move the message to the DLQ with `error` and `attempts`; first mark the job's record (`mark`,
    under `lock` for a run's). `for_job=False`: the message names no job here (an undecodable
    envelope, another job's): no record is marked, no workflow told."""

    error: dict[str, str]
    attempts: int
    mark: Mark | None = None
    lock: int | None = None
    for_job: bool = True
    #: False: the mark's write just failed (the run's own release): the copy makes it, not this receive.
    mark_now: bool = True


class RecordSuccess(NamedTuple):
    """Write the success of the run that held `lock` (its own write failed), with `result` (JSON text)."""

    result: str
    lock: int | None
    reason: str = "complete"


class Retry(NamedTuple):
    """Report the record failed; SQS brings it back after `delay` seconds (None: the queue's
    visibility timeout). The receive counts toward the DLQ."""

    error: BaseException
    delay: int | None = None
    metric: str | None = None


class Done(NamedTuple):
    """Nothing left to do. `notify`: a workflow member's outcome is counted: check its stage."""

    reason: str
    metric: str | None = None
    notify: bool = False
    result: Any = None


class Park(NamedTuple):
    """A durable job parks (`durable.Suspend`): send the copy that continues it at `wake_ms` (epoch
    ms; SQS delay, or a one-time schedule beyond 15 minutes), then mark its record `state` under the
    run's `lock`; `signal`: the signal it waits for."""

    state: JobState
    wake_ms: int
    reason: str
    lock: int | None
    signal: str | None = None


class Cancel(NamedTuple):
    """A cancelled job ends `cancelled` (`lambdajobs.runtime.cancellation`): its run stopped at a check
    (`lock`: the run's), or a copy found the cancel recorded (`lock` None); `write`: the record still
    has to say so (False: it does, and only a workflow member's count may be left to make)."""

    lock: int | None
    reason: str
    write: bool = True


class Supersede(NamedTuple):
    """A debounced enqueue that a later enqueue of its key replaced: its record reads `superseded`,
    and it never runs (`lambdajobs.runtime.debounce`)."""

    reason: str = "superseded by a later enqueue of its key"


#: (Decisions are NamedTuples, not dataclasses: every record's path defines them at a cold start, where
#: a NamedTuple class costs a tenth of a frozen dataclass's on 3.11. Compare them within a kind only.)
Decision = Run | HandBack | DeadLetter | RecordSuccess | Retry | Done | Park | Cancel | Supersede


def seconds_until(epoch_ms: int, now: float | None = None) -> int:
    """Whole seconds from now until `epoch_ms`, at least 1 (an SQS delay)."""
    now_ms = (time.time() if now is None else now) * 1000
    return max(1, math.ceil((epoch_ms - now_ms) / 1000))


# -- the gates, in order ------------------------------------------------------------------------------


def carried_outcome(d: Delivery, now: float | None = None) -> Decision | None:
    """A copy whose job already ran: record its outcome, do not run it again. A newer worker's copy
    waits for a newer worker (its outcome kept as sent), up to NEWER_WORKER_PATIENCE_SECONDS after it
    was written, then goes to the DLQ; a discarded outcome (unreadable, another job id's) lets it run."""
    if d.carried is None or d.carried.discarded:
        return None
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


def deadline(d: Delivery, too_late: Callable[[], str | None]) -> Decision | None:
    """Not started this late in the invocation (`too_late` says why): handed back, costing no attempt."""
    why = too_late()
    return HandBack(0, why, metric="JobDeferred") if why else None


def init_failed(d: Delivery, error: BaseException | None) -> Decision | None:
    """The function could not load its job at its cold start (`FunctionInitError`): every delivery is
    dead-lettered with that reason, its record (when it names a job) marked dead, not run. It would
    fail every delivery, and SQS would move it after maxReceiveCount receives with no reason at all."""
    if error is None:
        return None
    named = d.job_id is not None and d.envelope is not None
    return DeadLetter(error_fields(error), d.attempt, mark=Mark.DEAD_UNRUN if named else None, for_job=named)


def unrunnable(d: Delivery) -> Decision | None:
    """An envelope that cannot run here: undecodable, another job's, or a priority the job lacks. A
    workflow member's record is marked dead (its stage must not wait for it for ever)."""
    if d.unrunnable is None:
        return None
    member = d.member is not None and d.job_id is not None and d.envelope is not None and bool(d.envelope.id)
    mark = Mark.DEAD_UNRUN if member else None
    return DeadLetter(error_fields(d.unrunnable), d.attempt, mark=mark, for_job=member)


def routing(
    d: Delivery, queue_url: Callable[[str | None], str], warn: Callable[..., None]
) -> Decision | None:
    """Sent to another priority level's queue than its own: moved there (if that queue is known)."""
    if not d.wants_other_level:
        return None
    try:
        where = queue_url(d.level)
    except Exception as exc:  # that level's queue is unknown here: run it where it is
        warn(d, exc)
        return None
    assert d.envelope is not None
    return HandBack(0, f"priority {d.envelope.priority}", to=where)


def validation(d: Delivery) -> Decision | None:
    """A payload the job's model refuses: dead at once (it would fail every attempt)."""
    if d.invalid is None:
        return None
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
