"""What the envelope module (`lambdajobs.runtime.envelope`) needs only for envelopes a plain job's
cold start never sees, or only producers write: the models of the `workflow`, `resume` and `debounce`
fields (built when the `Envelope` model itself is: `Envelope.model_rebuild` imports this module),
`encode` (a producer's) and the summary of a validation error. Each name is importable from
`lambdajobs.runtime.envelope` too, loaded on first use."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lambdajobs.runtime.envelope import MAX_MESSAGE_BYTES, MAX_WORKFLOW_ID_LENGTH
from lambdajobs.runtime.errors import PayloadTooLargeError


class ParentCounts(BaseModel):
    """How the stage before a workflow member's ended: its members, how many succeeded and died."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    total: int = Field(ge=0)
    succeeded: int = Field(ge=0)
    dead: int = Field(ge=0)


class WorkflowField(BaseModel):
    """The envelope's `workflow`: which workflow, stage and member a job is."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    id: str = Field(min_length=1, max_length=MAX_WORKFLOW_ID_LENGTH)
    stage: int = Field(ge=0, le=10_000)
    index: int = Field(ge=0)
    parents: ParentCounts | None = None


class ResumeField(BaseModel):
    """The envelope's `resume`, set by lambdajobs on the message a one-time schedule sends to continue
    a parked durable job: its wake-up (epoch ms) and the attempts used before the one it continues."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    wake: int = Field(ge=0)
    prior_attempts: int = Field(default=0, ge=0, le=10_000)


class DebounceField(BaseModel):
    """The envelope's `debounce`, set on a debounced enqueue: its key, and when it was enqueued (epoch
    ms): the worker runs it only if no later enqueue of the key came (`lambdajobs.runtime.debounce`)."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    key: str = Field(min_length=1, max_length=256)
    at: int = Field(ge=0)


def encode(
    job: str,
    payload: dict[str, Any],
    job_id: str,
    *,
    now: datetime | None = None,
    priority: str | None = None,
    workflow: dict[str, Any] | None = None,
    debounce: dict[str, Any] | None = None,
) -> str:
    """The message body for one job; raises PayloadTooLargeError above the SQS limit."""
    moment = now or datetime.now(UTC)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    enqueued_at = moment.isoformat().replace("+00:00", "Z")
    envelope = {"v": 1, "job": job, "id": job_id, "payload": payload, "enqueued_at": enqueued_at}
    if priority is not None:
        envelope["priority"] = priority
    if workflow is not None:
        envelope["workflow"] = workflow
    if debounce is not None:
        envelope["debounce"] = debounce
    body = json.dumps(
        envelope,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    size = len(body.encode())
    if size > MAX_MESSAGE_BYTES:
        raise PayloadTooLargeError(
            f"job '{job}' id '{job_id}': the message is {size} bytes, above the SQS limit of "
            f"{MAX_MESSAGE_BYTES}; store large data in S3 and send its key in the payload."
        )
    return body


def _summary(exc: ValidationError) -> str:
    """A one-line, value-free summary of a pydantic error: payload values may hold personal data.

    Location parts after the first are kept only when they look like field names (dict keys are
    data, e.g. an email address); a message that quotes the input is replaced by the error type.
    """
    parts = []
    for err in exc.errors(include_url=False):
        loc = [str(p) for p in err["loc"]]
        shown = [p if i == 0 or p.isidentifier() or p.isdigit() else "*" for i, p in enumerate(loc)]
        value = err.get("input")
        msg = err["msg"]
        echoes_input = isinstance(value, str | int | float) and str(value) != "" and str(value) in msg
        if echoes_input or err["type"] == "union_tag_invalid":  # the tag message quotes the bad tag
            msg = err["type"]
        parts.append(f"{'.'.join(shown) or '(root)'}: {msg}")
    return "; ".join(parts)
