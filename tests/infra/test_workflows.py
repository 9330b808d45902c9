"""Template assertions for workflows (chain, group, chord): the stack's workflow queue and its DLQ, the
continuer function that reads it, and least-privilege grants around them. A job worker may only send
its notice to the workflow queue; the continuer may only send to the job queues and touch workflow
items (`lambdajobs#wf#<id>`, an IAM condition on the partition key); producers may create workflow
items and read member records. Also Lambda's 4 KB environment limit, checked at synth.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    QUEUE_RETENTION_SECONDS,
    queue_name,
    stack_manifest_parameter,
)
from lambdajobs.runtime.spec import get_spec, load_jobs
from tests.infra.policies import allows
from tests.infra.test_operations import dashboard_body
from tests.infra.test_priorities import (
    MANAGED_POLICY_LIMIT,
    deployed,
    flatten,
    granted,
    managed_policy_grants,
    role_of,
)
from tests.infra.test_stack import (  # noqa: F401  (lambda_layer: a fixture)
    asset_of,
    files_under,
    lambda_layer,
    logical_id,
    props,
    ref_ids,
    resources,
)

JOBS = [spec.name for spec in load_jobs("handlers")]
#: Every queue of every job: (job, priority level), None for the job's own queue.
LEVELS = [(spec.name, level) for spec in load_jobs("handlers") for level in spec.levels]
WORKFLOW_ITEMS = {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["lambdajobs#wf#*"]}}
CONSUME = {
    "sqs:ReceiveMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueUrl",
    "sqs:DeleteMessage",
    "sqs:GetQueueAttributes",
}


def role_statements(template, role_id: str) -> list[dict[str, Any]]:
    """Every statement of the inline policies attached to a role."""
    return [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def actions_of(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return {action} if isinstance(action, str) else set(action)


def job_queue_names(template, stack) -> set[str]:
    return {
        props(template, stack, level.queue)["QueueName"]
        for w in stack.workers.values()
        for level in w.all_levels
    }


def dlq_names(template, stack) -> set[str]:
    return {
        props(template, stack, level.dead_letter_queue)["QueueName"]
        for w in stack.workers.values()
        for level in w.all_levels
    }


def job_queue_ids(stack) -> set[str]:
    """Every job queue of every priority level (not the DLQs)."""
    return {logical_id(stack, level.queue) for w in stack.workers.values() for level in w.all_levels}


def dlq_ids(stack) -> set[str]:
    return {
        logical_id(stack, level.dead_letter_queue) for w in stack.workers.values() for level in w.all_levels
    }


def sent_to(template, role_id: str) -> set[str]:
    """Logical ids a role's statements allow sqs:SendMessage on."""
    return {
        t
        for s in role_statements(template, role_id)
        if "sqs:SendMessage" in actions_of(s)
        for t in ref_ids(s["Resource"])
    }


def continuer(template, stack) -> dict[str, Any]:
    return props(template, stack, stack.workflows.function)


# -- the workflow queue and its DLQ --------------------------------------------------------------------


def test_the_workflow_queue_is_named_after_the_stack_and_redrives_to_its_dlq(template, stack):
    workflows = stack.workflows
    queue, dlq = props(template, stack, workflows.queue), props(template, stack, workflows.dead_letter_queue)
    # double dash: no job (nor a job's priority level, <stack>-<job>--<level>) can have these names
    assert queue["QueueName"] == f"{stack.stack_name}--workflows" == "lambdajobs--workflows"
    assert dlq["QueueName"] == "lambdajobs--workflows-dlq"
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [logical_id(stack, workflows.dead_letter_queue), "Arn"]},
        "maxReceiveCount": 5,
    }
    # visibility timeout = 6 x the continuer's timeout (no batching window)
    assert queue["VisibilityTimeout"] == 6 * continuer(template, stack)["Timeout"] == 720
    # retention as the job queues: the DLQ keeps a notice longer than its source
    assert queue["MessageRetentionPeriod"] == QUEUE_RETENTION_SECONDS
    assert dlq["MessageRetentionPeriod"] == DLQ_RETENTION_SECONDS
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True
    assert "KmsMasterKeyId" not in queue and "KmsMasterKeyId" not in dlq  # no key for anyone to be granted
    # its DLQ accepts redrives from the workflow queue only
    assert dlq["RedriveAllowPolicy"]["redrivePermission"] == "byQueue"
    [source] = dlq["RedriveAllowPolicy"]["sourceQueueArns"]
    assert flatten(source).endswith(":lambdajobs--workflows")


