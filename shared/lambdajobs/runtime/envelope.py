"""Envelope v1: the JSON message body every producer sends, in any language.

    {"v": 1, "job": "send_email", "id": "order-42", "payload": {...}, "enqueued_at": "2026-11-29T19:00:00Z"}

`v` and `job` and `payload` are required; `id` is the job id (when absent the worker uses the SQS
message id); `enqueued_at` is RFC 3339; `scheduled_at` (RFC 3339) is set on scheduled runs;
`priority` (optional) names one of the job's priority levels: a message that arrives on another
level's queue is moved to its level's queue first (send it to that level's queue, from the manifest,
to save the hop); `workflow` (optional, set by lambdajobs on the members of a workflow:
`{"id": ..., "stage": 0, "index": 3}`, and on later stages `"parents": {"total", "succeeded", "dead"}`,
the counts of the stage before) makes the job a member of that workflow; `resume` (set by lambdajobs
on the message a one-time schedule sends to continue a parked durable job: `{"wake": <epoch ms>,
"prior_attempts": <n>}`); `debounce` (set on a debounced enqueue: `{"key": ..., "at": <epoch ms>}`,
see docs/how-to/debounce.md). Unknown fields are ignored,
so later versions can add fields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lambdajobs.runtime import lazy
from lambdajobs.runtime.errors import EnvelopeError
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX

if TYPE_CHECKING:
    from lambdajobs.runtime.envelope_rare import DebounceField as DebounceField
    from lambdajobs.runtime.envelope_rare import ParentCounts as ParentCounts
    from lambdajobs.runtime.envelope_rare import ResumeField as ResumeField
    from lambdajobs.runtime.envelope_rare import WorkflowField as WorkflowField
    from lambdajobs.runtime.envelope_rare import _summary as _summary
    from lambdajobs.runtime.envelope_rare import encode as encode

#: SQS maximum message size (1 MiB since 2025; it was 256 KiB before).
MAX_MESSAGE_BYTES = 1_048_576
MAX_JOB_ID_LENGTH = 256


MAX_WORKFLOW_ID_LENGTH = 200


#: Names of this module defined in `lambdajobs.runtime.envelope_rare` (loaded on first use): the field
#: models only a workflow's, a continuation's or a debounced envelope has, `encode` (a producer's).
RARE = frozenset({"ParentCounts", "WorkflowField", "ResumeField", "DebounceField", "encode", "_summary"})

__getattr__ = lazy.exports(__name__, dict.fromkeys(RARE, "lambdajobs.runtime.envelope_rare"))


class Envelope(BaseModel):
    """An envelope, read. Its `workflow`, `resume` and `debounce` models live in
    `lambdajobs.runtime.envelope_rare`: the model (its validator, its schema) is built on first use,
    and the build imports them (`model_rebuild`), so a cold start that only reads plain envelopes
    (`decode`) defines none of them."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    v: Literal[1]
    job: str = Field(min_length=1)
    id: str | None = Field(default=None, min_length=1, max_length=MAX_JOB_ID_LENGTH)
    payload: dict[str, Any]
    enqueued_at: datetime | None = None
    scheduled_at: datetime | None = None
    priority: str | None = Field(default=None, min_length=1, max_length=64)
    workflow: WorkflowField | None = None
    resume: ResumeField | None = None
    debounce: DebounceField | None = None

    @field_validator("id")
    @classmethod
    def _id_not_reserved(cls, value: str | None) -> str | None:
        if value is not None and value.startswith(RESERVED_ID_PREFIX):
            raise ValueError(f"ids starting with {RESERVED_ID_PREFIX!r} are reserved")
        return value

    @field_validator("v", mode="before")
    @classmethod
    def _version_is_a_number(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON `true` would otherwise pass as 1
            raise ValueError("v must be the number 1")
        return value

    @classmethod
    def model_rebuild(
        cls,
        *,
        force: bool = False,
        raise_errors: bool = True,
        _parent_namespace_depth: int = 2,
        _types_namespace: Mapping[str, Any] | None = None,
    ) -> bool | None:
        """Pydantic's, with the field models of `lambdajobs.runtime.envelope_rare` in the namespace its
        annotations are resolved in (pydantic calls it when the model is first used: a validation, a
        schema)."""
        from lambdajobs.runtime import envelope_rare

        return super().model_rebuild(
            force=force,
            raise_errors=raise_errors,
            _parent_namespace_depth=_parent_namespace_depth,
            _types_namespace={**vars(envelope_rare), **(_types_namespace or {})},
        )


def parse_body(body: Any) -> dict[str, Any]:
    """A message body as a JSON object: the one parser of bodies (the worker's `decode` and the
    operator tools' dead-letter views both use it).

    Raises:
        EnvelopeError: anything else, whatever went wrong (not JSON, not an object, nested too deeply
            for the parser), with a one-line reason: a body must never crash its reader.
    """
    try:
        data = json.loads(body)
    except RecursionError:
        raise EnvelopeError("message body is JSON nested too deeply to read") from None
    except Exception as exc:
        raise EnvelopeError(f"message body is not JSON ({exc.__class__.__name__}: {exc})") from exc
    if not isinstance(data, dict):
        raise EnvelopeError(f"message body is a JSON {type(data).__name__}, not an envelope object")
    return data


#: The keys of a plain envelope (no workflow, resume or debounce): `decode` checks those by hand.
_PLAIN_KEYS = frozenset({"v", "job", "id", "payload", "enqueued_at", "scheduled_at", "priority"})
#: A time as the producer writes it (`encode`): what `datetime.fromisoformat` and pydantic read alike.
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?(Z|[+-]\d\d:\d\d)")


def _time(value: Any) -> datetime | bool | None:
    """A plain envelope's time: None, a datetime, or False (not one `_plain` reads: the model decides)."""
    if value is None:
        return None
    if type(value) is not str or not _ISO_TIME.fullmatch(value):
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:  # a field out of range (month 13, hour 25): the model's error says which
        return False


def _short(value: Any, longest: int) -> bool:
    return value is None or (type(value) is str and 0 < len(value) <= longest)


def _plain(data: dict[str, Any]) -> Envelope | None:
    """The envelope of a plain job (the producer's, with no workflow, resume or debounce), checked by
    hand as the model checks it and built without validation, so a cold start that only sees such
    envelopes never builds the model's validators; None for any other: the model decides."""
    if not data.keys() <= _PLAIN_KEYS:
        return None
    job, job_id = data.get("job"), data.get("id")
    if type(data.get("v")) is not int or data["v"] != 1 or type(job) is not str or not job:
        return None
    if not _short(job_id, MAX_JOB_ID_LENGTH) or (job_id or "").startswith(RESERVED_ID_PREFIX):
        return None
    if type(data.get("payload")) is not dict or not _short(data.get("priority"), 64):
        return None
    times: dict[str, Any] = {key: _time(data[key]) for key in ("enqueued_at", "scheduled_at") if key in data}
    if any(value is False for value in times.values()):
        return None
    return Envelope.model_construct(**{**data, **times})


def decode(body: Any) -> Envelope:
    """Parse a message body into an envelope.

    Raises:
        EnvelopeError: with a one-line reason, for any body that is not a valid envelope.
    """
    data = parse_body(body)
    plain = _plain(data)
    if plain is not None:
        return plain
    try:
        return Envelope.model_validate(data)
    except ValidationError as exc:
        raise EnvelopeError(f"invalid envelope: {summarize_validation_error(exc)}") from exc
    except Exception as exc:  # e.g. a payload nested too deeply for the validator
        raise EnvelopeError(f"invalid envelope ({exc.__class__.__name__})") from exc


def summarize_validation_error(exc: ValidationError) -> str:
    """A one-line, value-free summary of a pydantic error: payload values may hold personal data
    (`lambdajobs.runtime.envelope_rare._summary`: loaded on first use)."""
    from lambdajobs.runtime import envelope_rare

    return envelope_rare._summary(exc)
