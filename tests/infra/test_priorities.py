"""Template assertions for priorities and rate limits (issue 12): each level of a job has its own queue,
DLQ and event source on the job's one function, and every policy, alarm and dashboard row that covers
a job's queue covers each level's; the rate limiter's item lives in the job table.

This project's `send_email` declares `priorities=("high", "normal")` with `max_concurrency=10`: its
own queue (`lambdajobs_send_email`) is the normal level, `lambdajobs_send_email--high` the high one.
"""

from __future__ import annotations

import json
import sys
import textwrap
from typing import Any

import pytest

from lambdajobs.runtime.settings import (
    ENV_TABLE,
    RESERVED_ID_PREFIX,
    dead_letter_queue_name,
    queue_name,
)
from lambdajobs.runtime.spec import get_spec, load_jobs
from lambdajobs.testing import isolated_registry
from tests.infra.policies import allows, statements_of_role
from tests.infra.test_stack import logical_id, props, ref_ids, resources

#: Every level above a job's lowest, of every job that declares priorities: (job, level).
UPPER_LEVELS = [(s.name, level) for s in load_jobs("handlers") for level in s.levels if level is not None]
#: A managed policy holds at most 6,144 characters (whitespace not counted).
MANAGED_POLICY_LIMIT = 6144


def role_of(template, function_id: str) -> str:
    return template["Resources"][function_id]["Properties"]["Role"]["Fn::GetAtt"][0]


def granted(template, role_id: str) -> dict[str, set[str]]:
    """logical id -> the actions a role's inline policies allow on it."""
    found: dict[str, set[str]] = {}
    for policy in resources(template, "AWS::IAM::Policy").values():
        if {"Ref": role_id} not in policy["Properties"].get("Roles", []):
            continue
        for s in policy["Properties"]["PolicyDocument"]["Statement"]:
            actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
            for target in ref_ids(s["Resource"]):
                found.setdefault(target, set()).update(actions)
    return found


def managed_policy_grants(template, stack, policy) -> dict[str, list[set[str]]]:
    """logical id -> the action sets of each statement of a managed policy that names it."""
    found: dict[str, list[set[str]]] = {}
    for s in props(template, stack, policy)["PolicyDocument"]["Statement"]:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        for target in ref_ids(s["Resource"]):
            found.setdefault(target, []).append(set(actions))
    return found


def flatten(value: Any) -> str:
    """A template string value as text, each Ref / Fn::GetAtt written `<LogicalId>` / `<LogicalId.Attr>`."""
    if isinstance(value, str):
        return value
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(flatten(p) for p in parts)
    if "Ref" in value:
        return f"<{value['Ref']}>"
    if "Fn::GetAtt" in value:
        return "<{}.{}>".format(*value["Fn::GetAtt"])
    raise AssertionError(f"unexpected intrinsic {value}")


def high(stack, job: str = "send_email", level: str = "high"):
    return stack.workers[job].levels[level]


# -- the high queue, its DLQ and its event source ------------------------------------------------------


def test_send_email_declares_the_levels_these_tests_check():
    spec = get_spec("send_email")
    assert spec.priorities == ("high", "normal") and spec.levels == ("high", None)
    assert (spec.concurrency_of("high"), spec.concurrency_of(None)) == (20, 10)
    assert UPPER_LEVELS == [("send_email", "high")]


def test_the_high_queue_has_its_name_and_redrives_to_its_own_dlq(template, stack):
    spec, worker, level = get_spec("send_email"), stack.workers["send_email"], high(stack)
    queue = props(template, stack, level.queue)
    own = props(template, stack, worker.queue)
    assert (
        queue["QueueName"]
        == queue_name(stack.stack_name, "send_email", "high")
        == "lambdajobs_send_email--high"
    )
    assert own["QueueName"] == "lambdajobs_send_email"  # the job's own queue stays the lowest level's
    # its own DLQ, after max_attempts receives and the one spare (as the job's own queue)
    assert queue["RedrivePolicy"] == {
        "deadLetterTargetArn": {"Fn::GetAtt": [logical_id(stack, level.dead_letter_queue), "Arn"]},
        "maxReceiveCount": spec.max_attempts + 1,
    }
    assert logical_id(stack, level.dead_letter_queue) != logical_id(stack, worker.dead_letter_queue)
    assert queue["VisibilityTimeout"] == own["VisibilityTimeout"] == spec.visibility_timeout_seconds
    dlq = props(template, stack, level.dead_letter_queue)
    assert dlq["RedriveAllowPolicy"]["redrivePermission"] == "byQueue"
    [source] = dlq["RedriveAllowPolicy"]["sourceQueueArns"]
    assert flatten(source).endswith(":lambdajobs_send_email--high")
    assert dlq["QueueName"] == "lambdajobs_send_email--high-dlq"


