"""Create a stack's queues, dead-letter queues and job table through the AWS API, from the same job
specs CDK reads: used by the local stack (embedded moto server) and by the moto-backed tests."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from lambdajobs.runtime.config import QueueAddress, StackConfig
from lambdajobs.runtime.settings import (
    CONTINUER_TIMEOUT_SECONDS,
    DLQ_RETENTION_SECONDS,
    DLQ_SUFFIX,
    ENV_BUCKET,
    ENV_JOB_INDEX,
    ENV_JOBS,
    ENV_LEVEL_DLQ_URL_PREFIX,
    ENV_LEVEL_QUEUE_URL_PREFIX,
    ENV_STACK,
    ENV_TABLE,
    ENV_WORKFLOW_QUEUE_URL,
    JOB_INDEX,
    JOB_INDEX_KEY,
    JOB_INDEX_SORT_KEY,
    QUEUE_RETENTION_SECONDS,
    WORKFLOW_MAX_RECEIVE_COUNT,
    dlq_url_env,
    level_env,
    manifest_parameter,
    queue_key,
    queue_name,
    queue_url_env,
    schedule_group_names,
    scheduler_dead_letter_queue_name,
    stack_manifest_parameter,
    workflow_queue_name,
)
from lambdajobs.runtime.spec import JobSpec, job_index_mode
from lambdajobs.staging.environment import Place

#: What EventBridge Scheduler replaces with the slot's time when it sends a schedule's input.
SCHEDULED_TIME_PLACEHOLDER = "<aws.scheduler.scheduled-time>"


@dataclass(frozen=True)
class JobQueues:
    """One queue of a job and its DLQ: the job's own (`level` None) or a priority level's."""

    job: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str
    level: str | None = None

    @property
    def key(self) -> str:
        return queue_key(self.job, self.level)

    @property
    def address(self) -> QueueAddress:
        return QueueAddress(url=self.queue_url, arn=self.queue_arn, dlq_url=self.dlq_url)

    def manifest(self) -> dict[str, str]:
        return {"queue_url": self.queue_url, "queue_arn": self.queue_arn, "dlq_url": self.dlq_url}


@dataclass(frozen=True)
class Provisioned:
    stack: str
    table: str
    #: Every queue by `queue_key(job, level)`: the job's name for its own, `<job>@<level>` for a
    #: priority level's.
    queues: dict[str, JobQueues]
    bucket: str = ""
    scheduler_role_arn: str = ""
    scheduler_dlq_url: str = ""
    scheduler_dlq_arn: str = ""
    cron_group: str = ""
    one_time_group: str = ""
    #: The workflow queue (its continuer's event source) and its DLQ.
    workflow_queue_url: str = ""
    workflow_queue_arn: str = ""
    workflow_dlq_url: str = ""
    #: The job index's mode ("off", "finished", "all"): what the index (always there) holds.
    job_index: str = "off"

    @property
    def account(self) -> str:
        """The account the queues are in (moto's)."""
        return self.workflow_queue_url.rstrip("/").split("/")[-2] if self.workflow_queue_url else ""

    def place(self) -> Place:
        """Where the stack is, as a function's environment says it (`staging.environment.Place`)."""
        return Place(self.account)

    def environment(self, jobs: str | None = None) -> dict[str, str]:
        """The environment variables CDK sets on the stack's functions, for these resources."""
        env = {
            ENV_STACK: self.stack,
            ENV_TABLE: self.table,
            ENV_BUCKET: self.bucket,
            ENV_WORKFLOW_QUEUE_URL: self.workflow_queue_url,
            ENV_JOB_INDEX: self.job_index,
        }
        if jobs:
            env[ENV_JOBS] = jobs
        for q in self.queues.values():
            if q.level is None:
                env[queue_url_env(q.job)] = q.queue_url
                env[dlq_url_env(q.job)] = q.dlq_url
            else:
                env[level_env(ENV_LEVEL_QUEUE_URL_PREFIX, q.job, q.level)] = q.queue_url
                env[level_env(ENV_LEVEL_DLQ_URL_PREFIX, q.job, q.level)] = q.dlq_url
        return env

    def levels(self, job: str) -> list[JobQueues]:
        """A job's queues, its priority levels' first (highest first), its own last."""
        return [q for q in self.queues.values() if q.job == job and q.level is not None] + [self.queues[job]]

    def manifest_entry(self, job: str) -> dict[str, Any]:
        """What the stack publishes at /lambdajobs/<stack>/jobs/<job>."""
        levels = {q.level: q.manifest() for q in self.levels(job) if q.level is not None}
        return {**self.queues[job].manifest(), "levels": levels}

    def config(self, base: StackConfig) -> StackConfig:
        """`base` (its connection and jobs package) with every resource provisioned here known."""
        return base.with_resources(
            stack=self.stack,
            table=self.table,
            bucket=self.bucket,
            queues={key: q.address for key, q in self.queues.items()},
            scheduler_role_arn=self.scheduler_role_arn,
            one_time_group=self.one_time_group,
            scheduler_dlq_arn=self.scheduler_dlq_arn,
            workflow_queue_url=self.workflow_queue_url or None,
            job_index=self.job_index,
        )

    def manifest(self) -> dict[str, str]:
        """What the stack publishes at /lambdajobs/<stack>/stack."""
        return {
            "table": self.table,
            "bucket": self.bucket,
            "scheduler_role_arn": self.scheduler_role_arn,
            "cron_group": self.cron_group,
            "one_time_group": self.one_time_group,
            "scheduler_dlq_arn": self.scheduler_dlq_arn,
            "scheduler_dlq_url": self.scheduler_dlq_url,
            "workflow_queue_url": self.workflow_queue_url,
            "workflow_dlq_url": self.workflow_dlq_url,
            "job_index": self.job_index,
        }


def _arn(sqs: Any, url: str) -> str:
    arn: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return arn


def provision_queues(
    spec: JobSpec, stack: str, config: StackConfig, arn_prefix: list[str] | None = None
) -> dict[str, JobQueues]:
    """Every queue of a job (its own, and one per priority level above its lowest), each with its DLQ,
    by `queue_key`. `arn_prefix`: see `_queue_with_dlq`."""
    made = [_provision_pair(spec, stack, level, config, arn_prefix) for level in spec.levels]
    return {q.key: q for q in made}


def _provision_pair(
    spec: JobSpec, stack: str, level: str | None, config: StackConfig, arn_prefix: list[str] | None
) -> JobQueues:
    name = queue_name(stack, spec.name, level)
    url, arn, dlq_url, dlq_arn = _queue_with_dlq(
        name, spec.visibility_timeout_seconds, spec.max_receive_count, config, arn_prefix
    )  # its DLQ: dead_letter_queue_name, `<name>-dlq`
    return JobQueues(spec.name, url, arn, dlq_url, dlq_arn, level)


def provision_workflow_queue(
    stack: str, config: StackConfig, arn_prefix: list[str] | None = None
) -> dict[str, str]:
    """The stack's workflow queue and its DLQ (the continuer's event source)."""
    url, arn, dlq_url, _ = _queue_with_dlq(
        workflow_queue_name(stack),
        6 * CONTINUER_TIMEOUT_SECONDS,
        WORKFLOW_MAX_RECEIVE_COUNT,
        config,
        arn_prefix,
    )
    return {"workflow_queue_url": url, "workflow_queue_arn": arn, "workflow_dlq_url": dlq_url}


def _queue_with_dlq(
    name: str,
    visibility_timeout: int,
    max_receive_count: int,
    config: StackConfig,
    arn_prefix: list[str] | None = None,
) -> tuple[str, str, str, str]:
    """A queue and its DLQ, the DLQ allowing redrive from the queue alone.

    `arn_prefix` holds the ARN prefix of the connection's queues (`arn:<partition>:sqs:<region>:
    <account>:`) once one queue's real ARN told it: every queue of one connection shares it, so a
    caller that makes many pairs (`provision`) asks once, and each further pair takes two calls, not
    five. Without it, each pair asks for its DLQ's ARN."""
    sqs = config.client("sqs")
    dlq_name = name + DLQ_SUFFIX  # dead_letter_queue_name: queue_name refused a name too long
    prefix = arn_prefix[0] if arn_prefix else None
    dlq_attributes = {"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"}
    if prefix is not None:  # the queue's ARN is known before it exists: allow it on the DLQ at once
        dlq_attributes["RedriveAllowPolicy"] = _redrive_allow(prefix + name)
    dlq_url = sqs.create_queue(QueueName=dlq_name, Attributes=dlq_attributes)["QueueUrl"]
    if prefix is None:
        prefix = _arn(sqs, dlq_url).rsplit(":", 1)[0] + ":"
        if arn_prefix is not None:
            arn_prefix.append(prefix)
    dlq_arn, arn = prefix + dlq_name, prefix + name
    url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(visibility_timeout),
            "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
            "SqsManagedSseEnabled": "true",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": max_receive_count}
            ),
        },
    )["QueueUrl"]
    if "RedriveAllowPolicy" not in dlq_attributes:
        sqs.set_queue_attributes(QueueUrl=dlq_url, Attributes={"RedriveAllowPolicy": _redrive_allow(arn)})
    return url, arn, dlq_url, dlq_arn


