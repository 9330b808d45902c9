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
from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.settings import ENV_JOB, ENV_MODULES
from lambdajobs.runtime.spec import ensure_loaded
from lambdajobs.runtime.worker import Worker, logger

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def import_job_modules(config: StackConfig, modules: str | None) -> None:
    """Import the named job modules (comma-separated), else the configured jobs package."""
    names = [m.strip() for m in (modules or "").split(",") if m.strip()]
    if names:
        for name in names:
            importlib.import_module(name)
    elif config.jobs:
        ensure_loaded(config.jobs)
    else:
        raise ConfigurationError(
            f"neither {ENV_MODULES} nor LAMBDAJOBS_JOBS is set: this function does not know which "
            f"module declares its job (the lambdajobs CDK constructs set both)."
        )


def make_handler(worker: Worker) -> Handler:
    """A Lambda handler around `worker`: the Powertools Logger gets the Lambda context per invocation."""

    @logger.inject_lambda_context(clear_state=True)
    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return worker.handle(event, context)

    return handler


def from_environment(environ: Mapping[str, str] | None = None) -> Handler:
    """Build the handler the way a cold start does, from `environ` (default: the process environment)."""
    env = os.environ if environ is None else environ
    config = StackConfig.from_environment(env)
    import_job_modules(config, env.get(ENV_MODULES))
    return make_handler(Worker(env.get(ENV_JOB) or None, config=config))
