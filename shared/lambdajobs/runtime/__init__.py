"""lambdajobs runtime: declare jobs, enqueue them, run them in Lambda, read their status.

`aws` (lazy boto3 clients) is importable from here too. Ships inside every Lambda: imports only the
standard library, pydantic and (lazily) boto3 here; Powertools is imported by the worker. Never imports
aws_cdk, moto, rich or typer.
"""

from lambdajobs.runtime import aws
from lambdajobs.runtime.alarms import Alarms
from lambdajobs.runtime.backoff import Backoff
from lambdajobs.runtime.context import JobContext
from lambdajobs.runtime.errors import (
    DeclarationError,
    EnvelopeError,
    LambdaJobsError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    QueueNotFoundError,
    StackNotFoundError,
    UnknownJobError,
)
from lambdajobs.runtime.spec import Job, JobSpec, cron, get_spec, job, registered_jobs

__all__ = [
    "Alarms",
    "Backoff",
    "DeclarationError",
    "EnvelopeError",
    "Job",
    "JobContext",
    "JobSpec",
    "LambdaJobsError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "QueueNotFoundError",
    "StackNotFoundError",
    "UnknownJobError",
    "aws",
    "cron",
    "enqueue",
    "enqueue_many",
    "get_spec",
    "get_status",
    "job",
    "registered_jobs",
    "wait_for",
]


def __getattr__(name: str) -> object:
    # The producer and status readers pull in more modules; load them on first use only.
    if name in ("enqueue", "enqueue_many"):
        from lambdajobs.runtime import producer

        return getattr(producer, name)
    if name in ("get_status", "wait_for"):
        from lambdajobs.runtime import records

        return getattr(records, name)
    raise AttributeError(f"module 'shared' has no attribute {name!r}")