def _redrive_allow(source_arn: str) -> str:
    return json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [source_arn]})


def provision_table(name: str, config: StackConfig, *, job_index: str = "off") -> str:
    """The job table, with the job index (in every mode, as the stack builds it: mode "off" indexes
    dead records, and searchable fields' entries use it too)."""
    del job_index  # the index is there whatever the mode: its writers decide what it holds
    ddb = config.client("dynamodb")
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[
            {"AttributeName": "id", "AttributeType": "S"},
            {"AttributeName": JOB_INDEX_KEY, "AttributeType": "S"},
            {"AttributeName": JOB_INDEX_SORT_KEY, "AttributeType": "S"},
        ],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
        GlobalSecondaryIndexes=[
            {
                "IndexName": JOB_INDEX,
                "KeySchema": [
                    {"AttributeName": JOB_INDEX_KEY, "KeyType": "HASH"},
                    {"AttributeName": JOB_INDEX_SORT_KEY, "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            }
        ],
    )
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
    )
    return name


def provision_scheduling(
    stack: str, config: StackConfig, arn_prefix: list[str] | None = None
) -> dict[str, str]:
    """Schedule groups, the Scheduler DLQ and the role one-time schedules send with. `arn_prefix`:
    see `_queue_with_dlq`."""
    sqs, scheduler = config.client("sqs"), config.client("scheduler")
    dlq_name = scheduler_dead_letter_queue_name(stack)
    dlq_url = sqs.create_queue(
        QueueName=dlq_name,
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
    )["QueueUrl"]
    dlq_arn = arn_prefix[0] + dlq_name if arn_prefix else _arn(sqs, dlq_url)
    cron_group, once_group = schedule_group_names(stack)
    for group in (cron_group, once_group):
        scheduler.create_schedule_group(Name=group)
    # The role one-time schedules send with. Only its ARN is needed here: emulated schedules never
    # assume it (moto's Scheduler does not fire; the local scheduler sends itself), and creating
    # IAM resources in moto is slow. The deployed stack creates the real, least-privilege role.
    account = dlq_arn.split(":")[4]
    role_arn = f"arn:aws:iam::{account}:role/{stack}-one-time-schedules"
    return {
        "scheduler_role_arn": role_arn,
        "scheduler_dlq_url": dlq_url,
        "scheduler_dlq_arn": dlq_arn,
        "cron_group": cron_group,
        "one_time_group": once_group,
    }


def provision_schedule(
    spec: JobSpec, queues: JobQueues, scheduling: dict[str, str], config: StackConfig
) -> None:
    """The cron job's schedule, as CDK declares it (moto stores it; it never fires: the local
    scheduler does that)."""
    assert spec.schedule is not None
    window = spec.schedule.flexible_window_minutes
    config.client("scheduler").create_schedule(
        Name=spec.name,
        GroupName=scheduling["cron_group"],
        ScheduleExpression=spec.schedule.expression,
        ScheduleExpressionTimezone=spec.schedule.timezone,
        FlexibleTimeWindow={"Mode": "FLEXIBLE", "MaximumWindowInMinutes": window}
        if window
        else {"Mode": "OFF"},
        Target={
            "Arn": queues.queue_arn,
            "RoleArn": scheduling["scheduler_role_arn"],
            "Input": json.dumps(spec.scheduled_envelope(SCHEDULED_TIME_PLACEHOLDER), separators=(",", ":")),
            "RetryPolicy": {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400},
            "DeadLetterConfig": {"Arn": scheduling["scheduler_dlq_arn"]},
        },
    )


def publish_manifest(provisioned: Provisioned, job: str, config: StackConfig) -> None:
    """Write a job's manifest entry to SSM, as the stack does."""
    config.client("ssm").put_parameter(
        Name=manifest_parameter(provisioned.stack, job),
        Type="String",
        Overwrite=True,
        Value=json.dumps(provisioned.manifest_entry(job)),
    )


def provision(
    specs: Iterable[JobSpec],
    *,
    stack: str = "lambdajobs",
    config: StackConfig | None = None,
    manifest: bool = True,
    job_index: str | None = None,
) -> Provisioned:
    """Create every queue pair, the job table, the data bucket and the scheduling resources, the
    cron schedules, and publish the manifest to SSM like the stack does. `config` says where (its
    connection: the local stack's endpoint, or moto in-process); default: boto3's defaults.
    `job_index`: the job index's mode (default: as the stack derives it, `spec.job_index_mode`)."""
    config = config or StackConfig(stack=stack)
    specs = list(specs)
    mode = job_index_mode(specs, job_index)
    arn_prefix: list[str] = []  # learnt from the first queue made: the others need not ask
    queues = {
        key: q for spec in specs for key, q in provision_queues(spec, stack, config, arn_prefix).items()
    }
    table = provision_table(f"{stack}-jobs", config, job_index=mode)
    bucket = f"{stack}-data".lower()
    config.client("s3").create_bucket(Bucket=bucket)
    scheduling = provision_scheduling(stack, config, arn_prefix)
    workflows = provision_workflow_queue(stack, config, arn_prefix)
    for spec in specs:
        if spec.schedule is not None:
            provision_schedule(spec, queues[spec.name], scheduling, config)
    provisioned = Provisioned(
        stack=stack,
        table=table,
        queues=queues,
        bucket=bucket,
        job_index=mode,
        **scheduling,
        **workflows,
    )
    if manifest:
        ssm = config.client("ssm")
        for spec in specs:
            publish_manifest(provisioned, spec.name, config)
        ssm.put_parameter(
            Name=stack_manifest_parameter(stack),
            Type="String",
            Overwrite=True,
            Value=json.dumps(provisioned.manifest()),
        )
    return provisioned