def test_the_workflow_queues_refuse_plain_http(template, stack):
    for queue in (stack.workflows.queue, stack.workflows.dead_letter_queue):
        qid = logical_id(stack, queue)
        statements = [
            s
            for p in resources(template, "AWS::SQS::QueuePolicy").values()
            if qid in ref_ids(p["Properties"]["Queues"])
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        ), f"{qid} accepts requests without TLS"


# -- the continuer function ----------------------------------------------------------------------------


def test_the_continuer_runs_the_continuer_entry_point_as_the_workers_run(template, stack):
    fn = continuer(template, stack)
    worker = props(template, stack, stack.workers[JOBS[0]].function)
    assert fn["Handler"] == "lambdajobs.runtime.continuer_entry.lambda_handler"
    assert (fn["Timeout"], fn["MemorySize"]) == (120, 256)
    assert "ReservedConcurrentExecutions" not in fn
    # the workers' runtime, architecture, Powertools layer and JSON logs; the runtime in its asset
    for key in ("Runtime", "Architectures"):
        assert fn[key] == worker[key], key
    assert fn["Layers"] == worker["Layers"][:1]
    assert {k: v for k, v in fn["LoggingConfig"].items() if k != "LogGroup"} == {
        k: v for k, v in worker["LoggingConfig"].items() if k != "LogGroup"
    }
    [group] = ref_ids(fn["LoggingConfig"]["LogGroup"])
    assert template["Resources"][group]["Properties"]["RetentionInDays"] == 30
    assert ref_ids(fn["LoggingConfig"]["LogGroup"]) != ref_ids(worker["LoggingConfig"]["LogGroup"])


def test_the_continuer_finds_every_job_queue_by_the_naming_rule_and_imports_no_job(template, stack):
    env = continuer(template, stack)["Environment"]["Variables"]
    assert env["LAMBDAJOBS_STACK"] == stack.stack_name
    assert ref_ids(env["LAMBDAJOBS_TABLE"]) == {logical_id(stack, stack.table)}
    assert env["LAMBDAJOBS_RECORD_TTL_DAYS"] == "7"
    assert env["LAMBDAJOBS_ACCOUNT"] == {"Ref": "AWS::AccountId"}
    # nothing names a queue: its environment does not grow with the jobs
    assert not {k for k in env if "QUEUE" in k or "ARN" in k or "DLQ" in k or "WORKFLOW" in k}
    # it imports no job module: the jobs package is not even named
    assert not {"LAMBDAJOBS_JOB", "LAMBDAJOBS_MODULES", "LAMBDAJOBS_JOBS"} & set(env)


def test_the_runtime_finds_each_queue_the_continuer_sends_to(template, stack):
    env = {k: flatten(v) for k, v in continuer(template, stack)["Environment"]["Variables"].items()}
    env |= {"LAMBDAJOBS_ACCOUNT": "123456789012", "LAMBDAJOBS_URL_SUFFIX": "amazonaws.com"}
    config = StackConfig.from_environment(env).with_resources(region="eu-west-1")
    for job, level in LEVELS:
        [queues] = [q for q in stack.workers[job].all_levels if q.level == level]
        name = props(template, stack, queues.queue)["QueueName"]
        assert config.queue_url(job, level) == f"https://sqs.eu-west-1.amazonaws.com/123456789012/{name}"
    assert config.table == f"<{logical_id(stack, stack.table)}>" and config.stack == stack.stack_name


