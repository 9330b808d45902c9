"""Monitoring at scale (issue 27): dashboards named per region and kept under CloudWatch's limits, the
account's Lambda concurrency against its quota, email only from the root composite alarm, every
other alarm to the topic for machines, and the reserved-concurrency cap from the account's quota.

The session's template (this repository's app: one group of jobs, in the root stack) and, for groups
in nested stacks, one small app of stand-in workers (a queue, a DLQ and a function each: what
`Monitoring` reads of a `JobWorker`).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lambdajobs.cdk import monitoring as mon
from lambdajobs.cdk.quotas import (
    ACCOUNT_CONCURRENCY_CONTEXT,
    DEFAULT_ACCOUNT_CONCURRENCY,
    account_concurrency_quota,
    max_reserved_concurrency,
)
from lambdajobs.errors import ConfigurationError
from lambdajobs.runtime.alarms import Alarms
from tests.infra.conftest import ALARM_EMAIL
from tests.infra.test_stack import logical_id, props, ref_ids, resources


def alarm_rule_refs(alarm: dict[str, Any]) -> set[str]:
    """The logical ids a composite alarm's rule names (its children's `Fn::GetAtt ... Arn`)."""
    return ref_ids(alarm["Properties"]["AlarmRule"])


def reached(template: dict[str, Any], composite: str) -> set[str]:
    """Every alarm a composite watches, through the composites under it."""
    seen: set[str] = set()
    todo = [composite]
    while todo:
        for child in alarm_rule_refs(template["Resources"][todo.pop()]):
            if child not in seen:
                seen.add(child)
                if template["Resources"][child]["Type"] == "AWS::CloudWatch::CompositeAlarm":
                    todo.append(child)
    return seen


# -- the session's app: dashboards, the account's concurrency ---------------------------------------


def test_the_first_dashboard_is_named_after_the_stack_and_its_region(template, stack):
    # Dashboards are account-wide: the same stack in two regions of one account needs two names.
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    assert dashboard["Properties"]["DashboardName"] == {
        "Fn::Join": ["", [f"{stack.stack_name}-", {"Ref": "AWS::Region"}, "-jobs"]]
    }
    assert stack.monitoring.dashboards == [stack.monitoring.dashboard]


def test_the_account_concurrency_alarm_compares_the_claim_with_the_live_quota(template, stack):
    alarm = props(template, stack, stack.monitoring.account_alarm)
    by_id = {m["Id"]: m for m in alarm["Metrics"]}
    [expression] = [m for m in alarm["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "100 * claimed / SERVICE_QUOTA(usage)" and expression["ReturnData"]
    claimed = by_id["claimed"]["MetricStat"]
    assert claimed["Metric"] == {"Namespace": "AWS/Lambda", "MetricName": "ClaimedAccountConcurrency"}
    assert claimed["Stat"] == "Maximum" and claimed["Period"] == 60
    usage = by_id["usage"]["MetricStat"]["Metric"]
    assert (usage["Namespace"], usage["MetricName"]) == ("AWS/Usage", "ResourceCount")
    assert {d["Name"]: d["Value"] for d in usage["Dimensions"]} == {
        "Service": "Lambda",
        "Resource": "ConcurrentExecutions",
        "Type": "Resource",
        "Class": "None",
    }
    # above 80% of the quota in each of 5 one-minute periods
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (80, "GreaterThanThreshold")
    assert (alarm["EvaluationPeriods"], alarm["DatapointsToAlarm"]) == (5, 5)
    assert alarm["TreatMissingData"] == "notBreaching"
    assert "throttles every function" in alarm["AlarmDescription"]
    topic = logical_id(stack, stack.monitoring.topic)
    assert ref_ids(alarm["AlarmActions"]) == {topic} and ref_ids(alarm["OKActions"]) == {topic}


def test_the_first_dashboard_shows_the_accounts_concurrency(template):
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    body = json.loads(
        "".join(
            p if isinstance(p, str) else "0" for p in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
        )
    )
    [widget] = [
        w
        for w in body["widgets"]
        if w["properties"]["title"] == "account: Lambda concurrency claimed / quota"
    ]
    metrics = json.dumps(widget["properties"]["metrics"])
    assert '"AWS/Lambda", "ClaimedAccountConcurrency"' in metrics
    assert "SERVICE_QUOTA(usage)" in metrics and '"AWS/Usage", "ResourceCount"' in metrics
    # the quota synth checks reservations against (default 1000), and the alarm's threshold
    assert widget["properties"]["annotations"]["horizontal"][0]["value"] == DEFAULT_ACCOUNT_CONCURRENCY
    assert widget["properties"]["annotations"]["horizontal"][1]["value"] == 80


# -- the session's app: who is notified ---------------------------------------------------------------


def test_the_alarm_email_is_subscribed_to_the_email_topic_only(template, stack):
    email_topic = logical_id(stack, stack.monitoring.email_topic)
    assert email_topic != logical_id(stack, stack.monitoring.topic)
    [subscription] = resources(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Protocol"] == "email"
    assert subscription["Properties"]["Endpoint"] == ALARM_EMAIL
    assert subscription["Properties"]["TopicArn"] == {"Ref": email_topic}


def test_the_email_topic_requires_tls_and_lets_this_accounts_alarms_publish(template, stack):
    email_topic = logical_id(stack, stack.monitoring.email_topic)
    [policy] = [
        p
        for p in resources(template, "AWS::SNS::TopicPolicy").values()
        if {"Ref": email_topic} in p["Properties"]["Topics"]
    ]
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in statements
    )
    # the composite alarm publishes as CloudWatch: refused without this statement, no email ever
    [allow] = [s for s in statements if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish" and allow["Resource"] == {"Ref": email_topic}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}


def test_only_the_root_composite_alarm_notifies_the_email_topic(template, stack):
    # SNS suspends an email subscription sent more than 10 messages a second: one composite, one
    # email per incident, however many alarms fire at once.
    email_topic = logical_id(stack, stack.monitoring.email_topic)
    notifying = {
        lid
        for lid, r in template["Resources"].items()
        if r["Type"].startswith("AWS::CloudWatch::")
        and email_topic in ref_ids([r["Properties"].get(k) for k in ("AlarmActions", "OKActions")])
    }
    root = logical_id(stack, stack.monitoring.composite)
    assert notifying == {root}
    composite = template["Resources"][root]["Properties"]
    assert composite["AlarmActions"] == [{"Ref": email_topic}] == composite["OKActions"]
    assert composite["AlarmName"] == f"{stack.stack_name}-any-alarm"
    assert "once per incident" in json.dumps(composite["AlarmDescription"])


def test_every_metric_alarm_notifies_the_topic_for_machines_and_never_the_email(template, stack):
    topic = logical_id(stack, stack.monitoring.topic)
    alarms = resources(template, "AWS::CloudWatch::Alarm")
    assert len(alarms) > 20
    for lid, alarm in alarms.items():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": topic}], lid
        assert alarm["Properties"]["OKActions"] == [{"Ref": topic}], lid


def test_the_root_composite_watches_every_alarm_of_the_stack(template, stack):
    monitoring = stack.monitoring
    root = logical_id(stack, monitoring.composite)
    every_alarm = set(resources(template, "AWS::CloudWatch::Alarm"))
    assert every_alarm <= reached(template, root)
    # directly: the stack-wide alarms and the group's composite, which watches every job alarm
    [group] = monitoring.groups.values()
    direct = alarm_rule_refs(template["Resources"][root])
    stack_wide = [monitoring.account_alarm, monitoring.scheduler_alarm, *monitoring.workflow_alarms.values()]
    assert direct == {logical_id(stack, a) for a in [*stack_wide, group.composite]}
    job_alarms = {
        logical_id(stack, alarm)
        for job in stack.workers
        for alarm in [
            *monitoring.alarms[job].values(),
            *(a for level in monitoring.level_alarms[job].values() for a in level.values()),
        ]
    }
    under_group = reached(template, logical_id(stack, group.composite))
    assert {
        a for a in under_group if template["Resources"][a]["Type"] == "AWS::CloudWatch::Alarm"
    } == job_alarms
    group_alarm = props(template, stack, group.composite)
    assert group_alarm["AlarmName"] == f"{stack.stack_name}-jobs-any-alarm"
    assert "AlarmActions" not in group_alarm  # only the root composite notifies anyone


# -- the rule and dashboard budgets -----------------------------------------------------------------


def test_a_rule_of_the_longest_alarm_arns_fits_cloudwatchs_limits():
    longest = "arn:aws-us-gov:cloudwatch:" + "r" * 16 + ":123456789012:alarm:" + "n" * 255
    from aws_cdk import App, Stack
    from aws_cdk import aws_cloudwatch as cw

    stack = Stack(App(), "rule")
    children = [cw.Alarm.from_alarm_arn(stack, f"A{i}", longest) for i in range(mon.CHILDREN_PER_RULE)]
    rule = cw.AlarmRule.any_of(*children).render_alarm_rule()
    assert len(rule) <= mon.ALARM_RULE_MAX_CHARACTERS and mon.CHILDREN_PER_RULE <= mon.ALARM_RULE_MAX_ALARMS
    one_more = cw.AlarmRule.any_of(*children, children[0]).render_alarm_rule()
    assert len(one_more) > mon.ALARM_RULE_MAX_CHARACTERS  # the budget is not looser than it must be


def test_jobs_are_packed_whole_into_composites():
    assert mon.pack([6] * 6, 31) == [[0, 1, 2, 3, 4], [5]]
    assert mon.pack([40, 3, 30], 31) == [[0], [1], [2]]
    assert mon.pack([], 31) == [] and mon.pack([0, 0], 31) == [[0, 1]]


# -- groups in nested stacks: one small app -----------------------------------------------------------


class Worker:
    """What `Monitoring` reads of a `JobWorker`: a queue and DLQ per level, a function, the alarms."""

    def __init__(self, scope, job: str, levels: tuple[str, ...] = ()) -> None:
        from aws_cdk import aws_lambda as lambda_
        from aws_cdk import aws_sqs as sqs
        from constructs import Construct

        from lambdajobs.cdk.stack import construct_id

        where = Construct(scope, construct_id(job))
        self.node = where.node
        self.spec = SimpleNamespace(name=job, alarms=Alarms())
        self.function = lambda_.Function(
            where,
            "Worker",
            runtime=lambda_.Runtime.PYTHON_3_13,
            handler="index.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    pass\n"),
        )

        def level(name: str | None):
            return SimpleNamespace(
                job=job,
                level=name,
                label=f"{job} ({name or 'normal'})" if levels else job,
                queue=sqs.Queue(where, f"Queue{name or ''}"),
                dead_letter_queue=sqs.Queue(where, f"DeadLetterQueue{name or ''}"),
            )

        self.levels = {name: level(name) for name in levels}
        self.all_levels = [*self.levels.values(), level(None)]


@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """A root stack with two jobs (one with a priority level), a nested stack `Jobs2` with six jobs
    (36 alarms: more than one rule takes) and `Jobs3` with two jobs whose dashboard is given room for
    one row (as if their rows passed CloudWatch's limits). Synthesized once."""
    from aws_cdk import App, NestedStack, Stack
    from aws_cdk import aws_sqs as sqs
    from constructs import Construct

    app = App(outdir=str(tmp_path_factory.mktemp("cdk.out")), context={ACCOUNT_CONCURRENCY_CONTEXT: "3000"})
    root = Stack(app, "grouped")
    monitoring = mon.Monitoring(
        root, "Monitoring", alarm_email="ops@example.com", scheduler_dlq=sqs.Queue(root, "SchedulerDlq")
    )
    monitoring.add_jobs({"alpha": Worker(root, "alpha", ("high",)), "beta": Worker(root, "beta")}, part=1)
    second = NestedStack(root, "Jobs2")
    monitoring.add_jobs(
        {f"job{n}": Worker(second, f"job{n}") for n in range(6)},
        part=2,
        scope=Construct(second, "Monitoring"),
    )
    third = NestedStack(root, "Jobs3")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mon, "MAX_DASHBOARD_WIDGETS", 5)  # a row of a job without priorities: 5 widgets
        monitoring.add_jobs(
            {"gamma": Worker(third, "gamma"), "delta": Worker(third, "delta")},
            part=3,
            scope=Construct(third, "Monitoring"),
        )
    assembly = app.synth()
    out = Path(assembly.directory)
    templates = {
        name: json.loads((out / s.template_file).read_text())
        for name, s in (("root", root), ("Jobs2", second), ("Jobs3", third))
    }
    return SimpleNamespace(monitoring=monitoring, stack=root, **templates)


