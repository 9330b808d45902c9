"""Personal data declared in pii_fields never reaches logs, job-record errors or DLQ reasons."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import Backoff, JobContext, PermanentError
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status

EMAIL = "jane.doe@example.com"
CARD = "4111111111111111"
OTHER_EMAIL = "john.roe@example.org"
OTHER_CARD = "5500005555555559"
BACKUP_CARD = "3530111333300000"


class Charge(BaseModel):
    email: str
    card_number: str
    amount_cents: int
    outcome: str  # ok | retry | permanent


class Calls:
    seen: dict[str, int] = {}


def charge_card(payload: Charge, ctx: JobContext) -> dict:
    # a careless job: it logs and raises with the personal data in every way it can
    ctx.logger.info(f"charging {payload.card_number} for {payload.email}", extra={"email": payload.email})
    ctx.logger.info("details", extra={"customer": {"email": payload.email, "card": payload.card_number}})
    # a value not from this payload, under a PII field's name: erased by name (data masking)
    ctx.logger.info("backup card", extra={"card_number": BACKUP_CARD, "wallet": {"card_number": BACKUP_CARD}})
    key = payload.card_number
    Calls.seen[key] = Calls.seen.get(key, 0) + 1
    if payload.outcome == "retry" and Calls.seen[key] == 1:
        raise RuntimeError(f"card {payload.card_number} declined for {payload.email}; try again")
    if payload.outcome == "permanent":
        raise PermanentError(f"card {payload.card_number} of {payload.email} is blocked")
    if payload.outcome == "always":
        raise RuntimeError(f"gateway refused {payload.card_number}")
    return {"charged": payload.amount_cents}


@pytest.fixture
def runner(declare):
    Calls.seen = {}
    return declare(charge_card, pii_fields=("email", "card_number"), max_attempts=2, backoff=Backoff.fixed(0))


@pytest.fixture
def worker_logs():
    """Everything the worker's Powertools logger writes, as it would reach CloudWatch Logs."""
    import io
    import logging

    stream = io.StringIO()
    handlers = logging.getLogger("lambdajobs").handlers
    previous = [h.setStream(stream) for h in handlers]
    yield stream
    for handler, old in zip(handlers, previous, strict=True):
        handler.setStream(old)


def test_pii_never_appears_in_logs_errors_or_dlq_reasons(runner, clock, worker_logs, caplog):
    # GIVEN charges that succeed, are retried, fail permanently, and die on their last attempt
    ids = {
        "ok": enqueue("charge_card", Charge(email=EMAIL, card_number=CARD, amount_cents=100, outcome="ok")),
        "retry": enqueue(
            "charge_card",
            Charge(email=OTHER_EMAIL, card_number=OTHER_CARD, amount_cents=200, outcome="retry"),
        ),
        "permanent": enqueue(
            "charge_card",
            Charge(
                email="max@example.net", card_number="340000000000009", amount_cents=1, outcome="permanent"
            ),
        ),
        "always": enqueue(
            "charge_card",
            Charge(email="ann@example.io", card_number="6011000990139424", amount_cents=1, outcome="always"),
        ),
    }
    # WHEN they run to their end
    for _ in range(4):
        runner.drain()
        clock.shift(2)
    statuses = {k: get_status(v) for k, v in ids.items()}
    assert [statuses[k].state for k in ("ok", "retry", "permanent", "always")] == [
        "succeeded",
        "succeeded",
        "dead",
        "dead",
    ]
    # THEN no log line, record error or DLQ reason holds any of the personal data
    logs = worker_logs.getvalue() + caplog.text
    assert "charging" in logs and "declined" in logs and "*****" in logs  # the lines are there, masked
    dlq = runner.dlq_messages()
    reasons = json.dumps([m["MessageAttributes"] for m in dlq])
    errors = json.dumps([s.error for s in statuses.values()])
    for secret in (
        BACKUP_CARD,
        EMAIL,
        CARD,
        OTHER_EMAIL,
        OTHER_CARD,
        "max@example.net",
        "340000000000009",
        "ann@example.io",
        "6011000990139424",
    ):
        assert secret not in logs, f"{secret} leaked into the logs"
        assert secret not in reasons, f"{secret} leaked into a DLQ reason"
        assert secret not in errors, f"{secret} leaked into a job record"
    # AND the reasons still say what happened
    assert "is blocked" in reasons and "gateway refused" in reasons


def test_unknown_pii_field_fails_at_declaration():
    from lambdajobs.runtime import DeclarationError
    from lambdajobs.runtime.spec import job
    from lambdajobs.testing import isolated_registry

    with isolated_registry(), pytest.raises(DeclarationError, match="pii_fields"):
        job(name="leaky", pii_fields=("phone",))(charge_card)
