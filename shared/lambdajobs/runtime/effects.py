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

import base64
import json
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdajobs.runtime import aws
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.delivery import CarriedOutcome, Delivery, Mark, about
from lambdajobs.runtime.envelope import parse_body
from lambdajobs.runtime.errors import EnvelopeError, NotStartedError
from lambdajobs.runtime.gates import (
    Cancel,
    DeadLetter,
    Decision,
    Done,
    HandBack,
    Park,
    RecordSuccess,
    Retry,
    Supersede,
)
from lambdajobs.runtime.job_record import JobState
from lambdajobs.runtime.records import JobRecordStore, error_fields, stored_fields
from lambdajobs.runtime.settings import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_TYPE,
    ATTR_FAILED_AT,
    ATTR_PRIOR_ATTEMPTS,
    ATTR_RATE_SLOT,
    ATTR_REASON,
    ATTR_REDRIVEN,
    ATTR_RESUME,
    ATTR_SETTLE,
    DLQ_ATTRIBUTES,
    HANDBACK_ATTRIBUTES,
    queue_key,
)

MAX_SQS_ATTRIBUTES = 10  # SQS: at most 10 message attributes per message
MAX_DELAY_SECONDS = 900  # SQS: DelaySeconds at most 15 minutes

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
        how = _CARRY_OUT.get(type(decision))
        if how is not None:
            return getattr(self, how)(d, decision)
        raise TypeError(f"not a decision the executor carries out: {decision!r}")

    def write(self, call: Callable[..., Any], *args: Any) -> Exception | None:
        """A bookkeeping call, tried again on transient failures (`aws.retrying`)."""
        return aws.retrying(call, *args, rng=self.rng)

    # -- done, retry --------------------------------------------------------------------------------

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
        from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

        member = d.member
        assert member is not None
        if self.write(workflow.notify, self.config, member.id, member.stage) is None:
            return True
        self.log.warning(
            "could not check the workflow; handing the message back", extra={"workflow": member.id}
        )
        self.hand_back(d, HandBack(1, "workflow notice"))
        return False

    def retry(self, d: Delivery, decision: Retry) -> Any:
        """Report the record failed, visible again after the decision's delay (that receive counts)."""
        if decision.metric:
            self.metric(decision.metric, 1)
        if decision.delay is not None:
            self.retry_after(d, decision.delay)
        raise decision.error

    def retry_after(self, d: Delivery, seconds: int) -> None:
        """Make a failed record visible again after `seconds` (its backoff delay). Best effort: if this
        fails, the record is still reported failed and returns after the queue's visibility timeout."""
        try:
            self.config.client("sqs").change_message_visibility(
                QueueUrl=self.queue_url(d), ReceiptHandle=d.record.receipt_handle, VisibilityTimeout=seconds
            )
        except Exception as exc:
            self.log.warning(
                "could not set the retry delay; the message returns after the queue's visibility timeout",
                extra={"error": _error(exc)},
            )

    # -- cancelled ------------------------------------------------------------------------------------

    def cancelled(self, d: Delivery, decision: Cancel) -> Any:
        """A cancelled job: its record ends `cancelled` (a workflow member counted dead, so its stage
        goes on), the message is dropped (reported done). If the write fails on a throttle, a copy
        comes back to make it; the job does not run in between (the record refuses it)."""
        assert d.job_id is not None
        self.store.forget_progress(d.job_id)
        tally = self.store.tally(d.member)
        if decision.write or tally is not None:
            failed = self.write(self.store.settle_cancelled, d.job_id, d.spec.name, decision.lock, tally)
            if failed is not None and aws.transient(failed):
                return self.hand_back(d, HandBack(1, "cancel"))
        self.metric("JobCancelled", 1)
        self.log.info("job cancelled", extra={"reason": decision.reason})
        if d.member is not None:  # its stage may be complete now (a failed check hands it back)
            self.notify(d)
        return None

    def superseded(self, d: Delivery, decision: Supersede) -> Any:
        """A debounced enqueue replaced by a later one of its key: its record reads `superseded`
        (written only where the job has no record yet), and the message is dropped. A throttled write
        hands the message back for it."""
        assert d.job_id is not None
        failed = self.write(self.store.supersede, d.job_id, d.spec.name)
        if failed is not None and aws.transient(failed):
            return self.hand_back(d, HandBack(1, "superseded"))
        self.metric("JobSuperseded", 1)
        self.log.info("superseded by a later enqueue of its debounce key; not run")
        return None

    # -- success left to write ------------------------------------------------------------------------

    def record_success(self, d: Delivery, decision: RecordSuccess) -> Any:
        """Write the success of a run that held `lock`. If that fails, hand the outcome back with the
        message (a copy carried here: only if the failure may pass; else this receive counts)."""
        assert d.job_id is not None
        tally = self.store.tally(d.member)
        failed = self.write(self.store.complete, d.job_id, d.spec.name, decision.result, decision.lock, tally)
        if failed is None:
            self.metric("JobSucceeded", 1)
            self.log.info("recorded the success of a job that ran", extra={"job_id": d.job_id})
            if d.member is not None:
                self.notify(d)
            return None
        carried = d.carried is not None and d.carried.outcome is not None
        if carried and not aws.transient(failed):  # the record cannot be written: this receive counts
            raise failed
        outcome = CarriedOutcome(
            action="complete", job_id=d.job_id, result=decision.result, lock=decision.lock
        )
        self.log.warning(
            "the job's success could not be written; handing the outcome back with the message",
            extra={"error": _error(failed)},
        )
        return self.hand_back(d, HandBack(1, decision.reason, outcome=outcome))

    # -- hand-backs -----------------------------------------------------------------------------------

    def hand_back(self, d: Delivery, decision: HandBack) -> Any:
        """Send a copy of the message back (see the module docstring) and delete the original."""
        record = d.record
        attributes = copied_attributes(record, drop=HANDBACK_ATTRIBUTES, room=MAX_SQS_ATTRIBUTES - 4)
        slot = decision.slot or (d.carried_slot if decision.keep_slot and decision.outcome is None else None)
        if slot is not None:  # a rate-limit slot taken for this attempt goes along
            attributes[ATTR_RATE_SLOT] = {"DataType": "String", "StringValue": slot.text()}
        prior = str(max(0, d.attempt - 1))
        attributes[ATTR_PRIOR_ATTEMPTS] = {"DataType": "Number", "StringValue": prior}
        if decision.resume is not None:
            attributes[ATTR_RESUME] = {"DataType": "Number", "StringValue": str(decision.resume)}
        if decision.outcome is not None:
            attributes[ATTR_SETTLE] = {"DataType": "String", "StringValue": decision.outcome.text()}
        elif decision.keep_outcome and d.carried is not None and d.carried.text is not None:
            attributes[ATTR_SETTLE] = {"DataType": "String", "StringValue": d.carried.text}
        if decision.metric:
            self.metric(decision.metric, 1)
        sqs = self.config.client("sqs")
        queue_url = decision.to or self.queue_url(d)
        delay = min(MAX_DELAY_SECONDS, max(0, decision.delay))
        failed = self.write(
            lambda: sqs.send_message(
                QueueUrl=queue_url,
                MessageBody=body_keeping_job_id(d),
                MessageAttributes=attributes,
                DelaySeconds=delay,
                **message_group(d.record),
            )
        )
        if failed is not None:
            self.retry_after(d, decision.delay)
            raise NotStartedError(
                f"{decision.reason}: could not hand the message back; it returns in {decision.delay} s"
            )
        if slot is not None and decision.mark_waiting and d.job_id is not None:
            # Only once the copy is in the queue: a record waiting for a slot means a copy due then
            # exists, so another delivery of this message is a duplicate (`gates.waits_elsewhere`).
            self.write(self.store.wait, d.job_id, d.spec.name, slot.until_iso())
        self.delete_original(d)
        self.metric("JobHandedBack", 1)
        self.log.info("handed the message back", extra={"reason": decision.reason, "retry_in_seconds": delay})
        return None

    def delete_original(self, d: Delivery) -> None:
        """Delete a record's message now that a copy of it is elsewhere (back in its queue, or in the
        DLQ): were the invocation to die before the batch response, the original would come back and
        be handled twice. Best effort: the batch response still reports the record done."""
        sqs = self.config.client("sqs")
        queue_url = self.queue_url(d)
        self.write(lambda: sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=d.record.receipt_handle))

    def queue_url(self, d: Delivery) -> str:
        """The URL of the queue a record came from (its priority level's)."""
        record = d.record
        known = self.config.queues.get(queue_key(d.spec.name, d.source_level))
        url = (known.url if known else "") or self._queue_urls.get(record.event_source_arn)
        where = self.config.where() if not url else None
        if where is not None:  # the naming rule: the ARN ends with the queue's name
            url = where.queue_url(record.event_source_arn.rsplit(":", 1)[-1])
        if not url:  # arn:aws:sqs:<region>:<account>:<name>
            *_, account, name = record.event_source_arn.split(":")
            sqs = self.config.client("sqs")
            url = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
            self._queue_urls[record.event_source_arn] = url
        return url

    # -- durable jobs ---------------------------------------------------------------------------------

    def park(self, d: Delivery, decision: Park) -> Any:
        """Park a durable job (`lambdajobs.runtime.durable`): first the copy that continues it at its
        wake-up (an SQS delay up to 15 minutes, a one-time schedule beyond), then its record, under
        the run's lock. If the copy cannot be sent the message comes back (the record keeps the run's
        lock until the invocation's deadline, and the next run replays to the same point); if the
        record cannot be written, the copy waits for that lock and takes the job over."""
        from lambdajobs.runtime import durable, gates

        assert d.job_id is not None
        self.store.forget_progress(d.job_id)  # on the record already; the next run keeps it
        scheduled = gates.seconds_until(decision.wake_ms) > durable.MAX_SQS_DELAY_SECONDS
        self._send_wake_up(d, decision, scheduled)
        failed = self._park_record(d, decision)
        if failed is not None:
            self.log.warning(
                "could not park the job's record; its copy takes it over at the run's deadline",
                extra={"error": _error(failed)},
            )
        if scheduled:  # (a copy sent back deleted it already)
            self.delete_original(d)
        self.metric("JobParked", 1)
        return None

    def _send_wake_up(self, d: Delivery, decision: Park, scheduled: bool) -> None:
        """The copy that continues the job at its wake-up, or its one-time schedule.

        Raises:
            NotStartedError: it could not be sent (the message comes back: reported failed).
        """
        from lambdajobs.runtime import durable, gates

        assert d.job_id is not None
        job_id, wake = d.job_id, decision.wake_ms
        if not scheduled:
            self.hand_back(
                d, HandBack(gates.seconds_until(wake), decision.reason, keep_slot=False, resume=wake)
            )
            return
        body = durable.resumed_body(body_keeping_job_id(d), wake, max(0, d.attempt - 1))
        failed = self.write(
            lambda: durable.schedule_wake(
                self.config,
                d.spec.name,
                job_id,
                body,
                wake,
                d.source_level,
                message_group(d.record).get("MessageGroupId"),
            )
        )
        if failed is not None:
            self.retry_after(d, 60)
            raise NotStartedError(f"{decision.reason}: could not schedule its wake-up; it comes back in 60 s")

    def _park_record(self, d: Delivery, decision: Park) -> Exception | None:
        """Park the record (tried again on transient errors); a signal that came while the job ran
        wakes it at once instead (a copy in 1 s). Returns the error that stopped it, if any."""
        from lambdajobs.runtime import durable, lifecycle

        assert d.job_id is not None
        job_id, job = d.job_id, d.spec.name
        how: dict[str, Any] = {}
        if decision.signal is not None:
            body = body_keeping_job_id(d)
            small = len(body.encode()) <= durable.MAX_RESUME_BODY_BYTES
            how = {
                "signal": decision.signal,
                "resume_body": body if small else None,
                "resume_queue": self.queue_url(d) if small else None,
                "resume_group": message_group(d.record).get("MessageGroupId"),
            }
        try:
            aws.read_retrying(
                lambda: self.store.suspend(
                    job_id, job, decision.state, decision.lock, decision.wake_ms, **how
                )
            )
        except lifecycle.SignalArrived:
            soon = int(time.time() * 1000) + durable.CONTINUE_DELAY_MS
            self.hand_back(d, HandBack(1, "its signal came", keep_slot=False, resume=soon))
            return self.write(lambda: self.store.suspend(job_id, job, JobState.SLEEPING, decision.lock, soon))
        except Exception as exc:
            return exc
        return None

    # -- dead letters ---------------------------------------------------------------------------------

    def dead_letter(self, d: Delivery, decision: DeadLetter) -> Any:
        """Mark the job's record dead (the decision's mark), check a workflow member's stage, send the
        message to the DLQ with its reason, delete the original (see the module docstring)."""
        job_id = d.job_id if decision.for_job else None
        error = decision.error
        left = None
        if job_id is not None:
            left = CarriedOutcome(
                action="dead_letter",
                job_id=job_id,
                attempts=decision.attempts,
                type=error["type"],
                message=error["message"],
                mark=decision.mark,
                lock=decision.lock,
            )
        if left is not None and decision.mark is not None:
            if not decision.mark_now:  # the write just failed here: the copy makes it
                return self.hand_back(d, HandBack(1, "dead-letter", outcome=left))
            job = d.envelope.job if d.envelope is not None else d.spec.name  # (a job gone: its own name)
            failed = self.write(self._mark(d, decision.mark), job_id, job, error, decision.lock)
            if failed is not None and aws.transient(failed):  # else it cannot be written: move anyway
                return self.hand_back(d, HandBack(1, "dead-letter", outcome=left))
            left = left.model_copy(update={"mark": None})
        if left is not None and d.member is not None:
            from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

            member = d.member
            if self.write(workflow.notify, self.config, member.id, member.stage) is not None:
                return self.hand_back(d, HandBack(1, "workflow notice", outcome=left))
        if not self._send_to_dlq(d, error, decision.attempts):
            # a copy carries the move still to make (a message with no job here is dead-lettered again)
            return self.hand_back(d, HandBack(1, "dead-letter", outcome=left, keep_slot=False))
        self.delete_original(d)
        self.metric("JobDeadLettered", 1)
        self.log.warning(
            "moved to the dead-letter queue",
            extra={"message_id": d.record.message_id, "job_id": job_id, "error": error},
        )
        return None

    def _mark(self, d: Delivery, mark: Mark) -> Callable[[str, str, dict[str, str], int | None], None]:
        """The record write of `mark` (job id, job, error, lock)."""
        tally = self.store.tally(d.member)
        if mark is Mark.DEAD_RUN:
            return lambda job_id, job, error, lock: self.store.bury(job_id, job, error, lock, tally)
        past_last = mark is Mark.DEAD_PAST_LAST
        details = {**about(d), **(stored_fields(d.raw_payload) if d.envelope is not None else {})}
        return lambda job_id, job, error, lock: self.store.reject(
            job_id, job, error, past_last, tally, details
        )

    def _send_to_dlq(self, d: Delivery, error: dict[str, str], attempts: int) -> bool:
        ours = {
            ATTR_ERROR_TYPE: error["type"],
            ATTR_REASON: error["message"] or error["type"],
            ATTR_ATTEMPTS: str(attempts),
            ATTR_FAILED_AT: _iso(None, seconds=True),
        }
        # A redriven message starts again: the hand-back attributes are not carried to the DLQ.
        attributes = copied_attributes(
            d.record,
            drop=(*DLQ_ATTRIBUTES, *HANDBACK_ATTRIBUTES, ATTR_REDRIVEN),
            room=MAX_SQS_ATTRIBUTES - len(ours),
        )
        for name, text in ours.items():
            attributes[name] = {"DataType": "String", "StringValue": text}
        dlq = self.config.dlq_url(d.spec.name, d.source_level)
        send = self.config.client("sqs").send_message
        return (
            self.write(
                lambda: send(
                    QueueUrl=dlq,
                    MessageBody=d.record.body,
                    MessageAttributes=attributes,
                    **message_group(d.record),
                )
            )
            is None
        )


