"""The board tests' jobs, a jobs package of their own (the board's CLI test names it with --jobs).

Import it only through `load_jobs` inside `isolated_registry` (the `local` fixture does): its `@job`
declarations must not land in the process registry other tests read.

- `board_mail` (priorities high/normal, `pii_fields=("to",)`, `uses=("job_stats",)`; the `local`
  fixture turns the stack's job index on): fails permanently, naming the address in its error, when
  the subject is "bounce";
- `board_signup` (`pii_fields=("email",)`): fails permanently while its address is in `BROKEN`;
- `board_flaky`: always fails permanently (the DLQ the purge tests empty);
- `board_digest`: a cron job (the schedules page, "trigger now");
- `board_approval`: a durable job: one step ("draft", `pause` seconds), then a wait for signal
  "approval" of 10 minutes (its wake-up is an SQS delay: no schedule).
- `board_order` (`pii_fields=("email",)`, `searchable=("customer", "@tenant")`, priorities
  high/normal, 3 attempts 1 s apart): logs "packing order", fails its first `fail_times` attempts naming
  the address, then logs "order packed" and succeeds (the job page's payload, attempts, traceback and
  logs: a failed attempt's lines are written, a success's dropped; search).
"""

from __future__ import annotations

import time

from pydantic import BaseModel

from lambdajobs import JobContext, PermanentError, cron, job
from lambdajobs.runtime.backoff import Backoff

#: Addresses `board_signup` refuses (a test puts one in, then takes it out to redrive).
BROKEN: set[str] = set()


class Mail(BaseModel):
    to: str
    subject: str


class Signup(BaseModel):
    email: str
    plan: str = "free"


class Nothing(BaseModel):
    n: int = 0


@job(pii_fields=("to",), priorities=("high", "normal"), uses=("job_stats",))
def board_mail(payload: Mail) -> dict[str, str]:
    if payload.subject == "bounce":
        # names the address on purpose: the worker must mask it in the record and the DLQ reason
        raise PermanentError(f"mailbox {payload.to} is full")
    return {"sent": payload.subject}


@job(pii_fields=("email",))
def board_signup(payload: Signup) -> dict[str, str]:
    if payload.email in BROKEN:
        raise PermanentError(f"cannot reach {payload.email}")
    return {"welcomed": payload.plan}


@job(max_attempts=2)
def board_flaky(payload: Nothing) -> None:
    raise PermanentError("this job never works")


@cron("cron(0 9 * * ? *)", timezone="America/New_York")
def board_digest(payload: Nothing) -> dict[str, int]:
    return {"sent": payload.n}


class Approval(BaseModel):
    pause: float = 0.2


@job(timeout_seconds=30)
def board_approval(payload: Approval, ctx: JobContext) -> dict[str, object]:
    ctx.step("draft", lambda: time.sleep(payload.pause) or "drafted")
    decision = ctx.wait_for_signal("approval", timeout_seconds=600)
    return {"decision": decision}


class Order(BaseModel):
    customer: str
    email: str
    fail_times: int = 0


@job(
    pii_fields=("email",),
    searchable=("customer", "@tenant"),
    priorities=("high", "normal"),
    max_attempts=3,
    backoff=Backoff.fixed(1),
)
def board_order(payload: Order, ctx: JobContext) -> dict[str, str]:
    # kept until the attempt ends: written by a failing attempt, dropped by the one that succeeds
    ctx.logger.info("packing order", extra={"customer": payload.customer})
    if ctx.attempt <= payload.fail_times:
        # names the address on purpose: the record's error and traceback must hold it masked
        raise RuntimeError(f"warehouse cannot reach {payload.email}")
    ctx.logger.info("order packed", extra={"customer": payload.customer})
    return {"packed": payload.customer}
