"""One SQS record as the worker sees it: decoded once into a frozen `Delivery`.

A delivery is everything the worker's decisions read: the envelope and the job it names, the priority
level it asks for and the one whose queue it came from, its attempt number, its job id, its workflow
membership, whether it is a DLQ redrive, and what a handed-back copy carries. Nothing here talks to
AWS: the gates (`lambdajobs.runtime.gates`) and the executor (`lambdajobs.runtime.effects`) do.

The hand-back protocol. A copy the worker sends back to a job's queue carries, in message attributes
(see `lambdajobs.runtime.settings`):

- `lambdajobs.prior_attempts`: the attempts earlier copies used (this copy's attempt is that plus its
  receive count);
- `lambdajobs.rate_slot`: `<attempt>:<slot µs>[:ahead]`, the rate-limit slot the copy waits for;
- `lambdajobs.settle`: a `CarriedOutcome` (JSON, versioned by `v`): the job already ran and only its
  bookkeeping is left (record its success; or mark its record dead and move it to the DLQ).

The queue is writable by anyone with send permission, so a carried outcome is validated: one that does
not parse, or names another job id, is discarded with a warning and the message runs as its own job; a
newer version than this worker knows (a deploy in progress) is handed back for a newer worker, neither
run nor dropped, for up to an hour after it was written (then it goes to the DLQ with that reason).
Copies written before the protocol had a version (no `v`) are read as version 0; the marks keep the
values those workers wrote and read.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from lambdajobs.runtime import lazy
from lambdajobs.runtime.envelope import Envelope, decode
from lambdajobs.runtime.errors import (
    EnvelopeError,
    PayloadValidationError,
    UnknownJobError,
    UnknownPriorityError,
)
from lambdajobs.runtime.settings import (
    ATTR_FAILED_AT,
    ATTR_PRIOR_ATTEMPTS,
    ATTR_RATE_SLOT,
    ATTR_REDRIVEN,
    ATTR_RESUME,
    ATTR_SETTLE,
)
from lambdajobs.runtime.spec import JobSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

    from lambdajobs.runtime.decisions_rare import CarriedSlot as CarriedSlot
    from lambdajobs.runtime.decisions_rare import Mark as Mark
    from lambdajobs.runtime.delivery_rare import Carried as Carried
    from lambdajobs.runtime.delivery_rare import CarriedOutcome as CarriedOutcome
    from lambdajobs.runtime.envelope import WorkflowField

#: The version of `CarriedOutcome` this worker writes and understands.
PROTOCOL_VERSION = 1

#: Names of this module defined elsewhere, loaded on first use: the outcome a handed-back copy carries,
#: read (`lambdajobs.runtime.delivery_rare`); how a record is marked dead and the rate-limit slot a copy
#: carries (`lambdajobs.runtime.decisions_rare`, with the decisions that carry them).
RARE = {
    "CarriedOutcome": "lambdajobs.runtime.delivery_rare",
    "Carried": "lambdajobs.runtime.delivery_rare",
    "Mark": "lambdajobs.runtime.decisions_rare",
    "CarriedSlot": "lambdajobs.runtime.decisions_rare",
}

__getattr__ = lazy.exports(__name__, RARE)


def read_carried(text: str | None, job_id: str | None) -> Carried | None:
    """The carried outcome of a message (None: it carries none). Read with the envelope's hardened
    parser (size and nesting limits): never raises."""
    if text is None:
        return None
    return _rare().read_carried(text, job_id)


class Delivery(NamedTuple):
    """One SQS record of a job's queue, decoded once. (Value types on every record's path are
    NamedTuples: a class of them costs a tenth of a dataclass's at a cold start.)"""

    record: SQSRecord
    #: The job whose queue the record came from (the worker's).
    spec: JobSpec
    #: The attempt this receive is: the attempts earlier copies used, plus its receive count.
    attempt: int
    receives: int
    #: The priority level of the queue it came from (None: the job's own queue).
    source_level: str | None
    #: A message redriven from the DLQ (it carries the reason the worker gave it there, or the mark
    #: `lambdajobs dlq redrive` sets on a message SQS moved there).
    redriven: bool
    carried_slot: CarriedSlot | None
    carried: Carried | None
    envelope: Envelope | None = None
    #: Why the envelope cannot run here: undecodable, another job's, a priority the job lacks.
    unrunnable: EnvelopeError | UnknownJobError | UnknownPriorityError | None = None
    #: The envelope's priority level (None: the job's own queue).
    level: str | None = None
    payload: BaseModel | None = None
    invalid: PayloadValidationError | None = None
    #: The job id: the envelope's `id`, else the job's idempotency key of the payload, else the
    #: message id (None: the envelope could not be read).
    job_id: str | None = None
    #: The copy that continues a parked durable job: the wake-up it is for (epoch ms), else None.
    resume_wake: int | None = None

    def __repr__(self) -> str:  # not the record, the spec or the payload (personal data)
        return (
            f"Delivery(job={self.spec.name!r}, job_id={self.job_id!r}, attempt={self.attempt}, "
            f"receives={self.receives}, level={self.level!r}, redriven={self.redriven})"
        )

    @property
    def member(self) -> WorkflowField | None:
        """The workflow this job is a member of, or None."""
        return self.envelope.workflow if self.envelope is not None else None

    @property
    def raw_payload(self) -> Any:
        return self.envelope.payload if self.envelope is not None else None

    @property
    def wants_other_level(self) -> bool:
        """Sent to the queue of another priority level than its own (a producer that knows only the
        job's queue)."""
        return (
            self.envelope is not None
            and self.envelope.priority is not None
            and self.level != self.source_level
        )


