"""The naming rule of a stack's resources, loaded the first time one is named: its job queues and
dead-letter queues (at every priority level), the patterns that grant all of them, its schedule groups,
log groups and workflow queues, its manifest's parameters, the environment variables that give a
job's queue, and what a priority level may be named.

Split out of `lambdajobs.runtime.settings`, which keeps the names and defaults every layer reads and
re-exports these (PEP 562): CDK, the local stack and the manifest's reads name resources; a worker
whose environment names its table and queues (what CDK sets) does not compile them.
"""

from __future__ import annotations

import re

from lambdajobs.runtime.settings import (
    DLQ_SUFFIX,
    ENV_DLQ_URL_PREFIX,
    ENV_QUEUE_ARN_PREFIX,
    ENV_QUEUE_URL_PREFIX,
    MANIFEST_PREFIX,
    MAX_QUEUE_NAME,
    MAX_SCHEDULE_GROUP_NAME,
    STACK_MANIFEST,
)

#: Names a priority level: lower-case letters and digits (no '_' or '-': it becomes part of queue names
#: and environment variable names after the job's), at most 16.
PRIORITY_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,15}$")


def queue_name(stack: str, job: str, level: str | None = None) -> str:
    """A job's queue name, `<stack>_<job>`; a priority level's, `<stack>_<job>--<level>` (None: the
    job's own queue, which its lowest level uses); each one's DLQ adds `-dlq` (`dead_letter_queue_name`).

    The naming rule is what lets a function find any queue of its stack without a variable per queue,
    and a policy grant all of them by one pattern (`job_queue_pattern`): a stack name has no '_'
    (CloudFormation allows letters, digits and '-'), so `<stack>_*` matches no queue of any other
    stack, not even of a neighbour named `<stack>-2`; a job name has no '-' and a level neither
    '-' nor '_', so no two queues of one stack share a name.

    Raises:
        ConfigurationError: a stack name with '_'; a name (its DLQ's included) longer than SQS
            allows. Cutting it short could give two jobs (or two stacks) one queue, so the name is
            refused instead.
    """
    from lambdajobs.runtime.errors import ConfigurationError

    if "_" in stack or not stack:
        problem = "has '_'" if stack else "is empty"
        raise ConfigurationError(
            f"stack name '{stack}' {problem}; use letters, digits and '-' (as CloudFormation does)."
        )
    name = f"{stack}_{job}" if level is None else f"{stack}_{job}--{level}"
    if len(name) + len(DLQ_SUFFIX) > MAX_QUEUE_NAME:
        raise ConfigurationError(
            f"stack '{stack}' and job '{job}' make the queue name '{name}{DLQ_SUFFIX}' of "
            f"{len(name) + len(DLQ_SUFFIX)} characters (a DLQ's); SQS allows {MAX_QUEUE_NAME}: use a "
            f"shorter stack name (or job name)."
        )
    return name


def dead_letter_queue_name(stack: str, job: str, level: str | None = None) -> str:
    """The DLQ of a job's queue (of a priority level's with `level`): `<queue name>-dlq`."""
    return queue_name(stack, job, level) + DLQ_SUFFIX


def job_queue_pattern(stack: str) -> str:
    """The names of every job queue and DLQ of `stack`, at every level, and of nothing else: `<stack>_*`
    (an IAM resource pattern: see `queue_name` for why no other stack's names match)."""
    return f"{stack}_*"


def dead_letter_queue_pattern(stack: str) -> str:
    """The names of every job DLQ of `stack`: `<stack>_*-dlq` (no job queue ends so: a level is never
    named `dlq`, and a job name has no '-')."""
    return f"{stack}_*{DLQ_SUFFIX}"


def level_env(prefix: str, job: str, level: str) -> str:
    return f"{prefix}{level.upper()}_{job.upper()}"


def queue_url_env(job: str) -> str:
    return ENV_QUEUE_URL_PREFIX + job.upper()


def dlq_url_env(job: str) -> str:
    return ENV_DLQ_URL_PREFIX + job.upper()


def manifest_parameter(stack: str, job: str) -> str:
    return MANIFEST_PREFIX.format(stack=stack) + job


def stack_manifest_parameter(stack: str) -> str:
    return STACK_MANIFEST.format(stack=stack)


def queue_arn_env(job: str) -> str:
    return ENV_QUEUE_ARN_PREFIX + job.upper()


def schedule_group_names(stack: str) -> tuple[str, str]:
    """(cron group, one-time group). Scheduler group names: 1 to 64 of [0-9a-zA-Z-_.].

    Raises:
        ConfigurationError: the stack name makes them longer than Scheduler allows.
    """
    names = f"{stack}-cron", f"{stack}-once"
    if len(names[0]) > MAX_SCHEDULE_GROUP_NAME:
        from lambdajobs.runtime.errors import ConfigurationError

        raise ConfigurationError(
            f"stack '{stack}' makes the schedule group name '{names[0]}' of {len(names[0])} characters; "
            f"Scheduler allows {MAX_SCHEDULE_GROUP_NAME}: use a stack name of at most "
            f"{MAX_SCHEDULE_GROUP_NAME - 5} characters."
        )
    return names


def log_group_name(stack: str, job: str) -> str:
    """A job worker's log group, `/lambdajobs/<stack>/<job>`: named by rule (and in the job's manifest
    entry), so the operator's Logs Insights grant names the stack's groups by one pattern
    (`log_group_pattern`) that no other stack's group matches (a stack name has no '/')."""
    return f"/lambdajobs/{stack}/{job}"


def log_group_pattern(stack: str) -> str:
    """Every job worker log group of `stack` (an IAM resource pattern's name part)."""
    return f"/lambdajobs/{stack}/*"


def workflow_queue_name(stack: str) -> str:
    """The stack's workflow queue, `<stack>--workflows` (outside `job_queue_pattern`: no '_')."""
    return f"{stack}--workflows"


def workflow_dead_letter_queue_name(stack: str) -> str:
    """`<stack>--workflows-dlq`: named, so the CLI finds it with the workflow queue."""
    return workflow_queue_name(stack) + DLQ_SUFFIX


def scheduler_dead_letter_queue_name(stack: str) -> str:
    """`<stack>--scheduler-dlq`: where EventBridge Scheduler puts runs it could not deliver."""
    return f"{stack}--scheduler{DLQ_SUFFIX}"