def test_send_email_has_an_event_source_per_level_with_its_concurrency(template, stack):
    worker, level = stack.workers["send_email"], high(stack)
    fid = logical_id(stack, worker.function)
    by_queue = {
        m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fid}
    }
    assert set(by_queue) == {logical_id(stack, level.queue), logical_id(stack, worker.queue)}
    # high: twice the concurrency, so a backlog of normal jobs cannot hold back high ones
    assert by_queue[logical_id(stack, level.queue)]["ScalingConfig"] == {"MaximumConcurrency": 20}
    assert by_queue[logical_id(stack, worker.queue)]["ScalingConfig"] == {"MaximumConcurrency": 10}
    for esm in by_queue.values():
        assert esm["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_the_worker_may_consume_the_high_queue_hand_back_to_it_and_dead_letter_into_its_dlq(template, stack):
    worker, level = stack.workers["send_email"], high(stack)
    actions = granted(template, role_of(template, logical_id(stack, worker.function)))
    assert actions[logical_id(stack, level.queue)] >= {
        "sqs:ReceiveMessage",
        "sqs:DeleteMessage",
        "sqs:ChangeMessageVisibility",  # retry delays
        "sqs:SendMessage",  # hand-backs, and a message forwarded to its level
    }
    assert "sqs:SendMessage" in actions[logical_id(stack, level.dead_letter_queue)]
    # a message whose envelope says "normal" may be forwarded from the high queue to the job's own
    assert "sqs:SendMessage" in actions[logical_id(stack, worker.queue)]


def test_the_worker_finds_the_high_queue_by_the_naming_rule_not_a_variable(template, stack):
    from lambdajobs.runtime.config import StackConfig

    worker = stack.workers["send_email"]
    env = props(template, stack, worker.function)["Environment"]["Variables"]
    assert not [k for k in env if k.startswith("LAMBDAJOBS_PRIORITY_") or "QUEUE" in k]
    # what the runtime makes of the deployed environment: the level's queue, by its name
    deployed = {k: v for k, v in env.items() if isinstance(v, str)} | {
        "LAMBDAJOBS_ACCOUNT": "123456789012",
        "LAMBDAJOBS_PARTITION": "aws-cn",
        "LAMBDAJOBS_URL_SUFFIX": "amazonaws.com.cn",
        "LAMBDAJOBS_TABLE": "t",
    }
    config = StackConfig.from_environment(deployed).with_resources(region="cn-north-1")
    name = props(template, stack, high(stack).queue)["QueueName"]
    dlq = props(template, stack, high(stack).dead_letter_queue)["QueueName"]
    address = config.queue("send_email", "high")
    assert address.url == f"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/{name}"
    assert address.arn == f"arn:aws-cn:sqs:cn-north-1:123456789012:{name}"
    assert address.dlq_url == f"https://sqs.cn-north-1.amazonaws.com.cn/123456789012/{dlq}"


def test_a_job_that_enqueues_send_email_may_send_at_either_priority(template, stack):
    fn = stack.workers["daily_report"].function
    statements = statements_of_role(template, role_of(template, logical_id(stack, fn)))
    for level in ("high", None):
        assert allows(
            statements, template, "sqs:SendMessage", queue_name(stack.stack_name, "send_email", level)
        )
        # never another job's DLQ
        assert not allows(
            statements,
            template,
            "sqs:SendMessage",
            dead_letter_queue_name(stack.stack_name, "send_email", level),
        )
    assert not allows(
        statements, template, "sqs:SendMessage", queue_name(stack.stack_name, "transcode_video")
    )


def test_one_time_schedules_may_send_to_the_high_queue(template, stack):
    # enqueue(..., priority="high", run_at=...) beyond 15 minutes: Scheduler sends to the level's queue
    statements = statements_of_role(template, logical_id(stack, stack.scheduler_role))
    high_queue = queue_name(stack.stack_name, "send_email", "high")
    assert allows(statements, template, "sqs:SendMessage", high_queue)
    assert not allows(statements, template, "sqs:SendMessage", high_queue + "-dlq")
    # nothing of a neighbour stack named like this one and more
    assert not allows(
        statements, template, "sqs:SendMessage", queue_name(stack.stack_name + "-2", "send_email")
    )


# -- producer and operator policies --------------------------------------------------------------------


def test_producers_may_enqueue_at_the_high_level(template, stack):
    statements = props(template, stack, stack.producer_policy)["PolicyDocument"]["Statement"]
    high_queue = queue_name(stack.stack_name, "send_email", "high")
    assert allows(statements, template, "sqs:SendMessage", high_queue)
    assert not allows(statements, template, "sqs:SendMessage", high_queue + "-dlq")
    assert not allows(
        statements, template, "sqs:SendMessage", queue_name(stack.stack_name + "-2", "send_email")
    )


def test_operators_reach_the_high_queue_and_its_dlq(template, stack):
    statements = props(template, stack, stack.operator_policy)["PolicyDocument"]["Statement"]
    high_queue = queue_name(stack.stack_name, "send_email", "high")
    # health (queue depth), and redrive / cron trigger / enqueue send to it
    for action in ("sqs:GetQueueAttributes", "sqs:SendMessage"):
        assert allows(statements, template, action, high_queue)
    # never a send to a DLQ (the job queues' pattern names them too: a deny)
    assert allows(statements, template, "sqs:GetQueueAttributes", high_queue + "-dlq")
    assert not allows(statements, template, "sqs:SendMessage", high_queue + "-dlq")
    # the dead-letter commands: list, show, redrive, purge (as every job's DLQ), on DLQs only
    dlq_actions = [
        "sqs:ReceiveMessage",
        "sqs:ChangeMessageVisibility",
        "sqs:DeleteMessage",
        "sqs:PurgeQueue",
        # the board's "redrive all": SQS's own move task
        "sqs:StartMessageMoveTask",
        "sqs:ListMessageMoveTasks",
    ]
    for action in dlq_actions:
        assert allows(statements, template, action, high_queue + "-dlq")
        assert allows(statements, template, action, dead_letter_queue_name(stack.stack_name, "send_email"))
        assert not allows(statements, template, action, high_queue)  # never purge a job queue
        assert not allows(
            statements, template, action, queue_name(stack.stack_name + "-2", "send_email") + "-dlq"
        )


def arn_for(template, stack_name: str, logical: str) -> str:
    """A realistic deployed ARN for a resource (generated names at their longest), to size policies."""
    resource = template["Resources"][logical]
    kind, properties = resource["Type"], resource.get("Properties", {})
    head = "arn:aws-us-gov:{}:ap-southeast-2:123456789012:"
    generated = f"{stack_name}-{logical}-ABCDEFGHIJKLM"  # CloudFormation: stack-logicalid-suffix
    if kind == "AWS::SQS::Queue":
        return head.format("sqs") + properties.get("QueueName", generated[:80])
    if kind == "AWS::IAM::Role":
        return "arn:aws-us-gov:iam::123456789012:role/" + generated[:64]
    if kind == "AWS::DynamoDB::Table":
        return head.format("dynamodb") + "table/" + generated
    raise AssertionError(f"no ARN pattern for {kind}")


def deployed(template, stack_name: str, value: Any) -> Any:
    """A policy document as IAM would store it: intrinsics replaced by realistic values."""
    pseudo = {
        "AWS::Partition": "aws-us-gov",
        "AWS::Region": "ap-southeast-2",
        "AWS::AccountId": "123456789012",
    }
    if isinstance(value, list):
        return [deployed(template, stack_name, v) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value and value["Ref"] in pseudo:
        return pseudo[value["Ref"]]
    if "Fn::GetAtt" in value and value["Fn::GetAtt"][1] == "Arn":
        return arn_for(template, stack_name, value["Fn::GetAtt"][0])
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(deployed(template, stack_name, p) for p in parts)
    assert not any(k.startswith("Fn::") or k == "Ref" for k in value), value
    return {k: deployed(template, stack_name, v) for k, v in value.items()}


def test_the_operator_policy_stays_under_the_managed_policy_limit(template, stack):
    document = props(template, stack, stack.operator_policy)["PolicyDocument"]
    text = json.dumps(deployed(template, stack.stack_name, document), separators=(",", ":"))
    assert "Fn::" not in text and "<" not in text
    # every queue (each level's) and DLQ once: repeats would eat into the 6,144 characters (a
    # conditioned statement names its resource again: `lambdajobs signal` writes job records only)
    arns = [
        r
        for s in json.loads(text)["Statement"]
        if s["Effect"] == "Allow" and "Condition" not in s
        for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    ]
    assert len(arns) == len(set(arns))
    queues = {a for a in arns if ":sqs:" in a}
    # the stack's two name patterns (job queues, their DLQs), the Scheduler DLQ, the workflow queue
    # and its DLQ: the same however many jobs the stack holds
    assert len(queues) == 5
    print(f"operator policy: {len(text)} of {MANAGED_POLICY_LIMIT} characters")
    assert len(text) < MANAGED_POLICY_LIMIT


# -- manifest, dashboard, alarms -----------------------------------------------------------------------


def test_the_manifest_entry_lists_the_high_level(template, stack):
    level, worker = high(stack), stack.workers["send_email"]
    entry = json.loads(flatten(props(template, stack, worker.manifest)["Value"]))
    queue, dlq = logical_id(stack, level.queue), logical_id(stack, level.dead_letter_queue)
    assert entry["levels"] == {
        "high": {"queue_url": f"<{queue}>", "queue_arn": f"<{queue}.Arn>", "dlq_url": f"<{dlq}>"}
    }
    # the lowest level is the job's own queue, at the top of the entry as before
    assert entry["queue_url"] == f"<{logical_id(stack, worker.queue)}>"
    other = json.loads(flatten(props(template, stack, stack.workers["transcode_video"].manifest)["Value"]))
    assert other["levels"] == {}


def dashboard_widgets(template) -> dict[str, dict[str, Any]]:
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(flatten(dashboard["Properties"]["DashboardBody"]))
    return {w["properties"]["title"]: w for w in body["widgets"] if "title" in w.get("properties", {})}


def queue_names_in(widget: dict[str, Any]) -> set[str]:
    """The queues (their `<LogicalId.QueueName>`) whose metrics a widget plots."""
    return {
        metric[metric.index("QueueName") + 1]
        for metric in widget["properties"]["metrics"]
        if "QueueName" in metric
    }


@pytest.mark.parametrize(("job", "level"), UPPER_LEVELS)
def test_the_dashboard_shows_each_levels_queue_and_dlq(template, stack, job, level):
    widgets, queues = dashboard_widgets(template), high(stack, job, level)
    lowest = get_spec(job).priorities[-1]
    assert queue_names_in(widgets[f"{job} ({level}): queue"]) == {
        f"<{logical_id(stack, queues.queue)}.QueueName>"
    }
    assert queue_names_in(widgets[f"{job} ({level}): dead letters"]) == {
        f"<{logical_id(stack, queues.dead_letter_queue)}.QueueName>"
    }
    own = stack.workers[job]
    assert queue_names_in(widgets[f"{job} ({lowest}): queue"]) == {
        f"<{logical_id(stack, own.queue)}.QueueName>"
    }
    assert f"{job}: worker" in widgets  # one worker graph: the levels share the function


@pytest.mark.parametrize(("job", "level"), UPPER_LEVELS)
def test_alarms_cover_each_levels_queue_and_dlq(template, stack, job, level):
    limits, queues = get_spec(job).alarms, high(stack, job, level)
    alarms = stack.monitoring.level_alarms[job][level]
    found = {name: props(template, stack, alarm) for name, alarm in alarms.items()}
    queue, dlq = logical_id(stack, queues.queue), logical_id(stack, queues.dead_letter_queue)
    expected = {
        "DeadLetters": ("ApproximateNumberOfMessagesVisible", limits.dlq_messages_above, dlq),
        "DeadLetterAge": ("ApproximateAgeOfOldestMessage", limits.dlq_oldest_message_age_seconds_above, dlq),
        "OldestMessage": ("ApproximateAgeOfOldestMessage", limits.oldest_message_age_seconds_above, queue),
        "QueueDepth": ("ApproximateNumberOfMessagesVisible", limits.queue_depth_above, queue),
    }
    assert set(found) == set(expected)
    topic = logical_id(stack, stack.monitoring.topic)
    for name, (metric, threshold, target) in expected.items():
        alarm = found[name]
        assert (alarm["MetricName"], alarm["Threshold"]) == (metric, threshold)
        assert ref_ids(alarm["Dimensions"]) == {target}
        assert ref_ids(alarm["AlarmActions"]) == {topic} and ref_ids(alarm["OKActions"]) == {topic}
        assert f"lambdajobs job {job} ({level}):" in alarm["AlarmDescription"]
    # distinct from the job's own queue's alarms (which keep their ids: see the test below)
    own = {name: logical_id(stack, a) for name, a in stack.monitoring.alarms[job].items()}
    assert not {logical_id(stack, a) for a in alarms.values()} & set(own.values())
    assert ref_ids(props(template, stack, stack.monitoring.alarms[job]["DeadLetters"])["Dimensions"]) == {
        logical_id(stack, stack.workers[job].dead_letter_queue)
    }


# -- the rate limiter ----------------------------------------------------------------------------------


def test_the_rate_limiter_item_is_in_the_job_table_the_worker_may_read_and_update(template, stack):
    from lambdajobs.runtime.ratelimit import ITEM_PREFIX

    # one item per limiter, in the job table (no table of its own to provision or grant)
    assert ITEM_PREFIX == f"{RESERVED_ID_PREFIX}ratelimit#" == "lambdajobs#ratelimit#"
    assert list(resources(template, "AWS::DynamoDB::Table")) == [logical_id(stack, stack.table)]
    assert get_spec("send_email").rate_limit is not None
    fn = stack.workers["send_email"].function
    assert props(template, stack, fn)["Environment"]["Variables"][ENV_TABLE] == {
        "Ref": logical_id(stack, stack.table)
    }
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_of(template, logical_id(stack, fn))} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
        if logical_id(stack, stack.table) in ref_ids(s["Resource"])
        and "dynamodb:BatchWriteItem" not in s["Action"]  # send_email's search entries: their own
    ]
    # consistent GetItem reads the bucket, a conditional UpdateItem takes a slot (and the job record's
    # first write is a PutItem; BatchGetItem is a workflow member's ctx.parent_results): on the table
    [statement] = statements
    assert sorted(statement["Action"]) == [
        "dynamodb:BatchGetItem",
        "dynamodb:GetItem",
        "dynamodb:PutItem",
        "dynamodb:UpdateItem",
    ]
    assert statement["Resource"] == {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}