def dashboard_names(template) -> list[Any]:
    return [
        d["Properties"]["DashboardName"] for d in resources(template, "AWS::CloudWatch::Dashboard").values()
    ]


def test_a_later_groups_dashboard_is_named_after_its_part(grouped):
    region = {"Ref": "AWS::Region"}
    assert dashboard_names(grouped.root) == [{"Fn::Join": ["", ["grouped-", region, "-jobs"]]}]
    assert dashboard_names(grouped.Jobs2) == [{"Fn::Join": ["", ["grouped-", region, "-jobs-2"]]}]


def test_a_group_whose_rows_pass_a_dashboards_limits_continues_on_another(grouped):
    region = {"Ref": "AWS::Region"}
    assert dashboard_names(grouped.Jobs3) == [
        {"Fn::Join": ["", ["grouped-", region, "-jobs-3"]]},
        {"Fn::Join": ["", ["grouped-", region, "-jobs-3_2"]]},
    ]
    for dashboard in resources(grouped.Jobs3, "AWS::CloudWatch::Dashboard").values():
        body = "".join(
            p for p in dashboard["Properties"]["DashboardBody"]["Fn::Join"][1] if isinstance(p, str)
        )
        assert body.count('"type":"metric"') == 5  # one job's row each, within the (patched) limit
    assert len(grouped.monitoring.dashboards) == 4  # the first, Jobs2's, and Jobs3's two


