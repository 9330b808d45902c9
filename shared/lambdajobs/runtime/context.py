"""The context object a job function receives as its second argument."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.config import StackConfig

if TYPE_CHECKING:
    from lambdajobs.runtime.durable import Durable
    from lambdajobs.runtime.envelope import WorkflowField
    from lambdajobs.runtime.job_record import JobState


class JobCancelled(BaseException):
    """Raised in a running job at its next check (`ctx.progress`, a durable step's checkpoint,
    `ctx.raise_if_cancelled()`) once `lambdajobs.cancel(job_id)` was recorded. It is not an
    `Exception`, so `except Exception` in a job does not swallow it: catch it only to clean up, and
    raise it again. The worker records the job `cancelled` and runs it no more."""


class LockLost(BaseException):
    """A checkpoint was refused: this run no longer holds the job's lock (its invocation was taken for
    dead, and another delivery took the job over). The run stops where it is, without an outcome.
    Raised by `lambdajobs.runtime.durable`; defined here, so the worker catches it without loading it."""


class Suspend(BaseException):
    """Raised out of a job function to park it (the worker catches it: `worker.Worker._run`), by
    `lambdajobs.runtime.durable`; defined here, so the worker catches it without loading it."""

    def __init__(self, state: JobState, wake_ms: int, reason: str, signal: str | None = None) -> None:
        super().__init__(reason)
        self.state = state
        self.wake_ms = wake_ms
        self.reason = reason
        self.signal = signal


#: JobContext's `config` when none is given: a new `StackConfig()` (the default configuration).
_NEW_CONFIG: Any = object()


class JobContext:
    """What a running job knows about itself.

    `remaining_seconds()` is the time left in the Lambda invocation; `logger` is bound to the job id;
    `progress(percent, message)` persists to the job record, readable through `get_status`;
    `cancelled` says whether the job was cancelled while it runs (a progress report or a durable step
    of a cancelled job raises `JobCancelled`, which stops it);
    `config` is the stack the job runs in, and `client("s3")` a boto3 client on it (in `lambdajobs
    dev` and tests it reaches the local stack, not AWS). A member of a workflow has `workflow` (its id,
    stage and index, and `parents`: how many members the stage before had, succeeded and died) and
    `parent_results`: what the stage before returned.

    Durable jobs (docs/how-to/durable-jobs.md): `step(name, fn, *args, **kwargs)` runs `fn` once and
    checkpoints its result, `sleep(seconds)` and `wait_for_signal(name, timeout_seconds)` park the job
    with no compute until then; a job longer than an invocation continues in a fresh one between steps.
    """

    # (A plain class with a dataclass's constructor, repr and equality: every cold start defines it,
    # and a dataclass costs ten times as much to define on 3.11. Its repr and equality are in
    # `lambdajobs.runtime.context_rare`, with the methods a plain run never calls.)

    job_id: str
    job: str
    attempt: int
    max_attempts: int
    logger: Any
    lambda_context: Any
    #: For scheduled runs: the slot this run is for (Scheduler's scheduled time), else None.
    scheduled_at: datetime | None
    progress_sink: Callable[[str, float, str | None], None] | None
    config: StackConfig
    #: For a workflow's member: the envelope's `workflow` (id, stage, index, parents), else None.
    workflow: WorkflowField | None
    #: The run's durable state (steps, sleeps, signals): the worker's; None outside the worker (then
    #: a step just runs, and a sleep or a signal wait is refused).
    durable: Durable | None
    #: The worker's, in place of `durable`: builds it on first use (a step, a sleep, a signal wait),
    #: given a reader of what the run's acquire wrote and its lock (`capture`), so a run that uses none
    #: never loads `lambdajobs.runtime.durable` (a cold start's import).
    durable_factory: Callable[[Callable[[], Any]], Durable] | None
    #: What the run's acquire wrote and its lock, read on the run's own thread (the store's `acquired`).
    acquired_reader: Callable[[], Any] | None
    #: Reads whether a cancel of this job is recorded (the worker's; None outside it: never cancelled).
    cancel_check: Callable[[], bool] | None

    #: `ctx.cancelled` reads the record at most this often (each a consistent read: one read unit).
    CANCEL_READ_SECONDS = 1.0

    __match_args__ = FIELDS = (
        "job_id",
        "job",
        "attempt",
        "max_attempts",
        "logger",
        "lambda_context",
        "scheduled_at",
        "progress_sink",
        "config",
        "workflow",
        "durable",
        "durable_factory",
        "acquired_reader",
        "cancel_check",
    )
    __hash__ = None  # type: ignore[assignment]  # (mutable, compared by value: as a dataclass)

    def __init__(
        self,
        job_id: str,
        job: str,
        attempt: int,
        max_attempts: int,
        logger: Any,
        lambda_context: Any = None,
        scheduled_at: datetime | None = None,
        progress_sink: Callable[[str, float, str | None], None] | None = None,
        config: StackConfig = _NEW_CONFIG,
        workflow: WorkflowField | None = None,
        durable: Durable | None = None,
        durable_factory: Callable[[Callable[[], Any]], Durable] | None = None,
        acquired_reader: Callable[[], Any] | None = None,
        cancel_check: Callable[[], bool] | None = None,
    ) -> None:
        self.job_id, self.job, self.attempt, self.max_attempts = job_id, job, attempt, max_attempts
        self.logger, self.lambda_context, self.scheduled_at = logger, lambda_context, scheduled_at
        self.progress_sink = progress_sink
        self.config = StackConfig() if config is _NEW_CONFIG else config  # (a new one per context)
        self.workflow, self.durable, self.durable_factory = workflow, durable, durable_factory
        self.acquired_reader, self.cancel_check = acquired_reader, cancel_check
        self._parent_results: list[Any] | None = None
        self._cancelled = False
        self._cancel_read_at = 0.0
        self._acquired: Any = None
        self._captured = False

    def __repr__(self) -> str:
        return _rare().context_repr(self)

    def __eq__(self, other: object) -> bool:
        return _rare().context_eq(self, other)

    @property
    def cancelled(self) -> bool:
        """Whether this job was cancelled (`lambdajobs.cancel`) while it runs. Progress reports and
        durable steps check it for free, and raise `JobCancelled` to stop the job; reading this
        property reads the record at most once a second. Check it in a long loop that reports no
        progress, and stop (return, or `raise_if_cancelled()`)."""
        return _rare().cancelled(self)

    def raise_if_cancelled(self) -> None:
        """Stop here if the job was cancelled: raises `JobCancelled` (the worker records the job
        `cancelled`; not an `Exception`, so `except Exception` does not catch it)."""
        if self.cancelled:
            raise JobCancelled(f"job '{self.job_id}' was cancelled")

    @property
    def parent_results(self) -> list[Any]:
        """The results of the stage before this one, in member order (None for a member that died);
        empty for a job outside workflows and for a first stage. Read on first use, from the members'
        job records (one BatchGetItem per 100 members)."""
        if self._parent_results is None and self.workflow is None:  # outside workflows: none
            self._parent_results = []
        return self._parent_results if self._parent_results is not None else _rare().parent_results(self)

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
        return _rare().progress(self, percent, message)

    # -- durable jobs -------------------------------------------------------------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., Any] | None = None,
        /,
        *args: Any,
        budget_seconds: float | None = None,
        **kwargs: Any,
    ) -> Any:
        """Run `fn(*args, **kwargs)` once for this job, and return its result (JSON data, at most
        32 KB): a later attempt or continuation of the job gets the checkpointed result back instead
        of running it again. Without `fn`, a decorator: `@ctx.step("upload")` runs the function it
        decorates at once and stands for its result.

        `budget_seconds`: the longest the step may take. A step starts only if that much time is left
        in the invocation (else the job continues in a fresh invocation first, using no attempt);
        without it, the duration of the step before is the guess. A budget no invocation can hold
        fails the job (`StepError`).

        A step that raises fails the attempt as any error does; the next attempt replays the steps
        done. A crash after a step's effect and before its checkpoint runs it again: make external
        calls idempotent with `ctx.step_key`.

        Raises:
            StepError: a name used twice in one run, a result too large or not JSON, a budget too long.
            MaxDurationError: the job has run longer than its `max_duration_seconds`.
        """
        return _rare().step(self, name, fn, *args, budget_seconds=budget_seconds, **kwargs)

    @property
    def step_key(self) -> str | None:
        """Inside a step: `<job id>:<step name>`, the same in every run of that step (an idempotency
        key for the external call it makes); None outside a step."""
        current = self.durable.current if self.durable is not None else None
        return f"{self.job_id}:{current}" if current is not None else None

    def sleep(self, seconds: float, *, name: str | None = None) -> None:
        """Park the job for `seconds`, with no compute meanwhile: the invocation ends here and the job
        continues after the delay (SQS up to 15 minutes, a one-time schedule beyond), replaying its
        steps from their checkpoints. Sleeps are named by their order in the run unless `name` says.

        Raises:
            StepError: not a positive number, or past the job's `max_duration_seconds`.
        """
        self._durable("ctx.sleep").sleep(seconds, name)

    def wait_for_signal(self, name: str, timeout_seconds: float) -> Any:
        """Park the job until `lambdajobs.signal(job_id, name, data)` delivers `data` (returned here),
        at most `timeout_seconds`. A signal sent earlier, even before the job started, is returned at
        once.

        Raises:
            SignalTimeoutError: the timeout passed and no signal came (catch it to go on without).
        """
        return self._durable("ctx.wait_for_signal").wait_for_signal(name, timeout_seconds)

    def _durable(self, what: str) -> Durable:
        """`_durable_state()`, or a refusal of `what` when the job runs outside the worker."""
        return _rare().durable(self, what)

    def capture(self) -> None:
        """The worker's, on the run's own thread before the job function runs: take what the run's
        acquire wrote and its lock (the store keeps them per thread), for the durable state, which a
        job may first use from a thread of its own."""
        if self.durable is not None:
            self.durable.capture()
        elif self.acquired_reader is not None:
            self._acquired, self._captured = self.acquired_reader(), True

    def _durable_state(self) -> Durable | None:
        """`durable`; built by `durable_factory` the first time a step, a sleep or a wait needs it."""
        return _rare().durable_state(self)


def _rare() -> Any:
    """`lambdajobs.runtime.context_rare`: what a run that only returns never calls (a step, a progress
    report, a cancel check, the parents' results, a repr), imported on first use."""
    from lambdajobs.runtime import context_rare

    return context_rare
