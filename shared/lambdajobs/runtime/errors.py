"""Every error lambdajobs raises, in one place. Every message says what was wrong and what to do.

All of them derive from `LambdaJobsError`; those about a bad argument also derive from `ValueError`
(and lookups from `LookupError`), so callers that catch the built-in kinds keep working. Users import
them from `lambdajobs.errors`.

Most of the runtime imports this module, so it imports nothing of lambdajobs, not even for type
checking (tests/unit/test_public_api.py checks): `WaitTimeoutError` describes what it reads of a
`JobStatus` with a protocol, since importing `records` would close a cycle (records, config, ...,
errors, records).
"""

from __future__ import annotations

from typing import Any, Protocol


class _Status(Protocol):
    """What `WaitTimeoutError` reads of the status it carries (a `lambdajobs.JobStatus`)."""

    @property
    def job_id(self) -> str: ...

    @property
    def state(self) -> str: ...


class LambdaJobsError(Exception):
    """Base class of every lambdajobs error."""


class DeclarationError(LambdaJobsError, ValueError):
    """A `@job` declaration is invalid. Raised at import time, naming the job and the fix."""


class ScheduleError(LambdaJobsError, ValueError):
    """A schedule expression or time zone is invalid."""


class ConfigurationError(LambdaJobsError, ValueError):
    """The stack configuration is incomplete or invalid (a CDK option, a jobs module, a variable)."""


class InvalidOptionError(LambdaJobsError, ValueError):
    """A command-line option's value is not understood (the CLI)."""


class UnknownJobError(LambdaJobsError, LookupError):
    """No job of that name is declared in the jobs module that was searched."""


class EnvelopeError(LambdaJobsError, ValueError):
    """A message body is not a valid lambdajobs envelope."""


class PayloadValidationError(LambdaJobsError, ValueError):
    """A payload does not match the job's payload model."""


class PayloadTooLargeError(LambdaJobsError, ValueError):
    """An encoded message exceeds the SQS message size limit."""


class EnqueueError(LambdaJobsError, ValueError):
    """An `enqueue` option is invalid: job id, delay, run_at, or a mismatch between them."""


class JobIdError(EnqueueError):
    """A job id is empty, not a string, or longer than 256 characters."""


class UnknownPriorityError(EnqueueError):
    """A producer named a priority level the job does not declare: nothing was sent."""


class WorkflowError(EnqueueError):
    """A workflow that cannot be enqueued (an empty stage, too many stages, later stages too large to
    record, another workflow under the same id), or a bad workflow id: nothing was sent."""


class ScheduleConflictError(EnqueueError):
    """A job id is already scheduled for another time or with another payload."""


class ProgressError(LambdaJobsError, ValueError):
    """`ctx.progress` was given a percentage outside 0 to 100."""


class QueueNotFoundError(LambdaJobsError, LookupError):
    """The queue of a job could not be resolved (no environment variable, no stack manifest)."""


class StackNotFoundError(QueueNotFoundError):
    """The stack's manifest is not there: wrong stack name, region or account, or not deployed."""


class JobIndexOffError(LambdaJobsError):
    """Listing or counting jobs in a state this stack's job index mode does not hold (mode `off`, the
    default, holds `dead` jobs only: each state held costs write units per job). The message says
    which mode to set."""


class StateInUseError(LambdaJobsError):
    """Another running local stack (`lambdajobs dev`) keeps its state in the same folder."""


class NotStartedError(LambdaJobsError):
    """A record was not run (too close to the deadline, its lock held, or its bookkeeping failed) and
    could not be handed back as a copy; it comes back after its delay, and that receive counts."""


class RateLimitBusyError(LambdaJobsError):
    """A rate limiter's slot could not be taken after many tries (other workers kept taking it)."""


class LastAttemptLostError(LambdaJobsError):
    """The job's last attempt ended without an outcome (its invocation crashed or timed out): the job
    is dead with this reason."""


