"""How the worker carries out every decision but a success (`lambdajobs.runtime.effects.Effects`
delegates to these, and imports this module on first use: a cold start whose first record succeeds
does not compile it). The protocol is in `lambdajobs.runtime.effects`' docstring."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdajobs.runtime import aws
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
from lambdajobs.runtime.records import error_fields, stored_fields
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

if TYPE_CHECKING:
    from lambdajobs.runtime.effects import Effects

MAX_SQS_ATTRIBUTES = 10  # SQS: at most 10 message attributes per message
MAX_DELAY_SECONDS = 900  # SQS: DelaySeconds at most 15 minutes


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


def apply(fx: Effects, d: Delivery, decision: Decision) -> Any:
    """`Effects.apply` of a decision other than `Done`: the executor's method for its kind."""
    how = _CARRY_OUT.get(type(decision))
    if how is not None:
        return getattr(fx, how)(d, decision)
    raise TypeError(f"not a decision the executor carries out: {decision!r}")


def notify(fx: Effects, d: Delivery) -> bool:
    from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

    member = d.member
    assert member is not None
    if fx.write(workflow.notify, fx.config, member.id, member.stage) is None:
        return True
    fx.log.warning("could not check the workflow; handing the message back", extra={"workflow": member.id})
    fx.hand_back(d, HandBack(1, "workflow notice"))
    return False


def retry(fx: Effects, d: Delivery, decision: Retry) -> Any:
    if decision.metric:
        fx.metric(decision.metric, 1)
    if decision.delay is not None:
        fx.retry_after(d, decision.delay)
    raise decision.error


def retry_after(fx: Effects, d: Delivery, seconds: int) -> None:
    try:
        fx.config.client("sqs").change_message_visibility(
            QueueUrl=fx.queue_url(d), ReceiptHandle=d.record.receipt_handle, VisibilityTimeout=seconds
        )
    except Exception as exc:
        fx.log.warning(
            "could not set the retry delay; the message returns after the queue's visibility timeout",
            extra={"error": _error(exc)},
        )


def cancelled(fx: Effects, d: Delivery, decision: Cancel) -> Any:
    assert d.job_id is not None
    fx.store.forget_progress(d.job_id)
    tally = fx.store.tally(d.member)
    if decision.write or tally is not None:
        failed = fx.write(fx.store.settle_cancelled, d.job_id, d.spec.name, decision.lock, tally)
        if failed is not None and aws.transient(failed):
            return fx.hand_back(d, HandBack(1, "cancel"))
    fx.metric("JobCancelled", 1)
    fx.log.info("job cancelled", extra={"reason": decision.reason})
    if d.member is not None:  # its stage may be complete now (a failed check hands it back)
        fx.notify(d)
    return None


def superseded(fx: Effects, d: Delivery, decision: Supersede) -> Any:
    assert d.job_id is not None
    failed = fx.write(fx.store.supersede, d.job_id, d.spec.name)
    if failed is not None and aws.transient(failed):
        return fx.hand_back(d, HandBack(1, "superseded"))
    fx.metric("JobSuperseded", 1)
    fx.log.info("superseded by a later enqueue of its debounce key; not run")
    return None


def record_success(fx: Effects, d: Delivery, decision: RecordSuccess) -> Any:
    assert d.job_id is not None
    tally = fx.store.tally(d.member)
    failed = fx.write(fx.store.complete, d.job_id, d.spec.name, decision.result, decision.lock, tally)
    if failed is None:
        fx.metric("JobSucceeded", 1)
        fx.log.info("recorded the success of a job that ran", extra={"job_id": d.job_id})
        if d.member is not None:
            fx.notify(d)
        return None
    carried = d.carried is not None and d.carried.outcome is not None
    if carried and not aws.transient(failed):  # the record cannot be written: this receive counts
        raise failed
    outcome = CarriedOutcome(action="complete", job_id=d.job_id, result=decision.result, lock=decision.lock)
    fx.log.warning(
        "the job's success could not be written; handing the outcome back with the message",
        extra={"error": _error(failed)},
    )
    return fx.hand_back(d, HandBack(1, decision.reason, outcome=outcome))


def hand_back(fx: Effects, d: Delivery, decision: HandBack) -> Any:
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
        fx.metric(decision.metric, 1)
    sqs = fx.config.client("sqs")
    queue_url = decision.to or fx.queue_url(d)
    delay = min(MAX_DELAY_SECONDS, max(0, decision.delay))
    failed = fx.write(
        lambda: sqs.send_message(
            QueueUrl=queue_url,
            MessageBody=body_keeping_job_id(d),
            MessageAttributes=attributes,
            DelaySeconds=delay,
            **message_group(d.record),
        )
    )
    if failed is not None:
        fx.retry_after(d, decision.delay)
        raise NotStartedError(
            f"{decision.reason}: could not hand the message back; it returns in {decision.delay} s"
        )
    if slot is not None and decision.mark_waiting and d.job_id is not None:
        # Only once the copy is in the queue: a record waiting for a slot means a copy due then
        # exists, so another delivery of this message is a duplicate (`gates.waits_elsewhere`).
        fx.write(fx.store.wait, d.job_id, d.spec.name, slot.until_iso())
    fx.delete_original(d)
    fx.metric("JobHandedBack", 1)
    fx.log.info("handed the message back", extra={"reason": decision.reason, "retry_in_seconds": delay})
    return None


def delete_original(fx: Effects, d: Delivery) -> None:
    sqs = fx.config.client("sqs")
    queue_url = fx.queue_url(d)
    fx.write(lambda: sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=d.record.receipt_handle))


