"""The parts of job declaration only some declarations need, loaded the first time one does: the
checks of rare options (priorities, a reserved concurrency, searchable fields, `uses` and `enqueues`,
an idempotency key, the light record mode, a rate limit), `@cron` and a cron job's payload and
envelope, loading a whole jobs package (`load_jobs`, `ensure_loaded`), the message of an unknown job,
the job index's mode of a stack, and the stand-in for a job whose module could not be imported.

Split out of `lambdajobs.runtime.spec`, which calls these when a declaration sets one of those options
(the rules and their order are `spec._DECLARATION_CHECKS`'): a worker's cold start, whose job module
declares a plain job, does not compile them. `cron` and `job_index_mode` are importable from `spec`
too.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from lambdajobs.runtime.envelope import summarize_validation_error
from lambdajobs.runtime.errors import ConfigurationError, DeclarationError, ScheduleError
from lambdajobs.runtime.naming import PRIORITY_NAME_RE
from lambdajobs.runtime.settings import ENV_JOB, JOB_NAME_RE
from lambdajobs.runtime.spec import (
    MAX_CONCURRENCY,
    MAX_RESERVED_CONCURRENCY,
    MIN_CONCURRENCY,
    RECORD_MODES,
    USES,
    Job,
    JobSpec,
    Registry,
    _check_range,
    _register,
    using_registry,
)

if TYPE_CHECKING:
    from lambdajobs.runtime.ratelimit import RateLimit
    from lambdajobs.runtime.schedule import Schedule


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


def scheduled_envelope(spec: JobSpec, scheduled_time: str) -> dict[str, Any]:
    """`JobSpec.scheduled_envelope`: the envelope a scheduled run sends."""
    return {
        "v": 1,
        "job": spec.name,
        "id": f"{spec.name}@{scheduled_time}",
        "payload": spec.schedule_payload,
        "scheduled_at": scheduled_time,
    }


def check_reserved_concurrency(spec: JobSpec) -> None:
    """A reservation covers every event source's batches in flight (checked after the priorities)."""
    if spec.reserved_concurrency is not None:
        _check_range(
            spec.name,
            "reserved_concurrency",
            spec.reserved_concurrency,
            spec.total_concurrency,
            MAX_RESERVED_CONCURRENCY,
            "at least max_concurrency (every priority level's together): less throttles the queues' "
            "event sources, and throttles use up attempts",
        )


def check_references(spec: JobSpec) -> None:
    """`uses` names stack resources lambdajobs has; `enqueues` names jobs."""
    name = spec.name
    bad_uses = sorted(set(spec.uses) - USES)
    if bad_uses:
        raise DeclarationError(f"job '{name}': uses={bad_uses} is unknown; choose from {sorted(USES)}.")
    bad_targets = [t for t in spec.enqueues if not JOB_NAME_RE.fullmatch(t)]
    if bad_targets:
        raise DeclarationError(f"job '{name}': enqueues={bad_targets} are not job names.")


def rate_limit_option(job_name: str, rate_limit: str | RateLimit, model: type[BaseModel]) -> RateLimit | None:
    """`rate_limit=` as a checked `RateLimit` whose key, if any, is a field of the payload model."""
    from lambdajobs.runtime.ratelimit import checked as checked_rate_limit

    limit = checked_rate_limit(job_name, rate_limit)
    if limit is not None and limit.key and limit.key not in model.model_fields:
        raise DeclarationError(
            f"job '{job_name}': rate_limit key {limit.key!r} is not a field of {model.__name__}; "
            f"name one of {sorted(model.model_fields)}."
        )
    return limit


def check_priorities(spec: JobSpec) -> None:
    """`priorities`: two or more distinct level names, each level's concurrency in range."""
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