def test_dashboard_rows_are_counted_as_cloudwatch_counts_metrics():
    from aws_cdk import aws_cloudwatch as cw

    claimed, usage = mon.claimed_account_concurrency(), mon.concurrency_usage()
    # an expression and each metric it uses are rows of the widget's metrics (a metric shown and
    # used by an expression is one row)
    assert mon.metric_count([cw.GraphWidget(left=[mon.concurrency_utilization()])]) == 3
    assert mon.metric_count([cw.GraphWidget(left=[claimed], right=[mon.concurrency_utilization()])]) == 3
    assert mon.metric_count([cw.GraphWidget(left=[claimed, usage]), cw.TextWidget(markdown="x")]) == 2


def test_the_first_dashboard_shows_the_quota_given_as_context(grouped):
    [dashboard] = resources(grouped.root, "AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]["Fn::Join"][1]
    assert any('"value":3000' in p for p in body if isinstance(p, str))


def test_a_nested_groups_alarms_notify_the_root_topic_through_a_parameter(grouped):
    alarms = resources(grouped.Jobs2, "AWS::CloudWatch::Alarm")
    assert len(alarms) == 36
    [parameter] = {ref for a in alarms.values() for ref in ref_ids(a["Properties"]["AlarmActions"])}
    assert parameter in grouped.Jobs2["Parameters"]
    # the root stack passes its topic's ARN to the nested stack
    [nested] = [
        r
        for lid, r in resources(grouped.root, "AWS::CloudFormation::Stack").items()
        if lid.startswith("Jobs2NestedStack")
    ]
    topic = grouped.stack.resolve(grouped.monitoring.topic.node.default_child.logical_id)
    assert nested["Properties"]["Parameters"][parameter] == {"Ref": topic}


def test_a_group_with_more_alarms_than_a_rule_takes_gets_composites_over_whole_jobs(grouped):
    composites = resources(grouped.Jobs2, "AWS::CloudWatch::CompositeAlarm")
    by_name = {c["Properties"]["AlarmName"]: lid for lid, c in composites.items()}
    assert set(by_name) == {
        "grouped-jobs-2-any-alarm",
        "grouped-jobs-2-any-alarm-1",
        "grouped-jobs-2-any-alarm-2",
    }
    group = by_name["grouped-jobs-2-any-alarm"]
    parts = [by_name["grouped-jobs-2-any-alarm-1"], by_name["grouped-jobs-2-any-alarm-2"]]
    assert alarm_rule_refs(composites[group]) == set(parts)
    watched = [alarm_rule_refs(composites[p]) for p in parts]
    assert all(len(w) <= mon.CHILDREN_PER_RULE for w in watched)
    assert watched[0] | watched[1] == set(resources(grouped.Jobs2, "AWS::CloudWatch::Alarm"))
    # whole jobs: each job's alarms are in one part (its construct id starts the alarm's logical id)
    for job in (f"Job{n}Job" for n in range(6)):
        assert sum(any(lid.startswith(f"Monitoring{job}") for lid in w) for w in watched) == 1, job


def test_the_root_composite_watches_every_groups_composite(grouped):
    composites = resources(grouped.root, "AWS::CloudWatch::CompositeAlarm")
    by_name = {c["Properties"]["AlarmName"]: lid for lid, c in composites.items()}
    assert set(by_name) == {"grouped-any-alarm", "grouped-jobs-any-alarm"}
    rule = composites[by_name["grouped-any-alarm"]]["Properties"]["AlarmRule"]["Fn::Join"][1]
    watched = [part["Fn::GetAtt"] for part in rule if isinstance(part, dict)]
    first = [
        grouped.stack.resolve(a.node.default_child.logical_id)
        for a in (grouped.monitoring.account_alarm, grouped.monitoring.scheduler_alarm)
    ]
    assert watched[:3] == [[first[0], "Arn"], [first[1], "Arn"], [by_name["grouped-jobs-any-alarm"], "Arn"]]
    # a nested group's composite reaches the root through an output of its nested stack
    for (nested, output), part in zip(watched[3:], (2, 3), strict=True):
        assert nested.startswith(f"Jobs{part}NestedStack")
        template = getattr(grouped, f"Jobs{part}")
        [composite, _] = template["Outputs"][output.removeprefix("Outputs.")]["Value"]["Fn::GetAtt"]
        assert template["Resources"][composite]["Properties"]["AlarmName"] == f"grouped-jobs-{part}-any-alarm"
    assert len(watched) == 5


def test_the_groups_add_up_to_the_public_attributes(grouped):
    monitoring = grouped.monitoring
    assert sorted(monitoring.groups) == [1, 2, 3]
    assert set(monitoring.alarms) == {"alpha", "beta", *(f"job{n}" for n in range(6)), "gamma", "delta"}
    assert set(monitoring.level_alarms["alpha"]) == {"high"} and monitoring.level_alarms["beta"] == {}
    assert monitoring.dashboard is monitoring.dashboards[0] is monitoring.groups[1].dashboards[0]


def test_a_part_or_a_job_is_added_once():
    from aws_cdk import App, Stack

    stack = Stack(App(), "twice")
    monitoring = mon.Monitoring(stack, "Monitoring")
    monitoring.add_jobs({"alpha": Worker(stack, "alpha")}, part=1)
    with pytest.raises(ConfigurationError, match="part 1 were added already"):
        monitoring.add_jobs({"beta": Worker(stack, "beta")}, part=1)
    with pytest.raises(ConfigurationError, match=r"\['alpha'\] are in two groups"):
        monitoring.add_jobs({"alpha": SimpleNamespace()}, part=2)
    with pytest.raises(ConfigurationError, match="number the groups of jobs 1, 2, 3"):
        monitoring.add_jobs({}, part=0)


def test_more_groups_than_the_root_composite_can_watch_are_refused_with_the_fix():
    from aws_cdk import App, Stack

    stack = Stack(App(), "crowded")
    monitoring = mon.Monitoring(stack, "Monitoring")  # no workflows, no Scheduler DLQ: 1 stack-wide alarm
    room = mon.CHILDREN_PER_RULE - 1
    for part in range(1, room + 1):
        monitoring.add_jobs({f"job{part}": Worker(stack, f"job{part}")}, part=part)
    with pytest.raises(ConfigurationError, match="split the jobs over two stacks of their own"):
        monitoring.add_jobs({"one_more": Worker(stack, "one_more")}, part=room + 1)


# -- the account's quota: what reservations may take ----------------------------------------------


def quota_given(value: Any) -> int:
    from aws_cdk import App, Stack

    context = {} if value is None else {ACCOUNT_CONCURRENCY_CONTEXT: value}
    return account_concurrency_quota(Stack(App(context=context), "quota"))


def test_the_quota_defaults_to_lambdas_default_and_leaves_100_unreserved():
    assert quota_given(None) == DEFAULT_ACCOUNT_CONCURRENCY == 1000
    assert max_reserved_concurrency(quota_given(None)) == 900


@pytest.mark.parametrize("value", ["3000", 3000, " 3000 "])
def test_a_quota_given_as_context_changes_the_cap(value):
    # `-c lambdajobs:accountConcurrency=3000` gives a string, cdk.json a number
    assert quota_given(value) == 3000
    assert max_reserved_concurrency(quota_given(value)) == 2900


def test_a_new_accounts_small_quota_leaves_nothing_to_reserve():
    assert max_reserved_concurrency(quota_given("10")) == 0
    assert max_reserved_concurrency(100) == 0 and max_reserved_concurrency(101) == 1


@pytest.mark.parametrize("value", ["lots", "1.5", "0", 0, -5, True, 2.5, "-1"])
def test_a_bad_quota_is_refused_with_the_fix(value):
    with pytest.raises(ConfigurationError) as refused:
        quota_given(value)
    message = str(refused.value)
    assert ACCOUNT_CONCURRENCY_CONTEXT in message and "whole number" in message
    assert f"-c {ACCOUNT_CONCURRENCY_CONTEXT}=1000" in message and "\n" not in message