def queue_url(fx: Effects, d: Delivery) -> str:
    record = d.record
    known = fx.config.queues.get(queue_key(d.spec.name, d.source_level))
    url = (known.url if known else "") or fx._queue_urls.get(record.event_source_arn)
    where = fx.config.where() if not url else None
    if where is not None:  # the naming rule: the ARN ends with the queue's name
        url = where.queue_url(record.event_source_arn.rsplit(":", 1)[-1])
    if not url:  # arn:aws:sqs:<region>:<account>:<name>
        *_, account, name = record.event_source_arn.split(":")
        sqs = fx.config.client("sqs")
        url = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
        fx._queue_urls[record.event_source_arn] = url
    return url


def park(fx: Effects, d: Delivery, decision: Park) -> Any:
    from lambdajobs.runtime import durable, gates

    assert d.job_id is not None
    fx.store.forget_progress(d.job_id)  # on the record already; the next run keeps it
    scheduled = gates.seconds_until(decision.wake_ms) > durable.MAX_SQS_DELAY_SECONDS
    _send_wake_up(fx, d, decision, scheduled)
    failed = _park_record(fx, d, decision)
    if failed is not None:
        fx.log.warning(
            "could not park the job's record; its copy takes it over at the run's deadline",
            extra={"error": _error(failed)},
        )
    if scheduled:  # (a copy sent back deleted it already)
        fx.delete_original(d)
    fx.metric("JobParked", 1)
    return None


def _send_wake_up(fx: Effects, d: Delivery, decision: Park, scheduled: bool) -> None:
    """The copy that continues the job at its wake-up, or its one-time schedule.

    Raises:
        NotStartedError: it could not be sent (the message comes back: reported failed).
    """
    from lambdajobs.runtime import durable, gates

    assert d.job_id is not None
    job_id, wake = d.job_id, decision.wake_ms
    if not scheduled:
        fx.hand_back(d, HandBack(gates.seconds_until(wake), decision.reason, keep_slot=False, resume=wake))
        return
    body = durable.resumed_body(body_keeping_job_id(d), wake, max(0, d.attempt - 1))
    failed = fx.write(
        lambda: durable.schedule_wake(
            fx.config,
            d.spec.name,
            job_id,
            body,
            wake,
            d.source_level,
            message_group(d.record).get("MessageGroupId"),
        )
    )
    if failed is not None:
        fx.retry_after(d, 60)
        raise NotStartedError(f"{decision.reason}: could not schedule its wake-up; it comes back in 60 s")


def _park_record(fx: Effects, d: Delivery, decision: Park) -> Exception | None:
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
            "resume_queue": fx.queue_url(d) if small else None,
            "resume_group": message_group(d.record).get("MessageGroupId"),
        }
    try:
        aws.read_retrying(
            lambda: fx.store.suspend(job_id, job, decision.state, decision.lock, decision.wake_ms, **how)
        )
    except lifecycle.SignalArrived:
        soon = int(time.time() * 1000) + durable.CONTINUE_DELAY_MS
        fx.hand_back(d, HandBack(1, "its signal came", keep_slot=False, resume=soon))
        return fx.write(lambda: fx.store.suspend(job_id, job, JobState.SLEEPING, decision.lock, soon))
    except Exception as exc:
        return exc
    return None


def dead_letter(fx: Effects, d: Delivery, decision: DeadLetter) -> Any:
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
            return fx.hand_back(d, HandBack(1, "dead-letter", outcome=left))
        job = d.envelope.job if d.envelope is not None else d.spec.name  # (a job gone: its own name)
        failed = fx.write(_mark(fx, d, decision.mark), job_id, job, error, decision.lock)
        if failed is not None and aws.transient(failed):  # else it cannot be written: move anyway
            return fx.hand_back(d, HandBack(1, "dead-letter", outcome=left))
        left = left.model_copy(update={"mark": None})
    if left is not None and d.member is not None:
        from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

        member = d.member
        if fx.write(workflow.notify, fx.config, member.id, member.stage) is not None:
            return fx.hand_back(d, HandBack(1, "workflow notice", outcome=left))
    if not _send_to_dlq(fx, d, error, decision.attempts):
        # a copy carries the move still to make (a message with no job here is dead-lettered again)
        return fx.hand_back(d, HandBack(1, "dead-letter", outcome=left, keep_slot=False))
    fx.delete_original(d)
    fx.metric("JobDeadLettered", 1)
    fx.log.warning(
        "moved to the dead-letter queue",
        extra={"message_id": d.record.message_id, "job_id": job_id, "error": error},
    )
    return None


def _mark(fx: Effects, d: Delivery, mark: Mark) -> Callable[[str, str, dict[str, str], int | None], None]:
    """The record write of `mark` (job id, job, error, lock)."""
    tally = fx.store.tally(d.member)
    if mark is Mark.DEAD_RUN:
        return lambda job_id, job, error, lock: fx.store.bury(job_id, job, error, lock, tally)
    past_last = mark is Mark.DEAD_PAST_LAST
    details = {**about(d), **(stored_fields(d.raw_payload) if d.envelope is not None else {})}
    return lambda job_id, job, error, lock: fx.store.reject(job_id, job, error, past_last, tally, details)


def _send_to_dlq(fx: Effects, d: Delivery, error: dict[str, str], attempts: int) -> bool:
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
    dlq = fx.config.dlq_url(d.spec.name, d.source_level)
    send = fx.config.client("sqs").send_message
    return (
        fx.write(
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