# -- a deployed job that gains priorities keeps its resources ------------------------------------------

#: The logical ids send_email's own resources had before it declared priorities. A deployed stack keeps
#: them: a new logical id would replace the queue (and drop the messages in it) or the alarm.
DEPLOYED_SEND_EMAIL = {
    "queue": "LambdaJobsSendEmailJobQueue13D7D15D",
    "dlq": "LambdaJobsSendEmailJobDeadLetterQueue3C6D5BB2",
    "event source": "LambdaJobsSendEmailJobWorkerSqsEventSource"
    "lambdajobsLambdaJobsSendEmailJobQueue84EF3987462CEAE0",
    "DeadLetters": "LambdaJobsMonitoringSendEmailJobDeadLetters4D8BE712",
    "OldestMessage": "LambdaJobsMonitoringSendEmailJobOldestMessageD1E1EE22",
    "QueueDepth": "LambdaJobsMonitoringSendEmailJobQueueDepth6AE4FCD0",
    "DeadLetterAge": "LambdaJobsMonitoringSendEmailJobDeadLetterAge40EB7CF3",
    "WorkerErrors": "LambdaJobsMonitoringSendEmailJobWorkerErrors7E1EA987",
    "WorkerThrottles": "LambdaJobsMonitoringSendEmailJobWorkerThrottles4BA66FB3",
}