def about(d: Delivery) -> dict[str, Any]:
    """What the job's record keeps of its message (`lifecycle.acquire`'s `about`): when it was
    enqueued (the envelope's `enqueued_at`, else SQS's SentTimestamp), the priority level whose queue
    ran it (jobs with priorities), its fair-queue tenant, and a workflow member's place."""
    envelope = d.envelope
    enqueued = envelope.enqueued_at if envelope is not None else None
    if enqueued is None:
        sent = d.record.attributes.sent_timestamp
        enqueued = datetime.fromtimestamp(int(sent) / 1000, UTC) if sent and str(sent).isdigit() else None
    elif enqueued.tzinfo is None:
        enqueued = enqueued.replace(tzinfo=UTC)
    member = d.member
    return {
        "enqueued_at": enqueued.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        if enqueued is not None
        else None,
        "level": (d.source_level or d.spec.default_priority) if d.spec.priorities else None,
        "tenant": (d.record.raw_event.get("attributes") or {}).get("MessageGroupId") or None,
        "workflow": {"id": member.id, "stage": member.stage, "index": member.index} if member else None,
    }


def attempt_of(record: SQSRecord) -> int:
    """The attempt a record is: the attempts earlier copies of its message used, plus its receive count."""
    receives = int(record.attributes.approximate_receive_count or 1)
    return _attempt(receives, _texts(record))


def read(
    spec: JobSpec,
    record: SQSRecord,
    *,
    source_level: str | None,
    lookup: Callable[[str], JobSpec],
) -> Delivery:
    """Decode a record of `spec`'s queue (from priority level `source_level`'s queue); `lookup` finds a
    declared job by name. Never raises: what cannot be read is in the delivery."""
    texts = _texts(record)
    receives = int(record.attributes.approximate_receive_count or 1)
    read: dict[str, Any] = {
        "record": record,
        "spec": spec,
        "attempt": _attempt(receives, texts),
        "receives": receives,
        "source_level": source_level,
        "redriven": ATTR_FAILED_AT in texts or ATTR_REDRIVEN in texts,
        "carried_slot": _carried_slot(texts.get(ATTR_RATE_SLOT)),
        "carried": None,
    }
    try:
        envelope = decode(record.body)
    except EnvelopeError as exc:
        return Delivery(**read, unrunnable=exc)
    # each part read into the fields, and the delivery made once (it is frozen: each `replace` would
    # make it again, and every record reads them all)
    read["envelope"] = envelope
    read.update(_envelope_fields(spec, record, envelope, lookup))
    read.update(_resume_fields(read["attempt"], receives, texts, envelope))
    read["carried"] = read_carried(texts.get(ATTR_SETTLE), read.get("job_id"))
    return Delivery(**read)


def _carried_slot(text: str | None) -> CarriedSlot | None:
    """The rate-limit slot a copy carries (`CarriedSlot.parse`), None when it carries none."""
    if text is None:
        return None
    from lambdajobs.runtime.decisions_rare import CarriedSlot

    return CarriedSlot.parse(text)


def _texts(record: SQSRecord) -> dict[str, str]:
    """The message attributes' string values, by name (most messages have none: an empty dict, read
    with `get` by every part of `read`)."""
    attributes = record.raw_event.get("messageAttributes")
    if not attributes:
        return {}
    return {
        name: str(value["stringValue"])
        for name, value in attributes.items()
        if isinstance(value, dict) and value.get("stringValue") is not None
    }


def _attempt(receives: int, texts: dict[str, str]) -> int:
    try:
        prior = int(texts.get(ATTR_PRIOR_ATTEMPTS) or 0)
    except ValueError:
        prior = 0
    return max(0, prior) + receives


def _resume_fields(attempt: int, receives: int, texts: dict[str, str], envelope: Envelope) -> dict[str, Any]:
    """A copy that continues a parked durable job: the wake-up it carries (an attribute on an SQS copy;
    the envelope's `resume` on a schedule's, with the attempts before it when no attribute says)."""
    text = texts.get(ATTR_RESUME)
    if text is not None and text.isdigit():
        return {"resume_wake": int(text)}
    if envelope.resume is None:
        return {}
    if ATTR_PRIOR_ATTEMPTS not in texts:
        attempt = envelope.resume.prior_attempts + receives
    return {"resume_wake": envelope.resume.wake, "attempt": attempt}


def _envelope_fields(
    spec: JobSpec, record: SQSRecord, envelope: Envelope, lookup: Callable[[str], JobSpec]
) -> dict[str, Any]:
    try:
        if lookup(envelope.job).name != spec.name:
            raise UnknownJobError(
                f"job '{envelope.job}' was sent to the queue of job '{spec.name}'; "
                f"send it to the queue of '{envelope.job}'."
            )
        level = spec.level_for(envelope.priority) if envelope.priority is not None else None
    except (UnknownJobError, UnknownPriorityError) as exc:
        return {"unrunnable": exc, "job_id": envelope.id}
    try:
        payload = spec.validate(envelope.payload)  # the producer's rule, the same code
    except PayloadValidationError as exc:
        job_id = envelope.id or spec.derive_job_id(envelope.payload) or record.message_id
        return {"level": level, "invalid": exc, "job_id": job_id}
    # Derived from the validated payload, as the Python producer derives it: defaults applied.
    job_id = envelope.id or spec.job_id(payload.model_dump(mode="json")) or record.message_id
    return {"level": level, "payload": payload, "job_id": job_id}


def _rare() -> Any:
    """`lambdajobs.runtime.delivery_rare`: imported by the first record that carries an outcome."""
    from lambdajobs.runtime import delivery_rare

    return delivery_rare
