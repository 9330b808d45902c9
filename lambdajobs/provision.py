"""Create a stack's queues, dead-letter queues and job table through the AWS API, from the same job
specs CDK reads: used by the local stack (embedded moto server) and by the moto-backed tests."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from shared import aws
from shared.settings import (
    DLQ_RETENTION_SECONDS,
    ENV_STACK,
    ENV_TABLE,
    QUEUE_RETENTION_SECONDS,
    dlq_url_env,
    manifest_parameter,
    queue_name,
    queue_url_env,
)
from shared.spec import JobSpec


@dataclass(frozen=True)
class JobQueues:
    job: str
    queue_url: str
    queue_arn: str
    dlq_url: str
    dlq_arn: str


@dataclass(frozen=True)
class Provisioned:
    stack: str
    table: str
    queues: dict[str, JobQueues]

    def environment(self) -> dict[str, str]:
        """The environment variables CDK sets on the stack's functions, for these resources."""
        env = {ENV_STACK: self.stack, ENV_TABLE: self.table}
        for q in self.queues.values():
            env[queue_url_env(q.job)] = q.queue_url
            env[dlq_url_env(q.job)] = q.dlq_url
        return env

    def export(self) -> None:
        os.environ.update(self.environment())


def _arn(sqs: Any, url: str) -> str:
    arn: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return arn


def provision_queues(spec: JobSpec, stack: str) -> JobQueues:
    sqs = aws.client("sqs")
    name = queue_name(stack, spec.name)
    dlq_url = sqs.create_queue(
        QueueName=f"{name}-dlq"[:80],
        Attributes={"MessageRetentionPeriod": str(DLQ_RETENTION_SECONDS), "SqsManagedSseEnabled": "true"},
    )["QueueUrl"]
    dlq_arn = _arn(sqs, dlq_url)
    url = sqs.create_queue(
        QueueName=name,
        Attributes={
            "VisibilityTimeout": str(spec.visibility_timeout_seconds),
            "MessageRetentionPeriod": str(QUEUE_RETENTION_SECONDS),
            "SqsManagedSseEnabled": "true",
            "RedrivePolicy": json.dumps(
                {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": spec.max_attempts}
            ),
        },
    )["QueueUrl"]
    arn = _arn(sqs, url)
    sqs.set_queue_attributes(
        QueueUrl=dlq_url,
        Attributes={
            "RedriveAllowPolicy": json.dumps({"redrivePermission": "byQueue", "sourceQueueArns": [arn]})
        },
    )
    return JobQueues(spec.name, url, arn, dlq_url, dlq_arn)


def provision_table(name: str) -> str:
    ddb = aws.client("dynamodb")
    ddb.create_table(
        TableName=name,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    ddb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expiration"}
    )
    return name


def provision(specs: Iterable[JobSpec], *, stack: str = "lambdajobs", manifest: bool = True) -> Provisioned:
    """Create every queue pair and the job table; publish the manifest to SSM like the stack does."""
    queues = {spec.name: provision_queues(spec, stack) for spec in specs}
    table = provision_table(f"{stack}-jobs")
    if manifest:
        ssm = aws.client("ssm")
        for q in queues.values():
            ssm.put_parameter(
                Name=manifest_parameter(stack, q.job),
                Type="String",
                Overwrite=True,
                Value=json.dumps({"queue_url": q.queue_url, "dlq_url": q.dlq_url}),
            )
    return Provisioned(stack=stack, table=table, queues=queues)
