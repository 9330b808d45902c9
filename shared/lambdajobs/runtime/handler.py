"""Building a Lambda handler: around a `Worker` (the local stack, tests), or from the environment CDK
sets on a function (`lambdajobs.runtime.entry`, at cold start).

`from_environment` is the only code that reads the environment: it builds the stack configuration
(`StackConfig.from_environment`), imports exactly the job modules the function ships
(`LAMBDAJOBS_MODULES`: its own job's module and those of the jobs it enqueues; else the whole jobs
package `LAMBDAJOBS_JOBS`), and builds one `Worker` for the job named by `LAMBDAJOBS_JOB`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import ConfigurationError, FunctionInitError
from lambdajobs.runtime.settings import ENV_JOB, ENV_MODULES
from lambdajobs.runtime.spec import active_registry, ensure_loaded
from lambdajobs.runtime.worker import Worker, logger

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _import(name: str, job: str | None, *, package: bool = False) -> None:
    """Import one job module (with `package`: a whole jobs package, `ensure_loaded`).

    Raises:
        FunctionInitError: whatever the import raised, with the module and the error named.
    """
    try:
        ensure_loaded(name) if package else importlib.import_module(name)
    except Exception as exc:  # whatever a module raises at import: the function cannot run its job
        gone = exc.name if isinstance(exc, ModuleNotFoundError) else None
        hint = (
            f"; ship {gone} with the function: declare its distribution in [tool.lambdajobs] "
            "dependencies (pyproject.toml), or keep the module in your project"
            if gone is not None and gone != name
            else ""
        )
        raise FunctionInitError(
            f"the function of job '{job}' could not import its job module {name}: "
            f"{type(exc).__name__}: {exc}{hint}."
        ) from exc


def load_job(config: StackConfig, job: str | None, modules: str | None) -> None:
    """Import the function's job modules (comma-separated `modules`, else the configured jobs
    package) and check that they declare its job.

    Raises:
        FunctionInitError: an import failed (its module and error named), or the job is not declared.
        ConfigurationError: no module and no jobs package is configured.
    """
    names = [m.strip() for m in (modules or "").split(",") if m.strip()]
    if not names and not config.jobs:
        raise ConfigurationError(
            f"neither {ENV_MODULES} nor LAMBDAJOBS_JOBS is set: this function does not know which "
            f"module declares its job (the lambdajobs CDK constructs set both)."
        )
    for name in names:
        _import(name, job)
    if not names:
        _import(str(config.jobs), job, package=True)
    if job and job not in active_registry():
        raise FunctionInitError(
            f"the job modules {', '.join(names) or config.jobs} do not declare job '{job}' (declared: "
            f"{sorted(active_registry().names())}); check {ENV_MODULES} and {ENV_JOB}."
        )


def make_handler(worker: Worker) -> Handler:
    """A Lambda handler around `worker`. Each invocation's lines carry its request id and whether it
    was a cold start; not the function's name, ARN and memory, which Powertools'
    `inject_lambda_context` repeats on every line (about 170 bytes each) though the log group already
    names the function."""
    cold = [True]

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        logger.structure_logs(  # the keys of the last invocation go
            cold_start=cold[0], function_request_id=getattr(context, "aws_request_id", None)
        )
        cold[0] = False
        return worker.handle(event, context)

    handler.worker = worker  # type: ignore[attr-defined]
    return handler


def warm(handler: Handler) -> None:
    """Make the client a worker's first record needs (its job records' DynamoDB client) now, in the
    function's init phase, as AWS advises for SDK clients: the init phase pauses the collector
    (`lambdajobs.runtime.startup`), so the hundred thousand objects of the client's service model are
    built and frozen without being walked, as those of the imports are. Nothing here can fail the
    init: a client that cannot be made now is made, or its error reported, by the first record."""
    worker: Worker | None = getattr(handler, "worker", None)
    if worker is None:
        return
    try:
        worker.store.client  # noqa: B018 (made on first use, then kept)
    except Exception:  # the first record makes it again, and reports what went wrong
        return


def from_environment(environ: Mapping[str, str] | None = None) -> Handler:
    """Build the handler the way a cold start does, from `environ` (default: the process environment).

    When the job cannot be loaded (`FunctionInitError`), the handler still starts, with a worker
    that dead-letters every record with that reason (on Lambda an init error would never reach the
    handler: the messages would reach the DLQ after maxReceiveCount receives, with no reason). The
    error is logged once, and kept as the handler's `init_error`.
    """
    env = os.environ if environ is None else environ
    config = StackConfig.from_environment(env)
    job = env.get(ENV_JOB) or None
    try:
        load_job(config, job, env.get(ENV_MODULES))
    except FunctionInitError as exc:
        logger.error(
            "the function could not load its job: every record goes to its DLQ", extra={"error": str(exc)}
        )
        handler = make_handler(Worker(job, config=config, init_error=exc))
        handler.init_error = exc  # type: ignore[attr-defined]
        return handler
    return make_handler(Worker(job, config=config))
