"""The context object a job function receives as its second argument."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class JobContext:
    """What a running job knows about itself.

    `remaining_seconds()` is the time left in the Lambda invocation; `logger` is bound to the job id.
    """

    job_id: str
    job: str
    attempt: int
    max_attempts: int
    logger: Any = field(repr=False)
    lambda_context: Any = field(default=None, repr=False)

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def remaining_seconds(self) -> float:
        if self.lambda_context is None:
            return float("inf")
        return float(self.lambda_context.get_remaining_time_in_millis()) / 1000.0