def test_the_continuer_consumes_the_workflow_queue_in_batches_reporting_failures(template, stack):
    fid = logical_id(stack, stack.workflows.function)
    [mapping] = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fid}
    ]
    assert mapping["EventSourceArn"] == {"Fn::GetAtt": [logical_id(stack, stack.workflows.queue), "Arn"]}
    # without it a returned failure list is ignored and every notice of the batch deleted
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert mapping["BatchSize"] == 10
    assert mapping["ScalingConfig"] == {"MaximumConcurrency": 5}


def test_the_continuer_ships_the_runtime_and_no_job_module(synthesized):
    from lambdajobs.cdk import VENDORED_PACKAGES

    template, outdir, app_stack, _ = synthesized
    stack = app_stack.lambdajobs
    fn = continuer(template, stack)
    asset = Path(outdir) / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}"
    assert sorted(p.name for p in asset.iterdir()) == sorted(["lambdajobs", *VENDORED_PACKAGES])
    ours = files_under(asset / "lambdajobs")
    shipped = ("__init__.py", "errors.py")
    assert "runtime/worker.py" in ours and all(f in shipped or f.startswith("runtime/") for f in ours)
    # its own asset: no worker's (each of which holds job modules)
    assert all(asset != asset_of(synthesized, job) for job in JOBS)


def test_the_continuer_starts_from_its_asset_and_what_lambda_provides(synthesized, request, tmp_path):
    """A cold start with nothing but the continuer's asset and what Lambda and the Powertools layer
    provide: its entry point imports, and nothing of the jobs package is needed or loaded."""
    import subprocess
    import sys

    layer = request.getfixturevalue("lambda_layer")  # test_stack's: what Lambda provides

    template, outdir, app_stack, _ = synthesized
    fn = continuer(template, app_stack.lambdajobs)
    asset = Path(outdir) / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}"
    env = {k: v for k, v in fn["Environment"]["Variables"].items() if isinstance(v, str)}
    module, _, handler = fn["Handler"].rpartition(".")  # what Lambda imports and calls
    code = (
        "import importlib, json, sys\n"
        f"assert callable(getattr(importlib.import_module({module!r}), {handler!r}))\n"
        "mods = {n: getattr(m, '__file__', None) for n, m in sys.modules.items()}\n"
        "ours = ('lambdajobs', 'handlers')\n"
        "print(json.dumps({n: f for n, f in mods.items() if f and n.split('.')[0] in ours}))"
    )
    env |= {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{asset}:{layer}",
        "PYTHONTZPATH": "",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    files = json.loads(out.stdout.strip().splitlines()[-1])
    assert "lambdajobs.runtime.continuer" in files
    assert all(f.startswith(str(asset)) for f in files.values()), files
    assert not any(n.split(".")[0] == "handlers" for n in files)


@pytest.fixture(scope="module")
def local_workflow_queue():
    """The workflow queue and DLQ as the local stack provisions them (moto), with their attributes."""
    from moto import mock_aws

    from lambdajobs.local.provision import provision_workflow_queue
    from lambdajobs.runtime import aws
    from tests.conftest import FAKE_AWS_ENV

    with pytest.MonkeyPatch.context() as env, mock_aws():
        for key, value in FAKE_AWS_ENV.items():
            env.setenv(key, value)
        env.delenv("AWS_ENDPOINT_URL", raising=False)
        aws.reset_clients()
        config = StackConfig(stack="drift", region="us-east-1")
        made = provision_workflow_queue("drift", config)
        sqs = aws.client("sqs")
        yield {
            name: sqs.get_queue_attributes(QueueUrl=made[url], AttributeNames=["All"])["Attributes"]
            for name, url in (("queue", "workflow_queue_url"), ("dlq", "workflow_dlq_url"))
        }
    aws.reset_clients()


def test_the_local_stack_makes_the_workflow_queue_and_runs_the_continuer_as_the_template(
    template, stack, local_workflow_queue
):
    """The local stack writes the continuer's numbers apart from the construct: they must agree."""
    from lambdajobs.runtime.settings import CONTINUER_MAX_CONCURRENCY, CONTINUER_TIMEOUT_SECONDS

    queue, dlq = local_workflow_queue["queue"], local_workflow_queue["dlq"]
    cdk_queue = props(template, stack, stack.workflows.queue)
    cdk_dlq = props(template, stack, stack.workflows.dead_letter_queue)
    assert queue["QueueArn"].endswith(":" + cdk_queue["QueueName"].replace("lambdajobs-", "drift-"))
    assert dlq["QueueArn"].endswith(":" + cdk_dlq["QueueName"].replace("lambdajobs-", "drift-"))
    assert int(queue["VisibilityTimeout"]) == cdk_queue["VisibilityTimeout"]
    assert int(queue["MessageRetentionPeriod"]) == cdk_queue["MessageRetentionPeriod"]
    assert int(dlq["MessageRetentionPeriod"]) == cdk_dlq["MessageRetentionPeriod"]
    redrive = json.loads(queue["RedrivePolicy"])
    assert redrive["maxReceiveCount"] == cdk_queue["RedrivePolicy"]["maxReceiveCount"]
    assert redrive["deadLetterTargetArn"] == dlq["QueueArn"]
    assert queue["SqsManagedSseEnabled"] == dlq["SqsManagedSseEnabled"] == "true"
    # the local event source runs the continuer with the function's timeout and the mapping's cap
    fid = logical_id(stack, stack.workflows.function)
    [mapping] = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fid}
    ]
    assert continuer(template, stack)["Timeout"] == CONTINUER_TIMEOUT_SECONDS
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == CONTINUER_MAX_CONCURRENCY


