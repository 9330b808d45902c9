"""The local stack and CDK provision from the same specs: compare them so they can never drift."""

from __future__ import annotations

import json

import pytest
from moto import mock_aws

from lambdajobs.local.provision import SCHEDULED_TIME_PLACEHOLDER, provision
from lambdajobs.runtime import aws
from lambdajobs.runtime.settings import queue_key
from lambdajobs.runtime.spec import load_jobs
from tests.conftest import FAKE_AWS_ENV
from tests.infra.test_stack import logical_id, props

#: Every queue of every job: its own (level None) and each priority level's.
QUEUES = [(spec.name, level) for spec in load_jobs("handlers") for level in spec.levels]


@pytest.fixture(scope="module")
def local():
    with pytest.MonkeyPatch.context() as env, mock_aws():
        for key, value in FAKE_AWS_ENV.items():
            env.setenv(key, value)
        env.delenv("AWS_ENDPOINT_URL", raising=False)
        aws.reset_clients()
        provisioned = provision(load_jobs("handlers"), stack="drift")
        sqs = aws.client("sqs")
        queues = {}
        for job, q in provisioned.queues.items():
            queues[job] = (
                sqs.get_queue_attributes(QueueUrl=q.queue_url, AttributeNames=["All"])["Attributes"],
                sqs.get_queue_attributes(QueueUrl=q.dlq_url, AttributeNames=["All"])["Attributes"],
            )
        table = aws.client("dynamodb").describe_table(TableName=provisioned.table)["Table"]
        ttl = aws.client("dynamodb").describe_time_to_live(TableName=provisioned.table)[
            "TimeToLiveDescription"
        ]
        schedules = {
            s.name: aws.client("scheduler").get_schedule(Name=s.name, GroupName=provisioned.cron_group)
            for s in load_jobs("handlers")
            if s.schedule
        }
        yield {
            "queues": queues,
            "table": table,
            "ttl": ttl,
            "schedules": schedules,
            "provisioned": provisioned,
        }
    aws.reset_clients()


def test_both_make_the_same_queues(stack, local):
    cdk = {queue_key(job, level.level) for job, w in stack.workers.items() for level in w.all_levels}
    assert set(local["queues"]) == cdk == {queue_key(job, level) for job, level in QUEUES}
    assert "send_email@high" in cdk


@pytest.mark.parametrize(("job", "level"), QUEUES)
def test_queues_match(template, stack, local, job, level):
    [pair] = [q for q in stack.workers[job].all_levels if q.level == level]
    cdk_queue, cdk_dlq = (
        props(template, stack, pair.queue),
        props(template, stack, pair.dead_letter_queue),
    )
    queue, dlq = local["queues"][queue_key(job, level)]
    assert int(queue["VisibilityTimeout"]) == cdk_queue["VisibilityTimeout"]
    assert int(queue["MessageRetentionPeriod"]) == cdk_queue["MessageRetentionPeriod"]
    assert (
        json.loads(queue["RedrivePolicy"])["maxReceiveCount"] == cdk_queue["RedrivePolicy"]["maxReceiveCount"]
    )
    assert json.loads(queue["RedrivePolicy"])["deadLetterTargetArn"] == dlq["QueueArn"]
    assert int(dlq["MessageRetentionPeriod"]) == cdk_dlq["MessageRetentionPeriod"]
    assert queue["SqsManagedSseEnabled"] == dlq["SqsManagedSseEnabled"] == "true"
    assert cdk_queue["SqsManagedSseEnabled"] is cdk_dlq["SqsManagedSseEnabled"] is True
    assert queue["QueueArn"].endswith(
        ":" + cdk_queue["QueueName"].replace("lambdajobs_", "drift_").replace("lambdajobs-", "drift-")
    )


def test_table_matches(template, stack, local):
    cdk = props(template, stack, stack.table)
    table = local["table"]
    assert table["KeySchema"] == cdk["KeySchema"]
    [index] = table["GlobalSecondaryIndexes"]
    [cdk_index] = cdk["GlobalSecondaryIndexes"]
    assert index["IndexName"] == cdk_index["IndexName"]
    assert index["KeySchema"] == cdk_index["KeySchema"]
    assert index["Projection"] == cdk_index["Projection"]
    assert local["ttl"]["AttributeName"] == cdk["TimeToLiveSpecification"]["AttributeName"]
    assert table["BillingModeSummary"]["BillingMode"] == cdk["BillingMode"]


@pytest.mark.parametrize("job", [s.name for s in load_jobs("handlers") if s.schedule])
def test_schedules_match(template, stack, local, job):
    cdk = props(template, stack, stack.workers[job].schedule)
    schedule = local["schedules"][job]
    assert schedule["ScheduleExpression"] == cdk["ScheduleExpression"]
    assert schedule["ScheduleExpressionTimezone"] == cdk["ScheduleExpressionTimezone"]
    assert schedule["FlexibleTimeWindow"] == cdk["FlexibleTimeWindow"]
    assert schedule["Target"]["RetryPolicy"] == cdk["Target"]["RetryPolicy"]
    assert json.loads(schedule["Target"]["Input"]) == json.loads(cdk["Target"]["Input"])
    assert SCHEDULED_TIME_PLACEHOLDER in schedule["Target"]["Input"]
    assert logical_id(stack, stack.workers[job].queue) in json.dumps(cdk["Target"]["Arn"])


def _variables(template, stack, function) -> dict[str, object]:
    return props(template, stack, function)["Environment"]["Variables"]


@pytest.mark.parametrize("job", [spec.name for spec in load_jobs("handlers")])
def test_a_local_function_has_the_synthesized_functions_environment(template, stack, local, job):
    from lambdajobs.local.stack import worker_environment
    from lambdajobs.staging.asset import modules_for

    specs = {spec.name: spec for spec in load_jobs("handlers")}
    modules = modules_for(specs[job], specs)
    mine = worker_environment(specs[job], local["provisioned"], "handlers", modules)
    synthesized = _variables(template, stack, stack.workers[job].function)
    # the same variables (the deploy-time values differ: a token there, the local resource here)
    assert set(mine) == set(synthesized)
    # and the same values where synth knows them (named for this stack: "drift", not "lambdajobs")
    for key, value in synthesized.items():
        if isinstance(value, str):
            assert mine[key] == value.replace("lambdajobs", "drift") or (
                key.startswith("POWERTOOLS_") and mine[key] == value
            ), key


def test_the_local_continuer_has_the_synthesized_continuers_environment(template, stack, local):
    from lambdajobs.local.stack import continuer_environment

    mine = continuer_environment(local["provisioned"])
    synthesized = _variables(template, stack, stack.workflows.function)
    assert set(mine) == set(synthesized)
    for key, value in synthesized.items():
        if isinstance(value, str) and not key.startswith("POWERTOOLS_"):
            assert mine[key] == value.replace("lambdajobs", "drift"), key
