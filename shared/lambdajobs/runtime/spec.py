"""Job declarations: `@job(...)` records a frozen `JobSpec` in the active `Registry`.

One declaration drives everything: CDK reads the specs to build queues and workers, the worker reads
them to run jobs, producers read them to validate payloads. Options carry their unit in their name;
a bad declaration fails at import with an error naming the job and the fix.

Looking a job up (`get_spec`, `Registry.get`) never imports anything. A jobs package is imported
only when it is loaded, explicitly: `load_jobs`, or `ensure_loaded` (once per registry), which the
entry points call for the configured package (enqueue, the CLI, the board, the local stack, the test
harness, the CDK stack). Tests declare jobs in a registry of their own with
`lambdajobs.testing.isolated_registry`.

What only some declarations need (rare options' checks, `@cron` and a cron job's payload and
envelope, loading a whole jobs package, the message of an unknown job, `job_index_mode`, the
stand-in of a job that could not be imported) is in `lambdajobs.runtime.declarations`, and what
producers ask of a spec (a priority's queue level, a run's job id) in `lambdajobs.runtime.routing`,
each loaded the first time one needs it: a worker's cold start, whose job module declares a plain job,
does not compile them. `cron` and `job_index_mode` are importable from here too.
"""

from __future__ import annotations

import importlib
import inspect
import json
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from lambdajobs.runtime import lazy
from lambdajobs.runtime.envelope import summarize_validation_error
from lambdajobs.runtime.errors import DeclarationError, PayloadValidationError, UnknownJobError
from lambdajobs.runtime.settings import JOB_NAME_RE

if TYPE_CHECKING:  # loaded when a job declares a rate limit or a schedule: a cold start without them
    from lambdajobs.runtime.alarms import Alarms  # loaded when a spec's option is read
    from lambdajobs.runtime.backoff import Backoff

    # `@cron`, and the job index's mode of a stack (CDK, the local stack): in `declarations`,
    # importable from here
    from lambdajobs.runtime.declarations import cron as cron
    from lambdajobs.runtime.declarations import job_index_mode as job_index_mode
    from lambdajobs.runtime.keyslots import ConcurrencyKey
    from lambdajobs.runtime.ratelimit import RateLimit  # skips both modules
    from lambdajobs.runtime.schedule import Schedule

# Limits from AWS (see ../shared/guide/AWS_FACTS.md).
MAX_TIMEOUT_SECONDS = 900  # Lambda maximum function timeout
MAX_DURATION_SECONDS = 30 * 86_400  # a durable job's max_duration_seconds
MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 3600  # SQS maximum visibility timeout
MAX_BATCHING_WINDOW_SECONDS = 300  # event source mapping maximum batching window
MAX_BATCH_SIZE = 10_000  # standard queues; above 10 a batching window >= 1 s is required
MIN_CONCURRENCY, MAX_CONCURRENCY = 2, 1000  # ScalingConfig.MaximumConcurrency
MIN_MEMORY_MB, MAX_MEMORY_MB = 128, 10_240
#: Lambda keeps at least 100 of an account's executions unreserved; 900 of the default quota of 1000.
MAX_RESERVED_CONCURRENCY = 900
MAX_RECEIVE_COUNT = 1000  # SQS redrive maxReceiveCount
USES = frozenset({"bucket", "job_stats"})


class _MadeOnRead:
    """The default of a `JobSpec` field whose class a plain declaration need not load (`Backoff()`,
    `Alarms()`): the field's default factory and its descriptor at once. The factory gives this object
    itself, a placeholder; the field's first read replaces it with a new instance of the class,
    imported then. A job that leaves the option unset does not load the class's module (a worker's
    cold start: each frozen dataclass costs ~4 M instructions to define on 3.11), and whatever reads
    the field (the worker's retries, CDK, equality, repr, `dataclasses.replace`) sees the value it
    saw before: an instance equal to `Backoff()` (`Alarms()`)."""

    def __init__(self, module: str, name: str, attribute: str) -> None:
        self.module, self.attribute = module, attribute
        self.__name__ = name  # the class's: what the job options table says the default is

    def __call__(self) -> Any:
        return self

    def __get__(self, spec: Any, owner: Any = None) -> Any:
        if spec is None:
            return self
        value = spec.__dict__.get(self.attribute, self)
        if value is self:
            made = getattr(importlib.import_module(self.module), self.__name__)
            value = spec.__dict__[self.attribute] = made()
        return value

    def __set__(self, spec: Any, value: Any) -> None:
        spec.__dict__[self.attribute] = value

    def unread(self, spec: Any) -> bool:
        """Whether `spec`'s field holds the default, not read yet (no class loaded for it)."""
        return spec.__dict__.get(self.attribute) is self

    def __reduce__(self) -> str:
        return f"_DEFAULT_{self.attribute.upper()}"  # pickled and copied as this very object


_DEFAULT_BACKOFF = _MadeOnRead("lambdajobs.runtime.backoff", "Backoff", "backoff")
_DEFAULT_ALARMS = _MadeOnRead("lambdajobs.runtime.alarms", "Alarms", "alarms")


