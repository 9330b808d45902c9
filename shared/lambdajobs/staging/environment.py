"""Each function's environment variables, computed once: the CDK constructs call these with deploy-time
values (tokens), the local stack with the values of what it provisioned, so a function runs locally
with exactly the variables it gets on Lambda.

A job's worker function: `worker_own` (what `JobWorker` sets: its job, its modules, the stack and
table, its own queues), `worker_wired` (what `LambdaJobs` adds for what the job declared: the queues
of the jobs it `enqueues`, one-time scheduling, the bucket), the job index mode and the workflow queue;
`worker` is all of them together. The workflow continuer: `continuer`. Every lambdajobs function also
has `powertools()`. Lambda's own variables (`AWS_LAMBDA_FUNCTION_NAME`, ...) are Lambda's: the local
stack adds them (`lambdajobs.local.functions`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from lambdajobs.runtime.config import QueueAddress
from lambdajobs.runtime.settings import (
    DEFAULT_RECORD_TTL_DAYS,
    ENV_BUCKET,
    ENV_JOB,
    ENV_JOB_INDEX,
    ENV_JOBS,
    ENV_LEVEL_DLQ_URL_PREFIX,
    ENV_LEVEL_QUEUE_ARN_PREFIX,
    ENV_LEVEL_QUEUE_URL_PREFIX,
    ENV_MODULES,
    ENV_RECORD_TTL_DAYS,
    ENV_SCHEDULER_DLQ_ARN,
    ENV_SCHEDULER_GROUP,
    ENV_SCHEDULER_ROLE_ARN,
    ENV_STACK,
    ENV_TABLE,
    ENV_WORKFLOW_QUEUE_URL,
    METRICS_NAMESPACE,
    SERVICE_NAME,
    dlq_url_env,
    level_env,
    queue_arn_env,
    queue_url_env,
)
from lambdajobs.runtime.spec import JobSpec

#: A job's queues by priority level (None: the job's own queue, its lowest level).
Levels = Mapping[str | None, QueueAddress]


@dataclass(frozen=True)
class Scheduling:
    """What `enqueue(run_at=...)` beyond 15 minutes needs: the role Scheduler sends as, the stack's
    one-time schedule group, the DLQ of schedules that could not send."""

    role_arn: str
    group: str
    dlq_arn: str


def powertools() -> dict[str, str]:
    """Every lambdajobs function's Powertools settings."""
    return {"POWERTOOLS_SERVICE_NAME": SERVICE_NAME, "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE}


def send_to(job: str, level: str | None, queue: QueueAddress, *, arns: bool = True) -> dict[str, str]:
    """What a function that sends to one level's queue of `job` reads: its URL
    (`LAMBDAJOBS_QUEUE_URL_<JOB>`, or `LAMBDAJOBS_PRIORITY_QUEUE_URL_<LEVEL>_<JOB>` for a level above
    the job's own) and with `arns` its ARN (what a one-time schedule targets: `enqueue(run_at=...)`)."""
    if level is None:
        url, arn = queue_url_env(job), queue_arn_env(job)
    else:
        url = level_env(ENV_LEVEL_QUEUE_URL_PREFIX, job, level)
        arn = level_env(ENV_LEVEL_QUEUE_ARN_PREFIX, job, level)
    return {url: queue.url, **({arn: queue.arn} if arns else {})}


def worker_own(
    spec: JobSpec, *, stack: str, table: str, jobs_package: str, modules: Sequence[str], queues: Levels
) -> dict[str, str]:
    """A job's worker function, on its own: which job and modules, the stack, the table, and each of
    its levels' queues (its own queue's URL and DLQ URL; each level above it, URL, ARN and DLQ URL)."""
    own = queues[None]
    env = {
        ENV_JOB: spec.name,
        # the job modules this function ships and imports at cold start (see staging/asset.py)
        ENV_JOBS: jobs_package,
        ENV_MODULES: ",".join(modules),
        ENV_STACK: stack,
        ENV_TABLE: table,
        # its own queue: for retry delays (ChangeMessageVisibility) without a lookup
        queue_url_env(spec.name): own.url,
        dlq_url_env(spec.name): own.dlq_url,
    }
    # each priority level's: hand-backs and dead letters stay in the record's level, and a message
    # whose envelope names another level is forwarded there
    for level, queue in queues.items():
        if level is not None:
            env[level_env(ENV_LEVEL_QUEUE_URL_PREFIX, spec.name, level)] = queue.url
            env[level_env(ENV_LEVEL_QUEUE_ARN_PREFIX, spec.name, level)] = queue.arn
            env[level_env(ENV_LEVEL_DLQ_URL_PREFIX, spec.name, level)] = queue.dlq_url
    return env


def worker_wired(
    spec: JobSpec, *, targets: Mapping[str, Levels], scheduling: Scheduling, bucket: str
) -> dict[str, str]:
    """What a job's declaration adds to its worker: every level's queue of each job it `enqueues`
    (it may enqueue the target at any of its priorities) and one-time scheduling, and the bucket
    with `uses=("bucket",)`."""
    env: dict[str, str] = {}
    for target in spec.enqueues:
        for level, queue in targets[target].items():
            env.update(send_to(target, level, queue))
    if spec.enqueues:
        env[ENV_SCHEDULER_ROLE_ARN] = scheduling.role_arn
        env[ENV_SCHEDULER_GROUP] = scheduling.group
        env[ENV_SCHEDULER_DLQ_ARN] = scheduling.dlq_arn
    if "bucket" in spec.uses:
        env[ENV_BUCKET] = bucket
    return env


def worker(
    spec: JobSpec,
    *,
    stack: str,
    table: str,
    jobs_package: str,
    modules: Sequence[str],
    queues: Mapping[str, Levels],
    scheduling: Scheduling,
    bucket: str,
    job_index: str,
    workflow_queue_url: str,
) -> dict[str, str]:
    """A job's worker function's whole environment (`queues`: every job's levels, by job)."""
    return {
        **worker_own(
            spec,
            stack=stack,
            table=table,
            jobs_package=jobs_package,
            modules=modules,
            queues=queues[spec.name],
        ),
        **worker_wired(spec, targets=queues, scheduling=scheduling, bucket=bucket),
        ENV_JOB_INDEX: job_index,
        ENV_WORKFLOW_QUEUE_URL: workflow_queue_url,
        **powertools(),
    }


def continuer(
    *, stack: str, table: str, job_queues: Iterable[tuple[str, str | None, QueueAddress]]
) -> dict[str, str]:
    """The workflow continuer's environment: the stack, the table, and the URL of every job queue (of
    each level: `(job, level, queue)`), where it sends next stages (now, never later: no ARNs)."""
    env = {ENV_STACK: stack, ENV_TABLE: table, ENV_RECORD_TTL_DAYS: str(DEFAULT_RECORD_TTL_DAYS)}
    for job, level, queue in job_queues:
        env.update(send_to(job, level, queue, arns=False))
    return env
