"""Template assertions for schedules, the data bucket and the producer/scheduler roles."""

from __future__ import annotations

import json

import pytest

from lambdajobs.runtime.settings import (
    ENV_JOB_INDEX,
    JOB_INDEX,
    schedule_group_names,
    stack_manifest_parameter,
)
from lambdajobs.runtime.spec import load_jobs
from tests.infra.test_stack import logical_id, props, ref_ids, resources

CRON_JOBS = [spec for spec in load_jobs("handlers") if spec.schedule]
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"


def policy_statements(template, role_id: str) -> list[dict]:
    return [
        s
        for p in list(resources(template, "AWS::IAM::Policy").values())
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_there_is_a_cron_job_to_check():
    assert [s.name for s in CRON_JOBS] == ["daily_report"]


@pytest.mark.parametrize("spec", CRON_JOBS, ids=lambda s: s.name)
def test_schedule_targets_the_job_queue_in_its_time_zone(template, stack, spec):
    worker = stack.workers[spec.name]
    schedule = props(template, stack, worker.schedule)
    assert schedule["ScheduleExpression"] == spec.schedule.expression
    assert schedule["ScheduleExpressionTimezone"] == spec.schedule.timezone == "America/New_York"
    assert schedule["GroupName"] == schedule_group_names(stack.stack_name)[0]
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    target = schedule["Target"]
    # the target is the queue, not the function: a run gets the queue's retries, DLQ, idempotency
    assert target["Arn"] == {"Fn::GetAtt": [logical_id(stack, worker.queue), "Arn"]}
    assert target["RetryPolicy"] == {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400}
    assert target["DeadLetterConfig"]["Arn"] == {
        "Fn::GetAtt": [logical_id(stack, stack.scheduler_dlq), "Arn"]
    }


@pytest.mark.parametrize("spec", CRON_JOBS, ids=lambda s: s.name)
def test_schedule_input_is_an_envelope_keyed_on_the_scheduled_time(template, stack, spec):
    target = props(template, stack, stack.workers[spec.name].schedule)["Target"]
    envelope = json.loads(target["Input"])
    assert envelope == {
        "v": 1,
        "job": spec.name,
        "id": f"{spec.name}@{SCHEDULED_TIME}",  # stable across Scheduler retries: one run per slot
        "payload": spec.schedule_payload,
        "scheduled_at": SCHEDULED_TIME,
    }


@pytest.mark.parametrize("spec", CRON_JOBS, ids=lambda s: s.name)
def test_schedule_role_may_only_send_to_that_queue(template, stack, spec):
    worker = stack.workers[spec.name]
    role_id = props(template, stack, worker.schedule)["Target"]["RoleArn"]["Fn::GetAtt"][0]
    trust = template["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "scheduler.amazonaws.com"}]
    assert trust[0]["Condition"]["StringEquals"]["aws:SourceArn"] == {
        "Fn::GetAtt": [logical_id(stack, stack.cron_group), "Arn"]
    }
    granted = {
        (s["Action"], target)
        for s in policy_statements(template, role_id)
        for target in ref_ids(s["Resource"])
    }
    assert granted == {
        ("sqs:SendMessage", logical_id(stack, worker.queue)),
        ("sqs:SendMessage", logical_id(stack, stack.scheduler_dlq)),
    }


def test_one_time_schedule_role_sends_to_job_queues_only(template, stack):
    from lambdajobs.runtime.settings import dead_letter_queue_name, queue_name
    from tests.infra.policies import allows

    statements = policy_statements(template, logical_id(stack, stack.scheduler_role))
    for s in statements:
        assert (
            s["Action"] == "sqs:SendMessage"
            or s["Action"] == ["sqs:SendMessage"]
            or ("sqs:SendMessage" in s["Action"] and not any("*" in a for a in s["Action"]))
        )
    # every queue of every job, each priority level's too (enqueue(..., priority=..., run_at=...)), by
    # the stack's name pattern; no job's DLQ; its own DLQ (runs it could not deliver)
    for spec in load_jobs("handlers"):
        for level in spec.levels:
            assert allows(
                statements, template, "sqs:SendMessage", queue_name(stack.stack_name, spec.name, level)
            )
            assert not allows(
                statements,
                template,
                "sqs:SendMessage",
                dead_letter_queue_name(stack.stack_name, spec.name, level),
            )
    assert allows(
        statements, template, "sqs:SendMessage", props(template, stack, stack.scheduler_dlq)["QueueName"]
    )
    assert not allows(statements, template, "sqs:SendMessage", f"{stack.stack_name}--workflows")
    assert not allows(
        statements, template, "sqs:SendMessage", queue_name(stack.stack_name + "-2", "send_email")
    )


def test_scheduler_dlq_is_standard_encrypted_and_kept_14_days(template, stack):
    dlq = props(template, stack, stack.scheduler_dlq)
    assert "FifoQueue" not in dlq
    assert dlq["SqsManagedSseEnabled"] is True and dlq["MessageRetentionPeriod"] == 14 * 86400


def test_data_bucket_is_private_encrypted_tls_only_and_expires_objects(template, stack):
    bucket = props(template, stack, stack.bucket)
    assert bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0][
        "ServerSideEncryptionByDefault"
    ] == {"SSEAlgorithm": "AES256"}
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    [rule] = bucket["LifecycleConfiguration"]["Rules"]
    assert rule["Status"] == "Enabled" and rule["ExpirationInDays"] == 90
    bid = logical_id(stack, stack.bucket)
    [policy] = [
        p
        for p in resources(template, "AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": bid}
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )


def test_report_job_reaches_only_its_prefix_and_the_metrics(template, stack):
    fn = template["Resources"][logical_id(stack, stack.workers["daily_report"].function)]
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = policy_statements(template, role_id)
    [s3] = [s for s in statements if "s3:PutObject" in s["Action"]]
    assert s3["Resource"]["Fn::Join"][1][-1] == "/daily_report/*"
    # job_stats with the job index off: the worker's metrics (no resource-level permission), no Query
    [metrics] = [s for s in statements if s["Resource"] == "*"]
    assert metrics["Action"] == "cloudwatch:GetMetricData"
    assert not [s for s in statements if "dynamodb:Query" in s["Action"]]


def test_a_job_using_job_stats_leaves_the_job_index_off(template, stack):
    # daily_report declares uses=("job_stats",) and counts from the worker's metrics: the index stays
    # off, so no job pays its write unit (issue 31); the table has the index all the same (dead jobs)
    [index] = props(template, stack, stack.table)["GlobalSecondaryIndexes"]
    assert index["IndexName"] == JOB_INDEX
    assert index["KeySchema"] == [
        {"AttributeName": "ix", "KeyType": "HASH"},
        {"AttributeName": "ix_at", "KeyType": "RANGE"},
    ]
    assert index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert stack.job_index == "off"
    for worker in stack.workers.values():
        env = props(template, stack, worker.function)["Environment"]["Variables"]
        assert env[ENV_JOB_INDEX] == "off"


def test_stack_manifest_tells_producers_how_to_schedule(template, stack):
    [param] = [
        p["Properties"]
        for p in resources(template, "AWS::SSM::Parameter").values()
        if p["Properties"]["Name"] == stack_manifest_parameter(stack.stack_name)
    ]
    text = json.dumps(param["Value"])
    for key in (
        "table",
        "bucket",
        "scheduler_role_arn",
        "cron_group",
        "one_time_group",
        "scheduler_dlq_arn",
        "scheduler_dlq_url",  # the board lists it without sqs:GetQueueUrl
        "job_index",
    ):
        assert f'\\"{key}\\"' in text
    assert ref_ids(param["Value"]) >= {
        logical_id(stack, stack.scheduler_role),
        logical_id(stack, stack.table),
    }


def test_producer_policy_can_enqueue_schedule_and_read_status_only(template, stack):
    doc = props(template, stack, stack.producer_policy)["PolicyDocument"]["Statement"]
    actions = {a for s in doc for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert actions == {
        "sqs:SendMessage",
        "ssm:GetParameter",
        "dynamodb:GetItem",
        "dynamodb:BatchGetItem",  # get_workflow: a running stage's member records
        # a workflow creates its item and marks it sent, on no other item (tests/infra/test_workflows.py)
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
        "scheduler:CreateSchedule",
        "scheduler:GetSchedule",  # a retried run_at with the same job id reads the existing schedule
        "scheduler:DeleteSchedule",  # cancel: a run_at job's schedule, a parked job's wake-up
        "iam:PassRole",
    }
    [pass_role] = [s for s in doc if s["Action"] == "iam:PassRole"]
    assert ref_ids(pass_role["Resource"]) == {logical_id(stack, stack.scheduler_role)}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_schedule_groups_go_with_the_stack(template, stack):
    # Retained groups with fixed names make the next deploy of the stack fail, and their one-time
    # schedules keep firing at deleted queues.
    for group in (stack.cron_group, stack.one_time_group):
        resource = template["Resources"][logical_id(stack, group)]
        assert resource["DeletionPolicy"] == "Delete" and resource["UpdateReplacePolicy"] == "Delete"


def test_only_scheduler_for_the_one_time_group_may_assume_its_role(template, stack):
    role = props(template, stack, stack.scheduler_role)
    [trust] = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Condition"]["StringEquals"] == {
        "aws:SourceAccount": {"Ref": "AWS::AccountId"},
        "aws:SourceArn": {"Fn::GetAtt": [logical_id(stack, stack.one_time_group), "Arn"]},
    }


def test_a_job_that_enqueues_can_schedule_them_for_later(template, stack):
    from lambdajobs.runtime.config import StackConfig
    from lambdajobs.runtime.settings import ENV_SCHEDULER_ROLE_ARN, scheduler_dead_letter_queue_name

    env = props(template, stack, stack.workers["daily_report"].function)["Environment"]["Variables"]
    assert ref_ids(env[ENV_SCHEDULER_ROLE_ARN]) == {logical_id(stack, stack.scheduler_role)}
    # the group and the Scheduler DLQ are named after the stack: the runtime finds them by the rule
    assert props(template, stack, stack.scheduler_dlq)["QueueName"] == scheduler_dead_letter_queue_name(
        stack.stack_name
    )
    deployed = {k: v for k, v in env.items() if isinstance(v, str)} | {
        "LAMBDAJOBS_ACCOUNT": "123456789012",
        ENV_SCHEDULER_ROLE_ARN: "arn:aws:iam::123456789012:role/r",
    }
    config = StackConfig.from_environment(deployed).with_resources(region="eu-west-1")
    assert config.scheduler_settings() == (
        "arn:aws:iam::123456789012:role/r",
        stack.one_time_group.schedule_group_name,
        f"arn:aws:sqs:eu-west-1:123456789012:{scheduler_dead_letter_queue_name(stack.stack_name)}",
    )
    # a job that enqueues nothing gets it too: its own durable wake-ups are one-time schedules
    # (test_every_worker_may_schedule_its_own_wake_ups_and_no_other_schedule)
    other = props(template, stack, stack.workers["send_email"].function)["Environment"]["Variables"]
    assert ref_ids(other[ENV_SCHEDULER_ROLE_ARN]) == {logical_id(stack, stack.scheduler_role)}
    assert not stack.specs["send_email"].enqueues


def _actions(statement: dict) -> set[str]:
    found = statement["Action"]
    return {found} if isinstance(found, str) else set(found)


def _schedule_patterns(statements: list[dict], group: str) -> list[str]:
    """The schedule names (patterns) of the one-time group the statements let CreateSchedule create."""
    found = []
    for s in statements:
        if "scheduler:CreateSchedule" not in _actions(s):
            continue
        *_, tail = s["Resource"]["Fn::Join"][1]
        prefix = f":schedule/{group}/"
        assert tail.startswith(prefix), tail  # in the one-time group, nowhere else
        found.append(tail.removeprefix(prefix))
    return found


@pytest.mark.parametrize("job", sorted(spec.name for spec in load_jobs("handlers")))
def test_every_worker_may_schedule_its_own_wake_ups_and_no_other_schedule(template, stack, job):
    """Issue 28: any job may be durable (`ctx.sleep`, `ctx.wait_for_signal`): a wake-up more than 15
    minutes away is a one-time schedule its worker creates (`durable.schedule_wake`), passing the
    one-time schedule role. The IAM scenarios run it under each role (tests/iam/test_durable.py)."""
    from fnmatch import fnmatchcase

    from lambdajobs.runtime.durable import wake_schedule_name
    from lambdajobs.runtime.producer import one_time_schedule_name
    from lambdajobs.runtime.settings import ENV_SCHEDULER_ROLE_ARN

    worker = stack.workers[job]
    function = props(template, stack, worker.function)
    statements = policy_statements(template, function["Role"]["Fn::GetAtt"][0])
    patterns = _schedule_patterns(statements, stack.one_time_group.schedule_group_name)
    wake_ups = {other: wake_schedule_name(other, "job-1", 1_900_000_000_000) for other in stack.workers}
    run_at = {other: one_time_schedule_name(other, "job-1") for other in stack.workers}
    # its own wake-ups, with the role they send with in its environment
    assert any(fnmatchcase(wake_ups[job], p) for p in patterns), patterns
    assert ref_ids(function["Environment"]["Variables"][ENV_SCHEDULER_ROLE_ARN]) == {
        logical_id(stack, stack.scheduler_role)
    }
    if not worker.spec.enqueues:
        # no other job's wake-up, and no run_at schedule (its own job's neither): CreateSchedule only
        assert patterns == [f"{job[:36]}-w*"]
        for other in stack.workers:
            assert not any(fnmatchcase(run_at[other], p) for p in patterns), other
            if other != job:
                assert not any(fnmatchcase(wake_ups[other], p) for p in patterns), other
        [creates] = [s for s in statements if "scheduler:CreateSchedule" in _actions(s)]
        assert _actions(creates) == {"scheduler:CreateSchedule"}
    else:  # enqueue(run_at=...) of the jobs it enqueues: any name of the group (schedules by job id)
        assert patterns == ["*"]
    # the one-time schedule role, passed to Scheduler only
    [pass_role] = [s for s in statements if "iam:PassRole" in _actions(s)]
    assert ref_ids(pass_role["Resource"]) == {logical_id(stack, stack.scheduler_role)}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_a_wake_up_pattern_reaches_no_run_at_schedule_and_only_its_own_jobs_wake_ups():
    """The naming the worker's grant relies on (`durable.wake_schedule_name`: `<job>-w<hex>`, or for a
    name above 36 characters `<job[:27]><hash of the name>-w<hex>`; `producer.one_time_schedule_name`,
    `<job[:40]>-<hex>`): no run_at name of any job matches a job's wake-up pattern, nor does another
    job's wake-up (job names are at most 48 of [a-z0-9_]: no '-'); every name fits Scheduler's 64."""
    from fnmatch import fnmatchcase

    from lambdajobs.runtime.durable import wake_schedule_name, wake_schedule_prefix
    from lambdajobs.runtime.producer import one_time_schedule_name

    long = "a" * 36
    names = ["a", "ab", "a_w", "w", long[:35], long, long + "b", long + "c", "a" * 48, "b" + long]
    for job in names:
        pattern = f"{wake_schedule_prefix(job)}*"
        for other in names:
            for job_id in ("x", "-w", "job-1", "w" * 200):
                assert not fnmatchcase(one_time_schedule_name(other, job_id), pattern), (job, other)
                assert fnmatchcase(wake_schedule_name(other, job_id, 1), pattern) == (other == job), (
                    job,
                    other,
                )
                assert len(wake_schedule_name(other, job_id, 1)) <= 64


@pytest.mark.parametrize("policy", ["producer_policy", "operator_policy"])
def test_producers_and_operators_signal_job_records_only(template, stack, policy):
    """`lambdajobs.signal()` (and `lambdajobs signal`): UpdateItem of the job's record (the signal,
    then its wake-up), and SendMessage of its wake-up to the job's queue (every job queue: see
    test_one_time_schedule_role_sends_to_job_queues_only for the pattern). Not lambdajobs' own items
    (workflows, rate limiters), whose ids start with the reserved prefix."""
    from lambdajobs.runtime.settings import RESERVED_ID_PREFIX, queue_name
    from tests.infra.policies import allows

    statements = props(template, stack, getattr(stack, policy))["PolicyDocument"]["Statement"]
    table = {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}
    [signals] = [s for s in statements if _actions(s) == {"dynamodb:UpdateItem"} and s["Resource"] == table]
    assert signals["Condition"] == {
        "ForAllValues:StringNotLike": {"dynamodb:LeadingKeys": [f"{RESERVED_ID_PREFIX}*"]}
    }
    assert RESERVED_ID_PREFIX == "lambdajobs#"
    for spec in load_jobs("handlers"):
        for level in spec.levels:
            assert allows(
                statements, template, "sqs:SendMessage", queue_name(stack.stack_name, spec.name, level)
            )


def test_operators_query_the_job_index_only(template, stack):
    statements = props(template, stack, stack.operator_policy)["PolicyDocument"]["Statement"]

    def having(action: str) -> list[dict]:
        return [
            s
            for s in statements
            if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        ]

    [query] = having("dynamodb:Query")
    assert query["Resource"]["Fn::Join"][1][-1] == f"/index/{JOB_INDEX}"
    [listing] = having("scheduler:ListSchedules")
    assert listing["Resource"] == "*"  # ListSchedules has no resource-level permission
    # counts and runs per minute from the worker's metrics, when the job index is off (ops.job_counts)
    [metrics] = having("cloudwatch:GetMetricData")
    assert metrics["Resource"] == "*" and "cloudwatch:GetMetricStatistics" in metrics["Action"]