# -- IAM -----------------------------------------------------------------------------------------------


def test_the_continuer_may_send_to_every_job_queue_and_nothing_else(template, stack):
    role = role_of(template, logical_id(stack, stack.workflows.function))
    statements = role_statements(template, role)
    # exactly the job queues of every level, by the stack's name pattern: no DLQ (notices die by
    # redrive, never by a send), not the workflow queue itself, nothing of a neighbour stack
    for name in job_queue_names(template, stack):
        assert allows(statements, template, "sqs:SendMessage", name), name
    for name in dlq_names(template, stack) | {f"{stack.stack_name}--workflows"}:
        assert not allows(statements, template, "sqs:SendMessage", name), name
    assert not allows(statements, template, "sqs:SendMessage", f"{stack.stack_name}-2_send_email")
    table = logical_id(stack, stack.table)
    expected: dict[str, set[str]] = {logical_id(stack, stack.workflows.queue): CONSUME}
    expected[table] = {"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"}
    assert {k: v for k, v in granted(template, role).items() if not k.startswith("AWS::")} == expected


def test_the_continuer_reads_and_updates_workflow_items_only(template, stack):
    role = role_of(template, logical_id(stack, stack.workflows.function))
    table = logical_id(stack, stack.table)
    statement, reads = [s for s in role_statements(template, role) if table in ref_ids(s["Resource"])]
    assert actions_of(statement) == {"dynamodb:GetItem", "dynamodb:UpdateItem"}
    assert statement["Resource"] == {"Fn::GetAtt": [table, "Arn"]}  # the table, not its indexes
    # every key it writes starts with the workflow prefix: no job record, no rate limiter
    assert statement["Condition"] == WORKFLOW_ITEMS
    # it reads members' records in batches (a stage re-sent after a crash skips delivered members)
    assert actions_of(reads) == {"dynamodb:BatchGetItem"} and reads["Resource"] == statement["Resource"]


@pytest.mark.parametrize("job", JOBS)
def test_every_worker_may_send_its_notice_to_the_workflow_queue_only(template, stack, job):
    worker = stack.workers[job]
    fn = props(template, stack, worker.function)
    statements = role_statements(template, role_of(template, logical_id(stack, worker.function)))
    assert allows(statements, template, "sqs:SendMessage", f"{stack.stack_name}--workflows")
    assert not allows(statements, template, "sqs:SendMessage", f"{stack.stack_name}--workflows-dlq")
    # it finds the queue by its name: no variable
    assert "LAMBDAJOBS_WORKFLOW_QUEUE_URL" not in fn["Environment"]["Variables"]


