"""Each function's environment variables, computed once: the CDK constructs call these with deploy-time
values (tokens), the local stack with the values of what it provisioned, so a function runs locally
with exactly the variables it gets on Lambda.

No variable names a queue. A function finds every queue of its stack from the naming rule
(`lambdajobs.runtime.settings.queue_name`) and where the stack is (`Place`: account, partition and
DNS suffix; the region is Lambda's own `AWS_REGION`), so an environment does not grow with the number
of jobs, of priority levels, or of jobs a job enqueues (Lambda allows 4 KB of variables in all).

A job's worker function: `worker_own` (what `JobWorker` sets: its job, its modules, the stack, the
table, where the stack is), `worker_wired` (what `LambdaJobs` adds for what the job declared: the
role of one-time schedules for a job that enqueues, the bucket), the job index mode; `worker` is all of
them together. The workflow continuer: `continuer`. Every lambdajobs function also has `powertools()`.
Lambda's own variables (`AWS_LAMBDA_FUNCTION_NAME`, `AWS_REGION`, ...) are Lambda's and do not count
toward its 4 KB: the local stack adds them (`lambdajobs.local.functions`).

`BOUNDS` says, for each variable whose value is known only at deploy time, the longest value AWS
allows for it, so the size check at synth is an upper bound that holds, not a guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lambdajobs.runtime.settings import (
    DEFAULT_RECORD_TTL_DAYS,
    ENV_ACCOUNT,
    ENV_BUCKET,
    ENV_JOB,
    ENV_JOB_INDEX,
    ENV_JOBS,
    ENV_MODULES,
    ENV_PARTITION,
    ENV_RECORD_TTL_DAYS,
    ENV_SCHEDULER_ROLE_ARN,
    ENV_STACK,
    ENV_TABLE,
    ENV_URL_SUFFIX,
    METRICS_NAMESPACE,
    SERVICE_NAME,
)
from lambdajobs.runtime.spec import JobSpec

#: The longest partition ("aws-us-gov") and DNS suffix ("amazonaws.com.cn") AWS has.
MAX_PARTITION = 10
MAX_URL_SUFFIX = 16
#: The longest value each deploy-time variable can take: an account id is 12 digits; a table name
#: (CloudFormation's, generated) at most DynamoDB's 255; a bucket name S3's 63; a role ARN
#: `arn:<partition>:iam::<account>:role/<name>` with IAM's 64-character role name.
BOUNDS = {
    ENV_ACCOUNT: 12,
    ENV_PARTITION: MAX_PARTITION,
    ENV_URL_SUFFIX: MAX_URL_SUFFIX,
    ENV_TABLE: 255,
    ENV_BUCKET: 63,
    ENV_SCHEDULER_ROLE_ARN: len("arn::iam:::role/") + MAX_PARTITION + 12 + 64,
}


@dataclass(frozen=True)
class Place:
    """Where a stack is, beyond its region: its account, partition and DNS suffix (CDK: `Aws.ACCOUNT_ID`,
    `Aws.PARTITION`, `Aws.URL_SUFFIX`; the local stack: its own)."""

    account: str
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"

    def environment(self) -> dict[str, str]:
        return {ENV_ACCOUNT: self.account, ENV_PARTITION: self.partition, ENV_URL_SUFFIX: self.url_suffix}


def powertools() -> dict[str, str]:
    """Every lambdajobs function's Powertools settings."""
    return {"POWERTOOLS_SERVICE_NAME": SERVICE_NAME, "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE}


def worker_own(
    spec: JobSpec, *, stack: str, table: str, jobs_package: str, modules: Sequence[str], place: Place
) -> dict[str, str]:
    """A job's worker function, on its own: which job and modules, the stack, the table, and where the
    stack is (from which it finds each of its levels' queues and DLQs, and any other job's queues)."""
    return {
        ENV_JOB: spec.name,
        # the job modules this function ships and imports at cold start (see staging/asset.py)
        ENV_JOBS: jobs_package,
        ENV_MODULES: ",".join(modules),
        ENV_STACK: stack,
        ENV_TABLE: table,
        **place.environment(),
    }


def worker_wired(spec: JobSpec, *, scheduler_role_arn: str, bucket: str) -> dict[str, str]:
    """What a job's declaration adds to its worker: the role one-time schedules send with (a durable
    job's wake-up beyond 15 minutes, and `enqueue(run_at=...)` of a job it enqueues: the schedule
    group and the Scheduler DLQ are named after the stack), and the bucket with `uses=("bucket",)`."""
    env: dict[str, str] = {ENV_SCHEDULER_ROLE_ARN: scheduler_role_arn}
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
    place: Place,
    scheduler_role_arn: str,
    bucket: str,
    job_index: str,
) -> dict[str, str]:
    """A job's worker function's whole environment."""
    return {
        **worker_own(spec, stack=stack, table=table, jobs_package=jobs_package, modules=modules, place=place),
        **worker_wired(spec, scheduler_role_arn=scheduler_role_arn, bucket=bucket),
        ENV_JOB_INDEX: job_index,
        **powertools(),
    }


def continuer(*, stack: str, table: str, place: Place) -> dict[str, str]:
    """The workflow continuer's environment: the stack, the table, and where the stack is (it sends a
    stage's jobs to their queues, found by the naming rule)."""
    return {
        ENV_STACK: stack,
        ENV_TABLE: table,
        ENV_RECORD_TTL_DAYS: str(DEFAULT_RECORD_TTL_DAYS),
        **place.environment(),
    }
