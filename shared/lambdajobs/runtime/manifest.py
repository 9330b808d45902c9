"""The stack's manifest in SSM Parameter Store: how producers, the CLI and status readers find the
stack's resources without hard-coded names. Environment variables set by CDK take precedence.

    /lambdajobs/<stack>/jobs/<job>   {"queue_url", "queue_arn", "dlq_url"}
    /lambdajobs/<stack>/stack        {"table", "bucket", "scheduler_role_arn", "cron_group", ...}
"""

from __future__ import annotations

import json
import threading

from lambdajobs.runtime import aws
from lambdajobs.runtime.errors import QueueNotFoundError, StackNotFoundError
from lambdajobs.runtime.settings import manifest_parameter, queue_url_env, stack_manifest_parameter, stack_name

_cache: dict[tuple[str, str], dict[str, str]] = {}
_lock = threading.Lock()


def _parameter(
    name: str, missing: str, error: type[QueueNotFoundError] = QueueNotFoundError
) -> dict[str, str]:
    key = (stack_name(), name)
    with _lock:
        if key in _cache:
            return _cache[key]
    ssm = aws.client("ssm")
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        raise error(
            f"{missing}: parameter {name} does not exist. Deploy the stack (stack name from "
            f"LAMBDAJOBS_STACK, now '{key[0]}') or set the environment variables it would provide."
        ) from None
    entry: dict[str, str] = json.loads(value)
    with _lock:
        _cache[key] = entry
    return entry


def job_entry(job: str) -> dict[str, str]:
    return _parameter(
        manifest_parameter(stack_name(), job), f"no queue for job '{job}' (or set {queue_url_env(job)})"
    )


def stack_entry() -> dict[str, str]:
    return _parameter(
        stack_manifest_parameter(stack_name()), f"stack '{stack_name()}' not found", StackNotFoundError
    )


def clear_cache() -> None:
    with _lock:
        _cache.clear()
