"""The worker's decisions other than `Run` and `Done` (`lambdajobs.runtime.gates` re-exports them,
loaded on first use: a cold start whose record succeeds takes none, and a NamedTuple class costs about
1.7 M instructions to define), and what they carry: how a record is marked dead (`Mark`) and the
rate-limit slot a handed-back copy waits for (`CarriedSlot`, re-exported by `lambdajobs.runtime.delivery`
too). The decisions themselves are described in `lambdajobs.runtime.gates`."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple

from lambdajobs.runtime.gates import Done, Run

if TYPE_CHECKING:
    from lambdajobs.runtime.delivery_rare import CarriedOutcome
    from lambdajobs.runtime.job_record import JobState


class Mark(StrEnum):
    """How a job's record is marked dead before its message moves to the DLQ. The values on the wire
    are those of workers deployed before the protocol had a version (they read them still)."""

    #: The run that held the lock failed for good; its release write failed (the record reads
    #: `running`): record it dead, while the record still carries that run's lock.
    DEAD_RUN = "release"
    #: A message that never ran (an invalid payload, a job or level gone): dead, unless a live run
    #: holds the record or it succeeded.
    DEAD_UNRUN = "reject"
    #: A message past its last attempt: dead as DEAD_UNRUN, and also over a `retrying` or `waiting`
    #: record (it was this message's own).
    DEAD_PAST_LAST = "bury"


class CarriedSlot(NamedTuple):
    """The rate-limit slot a copy waits for: taken for `attempt`, at `slot_us` (epoch µs); `ahead`: it
    was taken ahead of the queue by a higher priority level."""

    attempt: int
    slot_us: int
    ahead: bool = False

    @classmethod
    def parse(cls, text: str | None) -> CarriedSlot | None:
        parts = (text or "").split(":")
        if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
            return None
        return cls(int(parts[0]), int(parts[1]), parts[2:] == ["ahead"])

    def text(self) -> str:
        return f"{self.attempt}:{self.slot_us}" + (":ahead" if self.ahead else "")

    def until_iso(self) -> str:
        """The slot's time as the job's record shows it (`waiting_until`, RFC 3339 to the millisecond)."""
        moment = datetime.fromtimestamp(self.slot_us / 1_000_000, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


#: (Decisions are NamedTuples, not dataclasses: a NamedTuple class costs a tenth of a frozen dataclass's
#: to define on 3.11. Compare them within a kind only.)
Decision = Run | HandBack | DeadLetter | RecordSuccess | Retry | Done | Park | Cancel | Supersede
