"""lambdajobs: serverless background jobs on AWS (SQS + Lambda + DynamoDB), declared once in Python.

    from lambdajobs import job, cron, enqueue, get_status, JobContext, PermanentError

This module ships inside every Lambda function, so it imports only `lambdajobs.runtime` (and the
producer and status readers only when first used). The parts that never ship live beside it:
`lambdajobs.cdk` (constructs), `lambdajobs.local` (the local stack), `lambdajobs.testing` (a harness
for your tests), `lambdajobs.cli` and `lambdajobs.ops` (operator tools).
"""

from typing import TYPE_CHECKING

from lambdajobs.runtime import (
    Alarms,
    Backoff,
    ConfigurationError,
    DeclarationError,
    EnqueueError,
    EnvelopeError,
    Job,
    JobContext,
    JobIdError,
    JobSpec,
    JobState,
    LambdaJobsError,
    NotStartedError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    ProgressError,
    QueueNotFoundError,
    ScheduleConflictError,
    ScheduleError,
    StackConfig,
    StackNotFoundError,
    UnknownJobError,
    WaitTimeoutError,
    cron,
    current,
    get_spec,
    job,
    jobs_in,
    load_jobs,
    registered_jobs,
    using,
)

if TYPE_CHECKING:
    from lambdajobs.runtime.producer import enqueue, enqueue_many
    from lambdajobs.runtime.records import JobStatus, get_status, wait_for

__all__ = [
    "Alarms",
    "Backoff",
    "ConfigurationError",
    "DeclarationError",
    "EnqueueError",
    "EnvelopeError",
    "Job",
    "JobContext",
    "JobIdError",
    "JobSpec",
    "JobState",
    "JobStatus",
    "LambdaJobsError",
    "NotStartedError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "ProgressError",
    "QueueNotFoundError",
    "ScheduleConflictError",
    "ScheduleError",
    "StackConfig",
    "StackNotFoundError",
    "UnknownJobError",
    "WaitTimeoutError",
    "cron",
    "current",
    "enqueue",
    "enqueue_many",
    "get_spec",
    "get_status",
    "job",
    "jobs_in",
    "load_jobs",
    "registered_jobs",
    "using",
    "wait_for",
]


def __getattr__(name: str) -> object:
    # enqueue, enqueue_many, get_status, wait_for, JobStatus: loaded on first use (cold start).
    import lambdajobs.runtime

    return getattr(lambdajobs.runtime, name)