def priority_options(
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


def path_problem(model: type[BaseModel], path: str) -> str | None:
    """Why a dotted path is not a field of the payload model (nested models followed), or None."""
    from typing import get_args

    node: Any = model
    for part in path.split("."):
        fields_ = getattr(node, "model_fields", None) if isinstance(node, type) else None
        if fields_ is None or part not in fields_:
            return f"{part!r} is not a field of {getattr(node, '__name__', node)}"
        annotation = fields_[part].annotation
        models = [a for a in (annotation, *get_args(annotation)) if isinstance(a, type)]
        node = next((a for a in models if issubclass(a, BaseModel)), annotation)
    return None


def check_searchable(spec: JobSpec) -> None:
    """`searchable` names payload fields (dotted paths through nested models) or the tenant
    (`TENANT_FIELD`), each once."""
    from lambdajobs.runtime.settings import TENANT_FIELD

    for path in spec.searchable:
        problem = None
        if not isinstance(path, str) or not path:
            problem = "not a field name"
        elif path != TENANT_FIELD:
            problem = path_problem(spec.payload_model, path)
        if problem:
            raise DeclarationError(
                f"job '{spec.name}': searchable field {path!r}: {problem}; name payload fields (dotted "
                f"for nested ones) or {TENANT_FIELD!r} (the tenant)."
            )
    if len(set(spec.searchable)) != len(spec.searchable):
        raise DeclarationError(f"job '{spec.name}': searchable={list(spec.searchable)} names a field twice.")


def check_idempotency_key(spec: JobSpec) -> None:
    """`idempotency_key`, when given, names one or more fields of the payload model."""
    if spec.idempotency_key is None:
        return
    missing = [f for f in spec.idempotency_key if f not in spec.payload_model.model_fields]
    if not spec.idempotency_key or missing:
        raise DeclarationError(
            f"job '{spec.name}': idempotency_key names fields not in {spec.payload_model.__name__}: "
            f"{missing or '(empty)'}; use field names of the payload model."
        )


def check_record_mode(spec: JobSpec) -> None:
    """`record_mode` is "full" or "light"; light mode writes no record before or while the job runs,
    so it refuses what needs one: a durable job's `max_duration_seconds` (its checkpoints, sleeps,
    signal waits and continuations are written to the running job's record, under its lock).

    Allowed in light mode, each checked against that rule: `rate_limit` (its gate reads the record,
    which may be absent, and writes its own slot item; a run that missed its slot is handed back with
    nothing to give back), `concurrency_key` (slots are items of their own, keyed on the job id),
    workflows (a member's outcome is counted with its one write, in the same transaction as in full
    mode), `searchable` (entries of their own, at the first attempt), priorities and schedules."""
    if spec.record_mode not in RECORD_MODES:
        raise DeclarationError(
            f"job '{spec.name}': record_mode={spec.record_mode!r}; use 'full' (the default) or 'light'."
        )
    if spec.record_mode != "light":
        return
    durable = spec.max_duration_seconds not in (JobSpec.max_duration_seconds, spec.timeout_seconds)
    if durable:
        raise DeclarationError(
            f"job '{spec.name}': max_duration_seconds={spec.max_duration_seconds} needs the job's record "
            f"while it runs (durable steps, sleeps, signals, continuations), which record_mode='light' "
            f"does not keep; remove max_duration_seconds, or use record_mode='full'."
        )


def schedule_payload_json(
    job_name: str, model: type[BaseModel], schedule: Schedule | None, payload: dict[str, Any] | None
) -> str | None:
    """A cron job's payload for every run, validated now, as sorted JSON (None: not a cron job)."""
    if schedule is None:
        return None
    try:
        checked = model.model_validate(payload or {}).model_dump(mode="json")
    except ValidationError as exc:
        raise DeclarationError(
            f"job '{job_name}': the schedule's payload is not a valid {model.__name__}: "
            f"{summarize_validation_error(exc)}; pass payload={{...}} to @cron."
        ) from None
    return json.dumps(checked, sort_keys=True)


def load_into(registry: Registry, package: str) -> list[JobSpec]:
    """`Registry.load`: import a jobs package and every module inside it, declaring their jobs in
    `registry`; return those jobs (sorted by name)."""
    with using_registry(registry):  # a module imported now declares its jobs here
        modules = import_jobs_modules(package)
    specs = registry._specs
    for module in modules:  # a module imported before declared them elsewhere: add its Job objects
        for value in list(vars(module).values()):
            if isinstance(value, Job) and value.name not in specs:
                specs[value.name] = value.spec
    registry._loaded.add(package)
    return registry.jobs_in(package)


def check_shared_rate_limit(registry: Registry, spec: JobSpec) -> None:
    """Jobs sharing a rate limiter (by name) declare the same limits: there is one bucket."""
    limit = spec.rate_limit
    if limit is None:
        return
    for other in registry._specs.values():
        theirs = other.rate_limit
        if theirs and other.name != spec.name and theirs.name == limit.name and theirs != limit:
            raise DeclarationError(
                f"job '{spec.name}': rate limiter '{limit.name}' is declared by job '{other.name}' "
                f"as {theirs.describe()}; a shared limiter needs the same RateLimit."
            )


def unknown_job(registry: Registry, name: str) -> str:
    """What an `UnknownJobError` for `name` says: the jobs declared, the packages loaded, the fix."""
    known = ", ".join(registry.names()) or "none"
    loaded = registry._loaded
    packages = ", ".join(f"'{p}'" for p in sorted(loaded))
    if not packages:
        where = "no jobs module is loaded here"
    else:
        where = f"it is not declared in jobs module{'s' if len(loaded) > 1 else ''} {packages}"
    return (
        f"unknown job '{name}': {where} (declared jobs: {known}); check the name, or import the module "
        f"that declares it, or load its jobs package (config=StackConfig(jobs=...), LAMBDAJOBS_JOBS, "
        f"or ensure_loaded('<package>'))."
    )


def import_jobs_modules(package: str) -> list[Any]:
    """The jobs package and every module inside it, imported."""
    root = _import_jobs_package(package)
    modules = [root]
    if hasattr(root, "__path__"):
        _check_regular_packages(package, root)
        import pkgutil  # a whole jobs package: a worker imports only its job modules (LAMBDAJOBS_MODULES)

        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            modules.append(_import_from_project(info.name))
    return modules


def _import_from_project(name: str) -> Any:
    """Import a module of the jobs package; when something it imports is not importable from where
    Python started, but is your project's own code (a shared `common.py` at its root), make the
    project's root importable and try again (the error of that try stands)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        if not _project_roots():
            raise
    return importlib.import_module(name)


def job_index_mode(specs: Sequence[JobSpec], requested: str | None = None) -> str:
    """The job index's mode for a stack of these jobs: `requested` ("off", "finished" or "all"), else
    "off", whatever the jobs declare. A job that counts finished jobs (`uses=("job_stats",)`,
    `count_finished`) reads the worker's CloudWatch metrics when the index is off, so it no longer
    turns the index on: that cost a third write unit to every job of the stack (issue 31). `specs`
    stays for a rule that needs the jobs.

    Raises:
        ConfigurationError: an unknown mode.
    """
    from lambdajobs.runtime.settings import JOB_INDEX_MODES

    del specs  # no job's declaration changes the mode today
    if requested in (None, ""):
        return "off"
    if requested not in JOB_INDEX_MODES:
        raise ConfigurationError(f"job_index={requested!r}; use one of {', '.join(JOB_INDEX_MODES)}.")
    return requested


def _import_jobs_package(module: str) -> Any:
    """Import the jobs package; when it, or a module of your project it imports (a shared
    `common.py` at the project's root), is not importable from where Python started (plain `pytest`,
    `python scripts/x.py`: the script's folder is on sys.path, not your project's; an editable install
    of the jobs package alone), from the root of the project you are in (the folder whose
    pyproject.toml has `[tool.lambdajobs]`), and try again.

    Raises:
        ConfigurationError: it is not found there either (saying where it was looked for).
        ModuleNotFoundError: the package is there, but something it imports is not (a library not
            installed): that error, as it is.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        failed = exc
    roots = []
    for root in _project_roots():
        roots.append(root)
        try:
            return importlib.import_module(module)
        except ModuleNotFoundError as exc:
            failed = exc
    if not (failed.name and (module == failed.name or module.startswith(f"{failed.name}."))):
        raise failed  # the package exists but something it imports does not: say so
    where = (
        f"not on sys.path, nor in the project folder {roots[0]} (its pyproject.toml has [tool.lambdajobs])"
        if roots
        else "not on sys.path, and no folder from here up has a pyproject.toml with [tool.lambdajobs]"
    )
    raise ConfigurationError(
        f"jobs module '{module}' is not importable: {where}; check the name ([tool.lambdajobs] jobs in "
        f"pyproject.toml, or --jobs), run from inside your project, or install it (pip install -e .)."
    ) from None


def _project_roots() -> list[Any]:
    """The roots of the project you are in, from the current folder and from the script's, each put
    first on sys.path (`project.make_importable`)."""
    import sys
    from pathlib import Path

    from lambdajobs.runtime.project import make_importable

    script = Path(sys.argv[0]) if sys.argv and sys.argv[0] not in ("", "-c", "-m") else None
    starts = [Path.cwd()] + ([script.resolve().parent] if script and script.is_file() else [])
    roots: list[Any] = []
    for start in starts:
        root = make_importable(start)
        if root is not None and root not in roots:
            roots.append(root)
    return roots


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


class _Unread(BaseModel):
    """Any payload: a stand-in's, which is never run (`unloaded_spec`)."""

    model_config = {"extra": "allow", "defer_build": True}  # built only if a stand-in's payload is read


def _never_runs(*_: Any) -> None:
    raise AssertionError("a job whose module could not be imported never runs")


def unloaded_spec(name: str) -> JobSpec:
    """A stand-in for job `name` when its function could not import the module declaring it (the
    worker dead-letters every record with the reason): the declaration's defaults, any payload, no
    priorities, and a function that is never called."""
    return JobSpec(name=name, func=_never_runs, payload_model=_Unread)
