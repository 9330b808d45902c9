"""The plain job the worker comparisons run: send_email's payload, work and options (PII field, 5
attempts, 30 s) without its rate limit (20 a second would set the pace, not the worker) and priority
levels. Its declaration is made on demand, inside the caller's `isolated_registry`; `light()` declares
the same job in the light record mode (`record_mode="light"`), or returns None where lambdajobs has no
such mode."""

from __future__ import annotations

import inspect
from typing import Any

PLAIN_JOB = "plain_email"
LIGHT_JOB = "plain_email_light"


def declare(name: str = PLAIN_JOB, **options: Any) -> Any:
    """Declare the plain job (with these extra `@job` options); returns its JobSpec."""
    from handlers import emails
    from handlers.emails import SendEmail
    from lambdajobs import JobContext, job

    def plain_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
        return emails.send_email(payload, ctx)

    plain_email.__annotations__ = {"payload": SendEmail, "ctx": JobContext, "return": dict}
    declared = job(name=name, timeout_seconds=30, max_attempts=5, pii_fields=("to",), **options)(plain_email)
    return declared.spec


def has_light_mode() -> bool:
    """Whether `@job` takes `record_mode` (the light record mode of issue 31)."""
    from lambdajobs import job

    return "record_mode" in inspect.signature(job).parameters


def light() -> Any:
    """The plain job in the light record mode (its JobSpec), or None when `@job` has no `record_mode`."""
    if not has_light_mode():
        return None
    return declare(LIGHT_JOB, record_mode="light")
