"""The plain job the worker comparisons run: send_email's payload, work and options (PII field, 5
attempts, 30 s) without its rate limit (20 a second would set the pace, not the worker) and priority
levels. Its declaration is made on demand, inside the caller's `isolated_registry`."""

from __future__ import annotations

from typing import Any

PLAIN_JOB = "plain_email"


def declare() -> Any:
    """Declare the plain job; returns its JobSpec."""
    from handlers import emails
    from handlers.emails import SendEmail
    from lambdajobs import JobContext, job

    def plain_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
        return emails.send_email(payload, ctx)

    plain_email.__annotations__ = {"payload": SendEmail, "ctx": JobContext, "return": dict}
    declared = job(name=PLAIN_JOB, timeout_seconds=30, max_attempts=5, pii_fields=("to",))(plain_email)
    return declared.spec