def _iso(epoch: float | None, *, seconds: bool = False) -> str:
    moment = datetime.now(UTC) if epoch is None else datetime.fromtimestamp(epoch, UTC)
    text = moment.isoformat(timespec="seconds" if seconds else "milliseconds")
    return text.replace("+00:00", "Z")


def _error(exc: BaseException) -> dict[str, str]:
    return error_fields(exc)


def body_keeping_job_id(d: Delivery) -> str:
    """The body for a hand-back copy. An envelope without `id`, of a job without `idempotency_key`,
    takes its job id from the message id; the copy has a new message id, so it gets the original's as
    its `id` (the envelope's own field), or it would be another job. Anything else is copied as is."""
    record = d.record
    if d.spec.idempotency_key:
        return record.body
    try:
        envelope = parse_body(record.body)  # the one body parser: never raises but EnvelopeError
    except EnvelopeError:
        return record.body
    if envelope.get("id"):
        return record.body
    return json.dumps({**envelope, "id": record.message_id}, separators=(",", ":"), ensure_ascii=False)


#: Which method carries out each kind of decision.
_CARRY_OUT: dict[type, str] = {
    HandBack: "hand_back",
    DeadLetter: "dead_letter",
    RecordSuccess: "record_success",
    Retry: "retry",
    Done: "done",
    Park: "park",
    Cancel: "cancelled",
    Supersede: "superseded",
}


def message_group(record: SQSRecord) -> dict[str, str]:
    """The record's fair-queue tenant (`MessageGroupId`) as SendMessage takes it: a copy keeps it."""
    group = (record.raw_event.get("attributes") or {}).get("MessageGroupId")
    return {"MessageGroupId": str(group)} if group else {}


def copied_attributes(record: SQSRecord, *, drop: tuple[str, ...], room: int) -> dict[str, Any]:
    """The record's message attributes as SendMessage takes them, without `drop`, at most `room`."""
    attributes: dict[str, Any] = {}
    for name, value in (record.raw_event.get("messageAttributes") or {}).items():
        if name in drop or len(attributes) >= room:
            continue
        converted = {"DataType": value.get("dataType", "String")}
        if value.get("stringValue") is not None:
            converted["StringValue"] = value["stringValue"]
        if value.get("binaryValue") is not None:
            # Lambda's event holds it base64-encoded; SendMessage wants the bytes.
            converted["BinaryValue"] = base64.b64decode(value["binaryValue"])
        attributes[name] = converted
    return attributes
