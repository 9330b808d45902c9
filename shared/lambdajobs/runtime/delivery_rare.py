"""What the hand-back protocol (`lambdajobs.runtime.delivery`) needs only for a copy that carries an
outcome: the `CarriedOutcome` model, and reading it (`Carried`). Loaded on first use (each name is
importable from `lambdajobs.runtime.delivery` too), so a cold start whose record carries none does not
define them."""

from __future__ import annotations

import time
from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from lambdajobs.runtime.decisions_rare import Mark
from lambdajobs.runtime.delivery import PROTOCOL_VERSION
from lambdajobs.runtime.envelope import parse_body
from lambdajobs.runtime.errors import EnvelopeError


class CarriedOutcome(BaseModel):
    """What a handed-back copy carries when its job already ran: the outcome left to record."""

    # built when a copy carries an outcome (not at a cold start's first delivery)
    model_config = ConfigDict(frozen=True, extra="ignore", defer_build=True)

    v: int = PROTOCOL_VERSION
    #: `complete`: write the job's success; `dead_letter`: mark its record (`mark`), move it to the DLQ.
    action: Literal["complete", "dead_letter"]
    job_id: str = Field(min_length=1)
    #: The attempts used, as the DLQ message reports them.
    attempts: int | None = Field(default=None, ge=0)
    #: The lock of the run whose outcome this is (its in-progress expiry): writes land only under it.
    lock: int | None = None
    #: `complete`: the job's result (JSON text, as stored).
    result: str = "null"
    #: `dead_letter`: the error, as `error_fields` gives it.
    type: str = "Error"
    message: str = ""
    mark: Mark | None = None
    #: When it was written (epoch s). Every version has `v`, `job_id` and `at`: a worker that meets a
    #: newer version knows whose outcome it is, and for how long it has waited for a newer worker.
    at: int = Field(default_factory=lambda: int(time.time()))

    def error(self) -> dict[str, str]:
        return {"type": self.type, "message": self.message}

    def text(self) -> str:
        return self.model_dump_json(exclude_none=True)


class Carried(NamedTuple):
    """A copy's carried outcome, read: the outcome, or why there is none to apply (`newer`: written by
    a newer worker, `at` then; else the reason it was discarded). `text` is the attribute as sent."""

    outcome: CarriedOutcome | None = None
    newer: int | None = None
    at: int | None = None
    discarded: str | None = None
    text: str | None = None

    def __repr__(self) -> str:
        shown = f"outcome={self.outcome!r}, newer={self.newer}, at={self.at}, discarded={self.discarded!r}"
        return f"Carried({shown})"


def read_carried(text: str, job_id: str | None) -> Carried:
    """`delivery.read_carried` of a message that carries an outcome."""
    try:
        data = parse_body(text)
        if data.get("job_id") != job_id:
            return Carried(discarded="it names another job id", text=text)
        version = data.get("v", 0)  # none: written before the protocol had a version
        if isinstance(version, int) and not isinstance(version, bool) and version > PROTOCOL_VERSION:
            at = data.get("at")
            return Carried(newer=version, at=at if isinstance(at, int) else None, text=text)
        outcome = CarriedOutcome.model_validate({**data, "v": version})
    except (EnvelopeError, ValidationError) as exc:
        return Carried(discarded=f"unreadable ({str(exc).splitlines()[0][:200]})", text=text)
    return Carried(outcome=outcome, text=text)
