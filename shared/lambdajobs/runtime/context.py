"""The context object a job function receives as its second argument."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import WorkflowField
from lambdajobs.runtime.errors import ProgressError


@dataclass
class JobContext:
    """What a running job knows about itself.

    `remaining_seconds()` is the time left in the Lambda invocation; `logger` is bound to the job id;
    `progress(percent, message)` persists to the job record, readable through `get_status`;
    `config` is the stack the job runs in, and `client("s3")` a boto3 client on it (in `lambdajobs
    dev` and tests it reaches the local stack, not AWS). A member of a workflow has `workflow` (its id,
    stage and index, and `parents`: how many members the stage before had, succeeded and died) and
    `parent_results`: what the stage before returned.
    """

    job_id: str
    job: str
    attempt: int
    max_attempts: int
    logger: Any = field(repr=False)
    lambda_context: Any = field(default=None, repr=False)
    #: For scheduled runs: the slot this run is for (Scheduler's scheduled time), else None.
    scheduled_at: datetime | None = None
    progress_sink: Callable[[str, float, str | None], None] | None = field(default=None, repr=False)
    config: StackConfig = field(default_factory=StackConfig, repr=False)
    #: For a workflow's member: the envelope's `workflow` (id, stage, index, parents), else None.
    workflow: WorkflowField | None = None
    _parent_results: list[Any] | None = field(default=None, init=False, repr=False)

    @property
    def parent_results(self) -> list[Any]:
        """The results of the stage before this one, in member order (None for a member that died);
        empty for a job outside workflows and for a first stage. Read on first use, from the members'
        job records (one BatchGetItem per 100 members)."""
        if self._parent_results is None:
            parents = self.workflow.parents if self.workflow is not None else None
            if self.workflow is None or self.workflow.stage == 0 or parents is None:
                self._parent_results = []
            else:
                from lambdajobs.runtime.lifecycle import JobState
                from lambdajobs.runtime.records import get_statuses
                from lambdajobs.runtime.workflow import member_job_id

                stage, wid = self.workflow.stage - 1, self.workflow.id
                ids = [member_job_id(wid, stage, i) for i in range(parents.total)]
                found = get_statuses(ids, config=self.config)
                self._parent_results = [
                    found[i].result if found[i].state is JobState.SUCCEEDED else None for i in ids
                ]
        return self._parent_results

    def client(self, service: str) -> Any:
        """A boto3 client for `service` on this job's stack (created once, shared)."""
        return self.config.client(service)

    @property
    def is_last_attempt(self) -> bool:
        return self.attempt >= self.max_attempts

    def remaining_seconds(self) -> float:
        if self.lambda_context is None:
            return float("inf")
        return float(self.lambda_context.get_remaining_time_in_millis()) / 1000.0

    def progress(self, percent: float, message: str | None = None) -> None:
        """Record progress (0 to 100) and an optional short message. Each call is one DynamoDB write:
        report per stage, not per byte."""
        if isinstance(percent, bool) or not isinstance(percent, int | float) or not 0 <= percent <= 100:
            raise ProgressError(f"progress percent must be a number from 0 to 100, got {percent!r}")
        if self.progress_sink is not None:
            self.progress_sink(self.job_id, float(percent), message)
