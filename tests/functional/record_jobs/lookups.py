"""`lookup`: searchable by customer, country, e-mail (personal data: hashed) and tenant; fails its
first `fail_first` attempts (with the e-mail in the error, which the record must not keep), or every
attempt with `fail_always`. `ranked`: a job with priority levels."""

from __future__ import annotations

from pydantic import BaseModel

from lambdajobs import TENANT_FIELD, Backoff, JobContext, job

MAX_ATTEMPTS = 3


class Address(BaseModel):
    country: str
    city: str = ""


class Lookup(BaseModel):
    customer_id: str
    email: str = "nobody@example.com"
    address: Address | None = None
    fail_first: int = 0
    fail_always: bool = False
    filler: str = ""


class LookupFailedError(Exception):
    """A failure that may pass: the job is retried."""


@job(
    timeout_seconds=30,
    max_attempts=MAX_ATTEMPTS,
    backoff=Backoff.fixed(1),
    pii_fields=("email",),
    searchable=("customer_id", "address.country", "email", TENANT_FIELD),
)
def lookup(payload: Lookup, ctx: JobContext) -> dict[str, int]:
    if payload.fail_always or ctx.attempt <= payload.fail_first:
        raise LookupFailedError(f"no answer for {payload.email} on attempt {ctx.attempt}")
    return {"attempt": ctx.attempt}


class Ranked(BaseModel):
    key: str
    fail: bool = False


@job(timeout_seconds=30, max_attempts=1, priorities=("high", "normal"))
def ranked(payload: Ranked) -> str:
    if payload.fail:
        raise LookupFailedError("ranked failed")
    return payload.key