class WaitTimeoutError(LambdaJobsError, TimeoutError):
    """`wait_for` gave up; `.status` is the last status seen."""

    def __init__(self, status: _Status, timeout_seconds: float) -> None:
        super().__init__(
            f"job '{status.job_id}' is still {status.state} after {timeout_seconds:g} s; "
            f"wait longer or check it with get_status."
        )
        #: The last status seen: the `lambdajobs.JobStatus` that `wait_for` read.
        self.status: Any = status


class RecordHeldError(LambdaJobsError):
    """Internal: a job record's lock is held by another delivery (or the job already succeeded);
    `.item` is the record. The persistence layer turns it into Powertools' own error."""

    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("job record is held")
        self.item = item


class ClockError(LambdaJobsError):
    """The test harness's clock (`lambdajobs.testing.TestClock`) was asked for what it cannot do: a
    stack on the real clock, a move backwards, no retry waiting for its backoff."""


class FunctionInitError(LambdaJobsError):
    """A job's function could not load its job at its cold start: importing a job module failed (a
    library missing from the function's dependencies, a module not shipped, an error at import), or
    the modules it imported do not declare its job. Its records are dead-lettered with this error as
    their reason (they would fail every delivery), and its job records read dead."""


class InvocationError(LambdaJobsError):
    """A local stack's function invocation failed as a whole (`lambdajobs.local.functions`): its init
    failed, its process died, or its handler raised. The batch's records come back, as on Lambda."""


class InvocationTimeoutError(InvocationError, TimeoutError):
    """A local stack's function invocation ran past the function's timeout: its process was killed,
    as Lambda ends a timed-out execution environment."""


class PermanentError(LambdaJobsError):
    """Raise from a job when retrying cannot help (bad input, a refused request).

    The worker records the job as dead and moves its message to the dead-letter queue at once,
    with this error's message as the reason; it does not use up the remaining attempts.
    """


class StepError(PermanentError):
    """A durable job used a step, sleep or signal wait wrongly: a step name used twice in one run, a
    step result too large to checkpoint, a step that could never fit in the function's timeout, a
    sleep past the job's `max_duration_seconds`. Retrying cannot help: the job is dead with this
    reason."""


class MaxDurationError(PermanentError):
    """A durable job ran (with its sleeps and waits) for longer than its `max_duration_seconds`."""


class SignalTimeoutError(LambdaJobsError, TimeoutError):
    """`ctx.wait_for_signal(name, timeout_seconds)` waited its whole timeout and no signal came. Catch
    it to go on without the signal; uncaught, it fails the attempt like any error."""


class SignalRefusedError(LambdaJobsError, ValueError):
    """`signal(job_id, name, data)` was refused: the job has finished, or already has that signal
    with other data."""


class CancelError(LambdaJobsError, ValueError):
    """`cancel(...)` could not be carried out (an empty id, a workflow that does not exist)."""


class LogsUnavailableError(ConfigurationError):
    """A job's logs cannot be read here: no worker log file locally, or no log group named for the
    job in the stack's manifest (a stack deployed before it named them)."""


class BadRequestError(LambdaJobsError, ValueError):
    """A board page or JSON API request the board cannot use (a bad state, time, field or job):
    `status` is 400, or 404 for what names nothing; the message never repeats the URL's own text."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NoMappingError(LambdaJobsError, LookupError):
    """A job's queue has no event source mapping (`lambdajobs pause`, `resume`): the stack is not
    deployed with the job's worker (or, on the local stack, its workers are not started)."""


__all__ = [
    "BadRequestError",
    "CancelError",
    "ClockError",
    "ConfigurationError",
    "DeclarationError",
    "EnqueueError",
    "EnvelopeError",
    "FunctionInitError",
    "InvalidOptionError",
    "InvocationError",
    "InvocationTimeoutError",
    "JobIdError",
    "JobIndexOffError",
    "LambdaJobsError",
    "LastAttemptLostError",
    "LogsUnavailableError",
    "MaxDurationError",
    "NoMappingError",
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
    "StackNotFoundError",
    "StateInUseError",
    "StepError",
    "UnknownJobError",
    "UnknownPriorityError",
    "WaitTimeoutError",
    "WorkflowError",
]