@dataclass(frozen=True)
class JobSpec:
    """Everything lambdajobs knows about one job. Built by `@job`, read by every layer.

    Its option fields are the keyword arguments of `job()`, whose docstring documents each one, once
    (the job options reference page is generated from it); the fields below them are derived.
    """

    name: str
    func: Callable[..., Any] = field(compare=False, repr=False)
    payload_model: type[BaseModel] = field(repr=False)
    # The options of `job()` (documented there); their defaults are written here, once.
    timeout_seconds: int = 30
    max_attempts: int = 5
    batch_size: int = 10
    max_batching_window_seconds: int = 0
    max_concurrency: int = 10
    memory_mb: int = 256
    reserved_concurrency: int | None = None
    max_duration_seconds: int = 86_400
    record_mode: str = "full"
    idempotency_key: tuple[str, ...] | None = None
    backoff: Backoff = field(default_factory=_DEFAULT_BACKOFF)
    enqueues: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    pii_fields: tuple[str, ...] = ()
    searchable: tuple[str, ...] = ()
    tracing: bool = False
    #: Keep a record's INFO and DEBUG lines until it fails; a success writes none
    #: (`lambdajobs.runtime.logbuffer`). False: every line written at once.
    buffer_logs: bool = True
    alarms: Alarms = field(default_factory=_DEFAULT_ALARMS)
    rate_limit: RateLimit | None = None
    concurrency_key: ConcurrencyKey | None = None
    priorities: tuple[str, ...] = ()
    #: Each level's event-source MaximumConcurrency, in the order of `priorities`: the lowest level has
    #: `max_concurrency`, each level above twice the one below (capped at 1000) unless
    #: `priorities={"high": 20, "normal": 5}` says.
    priority_concurrency: tuple[int, ...] = ()
    #: For `@cron` jobs: when it runs, and the payload each run gets (JSON text; see `schedule_payload`).
    schedule: Schedule | None = None
    schedule_payload_json: str | None = field(default=None, repr=False)
    #: Whether the job function takes a second `ctx` argument.
    takes_context: bool = field(default=False, compare=False, repr=False)

    @property
    def levels(self) -> tuple[str | None, ...]:
        """The job's queues by priority level, highest first: a level's name for its own queue, None
        for the job's own queue (its lowest level, or its only queue when it has no priorities)."""
        return (*self.priorities[:-1], None)

    @property
    def default_priority(self) -> str | None:
        """The level `enqueue` uses without `priority=`: the lowest (None: the job has no levels)."""
        return self.priorities[-1] if self.priorities else None

    def level_for(self, priority: str | None) -> str | None:
        """The queue level of `priority` (None: the job's own queue).

        Raises:
            UnknownPriorityError: the job has no such level (or no levels at all).
        """
        from lambdajobs.runtime import routing

        return routing.level_for(self, priority)

    def priority_of(self, level: str | None) -> str | None:
        """The priority a queue level stands for (the lowest for the job's own queue)."""
        return self.default_priority if level is None else level

    def concurrency_of(self, level: str | None) -> int:
        """The MaximumConcurrency of a level's event source."""
        if not self.priorities:
            return self.max_concurrency
        return self.priority_concurrency[self.priorities.index(self.priority_of(level) or "")]

    @property
    def total_concurrency(self) -> int:
        """Batches in flight at most across the job's event sources (every level's)."""
        return sum(self.priority_concurrency) if self.priorities else self.max_concurrency

    @property
    def max_receive_count(self) -> int:
        """The queue's redrive maxReceiveCount: one receive more than `max_attempts`, so a message
        whose last attempt crashed or timed out comes back to the worker once, which moves it to the
        DLQ with that reason and marks its record dead (SQS redrive would move it without either)."""
        return self.max_attempts + 1

    @property
    def visibility_timeout_seconds(self) -> int:
        # AWS: visibility timeout >= 6 x function timeout + batching window, so a message is not
        # handed to a second worker while the first one (or its retries of throttled invocations)
        # may still run it.
        return 6 * self.timeout_seconds + self.max_batching_window_seconds

    @property
    def schedule_payload(self) -> dict[str, Any]:
        return dict(json.loads(self.schedule_payload_json)) if self.schedule_payload_json else {}

    def scheduled_envelope(self, scheduled_time: str) -> dict[str, Any]:
        """The envelope a scheduled run sends. The job id is the job (one schedule per cron job) plus
        the scheduled time: Scheduler delivers at least once, and each slot runs once. CDK passes
        Scheduler's `<aws.scheduler.scheduled-time>` placeholder; the local scheduler a real time."""
        from lambdajobs.runtime import declarations

        return declarations.scheduled_envelope(self, scheduled_time)

    def derive_job_id(self, payload: dict[str, Any]) -> str | None:
        """The job id implied by `idempotency_key`, or None when the job declares none."""
        from lambdajobs.runtime import routing

        return routing.derive_job_id(self, payload)

    # -- payload rules: the producer and the worker both call these, so they cannot drift ---------

    def validate(self, payload: Any) -> BaseModel:
        """The payload as an instance of the job's model.

        Raises:
            PayloadValidationError: the payload does not fit the model (the message holds no values).
        """
        model = self.payload_model
        if isinstance(payload, model):
            return payload
        if isinstance(payload, BaseModel):
            raise PayloadValidationError(
                f"job '{self.name}' takes a {model.__name__} payload, not a {type(payload).__name__}."
            )
        try:
            return model.model_validate(payload)
        except ValidationError as exc:
            raise PayloadValidationError(
                f"job '{self.name}': invalid {model.__name__} payload: {summarize_validation_error(exc)}"
            ) from exc

    def payload_data(self, payload: Any) -> dict[str, Any]:
        """The validated payload as JSON-ready data, defaults applied (what goes in the envelope)."""
        data: dict[str, Any] = self.validate(payload).model_dump(mode="json")
        return data

    def job_id(self, data: dict[str, Any], given: str | None = None) -> str | None:
        """The job id of a run: the one given (checked), else derived from `idempotency_key` over the
        validated payload data, else None (the caller picks one: a new uuid, or the message id).

        Raises:
            JobIdError: `given` is not a string of 1 to 256 characters.
        """
        from lambdajobs.runtime import routing

        return routing.job_id(self, data, given)