def test_send_emails_own_queue_keeps_the_logical_ids_it_was_deployed_with(template, stack):
    worker = stack.workers["send_email"]
    queue = logical_id(stack, worker.queue)
    [event_source] = [
        lid
        for lid, m in resources(template, "AWS::Lambda::EventSourceMapping").items()
        if m["Properties"]["EventSourceArn"] == {"Fn::GetAtt": [queue, "Arn"]}
    ]
    found = {
        "queue": queue,
        "dlq": logical_id(stack, worker.dead_letter_queue),
        "event source": event_source,
        **{name: logical_id(stack, alarm) for name, alarm in stack.monitoring.alarms["send_email"].items()},
    }
    assert found == DEPLOYED_SEND_EMAIL


NOTIFY = """
from pydantic import BaseModel

from lambdajobs import job


class Note(BaseModel):
    text: str


@job(max_concurrency=5{options})
def notify(payload: Note) -> None:
    pass
"""


def synth_notify(tmp_path_factory, package: str, options: str) -> dict[str, Any]:
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from lambdajobs.cdk import LambdaJobsStack

    root = tmp_path_factory.mktemp(package)
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "notes.py").write_text(textwrap.dedent(NOTIFY.format(options=options)))
    sys.path.insert(0, str(root))
    try:
        with isolated_registry():
            app = App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
            stack = LambdaJobsStack(app, "notes", jobs=package)
            return {"template": Template.from_stack(stack).to_json(), "stack": stack.lambdajobs}
    finally:
        sys.path.remove(str(root))