@pytest.mark.parametrize("job", JOBS)
def test_no_worker_may_send_to_a_job_it_does_not_enqueue(template, stack, job):
    worker, spec = stack.workers[job], get_spec(job)
    statements = role_statements(template, role_of(template, logical_id(stack, worker.function)))
    for other in JOBS:
        for level in get_spec(other).levels:
            name = queue_name(stack.stack_name, other, level)
            sends = allows(statements, template, "sqs:SendMessage", name)
            assert sends == (other == job or other in spec.enqueues), name
            # a DLQ: its own only (dead letters)
            dlq = allows(statements, template, "sqs:SendMessage", name + "-dlq")
            assert dlq == (other == job), name


@pytest.mark.parametrize("job", JOBS)
def test_a_worker_that_enqueues_jobs_may_create_workflow_items_only(template, stack, job):
    role = role_of(template, logical_id(stack, stack.workers[job].function))
    # every worker writes its job records (a first attempt's PutItem among them): that statement is
    # the job record's, beside GetItem, BatchGetItem and UpdateItem, which already reach any item
    record = {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
    puts = [
        s
        for s in role_statements(template, role)
        if "dynamodb:PutItem" in actions_of(s) and actions_of(s) != record
    ]
    if not get_spec(job).enqueues:
        assert puts == []  # it starts no workflow
        return
    [put] = puts
    assert actions_of(put) == {"dynamodb:PutItem"}
    assert put["Resource"] == {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}
    assert put["Condition"] == WORKFLOW_ITEMS


def test_this_project_has_a_job_that_enqueues_and_one_that_does_not():
    # so that both branches of the test above run
    assert {bool(get_spec(job).enqueues) for job in JOBS} == {True, False}


def test_producers_may_create_workflow_items_only_and_read_member_records(template, stack):
    statements = props(template, stack, stack.producer_policy)["PolicyDocument"]["Statement"]
    table = {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}
    # enqueue(workflow) creates the item, then marks its first stage sent: on workflow items only
    [writes] = [s for s in statements if "dynamodb:PutItem" in actions_of(s)]
    assert actions_of(writes) == {"dynamodb:PutItem", "dynamodb:UpdateItem"} and writes["Resource"] == table
    assert writes["Condition"] == WORKFLOW_ITEMS
    # and lambdajobs.signal(): UpdateItem of job records only, no workflow item (test_schedules)
    [signals] = [s for s in statements if actions_of(s) == {"dynamodb:UpdateItem"}]
    assert signals["Resource"] == table and "dynamodb:LeadingKeys" in json.dumps(signals["Condition"])
    # get_workflow: a running stage's member records in one call (any record: no condition)
    [reads] = [s for s in statements if "dynamodb:BatchGetItem" in actions_of(s)]
    assert actions_of(reads) == {"dynamodb:GetItem", "dynamodb:BatchGetItem"} and reads["Resource"] == table
    assert "Condition" not in reads
    # producers send no notices: that is the workers'
    assert logical_id(stack, stack.workflows.queue) not in managed_policy_grants(
        template, stack, stack.producer_policy
    )


def test_operators_reach_the_workflow_queue_and_its_dlq_as_a_jobs(template, stack):
    statements = props(template, stack, stack.operator_policy)["PolicyDocument"]["Statement"]
    queue, dlq = f"{stack.stack_name}--workflows", f"{stack.stack_name}--workflows-dlq"
    job_queue = queue_name(stack.stack_name, "send_email")
    # health, and redrive back to it: as a job queue; list, show, redrive, purge: as a job's DLQ
    for action in ("sqs:GetQueueAttributes", "sqs:SendMessage"):
        assert allows(statements, template, action, queue) and allows(statements, template, action, job_queue)
    for action in ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:PurgeQueue"):
        assert allows(statements, template, action, dlq)
        assert allows(statements, template, action, job_queue + "-dlq")
        assert not allows(statements, template, action, queue)
    # `lambdajobs workflow`: the workflow item and its members' records (and `lambdajobs jobs`: the job
    # index, on in this stack, whose Query grant names the index: see test_schedules)
    grants = managed_policy_grants(template, stack, stack.operator_policy)
    grants_on_table = grants[logical_id(stack, stack.table)]
    assert {"dynamodb:GetItem", "dynamodb:BatchGetItem"} <= set().union(*grants_on_table)
    # besides, `lambdajobs signal`: UpdateItem of job records only (test_schedules); a DLQ purge's
    # marker: PutItem of those items only (test_records)
    assert set().union(*grants_on_table) - {"dynamodb:GetItem", "dynamodb:BatchGetItem"} == {
        "dynamodb:PutItem",
        "dynamodb:Query",
        "dynamodb:UpdateItem",
    }


def test_the_producer_policy_stays_under_the_managed_policy_limit(template, stack):
    document = props(template, stack, stack.producer_policy)["PolicyDocument"]
    text = json.dumps(deployed(template, stack.stack_name, document), separators=(",", ":"))
    assert "Fn::" not in text and "<" not in text
    print(f"producer policy: {len(text)} of {MANAGED_POLICY_LIMIT} characters")
    assert len(text) < MANAGED_POLICY_LIMIT


# -- manifest, outputs, monitoring ---------------------------------------------------------------------


def test_the_stack_manifest_and_outputs_name_the_workflow_queue(template, stack):
    [param] = [
        p["Properties"]
        for p in resources(template, "AWS::SSM::Parameter").values()
        if p["Properties"]["Name"] == stack_manifest_parameter(stack.stack_name)
    ]
    value = flatten(param["Value"])
    manifest = json.loads(value)
    assert manifest["workflow_queue_url"] == f"<{logical_id(stack, stack.workflows.queue)}>"
    assert manifest["workflow_dlq_url"] == f"<{logical_id(stack, stack.workflows.dead_letter_queue)}>"
    outputs = template["Outputs"]
    assert outputs["WorkflowQueueUrl"]["Value"] == {"Ref": logical_id(stack, stack.workflows.queue)}
    assert outputs["WorkflowDeadLetterQueueUrl"]["Value"] == {
        "Ref": logical_id(stack, stack.workflows.dead_letter_queue)
    }


def test_a_dead_notice_and_a_failing_continuer_alarm_to_the_topic(template, stack):
    alarms = {name: props(template, stack, alarm) for name, alarm in stack.monitoring.workflow_alarms.items()}
    topic = logical_id(stack, stack.monitoring.topic)
    dead = alarms["DeadLetters"]
    # any notice in the DLQ: its workflow waits until it is redriven
    assert (dead["MetricName"], dead["Threshold"], dead["ComparisonOperator"]) == (
        "ApproximateNumberOfMessagesVisible",
        0,
        "GreaterThanThreshold",
    )
    assert ref_ids(dead["Dimensions"]) == {logical_id(stack, stack.workflows.dead_letter_queue)}
    errors = alarms["ContinuerErrors"]
    assert (errors["Namespace"], errors["MetricName"], errors["Threshold"]) == ("AWS/Lambda", "Errors", 0)
    assert ref_ids(errors["Dimensions"]) == {logical_id(stack, stack.workflows.function)}
    for alarm in alarms.values():
        assert ref_ids(alarm["AlarmActions"]) == {topic} and ref_ids(alarm["OKActions"]) == {topic}
        assert alarm["TreatMissingData"] == "notBreaching"
    # the workflow queue's own (a stalled continuer), as a job queue's
    assert ref_ids(alarms["OldestMessage"]["Dimensions"]) == {logical_id(stack, stack.workflows.queue)}


def test_the_dashboard_shows_the_workflow_queue_and_the_continuer(template, stack):
    body = dashboard_body(template)
    for title in ("workflows: queue", "workflows: dead letters", "workflows: continuer"):
        assert f'\\"title\\":\\"{title}\\"' in body
    [queue_widget] = [
        w
        for w in json.loads(flatten_body(template))["widgets"]
        if w["properties"]["title"] == "workflows: queue"
    ]
    metrics = json.dumps(queue_widget["properties"]["metrics"])
    assert "ApproximateNumberOfMessagesVisible" in metrics and "ApproximateAgeOfOldestMessage" in metrics
    assert logical_id(stack, stack.workflows.queue) in metrics


def flatten_body(template) -> str:
    """The dashboard body as JSON text, references written `<LogicalId.Attr>`."""
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    return flatten(dashboard["Properties"]["DashboardBody"])


# -- Lambda's 4 KB of environment ------------------------------------------------------------------------


def test_the_size_counts_keys_values_and_a_deploy_time_value_as_200():
    from aws_cdk import Aws

    from lambdajobs.cdk.job_worker import TOKEN_CHARACTERS, environment_size

    assert TOKEN_CHARACTERS == 200
    assert environment_size({"A": "bc", "DEF": ""}) == 6
    assert environment_size({"URL": Aws.ACCOUNT_ID}) == 3 + 200
    assert environment_size({"URL": f"https://sqs/{Aws.ACCOUNT_ID}/q"}) == 3 + len("https://sqs//q") + 200


def test_an_environment_over_4_kb_is_refused_with_the_function_and_the_fix():
    from lambdajobs.cdk.job_worker import check_environment_size

    check_environment_size("function F", {"K": "v" * 4095}, "fix it")  # 4,096: at the limit, accepted
    fake = {
        f"LAMBDAJOBS_QUEUE_URL_JOB_{i:03}": "https://sqs.eu-west-1.amazonaws.com/1/" + "q" * 40
        for i in range(50)
    }
    with pytest.raises(ConfigurationError) as refused:
        check_environment_size("function F of lambdajobs/Workflows", fake, "Split the jobs over two stacks.")
    message = str(refused.value)
    assert "function F of lambdajobs/Workflows" in message and "4096" in message
    assert "Split the jobs over two stacks." in message and "LAMBDAJOBS_QUEUE_URL_JOB_" in message


def test_a_function_refuses_variables_that_take_it_past_4_kb(tmp_path):
    from aws_cdk import App, Aws, Stack
    from aws_cdk import aws_lambda as lambda_

    from lambdajobs.cdk.job_worker import LambdaJobsFunction

    stack = Stack(App(outdir=str(tmp_path)), "sizes")
    options = {
        "runtime": lambda_.Runtime.PYTHON_3_13,
        "handler": "x.y",
        "code": lambda_.Code.from_inline("pass"),
    }
    with pytest.raises(ConfigurationError, match="Fewer jobs"):
        LambdaJobsFunction(stack, "Big", fix="Fewer jobs.", environment={"K": "v" * 5000}, **options)
    fn = LambdaJobsFunction(stack, "Grows", fix="Fewer jobs.", environment={"A": "b"}, **options)
    for i in range(19):  # 19 deploy-time values of about 200 characters: 3,900 or so
        fn.add_environment(f"QUEUE_{i:02}", Aws.ACCOUNT_ID)
    with pytest.raises(ConfigurationError, match="Grows"):
        fn.add_environment("QUEUE_19", Aws.ACCOUNT_ID)  # through the hook too (users add variables)
    assert "QUEUE_19" not in fn.environment_variables and "QUEUE_18" in fn.environment_variables


def test_every_function_of_the_stack_is_counted_whole_and_fits(template, stack):
    from lambdajobs.cdk.job_worker import environment_size

    functions = {job: w.function for job, w in stack.workers.items()} | {
        "continuer": stack.workflows.function
    }
    for name, fn in functions.items():
        counted = fn.environment_variables
        # what is counted is what the template holds: every variable, added when and however it was
        assert set(counted) == set(props(template, stack, fn)["Environment"]["Variables"]), name
        print(f"{name}: about {environment_size(counted)} of 4096 characters of environment")
        assert environment_size(counted) < 4096