# `backoff` and `alarms` read through their defaults (see `_MadeOnRead`)
setattr(JobSpec, "backoff", _DEFAULT_BACKOFF)  # noqa: B010
setattr(JobSpec, "alarms", _DEFAULT_ALARMS)  # noqa: B010


def _check_range(job: str, option: str, value: int, low: int, high: int, why: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise DeclarationError(
            f"job '{job}': {option}={value!r} is out of range; use an integer from {low} to {high} ({why})."
        )


def _payload_model(name: str, func: Callable[..., Any]) -> tuple[type[BaseModel], bool]:
    params = list(inspect.signature(func).parameters.values())
    if not params or len(params) > 2:
        raise DeclarationError(
            f"job '{name}': the function must take (payload) or (payload, ctx); "
            f"it takes {len(params)} parameters."
        )
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:  # a forward reference that does not resolve
        raise DeclarationError(f"job '{name}': cannot read its type annotations ({exc}).") from exc
    model = hints.get(params[0].name)
    if not (inspect.isclass(model) and issubclass(model, BaseModel)):
        raise DeclarationError(
            f"job '{name}': annotate its first parameter with a pydantic model, "
            f"e.g. `def {func.__name__}({params[0].name}: MyPayload, ctx: JobContext)`."
        )
    return model, len(params) == 2


def _validate(spec: JobSpec) -> None:
    """Every declaration rule, in this order: the first one broken raises."""
    for check in _DECLARATION_CHECKS:
        check(spec)


def _check_name(spec: JobSpec) -> None:
    """A job name is what queue, function and alarm names are built from."""
    if not JOB_NAME_RE.fullmatch(spec.name):
        raise DeclarationError(
            f"job '{spec.name}': a job name has lower-case letters, digits and underscores, starts with a "
            f"letter and has at most 48 characters; pass name='...' to @job."
        )


def _check_ranges(spec: JobSpec) -> None:
    """Each integer option within the AWS limit of the setting it becomes."""
    name = spec.name
    _check_range(name, "timeout_seconds", spec.timeout_seconds, 1, MAX_TIMEOUT_SECONDS, "Lambda maximum")
    _check_range(
        name, "max_attempts", spec.max_attempts, 1, MAX_RECEIVE_COUNT - 1, "SQS maxReceiveCount, less one"
    )
    _check_range(name, "batch_size", spec.batch_size, 1, MAX_BATCH_SIZE, "SQS event source")
    _check_range(
        name,
        "max_batching_window_seconds",
        spec.max_batching_window_seconds,
        0,
        MAX_BATCHING_WINDOW_SECONDS,
        "SQS event source",
    )
    _check_range(
        name, "max_concurrency", spec.max_concurrency, MIN_CONCURRENCY, MAX_CONCURRENCY, "MaximumConcurrency"
    )
    _check_range(name, "memory_mb", spec.memory_mb, MIN_MEMORY_MB, MAX_MEMORY_MB, "Lambda memory")
    _check_range(
        name,
        "max_duration_seconds",
        spec.max_duration_seconds,
        spec.timeout_seconds,
        MAX_DURATION_SECONDS,
        "at least timeout_seconds; 30 days at most, so a parked job's copy and record never outlive it",
    )


def _check_reserved_concurrency(spec: JobSpec) -> None:
    """A reservation covers every event source's batches in flight (checked after the priorities;
    `declarations.check_reserved_concurrency`)."""
    if spec.reserved_concurrency is not None:
        from lambdajobs.runtime.declarations import check_reserved_concurrency

        check_reserved_concurrency(spec)


def _check_event_source(spec: JobSpec) -> None:
    """The options together: Lambda's batching window rule, and the SQS visibility timeout maximum."""
    name = spec.name
    if spec.batch_size > 10 and spec.max_batching_window_seconds < 1:
        raise DeclarationError(
            f"job '{name}': batch_size={spec.batch_size} needs max_batching_window_seconds >= 1 "
            f"(Lambda requires a batching window for batches above 10)."
        )
    if spec.visibility_timeout_seconds > MAX_VISIBILITY_TIMEOUT_SECONDS:
        raise DeclarationError(
            f"job '{name}': 6 x timeout_seconds + max_batching_window_seconds = "
            f"{spec.visibility_timeout_seconds} s exceeds the SQS visibility timeout maximum of "
            f"{MAX_VISIBILITY_TIMEOUT_SECONDS} s; lower timeout_seconds."
        )


def _check_backoff(spec: JobSpec) -> None:
    """`backoff` is a `Backoff` whose own rules hold (the default's do)."""
    if _DEFAULT_BACKOFF.unread(spec):
        return
    from lambdajobs.runtime.backoff import Backoff

    if not isinstance(spec.backoff, Backoff):
        raise DeclarationError(
            f"job '{spec.name}': backoff={spec.backoff!r}; "
            f"use Backoff(base_seconds=..., max_seconds=..., jitter=...)."
        )
    problem = spec.backoff.check(spec.name)
    if problem:
        raise DeclarationError(problem)


def _check_alarms(spec: JobSpec) -> None:
    """`alarms` is an `Alarms` whose own rules hold (the default's do)."""
    if _DEFAULT_ALARMS.unread(spec):
        return
    from lambdajobs.runtime.alarms import Alarms

    if not isinstance(spec.alarms, Alarms):
        raise DeclarationError(f"job '{spec.name}': alarms={spec.alarms!r}; use Alarms(...).")
    problem = spec.alarms.check(spec.name)
    if problem:
        raise DeclarationError(problem)


def _check_pii_fields(spec: JobSpec) -> None:
    """`pii_fields` name fields of the payload model (the first part of a dotted path)."""
    unknown_pii = [f for f in spec.pii_fields if f.split(".")[0] not in spec.payload_model.model_fields]
    if unknown_pii:
        raise DeclarationError(
            f"job '{spec.name}': pii_fields {unknown_pii} are not fields of {spec.payload_model.__name__}; "
            f"name payload fields (dotted for nested ones)."
        )


def _check_searchable(spec: JobSpec) -> None:
    """`searchable` names payload fields or the tenant, each once (`declarations.check_searchable`)."""
    if spec.searchable:
        from lambdajobs.runtime.declarations import check_searchable

        check_searchable(spec)


def _check_references(spec: JobSpec) -> None:
    """`uses` names stack resources lambdajobs has; `enqueues` names jobs
    (`declarations.check_references`)."""
    if spec.uses or spec.enqueues:
        from lambdajobs.runtime.declarations import check_references

        check_references(spec)


def _check_idempotency_key(spec: JobSpec) -> None:
    """`idempotency_key`, when given, names fields of the payload model
    (`declarations.check_idempotency_key`)."""
    if spec.idempotency_key is not None:
        from lambdajobs.runtime.declarations import check_idempotency_key

        check_idempotency_key(spec)


#: The values of `record_mode`.
RECORD_MODES = ("full", "light")


def _check_record_mode(spec: JobSpec) -> None:
    """`record_mode` is "full" (the default) or "light", and light mode refuses what needs a record
    while the job runs (`declarations.check_record_mode`)."""
    if spec.record_mode != "full":
        from lambdajobs.runtime.declarations import check_record_mode

        check_record_mode(spec)


def _check_priorities(spec: JobSpec) -> None:
    """`priorities`: two or more distinct level names, each level's concurrency in range
    (`declarations.check_priorities`)."""
    if spec.priorities:
        from lambdajobs.runtime.declarations import check_priorities

        check_priorities(spec)


#: The declaration rules `_validate` applies, in order: each names the job and the fix.
_DECLARATION_CHECKS: tuple[Callable[[JobSpec], None], ...] = (
    _check_name,
    _check_ranges,
    _check_priorities,
    _check_reserved_concurrency,
    _check_event_source,
    _check_backoff,
    _check_alarms,
    _check_pii_fields,
    _check_searchable,
    _check_references,
    _check_idempotency_key,
    _check_record_mode,
)


def _priority_options(
    job_name: str, priorities: Any, max_concurrency: int
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """`priorities=` as (levels, their concurrency) (`declarations.priority_options`); none: ((), ())."""
    if priorities is None or priorities == ():
        return (), ()
    from lambdajobs.runtime.declarations import priority_options

    return priority_options(job_name, priorities, max_concurrency)


def job(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    # Defaults come from JobSpec's fields: written once, there.
    timeout_seconds: int = JobSpec.timeout_seconds,
    max_attempts: int = JobSpec.max_attempts,
    batch_size: int = JobSpec.batch_size,
    max_batching_window_seconds: int = JobSpec.max_batching_window_seconds,
    max_concurrency: int = JobSpec.max_concurrency,
    memory_mb: int = JobSpec.memory_mb,
    reserved_concurrency: int | None = None,
    max_duration_seconds: int = JobSpec.max_duration_seconds,
    record_mode: str = JobSpec.record_mode,
    idempotency_key: str | tuple[str, ...] | list[str] | None = None,
    backoff: Backoff | None = None,
    enqueues: tuple[str, ...] | list[str] = (),
    uses: tuple[str, ...] | list[str] = (),
    pii_fields: tuple[str, ...] | list[str] = (),
    alarms: Alarms | None = None,
    rate_limit: str | RateLimit | None = None,
    concurrency_key: ConcurrencyKey | None = None,
    priorities: Sequence[str] | Mapping[str, int] | None = None,
    searchable: tuple[str, ...] | list[str] = (),
    tracing: bool = JobSpec.tracing,
    buffer_logs: bool = JobSpec.buffer_logs,
) -> Any:
    """Declare a background job. Use as `@job` or `@job(timeout_seconds=60, ...)`.

    The decorated function takes `(payload: Model)` or `(payload: Model, ctx: JobContext)`; its
    return value (JSON-serializable, small) is stored as the job's result. The declaration drives
    everything: the CDK constructs build the job's queue, DLQ and worker from it, the worker runs it,
    producers validate payloads with it. Every option is checked now, against the AWS limits.

    Parameters:
        name: The job's name: lower-case letters, digits and `_`, starting with a letter, at most 48
            characters. Default: the function's name.
        timeout_seconds: Lambda timeout of the worker, 1 to 900. The queue's visibility timeout is
            6 x this + the batching window, so a message is not handed to a second worker while the
            first may still run it.
        max_attempts: Runs before the job is dead; 5, as AWS recommends for maxReceiveCount, since
            throttles and crashes consume receives too. The queue's `maxReceiveCount` is one more: a
            spare receive for a last attempt that crashed.
        batch_size: Records per Lambda invocation, 1 to 10,000; above 10 needs
            `max_batching_window_seconds` >= 1.
        max_batching_window_seconds: How long the event source waits to fill a batch, 0 to 300.
        max_concurrency: Concurrent batches at most (the event source's `MaximumConcurrency`, 2 to
            1000).
        memory_mb: Worker memory, 128 to 10,240.
        reserved_concurrency: Reserve this many concurrent executions for the worker (opt-in), at
            least `max_concurrency` (every priority level's together): a reservation below it throttles
            the event source, and throttles use up attempts, pushing good jobs to the DLQ.
        max_duration_seconds: How long a durable job (one that uses `ctx.step`, `ctx.sleep` or
            `ctx.wait_for_signal`) may take from its first start to its end, across invocations, sleeps
            and waits: 1 day by default, from `timeout_seconds` to 30 days. Past it the job is dead
            (`MaxDurationError`); a sleep or wait that would end after it is refused.
        record_mode: `"full"` (the default): the job's record is its lock, written when a run starts
            and when it ends (2 write units per success), so a job id runs at most once at a time.
            `"light"`: no lock; one eventually consistent read before the run skips a job already
            finished or cancelled, and the record is written once, at the end (1 write unit per success
            whose record is at most 1 KB). The weaker guarantee: two deliveries of one message at the
            same time (SQS is at-least-once) may both run the job; only one success is recorded, and a
            delivery after it is written does not run. No record exists while the job runs (it reads
            `pending`); `ctx.progress` is kept and written with the outcome. Refused in light mode:
            `max_duration_seconds` (durable jobs: `ctx.step`, `ctx.sleep` and `ctx.wait_for_signal`
            raise `PermanentError`). See docs/how-to/light-records.md.
        idempotency_key: Payload field(s) whose values identify a job: the job id is derived from them
            unless the producer gives one, so the same values run once. Unset: the producer's job id.
        backoff: Delay before each retry, exponential with full jitter by default (10 s doubling up to
            10 min): `Backoff(base_seconds=10, max_seconds=600, jitter="full")`, or
            `Backoff.fixed(30)`.
        enqueues: Other jobs this job enqueues: CDK gives it their queue URLs, permission to send to
            them, and their modules in its function (so it validates their payloads).
        uses: Stack resources the job uses beyond its own queue and record: `"bucket"` (read and write
            its prefix of the stack's data bucket, `LAMBDAJOBS_BUCKET`), `"job_stats"` (count its own
            and other jobs' finished runs, `count_finished`: the worker's CloudWatch metrics, or the
            job index when the stack turns it on).
        pii_fields: Payload fields that hold personal data (dotted paths for nested models): their
            values never appear in logs, job-record errors or DLQ reasons.
        alarms: Alarm thresholds: CloudWatch alarms to the stack's SNS topic (`Alarms`).
        rate_limit: Starts allowed per second, minute, hour or day across every worker: `"100/minute"`,
            or a `RateLimit` shared by name or keyed by a payload field with per-key quotas.
        concurrency_key: At most N runs in progress at once per value of a payload field, across every
            worker: `ConcurrencyKey("customer_id", 2)`, with per-value caps in `quotas={"acme": 5}`
            (1 to 1000). A run over its value's cap waits (handed back, using no attempt); a slot is
            freed when its run ends, or with its invocation after a crash. Two write units per run; a
            payload whose field is null is not capped.
        priorities: Priority levels, highest first: `("high", "normal")`, or `{"high": 50, "normal": 10}`
            with each level's concurrency (otherwise the lowest has `max_concurrency` and each level
            above twice the one below). Each level has its own queue, DLQ and event source on the
            job's function; `enqueue` without `priority=` uses the lowest, the job's own queue.
        searchable: Payload fields (dotted paths) the job's records can be found by
            (`records.search`, the board, the CLI), and `"@tenant"`
            (`lambdajobs.TENANT_FIELD`) for the fair-queue tenant. The worker writes one search entry
            per field at a job's first attempt: 2 write units per field per job (none when unset). A
            field also in `pii_fields` is stored hashed, and found by its exact value only.
        tracing: Trace the job with OpenTelemetry (also on for every job of a stack whose `tracing`
            option is on): a span per run, linked to the producer's (the message's `traceparent`),
            and the jobs it enqueues linked to it. See docs/how-to/tracing.md.
        buffer_logs: Keep the INFO and DEBUG lines a run logs (`ctx.logger`) in memory, and write
            them only if it fails (a warning or error is logged for it): a successful job writes no
            line, which keeps CloudWatch Logs' bill below a hand-written worker's. False: every line
            is written as it is logged, and a success ends with "job succeeded".

    Raises:
        DeclarationError: a bad option (out of range, unknown, inconsistent), a function without a
            pydantic payload annotation, or a name already used by another job; the message names
            the job and the fix.

    Example:
        >>> from pydantic import BaseModel
        >>> from lambdajobs import JobContext, job
        >>> class SendEmail(BaseModel):
        ...     to: str
        ...     subject: str
        >>> @job(timeout_seconds=30, max_attempts=5, pii_fields=("to",))
        ... def send_email(payload: SendEmail, ctx: JobContext) -> dict:
        ...     return {"sent": True}
        >>> send_email.enqueue({"to": "ada@example.com", "subject": "Hi"})
        'a3f1...'
    """
    options = {k: v for k, v in locals().items() if k not in ("func",)}

    def register(fn: Callable[..., Any]) -> Job:
        return _register(fn, **options)

    return register(func) if func is not None else register


def _register(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    record_mode: str = JobSpec.record_mode,
    idempotency_key: str | tuple[str, ...] | list[str] | None = None,
    backoff: Backoff | None = None,
    enqueues: tuple[str, ...] | list[str] = (),
    uses: tuple[str, ...] | list[str] = (),
    pii_fields: tuple[str, ...] | list[str] = (),
    alarms: Alarms | None = None,
    rate_limit: str | RateLimit | None = None,
    concurrency_key: ConcurrencyKey | None = None,
    priorities: Sequence[str] | Mapping[str, int] | None = None,
    searchable: tuple[str, ...] | list[str] = (),
    tracing: bool = JobSpec.tracing,
    buffer_logs: bool = JobSpec.buffer_logs,
    schedule: Schedule | None = None,
    schedule_payload: dict[str, Any] | None = None,
    **options: Any,
) -> Job:
    """Build the job's spec from `@job`'s (or `@cron`'s) options, check it, and add it to the active
    registry (`active_registry()`)."""
    job_name = name or fn.__name__
    levels, level_concurrency = _priority_options(
        job_name, priorities, options.get("max_concurrency", JobSpec.max_concurrency)
    )
    model, takes_context = _payload_model(job_name, fn)
    limit = _rate_limit_option(job_name, rate_limit, model)
    per_key = None
    if concurrency_key is not None:
        from lambdajobs.runtime.keyslots import checked as checked_key

        per_key = checked_key(job_name, concurrency_key, model.model_fields)
    _check_known_options(job_name, options)
    if not isinstance(tracing, bool):
        raise DeclarationError(f"job '{job_name}': tracing={tracing!r}; use True or False.")
    if not isinstance(buffer_logs, bool):
        raise DeclarationError(f"job '{job_name}': buffer_logs={buffer_logs!r}; use True or False.")
    key = (idempotency_key,) if isinstance(idempotency_key, str) else idempotency_key
    spec = JobSpec(
        name=job_name,
        func=fn,
        payload_model=model,
        record_mode=record_mode,
        idempotency_key=tuple(key) if key is not None else None,
        backoff=backoff if backoff is not None else _DEFAULT_BACKOFF(),
        enqueues=tuple(enqueues),
        uses=tuple(uses),
        pii_fields=(pii_fields,) if isinstance(pii_fields, str) else tuple(pii_fields),
        searchable=(searchable,) if isinstance(searchable, str) else tuple(searchable),
        tracing=tracing,
        buffer_logs=buffer_logs,
        alarms=alarms if alarms is not None else _DEFAULT_ALARMS(),
        rate_limit=limit,
        concurrency_key=per_key,
        priorities=levels,
        priority_concurrency=level_concurrency,
        schedule=schedule,
        schedule_payload_json=_schedule_payload_json(job_name, model, schedule, schedule_payload),
        takes_context=takes_context,
        **options,
    )
    _validate(spec)
    active_registry().add(spec)
    return Job(spec)


def _rate_limit_option(
    job_name: str, rate_limit: str | RateLimit | None, model: type[BaseModel]
) -> RateLimit | None:
    """`rate_limit=` as a checked `RateLimit` whose key, if any, is a field of the payload model
    (`declarations.rate_limit_option`)."""
    if rate_limit is None:
        return None
    from lambdajobs.runtime.declarations import rate_limit_option

    return rate_limit_option(job_name, rate_limit, model)


def _check_known_options(job_name: str, options: Mapping[str, Any]) -> None:
    """Only `job()`'s options: a misspelt one would otherwise be ignored."""
    unknown = sorted(set(options) - _INT_OPTIONS)
    if unknown:
        raise DeclarationError(
            f"job '{job_name}': unknown option(s) {unknown}; see docs/reference/job-options.md."
        )


def _schedule_payload_json(
    job_name: str, model: type[BaseModel], schedule: Schedule | None, payload: dict[str, Any] | None
) -> str | None:
    """A cron job's payload for every run, validated now, as sorted JSON (None: not a cron job;
    `declarations.schedule_payload_json`)."""
    if schedule is None:
        return None
    from lambdajobs.runtime.declarations import schedule_payload_json

    return schedule_payload_json(job_name, model, schedule, payload)


_INT_OPTIONS = frozenset(
    {
        "timeout_seconds",
        "max_attempts",
        "batch_size",
        "max_batching_window_seconds",
        "max_concurrency",
        "memory_mb",
        "reserved_concurrency",
        "max_duration_seconds",
    }
)


def _origin(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


class Job:
    """What `@job` returns: still callable like the function, plus `.spec` and `.enqueue(...)`."""

    def __init__(self, spec: JobSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.__wrapped__ = spec.func
        self.__doc__ = spec.func.__doc__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.spec.func(*args, **kwargs)

    def enqueue(self, payload: Any, **options: Any) -> str:
        from lambdajobs.runtime.producer import enqueue

        return enqueue(self, payload, **options)

    def enqueue_many(self, payloads: Any, **options: Any) -> Any:
        from lambdajobs.runtime.producer import enqueue_many

        return enqueue_many(self, payloads, **options)

    def __repr__(self) -> str:
        return f"<Job {self.name}>"


JobRef = str | Job | JobSpec


# -- the registry ------------------------------------------------------------------------------------


class Registry:
    """The declared jobs (name -> `JobSpec`) and the jobs packages loaded into them.

    `@job` and `@cron` add to the active registry (`active_registry()`): the process-wide default,
    or the one a test put in effect (`lambdajobs.testing.isolated_registry`). Looking a job up never
    imports anything; a jobs package is imported only when it is loaded, explicitly (`load`, or
    `ensure_loaded` at an entry point: enqueue, the CLI, the board, the local stack, the test
    harness, the CDK stack).
    """

    def __init__(self) -> None:
        self._specs: dict[str, JobSpec] = {}
        self._loaded: set[str] = set()

    def copy(self) -> Registry:
        """A new registry with these jobs and these packages loaded; adding to it leaves this one be."""
        copied = Registry()
        copied._specs = dict(self._specs)
        copied._loaded = set(self._loaded)
        return copied

    def add(self, spec: JobSpec) -> None:
        """Declare a job: the same function declared again (a module imported twice) replaces itself.

        Raises:
            DeclarationError: another function has the job's name, or another job declares a rate
                limiter of the same name with other limits.
        """
        self._check_unique(spec)
        self._check_shared_rate_limit(spec)
        self._specs[spec.name] = spec

    def _check_unique(self, spec: JobSpec) -> None:
        """One function per job name (queue, function and alarm names are built from it)."""
        existing = self._specs.get(spec.name)
        if existing is not None and _origin(existing.func) != _origin(spec.func):
            raise DeclarationError(
                f"job '{spec.name}' is declared twice ({_origin(existing.func)} and {_origin(spec.func)}); "
                f"give one of them another name with @job(name='...')."
            )

    def _check_shared_rate_limit(self, spec: JobSpec) -> None:
        """Jobs sharing a rate limiter (by name) declare the same limits: there is one bucket
        (`declarations.check_shared_rate_limit`)."""
        if spec.rate_limit is not None:
            from lambdajobs.runtime.declarations import check_shared_rate_limit

            check_shared_rate_limit(self, spec)

    def get(self, ref: JobRef) -> JobSpec:
        """The spec of a job given by name, `Job` or `JobSpec`. Imports nothing.

        Raises:
            UnknownJobError: no job of that name here, naming the jobs declared, the jobs packages
                loaded, and the fix.
        """
        if isinstance(ref, JobSpec):
            return ref
        if isinstance(ref, Job):
            return ref.spec
        spec = self._specs.get(ref)
        if spec is None:
            raise UnknownJobError(self._unknown(ref))
        return spec

    def _unknown(self, name: str) -> str:
        """What an `UnknownJobError` says (`declarations.unknown_job`)."""
        from lambdajobs.runtime.declarations import unknown_job

        return unknown_job(self, name)

    def load(self, package: str) -> list[JobSpec]:
        """Import a jobs package and every module inside it, declaring their jobs here; return those
        jobs (sorted by name). Jobs of modules imported before (into another registry) are added too.

        Raises:
            ConfigurationError: the package cannot be found, or a folder of it has no `__init__.py`.
        """
        from lambdajobs.runtime.declarations import load_into

        return load_into(self, package)

    def ensure_loaded(self, package: str | None) -> None:
        """`load(package)` unless this registry loaded it before; None or "" (no jobs package
        configured) loads nothing."""
        if package and package not in self._loaded:
            self.load(package)

    @property
    def loaded(self) -> frozenset[str]:
        """The jobs packages loaded into this registry."""
        return frozenset(self._loaded)

    def specs(self) -> list[JobSpec]:
        """Every declared job, sorted by name (a stable order for CDK logical ids)."""
        return [self._specs[k] for k in sorted(self._specs)]

    def names(self) -> list[str]:
        """The declared jobs' names, sorted."""
        return sorted(self._specs)

    def jobs_in(self, module: str) -> list[JobSpec]:
        """The declared jobs whose function lives in `module` or below it, sorted by name."""
        return [
            s
            for s in self.specs()
            if s.func.__module__ == module or s.func.__module__.startswith(f"{module}.")
        ]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __repr__(self) -> str:
        return f"<Registry of {len(self._specs)} jobs, loaded: {sorted(self._loaded)}>"


#: The process-wide registry: where `@job` declares unless a test put another one in effect.
default_registry = Registry()
_active = default_registry


def active_registry() -> Registry:
    """The registry `@job` declares into and the module functions (`get_spec`, ...) read."""
    return _active


def _activate(registry: Registry) -> Registry:
    """Put `registry` in effect; return the one it replaces."""
    global _active
    previous, _active = _active, registry
    return previous


@contextmanager
def using_registry(registry: Registry) -> Iterator[Registry]:
    """Put `registry` in effect for a block; the previous one is back on exit, even after an error.
    (Tests use `lambdajobs.testing.isolated_registry`.)"""
    previous = _activate(registry)
    try:
        yield registry
    finally:
        _activate(previous)


def _chosen(registry: Registry | None) -> Registry:
    return registry if registry is not None else active_registry()


def unloaded_spec(name: str) -> JobSpec:
    """A stand-in for job `name` when its function could not import the module declaring it (the
    worker dead-letters every record with the reason): the declaration's defaults, any payload, no
    priorities, and a function that is never called (`declarations.unloaded_spec`)."""
    from lambdajobs.runtime.declarations import unloaded_spec as stand_in

    return stand_in(name)


def get_spec(job_ref: JobRef, *, registry: Registry | None = None) -> JobSpec:
    """The spec of a job given by name, `Job` or `JobSpec`, in `registry` (default: the active one).

    Nothing is imported: a job is known once the module declaring it was imported, or its jobs
    package loaded (`ensure_loaded`, which enqueue, the CLI and the test harness call for the
    configured jobs package).

    Raises:
        UnknownJobError: no such job, naming the declared jobs, the packages loaded and the fix.
    """
    return _chosen(registry).get(job_ref)


def load_jobs(package: str, *, registry: Registry | None = None) -> list[JobSpec]:
    """Import a jobs package and every module inside it, declaring their jobs; return those jobs.

    The package is named by you, once (`[tool.lambdajobs] jobs = "myjobs"` in pyproject.toml, or
    cdk.json, or `--jobs`), and found like any import (your project, or site-packages). Its
    `__init__.py` need not import its modules: every module in the package is imported here. The jobs
    go to `registry` (default: the active one); `ensure_loaded` loads a package once.

    Raises:
        ConfigurationError: the package cannot be found.

    Example:
        >>> [spec.name for spec in load_jobs("myjobs")]
        ['send_invoice', 'nightly_export']
    """
    return _chosen(registry).load(package)


def ensure_loaded(package: str | None, *, registry: Registry | None = None) -> None:
    """Load the jobs package `package` into `registry` (default: the active one) unless it is loaded
    already; None or "" (no jobs package configured) loads nothing.

    Raises:
        ConfigurationError: as `load_jobs`.
    """
    _chosen(registry).ensure_loaded(package)


def registered_jobs(*, registry: Registry | None = None) -> list[JobSpec]:
    """Every declared job, sorted by name (a stable order for CDK logical ids)."""
    return _chosen(registry).specs()


def jobs_in(module: str, *, registry: Registry | None = None) -> list[JobSpec]:
    """The declared jobs whose function lives in `module` or below it, sorted by name."""
    return _chosen(registry).jobs_in(module)


# `cron` and `job_index_mode` live in `declarations`, loaded on first use
__getattr__ = lazy.exports(
    __name__, {"cron": "lambdajobs.runtime.declarations", "job_index_mode": "lambdajobs.runtime.declarations"}
)
