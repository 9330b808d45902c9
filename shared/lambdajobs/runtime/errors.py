"""Errors raised by lambdajobs. Every message says what was wrong and what to do."""

from __future__ import annotations


class LambdaJobsError(Exception):
    """Base class of every lambdajobs error."""


class DeclarationError(LambdaJobsError, ValueError):
    """A `@job` declaration is invalid. Raised at import time, naming the job and the fix."""


class UnknownJobError(LambdaJobsError, LookupError):
    """No job of that name is declared in this process."""


class EnvelopeError(LambdaJobsError, ValueError):
    """A message body is not a valid lambdajobs envelope."""


class PayloadValidationError(LambdaJobsError, ValueError):
    """A payload does not match the job's payload model."""


class PayloadTooLargeError(LambdaJobsError, ValueError):
    """An encoded message exceeds the SQS message size limit."""


class QueueNotFoundError(LambdaJobsError, LookupError):
    """The queue of a job could not be resolved (no environment variable, no stack manifest)."""


class StackNotFoundError(QueueNotFoundError):
    """The stack's manifest is not there: wrong stack name, region or account, or not deployed."""


class PermanentError(LambdaJobsError):
    """Raise from a job when retrying cannot help (bad input, a refused request).

    The worker records the job as dead and moves its message to the dead-letter queue at once,
    with this error's message as the reason; it does not use up the remaining attempts.
    """
