"""Where a stack's resources are when the configuration does not say: the naming rule (`Where`: a
queue's URL and ARN from the account, region and name) and the stack's manifest in SSM Parameter
Store (read once per connection and parameter, cached in `config._manifest_cache`).

Split out of `lambdajobs.runtime.config`: `StackConfig.queue`, `where`, `stack_entry`,
`workflow_queue`, `scheduler_settings` and `_parameter` call these, and a worker whose environment
names its table and queues (what CDK sets) never does, so its cold start does not compile them. They
call the configuration's own methods (`config.where()`, `config._parameter(...)`), as before.
`Where` is importable from `config` too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from lambdajobs.runtime.config import QueueAddress, StackConfig, _manifest_cache, _manifest_lock
from lambdajobs.runtime.errors import ConfigurationError, QueueNotFoundError, StackNotFoundError
from lambdajobs.runtime.settings import (
    dead_letter_queue_name,
    manifest_parameter,
    queue_key,
    queue_name,
    schedule_group_names,
    scheduler_dead_letter_queue_name,
    stack_manifest_parameter,
    workflow_queue_name,
)


@dataclass(frozen=True)
class Where:
    """Where a stack's queues are: with the naming rule (`settings.queue_name`), the URL and ARN of
    any of them, with no lookup. `endpoint`: an SQS endpoint that is not AWS's own (the local
    stack's); the URL is then `<endpoint>/<account>/<name>`, as moto's server makes it.

    Example:
        >>> Where("123456789012", "eu-west-1").queue_url("orders_send_invoice")
        'https://sqs.eu-west-1.amazonaws.com/123456789012/orders_send_invoice'
    """

    account: str
    region: str
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"
    endpoint: str | None = None

    def queue_url(self, name: str) -> str:
        base = self.endpoint.rstrip("/") if self.endpoint else f"https://sqs.{self.region}.{self.url_suffix}"
        return f"{base}/{self.account}/{name}"

    def queue_arn(self, name: str) -> str:
        return f"arn:{self.partition}:sqs:{self.region}:{self.account}:{name}"

    def address(self, name: str, dlq_name: str) -> QueueAddress:
        return QueueAddress(self.queue_url(name), self.queue_arn(name), self.queue_url(dlq_name))


def queue(config: StackConfig, job: str, level: str | None = None) -> QueueAddress:
    """A job's queue URL, ARN and DLQ URL (a priority level's with `level`; None: the job's own
    queue): what is known, completed from the manifest.

    Raises:
        QueueNotFoundError: the stack has no manifest entry for the job (or the level).
    """
    known = config.queues.get(queue_key(job, level), QueueAddress())
    if known.url and known.arn and known.dlq_url:
        return known
    where = config.where()
    if where is not None:
        ruled = where.address(
            queue_name(config.stack, job, level), dead_letter_queue_name(config.stack, job, level)
        )
        return QueueAddress(known.url or ruled.url, known.arn or ruled.arn, known.dlq_url or ruled.dlq_url)
    entry: dict[str, Any] = config._parameter(
        manifest_parameter(config.stack, job), f"no queue for job '{job}' in stack '{config.stack}'"
    )
    if level is not None:
        levels = entry.get("levels") or {}
        if level not in levels:
            raise QueueNotFoundError(
                f"job '{job}' has no queue for priority '{level}' in stack '{config.stack}' (it has "
                f"{sorted(levels) or 'none'}): deploy the stack with the job's current priorities."
            )
        entry = levels[level]
    return QueueAddress(
        url=known.url or entry.get("queue_url", ""),
        arn=known.arn or entry.get("queue_arn", ""),
        dlq_url=known.dlq_url or entry.get("dlq_url", ""),
    )


def where(config: StackConfig) -> Where | None:
    """Where the stack's queues are, when the account is known (a function's environment says;
    the region is the configuration's, else Lambda's `AWS_REGION`; the endpoint the
    configuration's, else boto3's `AWS_ENDPOINT_URL_SQS` / `AWS_ENDPOINT_URL`); None: ask the
    manifest."""
    region = config.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if not config.account or not region:
        return None
    endpoint = (
        config.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_SQS")
        or os.environ.get("AWS_ENDPOINT_URL")
        or None
    )
    return Where(config.account, region, config.partition, config.url_suffix, endpoint)


def stack_entry(config: StackConfig) -> dict[str, str]:
    """The stack's manifest: table, bucket, scheduler settings.

    Raises:
        StackNotFoundError: the stack is not deployed here (wrong name, region or account).
    """
    return config._parameter(
        stack_manifest_parameter(config.stack), f"stack '{config.stack}' not found", StackNotFoundError
    )


def workflow_queue(config: StackConfig) -> str:
    """The URL of the stack's workflow queue (known, else from the stack's manifest).

    Raises:
        StackNotFoundError: the stack is not deployed here.
        ConfigurationError: the stack was deployed by a version without workflows.
    """
    if config.workflow_queue_url:
        return config.workflow_queue_url
    where = config.where()
    if where is not None:
        return where.queue_url(workflow_queue_name(config.stack))
    url = config.stack_entry().get("workflow_queue_url")
    if not url:
        raise ConfigurationError(
            f"stack '{config.stack}' has no workflow queue: deploy it with this version of lambdajobs."
        )
    return str(url)


def scheduler_settings(config: StackConfig) -> tuple[str, str, str]:
    """(role ARN, one-time schedule group, scheduler DLQ ARN) for `enqueue(run_at=...)`."""
    group = config.one_time_group
    dlq_arn = config.scheduler_dlq_arn
    where = config.where()
    if where is not None:  # named by the stack's rule; the role's name is CloudFormation's
        group = group or schedule_group_names(config.stack)[1]
        dlq_arn = dlq_arn or where.queue_arn(scheduler_dead_letter_queue_name(config.stack))
    if config.scheduler_role_arn and group and dlq_arn:
        return config.scheduler_role_arn, group, dlq_arn
    entry = config.stack_entry()
    return (
        config.scheduler_role_arn or entry["scheduler_role_arn"],
        group or entry["one_time_group"],
        dlq_arn or entry["scheduler_dlq_arn"],
    )


def parameter(
    config: StackConfig, name: str, missing: str, error: type[QueueNotFoundError] = QueueNotFoundError
) -> dict[str, Any]:
    key = (config.connection, name)
    with _manifest_lock:
        if key in _manifest_cache:
            return _manifest_cache[key]
    ssm = config.client("ssm")
    try:
        value = ssm.get_parameter(Name=name)["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        raise error(
            f"{missing}: parameter {name} does not exist. Deploy the stack, or point at the right one "
            f"(stack name now '{config.stack}', region {config.region or 'from the environment'})."
        ) from None
    entry: dict[str, Any] = json.loads(value)
    with _manifest_lock:
        _manifest_cache[key] = entry
    return entry
