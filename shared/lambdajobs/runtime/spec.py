"""Job declarations: `@job(...)` records a frozen `JobSpec` in the registry.

One declaration drives everything: CDK reads the specs to build queues and workers, the worker reads
them to run jobs, producers read them to validate payloads. Options carry their unit in their name;
a bad declaration fails at import with an error naming the job and the fix.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import pkgutil
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from lambdajobs.runtime.alarms import Alarms
from lambdajobs.runtime.backoff import Backoff
from lambdajobs.runtime.envelope import MAX_JOB_ID_LENGTH, summarize_validation_error
from lambdajobs.runtime.errors import (
    ConfigurationError,
    DeclarationError,
    JobIdError,
    PayloadValidationError,
    ScheduleError,
    UnknownJobError,
    UnknownPriorityError,
)
from lambdajobs.runtime.settings import ENV_JOB, JOB_NAME_RE, PRIORITY_NAME_RE, RESERVED_ID_PREFIX

if TYPE_CHECKING:  # loaded when a job declares a rate limit or a schedule: a cold start without them
    from lambdajobs.runtime.ratelimit import RateLimit  # skips both modules
    from lambdajobs.runtime.schedule import Schedule

# Limits from AWS (see ../shared/guide/AWS_FACTS.md).
MAX_TIMEOUT_SECONDS = 900  # Lambda maximum function timeout
MAX_VISIBILITY_TIMEOUT_SECONDS = 12 * 3600  # SQS maximum visibility timeout
MAX_BATCHING_WINDOW_SECONDS = 300  # event source mapping maximum batching window
MAX_BATCH_SIZE = 10_000  # standard queues; above 10 a batching window >= 1 s is required
MIN_CONCURRENCY, MAX_CONCURRENCY = 2, 1000  # ScalingConfig.MaximumConcurrency
MIN_MEMORY_MB, MAX_MEMORY_MB = 128, 10_240
#: Lambda keeps at least 100 of an account's executions unreserved; 900 of the default quota of 1000.
MAX_RESERVED_CONCURRENCY = 900
MAX_RECEIVE_COUNT = 1000  # SQS redrive maxReceiveCount
USES = frozenset({"bucket", "job_stats"})


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
    idempotency_key: tuple[str, ...] | None = None
    backoff: Backoff = field(default_factory=Backoff)
    enqueues: tuple[str, ...] = ()
    uses: tuple[str, ...] = ()
    pii_fields: tuple[str, ...] = ()
    alarms: Alarms = field(default_factory=Alarms)
    rate_limit: RateLimit | None = None
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
        if priority is None or (self.priorities and priority == self.priorities[-1]):
            return None
        if priority in self.priorities:
            return priority
        choose = (
            f"choose one of {list(self.priorities)}"
            if self.priorities
            else "it has no priorities; leave priority unset, or declare @job(priorities=(...))"
        )
        raise UnknownPriorityError(f"job '{self.name}' has no priority {priority!r}: {choose}.")

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
        return {
            "v": 1,
            "job": self.name,
            "id": f"{self.name}@{scheduled_time}",
            "payload": self.schedule_payload,
            "scheduled_at": scheduled_time,
        }

    def derive_job_id(self, payload: dict[str, Any]) -> str | None:
        """The job id implied by `idempotency_key`, or None when the job declares none."""
        if not self.idempotency_key:
            return None
        values = {name: payload.get(name) for name in self.idempotency_key}
        digest = hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()
        return f"{self.name}-{digest[:32]}"

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
        if given is not None:
            if not isinstance(given, str) or not 0 < len(given) <= MAX_JOB_ID_LENGTH:
                raise JobIdError(
                    f"job_id must be a string of 1 to {MAX_JOB_ID_LENGTH} characters, got {given!r}"
                )
            if given.startswith(RESERVED_ID_PREFIX):
                raise JobIdError(f"job_id {given!r}: ids starting with {RESERVED_ID_PREFIX!r} are reserved")
            return given
        return self.derive_job_id(data)


_REGISTRY: dict[str, JobSpec] = {}


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
    name = spec.name
    if not JOB_NAME_RE.fullmatch(name):
        raise DeclarationError(
            f"job '{name}': a job name has lower-case letters, digits and underscores, starts with a "
            f"letter and has at most 48 characters; pass name='...' to @job."
        )
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
    _check_priorities(spec)
    if spec.reserved_concurrency is not None:
        _check_range(
            name,
            "reserved_concurrency",
            spec.reserved_concurrency,
            spec.total_concurrency,
            MAX_RESERVED_CONCURRENCY,
            "at least max_concurrency (every priority level's together): less throttles the queues' "
            "event sources, and throttles use up attempts",
        )
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
    if not isinstance(spec.backoff, Backoff):
        raise DeclarationError(
            f"job '{name}': backoff={spec.backoff!r}; "
            f"use Backoff(base_seconds=..., max_seconds=..., jitter=...)."
        )
    problem = spec.backoff.check(name)
    if problem:
        raise DeclarationError(problem)
    if not isinstance(spec.alarms, Alarms):
        raise DeclarationError(f"job '{name}': alarms={spec.alarms!r}; use Alarms(...).")
    problem = spec.alarms.check(name)
    if problem:
        raise DeclarationError(problem)
    unknown_pii = [f for f in spec.pii_fields if f.split(".")[0] not in spec.payload_model.model_fields]
    if unknown_pii:
        raise DeclarationError(
            f"job '{name}': pii_fields {unknown_pii} are not fields of {spec.payload_model.__name__}; "
            f"name payload fields (dotted for nested ones)."
        )
    bad_uses = sorted(set(spec.uses) - USES)
    if bad_uses:
        raise DeclarationError(f"job '{name}': uses={bad_uses} is unknown; choose from {sorted(USES)}.")
    bad_targets = [t for t in spec.enqueues if not JOB_NAME_RE.fullmatch(t)]
    if bad_targets:
        raise DeclarationError(f"job '{name}': enqueues={bad_targets} are not job names.")
    if spec.idempotency_key is not None:
        fields = spec.payload_model.model_fields
        missing = [f for f in spec.idempotency_key if f not in fields]
        if not spec.idempotency_key or missing:
            raise DeclarationError(
                f"job '{name}': idempotency_key names fields not in {spec.payload_model.__name__}: "
                f"{missing or '(empty)'}; use field names of the payload model."
            )


def _check_priorities(spec: JobSpec) -> None:
    name, levels = spec.name, spec.priorities
    if not levels:
        return
    bad = [p for p in levels if not isinstance(p, str) or not PRIORITY_NAME_RE.fullmatch(p) or p == "dlq"]
    if bad:
        raise DeclarationError(
            f"job '{name}': priorities {bad} are not level names; use lower-case letters and digits "
            f"(at most 16, not 'dlq'), highest first, e.g. priorities=('high', 'normal')."
        )
    if len(levels) < 2 or len(set(levels)) != len(levels):
        raise DeclarationError(
            f"job '{name}': priorities={list(levels)}; give two or more distinct levels, highest first, "
            f"e.g. priorities=('high', 'normal')."
        )
    for level, concurrency in zip(levels, spec.priority_concurrency, strict=True):
        _check_range(
            name,
            f"priorities[{level!r}]",
            concurrency,
            MIN_CONCURRENCY,
            MAX_CONCURRENCY,
            "MaximumConcurrency",
        )


def _priority_options(
    job_name: str, priorities: Any, max_concurrency: int
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """`priorities=` as (levels, their concurrency): a sequence of names (concurrency doubling per
    level up from `max_concurrency`) or a mapping of name to concurrency."""
    if priorities is None or priorities == ():
        return (), ()
    if isinstance(priorities, str):
        raise DeclarationError(
            f"job '{job_name}': priorities={priorities!r}; give the levels as a tuple, highest first, "
            f"e.g. priorities=('high', 'normal')."
        )
    if isinstance(priorities, Mapping):
        return tuple(priorities), tuple(priorities.values())
    levels = tuple(priorities)
    count = len(levels)
    concurrency = tuple(min(MAX_CONCURRENCY, max_concurrency * 2 ** (count - 1 - i)) for i in range(count))
    return levels, concurrency


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
    idempotency_key: str | tuple[str, ...] | list[str] | None = None,
    backoff: Backoff | None = None,
    enqueues: tuple[str, ...] | list[str] = (),
    uses: tuple[str, ...] | list[str] = (),
    pii_fields: tuple[str, ...] | list[str] = (),
    alarms: Alarms | None = None,
    rate_limit: str | RateLimit | None = None,
    priorities: Sequence[str] | Mapping[str, int] | None = None,
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
        idempotency_key: Payload field(s) whose values identify a job: the job id is derived from them
            unless the producer gives one, so the same values run once. Unset: the producer's job id.
        backoff: Delay before each retry, exponential with full jitter by default (10 s doubling up to
            10 min): `Backoff(base_seconds=10, max_seconds=600, jitter="full")`, or
            `Backoff.fixed(30)`.
        enqueues: Other jobs this job enqueues: CDK gives it their queue URLs, permission to send to
            them, and their modules in its function (so it validates their payloads).
        uses: Stack resources the job uses beyond its own queue and record: `"bucket"` (read and write
            its prefix of the stack's data bucket, `LAMBDAJOBS_BUCKET`), `"job_stats"` (query job
            records by job and finish time).
        pii_fields: Payload fields that hold personal data (dotted paths for nested models): their
            values never appear in logs, job-record errors or DLQ reasons.
        alarms: Alarm thresholds: CloudWatch alarms to the stack's SNS topic (`Alarms`).
        rate_limit: Starts allowed per second, minute, hour or day across every worker: `"100/minute"`,
            or a `RateLimit` shared by name or keyed by a payload field with per-key quotas.
        priorities: Priority levels, highest first: `("high", "normal")`, or `{"high": 50, "normal": 10}`
            with each level's concurrency (otherwise the lowest has `max_concurrency` and each level
            above twice the one below). Each level has its own queue, DLQ and event source on the
            job's function; `enqueue` without `priority=` uses the lowest, the job's own queue.

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


def cron(
    expression: str,
    *,
    timezone: str = "UTC",
    flexible_window_minutes: int | None = None,
    payload: dict[str, Any] | None = None,
    **options: Any,
) -> Callable[[Callable[..., Any]], Job]:
    """Declare a scheduled job: an EventBridge Scheduler `cron(...)` or `rate(...)` expression in an
    IANA time zone, e.g. `@cron("cron(0 9 * * ? *)", timezone="America/New_York")`.

    Every run gets `payload` (validated against the job's model now) and is an ordinary job on the
    job's queue: same retries, backoff, DLQ and idempotency; its job id is the job and the slot's
    time, so Scheduler's at-least-once delivery runs each slot once.

    Parameters:
        expression: When it runs: an EventBridge Scheduler `cron(minutes hours day-of-month month
            day-of-week year)` or `rate(value unit)` expression, checked now.
        timezone: The IANA time zone the cron expression is read in (daylight saving time included).
        flexible_window_minutes: Let Scheduler start a run up to this many minutes late, spreading
            load (1 to 1440). Unset: each run starts at its time.
        payload: The payload of every run, validated against the job's model now. Unset: `{}`.
        **options: Any option of `job()`.

    Raises:
        DeclarationError: an invalid expression or time zone, a payload that does not fit the
            model, or any `@job` option problem.

    Example:
        >>> @cron("cron(0 9 * * ? *)", timezone="America/New_York", payload={"to": ["ops@example.com"]})
        ... def daily_report(payload: DailyReport, ctx: JobContext) -> dict:
        ...     ...
    """

    def register(fn: Callable[..., Any]) -> Job:
        job_name = options.get("name") or fn.__name__
        try:
            from lambdajobs.runtime.schedule import parse_schedule

            # In a deployed function (CDK sets ENV_JOB on it) this very module was imported, and its
            # expression checked, when the stack was synthesized: its cold start skips the cron check.
            deployed = bool(os.environ.get(ENV_JOB))
            schedule = parse_schedule(expression, timezone, flexible_window_minutes, check_cron=not deployed)
        except ScheduleError as exc:
            raise DeclarationError(f"job '{job_name}': {exc}") from None
        return _register(fn, schedule=schedule, schedule_payload=payload or {}, **options)

    return register


def _register(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    idempotency_key: str | tuple[str, ...] | list[str] | None = None,
    backoff: Backoff | None = None,
    enqueues: tuple[str, ...] | list[str] = (),
    uses: tuple[str, ...] | list[str] = (),
    pii_fields: tuple[str, ...] | list[str] = (),
    alarms: Alarms | None = None,
    rate_limit: str | RateLimit | None = None,
    priorities: Sequence[str] | Mapping[str, int] | None = None,
    schedule: Schedule | None = None,
    schedule_payload: dict[str, Any] | None = None,
    **options: Any,
) -> Job:
    job_name = name or fn.__name__
    levels, level_concurrency = _priority_options(
        job_name, priorities, options.get("max_concurrency", JobSpec.max_concurrency)
    )
    model, takes_context = _payload_model(job_name, fn)
    limit = None
    if rate_limit is not None:
        from lambdajobs.runtime.ratelimit import checked as checked_rate_limit

        limit = checked_rate_limit(job_name, rate_limit)
    for other in _REGISTRY.values():
        theirs = other.rate_limit
        if limit and theirs and other.name != job_name and theirs.name == limit.name and theirs != limit:
            raise DeclarationError(
                f"job '{job_name}': rate limiter '{limit.name}' is declared by job '{other.name}' "
                f"as {theirs.describe()}; a shared limiter needs the same RateLimit."
            )
    if limit is not None and limit.key and limit.key not in model.model_fields:
        raise DeclarationError(
            f"job '{job_name}': rate_limit key {limit.key!r} is not a field of {model.__name__}; "
            f"name one of {sorted(model.model_fields)}."
        )
    unknown = sorted(set(options) - _INT_OPTIONS)
    if unknown:
        raise DeclarationError(
            f"job '{job_name}': unknown option(s) {unknown}; see docs/reference/job-options.md."
        )
    key = (idempotency_key,) if isinstance(idempotency_key, str) else idempotency_key
    payload_json = None
    if schedule is not None:
        try:
            checked = model.model_validate(schedule_payload or {}).model_dump(mode="json")
        except ValidationError as exc:
            raise DeclarationError(
                f"job '{job_name}': the schedule's payload is not a valid {model.__name__}: "
                f"{summarize_validation_error(exc)}; pass payload={{...}} to @cron."
            ) from None
        payload_json = json.dumps(checked, sort_keys=True)
    spec = JobSpec(
        name=job_name,
        func=fn,
        payload_model=model,
        idempotency_key=tuple(key) if key is not None else None,
        backoff=backoff if backoff is not None else Backoff(),
        enqueues=tuple(enqueues),
        uses=tuple(uses),
        pii_fields=(pii_fields,) if isinstance(pii_fields, str) else tuple(pii_fields),
        alarms=alarms if alarms is not None else Alarms(),
        rate_limit=limit,
        priorities=levels,
        priority_concurrency=level_concurrency,
        schedule=schedule,
        schedule_payload_json=payload_json,
        takes_context=takes_context,
        **options,
    )
    _validate(spec)
    existing = _REGISTRY.get(job_name)
    if existing is not None and _origin(existing.func) != _origin(fn):
        raise DeclarationError(
            f"job '{job_name}' is declared twice ({_origin(existing.func)} and {_origin(fn)}); "
            f"give one of them another name with @job(name='...')."
        )
    _REGISTRY[job_name] = spec
    return Job(spec)


_INT_OPTIONS = frozenset(
    {
        "timeout_seconds",
        "max_attempts",
        "batch_size",
        "max_batching_window_seconds",
        "max_concurrency",
        "memory_mb",
        "reserved_concurrency",
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


def get_spec(job_ref: JobRef, *, jobs: str | None = None) -> JobSpec:
    """The spec of a job given by name, `Job` or `JobSpec`.

    A name not declared yet is looked up in the jobs package `jobs` (your configured jobs module,
    e.g. "myjobs"), which is then loaded with `load_jobs`. Nothing else is ever imported.

    Raises:
        UnknownJobError: no such job, naming the job and the jobs module searched.
    """
    if isinstance(job_ref, JobSpec):
        return job_ref
    if isinstance(job_ref, Job):
        return job_ref.spec
    spec = _REGISTRY.get(job_ref)
    if spec is None and jobs and not _isolated and jobs not in _loaded:
        load_jobs(jobs)
        spec = _REGISTRY.get(job_ref)
    if spec is None:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        where = (
            f"it is not declared in jobs module '{jobs}'"
            if jobs
            else "no jobs module is configured here (pass the Job object, or config=StackConfig(jobs=...), "
            "or set LAMBDAJOBS_JOBS)"
        )
        raise UnknownJobError(
            f"unknown job '{job_ref}': {where} (declared jobs: {known}); check the name, or import "
            f"the module that declares it."
        )
    return spec


#: Jobs packages loaded so far (for error messages and to load each once).
_loaded: set[str] = set()
_isolated = False


def job_index_mode(specs: Sequence[JobSpec], requested: str | None = None) -> str:
    """The job index's mode for a stack of these jobs: `requested` ("off", "finished" or "all"), else
    "finished" when a job declares `uses=("job_stats",)` (it counts finished jobs), else "off".

    Raises:
        ConfigurationError: an unknown mode, or "off" while a job uses job_stats.
    """
    from lambdajobs.runtime.settings import JOB_INDEX_MODES

    users = sorted(s.name for s in specs if "job_stats" in s.uses)
    if requested in (None, ""):
        return "finished" if users else "off"
    if requested not in JOB_INDEX_MODES:
        raise ConfigurationError(f"job_index={requested!r}; use one of {', '.join(JOB_INDEX_MODES)}.")
    if requested == "off" and users:
        raise ConfigurationError(
            f"job_index='off', but {users} declare uses=('job_stats',), which counts jobs with the job "
            "index: set job_index to 'finished' (or 'all'), or drop job_stats from those jobs."
        )
    return requested


def load_jobs(module: str) -> list[JobSpec]:
    """Import a jobs package and every module inside it, declaring their jobs; return those jobs.

    The package is named by you, once (`[tool.lambdajobs] jobs = "myjobs"` in pyproject.toml, or
    cdk.json, or `--jobs`), and found like any import (your project, or site-packages). Its
    `__init__.py` need not import its modules: every module in the package is imported here.

    Raises:
        ConfigurationError: the package cannot be found.

    Example:
        >>> [spec.name for spec in load_jobs("myjobs")]
        ['send_invoice', 'nightly_export']
    """
    package = _import_jobs_package(module)
    modules = [package]
    if hasattr(package, "__path__"):
        _check_regular_packages(module, package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{module}."):
            modules.append(importlib.import_module(info.name))
    for found in modules:  # modules imported before (then registry cleared): register their jobs again
        for value in list(vars(found).values()):
            if isinstance(value, Job) and value.name not in _REGISTRY:
                _REGISTRY[value.name] = value.spec
    _loaded.add(module)
    return jobs_in(module)


def _import_jobs_package(module: str) -> Any:
    """Import the jobs package; when it is not importable from where Python started (plain `pytest`,
    `python scripts/x.py`: the script's folder is on sys.path, not your project's), from the root of
    the project you are in (the folder whose pyproject.toml has `[tool.lambdajobs]`), and try again.

    Raises:
        ConfigurationError: it is not found there either (saying where it was looked for).
    """

    def missing(exc: ModuleNotFoundError) -> bool:  # the package itself, not something it imports
        return bool(exc.name) and (module == exc.name or module.startswith(f"{exc.name}."))

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if not missing(exc):
            raise  # the package exists but something it imports does not: say so
    import sys
    from pathlib import Path

    from lambdajobs.runtime.project import make_importable

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    starts = [Path.cwd()] + ([script.resolve().parent] if script and script.is_file() else [])
    roots = []
    for start in starts:
        root = make_importable(start)
        if root is None or root in roots:
            continue
        roots.append(root)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not missing(exc):
                raise
    where = (
        f"not on sys.path, nor in the project folder {roots[0]} (its pyproject.toml has [tool.lambdajobs])"
        if roots
        else "not on sys.path, and no folder from here up has a pyproject.toml with [tool.lambdajobs]"
    )
    raise ConfigurationError(
        f"jobs module '{module}' is not importable: {where}; check the name ([tool.lambdajobs] jobs in "
        f"pyproject.toml, or --jobs), run from inside your project, or install it (pip install -e .)."
    ) from None


def _check_regular_packages(module: str, package: Any) -> None:
    """Every folder of a jobs package needs an `__init__.py`: module discovery and the per-function
    assets skip folders without one (namespace packages), which would leave their jobs out silently.

    Raises:
        ConfigurationError: naming the folder that lacks its `__init__.py`.
    """
    from pathlib import Path

    if getattr(package, "__file__", None) is None:
        raise ConfigurationError(
            f"jobs package '{module}' has no __init__.py (a namespace package); add an empty one."
        )
    root = Path(package.__file__).parent
    for folder in sorted({p.parent for p in root.rglob("*.py")}):
        if "__pycache__" in folder.parts or (folder / "__init__.py").exists():
            continue
        raise ConfigurationError(
            f"folder {folder} of jobs package '{module}' holds Python modules but no __init__.py, so "
            f"their jobs would not be found; add an empty __init__.py there."
        )


def jobs_in(module: str) -> list[JobSpec]:
    """The declared jobs whose function lives in `module` or below it, sorted by name."""
    return [
        spec
        for spec in registered_jobs()
        if spec.func.__module__ == module or spec.func.__module__.startswith(f"{module}.")
    ]


def registered_jobs() -> list[JobSpec]:
    """Every declared job, sorted by name (a stable order for CDK logical ids)."""
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


@contextmanager
def isolated_registry(*, keep: bool = False) -> Iterator[dict[str, JobSpec]]:
    """Declare jobs in a block without touching the process registry (for tests). With `keep=True`
    the block starts with the jobs already declared; either way they are restored on exit. Inside
    the block an unknown name never loads a jobs package (its jobs would land here and be lost)."""
    global _isolated
    saved, saved_isolated, saved_loaded = dict(_REGISTRY), _isolated, set(_loaded)
    _isolated = True
    if not keep:
        _REGISTRY.clear()
    try:
        yield _REGISTRY
    finally:
        _REGISTRY.clear()
        _REGISTRY.update(saved)
        _isolated = saved_isolated
        _loaded.clear()  # a package loaded inside the block registered its jobs there only
        _loaded.update(saved_loaded)
