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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from lambdajobs.runtime import lazy

if TYPE_CHECKING:
    from lambdajobs.runtime.decisions_rare import Cancel as Cancel
    from lambdajobs.runtime.decisions_rare import DeadLetter as DeadLetter
    from lambdajobs.runtime.decisions_rare import Decision as Decision
    from lambdajobs.runtime.decisions_rare import HandBack as HandBack
    from lambdajobs.runtime.decisions_rare import Park as Park
    from lambdajobs.runtime.decisions_rare import RecordSuccess as RecordSuccess
    from lambdajobs.runtime.decisions_rare import Retry as Retry
    from lambdajobs.runtime.decisions_rare import Supersede as Supersede
    from lambdajobs.runtime.delivery import Delivery
    from lambdajobs.runtime.gates_rare import duplicate as duplicate
    from lambdajobs.runtime.gates_rare import failed as failed
    from lambdajobs.runtime.gates_rare import lock_held as lock_held
    from lambdajobs.runtime.gates_rare import not_acquired as not_acquired
    from lambdajobs.runtime.gates_rare import past_last_attempt as past_last_attempt
    from lambdajobs.runtime.gates_rare import resumes_early as resumes_early
    from lambdajobs.runtime.gates_rare import seconds_until as seconds_until
    from lambdajobs.runtime.gates_rare import waits_elsewhere as waits_elsewhere

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


class Done(NamedTuple):
    """Nothing left to do. `notify`: a workflow member's outcome is counted: check its stage."""

    reason: str
    metric: str | None = None
    notify: bool = False
    result: Any = None


# -- the gates, in order ------------------------------------------------------------------------------


def carried_outcome(d: Delivery, now: float | None = None) -> Decision | None:
    """A copy whose job already ran: record its outcome, do not run it again. A newer worker's copy
    waits for a newer worker (its outcome kept as sent), up to NEWER_WORKER_PATIENCE_SECONDS after it
    was written, then goes to the DLQ; a discarded outcome (unreadable, another job id's) lets it run."""
    if d.carried is None or d.carried.discarded:
        return None
    return _rare().carried_outcome(d, now)


def deadline(d: Delivery, too_late: Callable[[], str | None]) -> Decision | None:
    """Not started this late in the invocation (`too_late` says why): handed back, costing no attempt."""
    why = too_late()
    return _decisions().HandBack(0, why, metric="JobDeferred") if why else None


def init_failed(d: Delivery, error: BaseException | None) -> Decision | None:
    """The function could not load its job at its cold start (`FunctionInitError`): every delivery is
    dead-lettered with that reason, its record (when it names a job) marked dead, not run. It would
    fail every delivery, and SQS would move it after maxReceiveCount receives with no reason at all."""
    if error is None:
        return None
    return _rare().init_failed(d, error)


def unrunnable(d: Delivery) -> Decision | None:
    """An envelope that cannot run here: undecodable, another job's, or a priority the job lacks. A
    workflow member's record is marked dead (its stage must not wait for it for ever)."""
    if d.unrunnable is None:
        return None
    return _rare().unrunnable(d)


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
    return _decisions().HandBack(0, f"priority {d.envelope.priority}", to=where)


def validation(d: Delivery) -> Decision | None:
    """A payload the job's model refuses: dead at once (it would fail every attempt)."""
    if d.invalid is None:
        return None
    return _rare().validation(d)


#: The gates and decisions defined in `lambdajobs.runtime.gates_rare` (loaded on first use): past the
#: last attempt, an early continuation, and the decisions after a run that did not simply succeed.
RARE = frozenset(
    {
        "seconds_until",
        "waits_elsewhere",
        "past_last_attempt",
        "resumes_early",
        "duplicate",
        "lock_held",
        "not_acquired",
        "failed",
    }
)

#: The decisions a plain success never takes, defined in `lambdajobs.runtime.decisions_rare` (loaded on
#: first use), and the union of all (`Decision`).
DECISIONS = frozenset(
    {"HandBack", "DeadLetter", "RecordSuccess", "Retry", "Park", "Cancel", "Supersede", "Decision"}
)

__getattr__ = lazy.exports(
    __name__,
    {
        **dict.fromkeys(RARE, "lambdajobs.runtime.gates_rare"),
        **dict.fromkeys(DECISIONS, "lambdajobs.runtime.decisions_rare"),
    },
)


def _rare() -> Any:
    """`lambdajobs.runtime.gates_rare`: imported by the first record whose gate decides, so a cold start
    whose record runs does not compile it."""
    from lambdajobs.runtime import gates_rare

    return gates_rare


def _decisions() -> Any:
    """`lambdajobs.runtime.decisions_rare`: imported by the first record a gate decides for."""
    from lambdajobs.runtime import decisions_rare

    return decisions_rare
