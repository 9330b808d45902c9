"""The executor of the worker's decisions (`lambdajobs.runtime.gates`): their SQS and DynamoDB effects.

Hand-backs. A receive that does not run the job sends a copy of its message back to its queue (after a
delay; to another priority level's queue when routed) and deletes the original at once, so it costs no
attempt and the copy is never at its queue's last receive. The copy carries the attempts used so far
and, as the decision says, a rate-limit slot or the outcome left to record (the protocol is in
`lambdajobs.runtime.delivery`). If the copy cannot be sent, the record is reported failed and returns
after the delay (that receive then counts).

Dead letters. A message that can never succeed, or whose last attempt failed, goes to the DLQ at once
with its reason in message attributes, after its record is marked dead (and, for a workflow member,
its stage checked). A step that fails on a throttle or a service error hands the message back carrying
the move still to make, so the job is not run again and the message never reaches SQS redrive without
its reason; if even that fails, the record is reported failed and SQS redrive still catches it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import aws
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.delivery import Delivery
from lambdajobs.runtime.gates import Done
from lambdajobs.runtime.records import JobRecordStore

if TYPE_CHECKING:
    from lambdajobs.runtime.gates import (
        Cancel,
        DeadLetter,
        Decision,
        HandBack,
        Park,
        RecordSuccess,
        Retry,
        Supersede,
    )

Metric = Callable[[str, float], None]


class Effects:
    """Carries out decisions for one worker: `config` is its stack, `store` its job records, `metric`
    counts an event (name, value), `log` is the worker's logger."""

    def __init__(
        self,
        config: StackConfig,
        store: JobRecordStore,
        *,
        metric: Metric,
        log: Any,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.store = store
        self.metric = metric
        self.log = log
        self.rng = rng or random.Random()
        self._queue_urls: dict[str, str] = {}

    def apply(self, d: Delivery, decision: Decision) -> Any:
        """Carry out `decision` for delivery `d`; returns what the batch processor records for it.

        Raises:
            NotStartedError: a copy could not be sent (the record is reported failed).
            Exception: a `Retry`'s error (the record is reported failed, and returns after its delay).
        """
        if type(decision) is Done:  # (the others: lambdajobs.runtime.handbacks, which calls back its method)
            return self.done(d, decision)
        return _rare().apply(self, d, decision)

    def write(self, call: Callable[..., Any], *args: Any) -> Exception | None:
        """A bookkeeping call, tried again on transient failures (`aws.retrying`)."""
        return aws.retrying(call, *args, rng=self.rng)

    # -- done; the other decisions are carried out by lambdajobs.runtime.handbacks (loaded on first use)

    def done(self, d: Delivery, decision: Done) -> Any:
        if decision.metric:
            self.metric(decision.metric, 1)
        if decision.notify and d.member is not None and not self.notify(d):
            return None  # handed back: its next delivery checks the workflow again
        return decision.result

    def notify(self, d: Delivery) -> bool:
        """A workflow member's outcome is counted: if that completed its stage, tell the continuer
        (`workflow.notify`). Every delivery of a finished member checks again, a duplicate too, so a
        crash after the count and before the notice is repaired by the message coming back. If the
        check or the notice fails, the message is handed back for that (False)."""
        return _rare().notify(self, d)

    def retry(self, d: Delivery, decision: Retry) -> Any:
        """Report the record failed, visible again after the decision's delay (that receive counts)."""
        return _rare().retry(self, d, decision)

    def retry_after(self, d: Delivery, seconds: int) -> None:
        """Make a failed record visible again after `seconds` (its backoff delay). Best effort: if this
        fails, the record is still reported failed and returns after the queue's visibility timeout."""
        return _rare().retry_after(self, d, seconds)

    def cancelled(self, d: Delivery, decision: Cancel) -> Any:
        """A cancelled job: its record ends `cancelled` (a workflow member counted dead, so its stage
        goes on), the message is dropped (reported done). If the write fails on a throttle, a copy
        comes back to make it; the job does not run in between (the record refuses it)."""
        return _rare().cancelled(self, d, decision)

    def superseded(self, d: Delivery, decision: Supersede) -> Any:
        """A debounced enqueue replaced by a later one of its key: its record reads `superseded`
        (written only where the job has no record yet), and the message is dropped. A throttled write
        hands the message back for it."""
        return _rare().superseded(self, d, decision)

    def record_success(self, d: Delivery, decision: RecordSuccess) -> Any:
        """Write the success of a run that held `lock`. If that fails, hand the outcome back with the
        message (a copy carried here: only if the failure may pass; else this receive counts)."""
        return _rare().record_success(self, d, decision)

    def hand_back(self, d: Delivery, decision: HandBack) -> Any:
        """Send a copy of the message back (see the module docstring) and delete the original."""
        return _rare().hand_back(self, d, decision)

    def delete_original(self, d: Delivery) -> None:
        """Delete a record's message now that a copy of it is elsewhere (back in its queue, or in the
        DLQ): were the invocation to die before the batch response, the original would come back and
        be handled twice. Best effort: the batch response still reports the record done."""
        return _rare().delete_original(self, d)

    def queue_url(self, d: Delivery) -> str:
        """The URL of the queue a record came from (its priority level's)."""
        return _rare().queue_url(self, d)

    def park(self, d: Delivery, decision: Park) -> Any:
        """Park a durable job (`lambdajobs.runtime.durable`): first the copy that continues it at its
        wake-up (an SQS delay up to 15 minutes, a one-time schedule beyond), then its record, under
        the run's lock. If the copy cannot be sent the message comes back (the record keeps the run's
        lock until the invocation's deadline, and the next run replays to the same point); if the
        record cannot be written, the copy waits for that lock and takes the job over."""
        return _rare().park(self, d, decision)

    def dead_letter(self, d: Delivery, decision: DeadLetter) -> Any:
        """Mark the job's record dead (the decision's mark), check a workflow member's stage, send the
        message to the DLQ with its reason, delete the original (see the module docstring)."""
        return _rare().dead_letter(self, d, decision)


def _rare() -> Any:
    """`lambdajobs.runtime.handbacks`, where every decision but a success is carried out: imported by
    the first record that needs it, so a cold start whose record succeeds does not compile it."""
    from lambdajobs.runtime import handbacks

    return handbacks
