"""lambdajobs runtime: declare jobs, enqueue them, run them in Lambda, read their status.

This subpackage (plus `lambdajobs/__init__.py`) is what ships in every Lambda function, beside the
user's job modules. It imports only the standard library, pydantic and (lazily) boto3 and Powertools;
never aws_cdk, moto, rich or typer (tests/unit/test_layering.py enforces it).

Its namespace (`__all__`, and `LAZY`: names loaded on first use) gathers the runtime's main names,
internal ones included (the registry, every error, the configuration's `current`). The public API is
the part `lambdajobs` re-exports (`lambdajobs.__all__`), and `lambdajobs.errors`.
"""

from typing import TYPE_CHECKING

from lambdajobs.runtime import lazy
from lambdajobs.runtime.config import StackConfig, current, using
from lambdajobs.runtime.context import JobCancelled, JobContext
from lambdajobs.runtime.errors import (
    ClockError,
    ConfigurationError,
    DeclarationError,
    EnqueueError,
    EnvelopeError,
    InvalidOptionError,
    JobIdError,
    JobIndexOffError,
    LambdaJobsError,
    LastAttemptLostError,
    MaxDurationError,
    NotStartedError,
    PayloadTooLargeError,
    PayloadValidationError,
    PermanentError,
    ProgressError,
    QueueNotFoundError,
    RateLimitBusyError,
    RecordHeldError,
    ScheduleConflictError,
    ScheduleError,
    SignalRefusedError,
    SignalTimeoutError,
    StackNotFoundError,
    StateInUseError,
    StepError,
    UnknownJobError,
    UnknownPriorityError,
    WaitTimeoutError,
    WorkflowError,
)
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.settings import TENANT_FIELD, bucket_prefix
from lambdajobs.runtime.spec import Job, JobSpec, get_spec, job, jobs_in, load_jobs, registered_jobs

if TYPE_CHECKING:  # loaded on first use (`LAZY`)
    from lambdajobs.runtime.alarms import Alarms as Alarms
    from lambdajobs.runtime.backoff import Backoff as Backoff
    from lambdajobs.runtime.declarations import cron as cron

__all__ = [
    "TENANT_FIELD",
    "Alarms",
    "Backoff",
    "ClockError",
    "ConfigurationError",
    "DeclarationError",
    "EnqueueError",
    "EnvelopeError",
    "InvalidOptionError",
    "Job",
    "JobCancelled",
    "JobContext",
    "JobIdError",
    "JobIndexOffError",
    "JobSpec",
    "JobState",
    "LambdaJobsError",
    "LastAttemptLostError",
    "MaxDurationError",
    "NotStartedError",
    "PayloadTooLargeError",
    "PayloadValidationError",
    "PermanentError",
    "ProgressError",
    "QueueNotFoundError",
    "RateLimitBusyError",
    "RecordHeldError",
    "ScheduleConflictError",
    "ScheduleError",
    "SignalRefusedError",
    "SignalTimeoutError",
    "StackConfig",
    "StackNotFoundError",
    "StateInUseError",
    "StepError",
    "UnknownJobError",
    "UnknownPriorityError",
    "WaitTimeoutError",
    "WorkflowError",
    "bucket_prefix",
    "cron",
    "current",
    "get_spec",
    "job",
    "jobs_in",
    "load_jobs",
    "registered_jobs",
    "using",
]

#: Loaded on first use (they pull in Powertools and more): a cold start that never enqueues or reads a
#: status does not pay for them.
LAZY = {
    "RateLimit": "lambdajobs.runtime.ratelimit",
    # `@cron`: what only a scheduled job's declaration needs (`lambdajobs.runtime.declarations`)
    "cron": "lambdajobs.runtime.declarations",
    # value types a job's declaration passes when it sets the option (`JobSpec` makes its defaults
    # on first read): a plain job's cold start does not define them
    "Alarms": "lambdajobs.runtime.alarms",
    "Backoff": "lambdajobs.runtime.backoff",
    "enqueue": "lambdajobs.runtime.producer",
    "enqueue_many": "lambdajobs.runtime.producer",
    "get_status": "lambdajobs.runtime.status",
    "get_statuses": "lambdajobs.runtime.status",
    "wait_for": "lambdajobs.runtime.status",
    "count_finished": "lambdajobs.runtime.status",
    "JobStatus": "lambdajobs.runtime.status",
    "chain": "lambdajobs.runtime.workflow",
    "chord": "lambdajobs.runtime.workflow",
    "group": "lambdajobs.runtime.workflow",
    "sig": "lambdajobs.runtime.workflow",
    "get_workflow": "lambdajobs.runtime.workflow",
    "WorkflowStatus": "lambdajobs.runtime.workflow",
    "signal": "lambdajobs.runtime.durable",
    "cancel": "lambdajobs.runtime.cancellation",
    "cancel_workflow": "lambdajobs.runtime.cancellation",
    "CancelResult": "lambdajobs.runtime.cancellation",
    "Debounce": "lambdajobs.runtime.debounce",
    "ConcurrencyKey": "lambdajobs.runtime.keyslots",
    "SignalResult": "lambdajobs.runtime.durable",
}


__getattr__ = lazy.exports(__name__, LAZY)