@pytest.fixture(scope="module")
def before_and_after(tmp_path_factory):
    """The same job and stack, without priorities and then with three levels (explicit concurrency)."""
    before = synth_notify(tmp_path_factory, "probe_notes_plain", "")
    after = synth_notify(
        tmp_path_factory, "probe_notes_levels", ', priorities={"urgent": 40, "high": 20, "normal": 5}'
    )
    return before, after


def test_adding_priorities_keeps_every_logical_id_of_the_deployed_job(before_and_after):
    before, after = before_and_after
    kept = set(before["template"]["Resources"])
    assert kept <= set(after["template"]["Resources"])  # nothing replaced, nothing renamed
    worker = before["stack"].workers["notify"]
    for construct in (worker.queue, worker.dead_letter_queue):
        lid = logical_id(before["stack"], construct)
        # the job's own queue and DLQ are untouched (a changed QueueName would replace the queue)
        assert after["template"]["Resources"][lid] == before["template"]["Resources"][lid]


def test_three_levels_get_three_queues_dlqs_event_sources_and_alarm_sets(before_and_after):
    _, after = before_and_after
    template, stack = after["template"], after["stack"]
    worker = stack.workers["notify"]
    assert [q.level for q in worker.all_levels] == ["urgent", "high", None]
    assert [q.priority for q in worker.all_levels] == ["urgent", "high", "normal"]
    names = {props(template, stack, q.queue)["QueueName"] for q in worker.all_levels}
    assert names == {"notes_notify--urgent", "notes_notify--high", "notes_notify"}
    dlqs = {logical_id(stack, q.dead_letter_queue) for q in worker.all_levels}
    assert len(dlqs) == 3
    concurrency = {
        m["Properties"]["EventSourceArn"]["Fn::GetAtt"][0]: m["Properties"]["ScalingConfig"][
            "MaximumConcurrency"
        ]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": logical_id(stack, worker.function)}
    }
    assert concurrency == {
        logical_id(stack, q.queue): c for q, c in zip(worker.all_levels, (40, 20, 5), strict=True)
    }
    level_alarms = stack.monitoring.level_alarms["notify"]
    assert set(level_alarms) == {"urgent", "high"}
    ids = [logical_id(stack, a) for alarms in level_alarms.values() for a in alarms.values()]
    assert len(ids) == len(set(ids)) == 8
