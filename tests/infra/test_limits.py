"""The limits docs/reference/limits.md states are recomputed here, from the template this session
synthesizes and the constants the layout fills stacks by: when either changes, this test fails and
prints the table the page must hold (between its `<!-- limits -->` markers)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from lambdajobs.cdk import layout
from lambdajobs.cdk.job_worker import MAX_ENVIRONMENT_CHARACTERS, environment_size
from lambdajobs.cdk.monitoring import CHILDREN_PER_RULE
from lambdajobs.cdk.stack import MAX_TARGET_QUEUES
from lambdajobs.runtime.spec import get_spec
from tests.infra.test_many_jobs import _policy_size
from tests.infra.test_stack import construct_prefix

PAGE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "limits.md"
#: CloudWatch list prices (USD per month, us-east-1, as of December 2026): a standard-resolution
#: alarm per metric it evaluates, a composite alarm, a dashboard (the account's first 10 alarm
#: metrics and 3 dashboards are free: not counted here).
PRICES = {"alarm_metric": 0.10, "composite_alarm": 0.50, "dashboard": 3.00}


def _job_resources(template: dict[str, Any], job: str) -> int:
    """The resources of one job in this project's template: its worker's and its alarms."""
    worker, alarms = construct_prefix(job)
    return sum(1 for lid in template["Resources"] if lid.startswith((worker, alarms)))


def _alarm_metrics(resource: dict[str, Any]) -> int:
    metrics = resource["Properties"].get("Metrics")
    return sum(1 for m in metrics if "MetricStat" in m) if metrics else 1


def _idle_usd(resources: list[dict[str, Any]]) -> float:
    usd = 0.0
    for r in resources:
        if r["Type"] == "AWS::CloudWatch::Alarm":
            usd += PRICES["alarm_metric"] * _alarm_metrics(r)
        elif r["Type"] == "AWS::CloudWatch::CompositeAlarm":
            usd += PRICES["composite_alarm"]
        elif r["Type"] == "AWS::CloudWatch::Dashboard":
            usd += PRICES["dashboard"]
    return round(usd, 2)


def limits_table(template: dict[str, Any], stack: Any) -> str:
    plain = _job_resources(template, "transcode_video")
    assert not get_spec("transcode_video").priorities and not get_spec("transcode_video").schedule
    levels = _job_resources(template, "send_email") - plain  # one priority level more
    assert len(get_spec("send_email").levels) == 2 and not get_spec("send_email").schedule
    cron = _job_resources(template, "daily_report") - plain
    jobs = sum(_job_resources(template, job) for job in stack.workers)
    shared = len(template["Resources"]) - jobs
    counted = layout.RESOURCES_PER_JOB + layout.RESOURCES_PER_QUEUE
    root_jobs = (layout.GROUP_RESOURCES - layout.ROOT_RESOURCES) // counted
    nested_jobs = layout.GROUP_RESOURCES // counted
    groups = CHILDREN_PER_RULE - 8  # the root composite's children: the groups, and 8 stack-wide alarms
    environments = [
        environment_size({k: v if isinstance(v, str) else "${Token[T.1]}" for k, v in variables.items()})
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        for variables in [r["Properties"]["Environment"]["Variables"]]
    ]
    policies = {
        name: _policy_size(
            template["Resources"][stack.resolve(policy.node.default_child.logical_id)]["Properties"][
                "PolicyDocument"
            ]
        )
        for name, policy in (("producer", stack.producer_policy), ("operator", stack.operator_policy))
    }
    job_ids = {
        lid for job in stack.workers for lid in template["Resources"] if lid.startswith(construct_prefix(job))
    }
    per_job_usd = _idle_usd(
        [r for lid, r in template["Resources"].items() if lid.startswith(construct_prefix("transcode_video"))]
    )
    per_level_usd = round(
        _idle_usd(
            [r for lid, r in template["Resources"].items() if lid.startswith(construct_prefix("send_email"))]
        )
        - per_job_usd,
        2,
    )
    stack_usd = _idle_usd([r for lid, r in template["Resources"].items() if lid not in job_ids])
    rows = [
        ("resources of a plain job", f"{plain} (the layout counts {counted}: a composite alarm at most)"),
        ("resources of each priority level above the lowest", str(levels)),
        ("resources of a cron job's schedule", str(cron)),
        ("resources of the stack itself, beside its jobs (this project's)", str(shared)),
        ("plain jobs in the stack itself", str(root_jobs)),
        ("plain jobs in each nested stack", str(nested_jobs)),
        (
            "nested stacks",
            f"{groups - 1}, so about {root_jobs + (groups - 1) * nested_jobs} plain jobs per app",
        ),
        (
            "largest function environment (this project's, at its bounds)",
            f"{max(environments)} of {MAX_ENVIRONMENT_CHARACTERS} characters, whatever the number of jobs",
        ),
        (
            "producer policy, operator policy",
            f"at most {policies['producer']} and {policies['operator']} of 6144 characters, "
            "whatever the number of jobs",
        ),
        (
            "jobs a job may enqueue",
            f"any number (above {MAX_TARGET_QUEUES} queues, by the stack's name pattern)",
        ),
        ("idle cost of a plain job (its alarms)", f"${per_job_usd:.2f} a month"),
        ("idle cost of a priority level above the lowest", f"${per_level_usd:.2f} a month"),
        (
            "idle cost of the stack beside its jobs (composites, dashboard, stack-wide alarms)",
            f"${stack_usd:.2f} a month",
        ),
    ]
    lines = ["| limit | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)]
    return "\n".join(lines)


def test_the_limits_page_states_what_the_template_holds(template, stack):
    expected = limits_table(template, stack)
    page = PAGE.read_text()
    found = re.search(r"<!-- limits -->\n(.*?)\n?<!-- /limits -->", page, re.S)
    assert found, f"{PAGE} has no <!-- limits --> block"
    assert found.group(1) == expected, "docs/reference/limits.md must hold:\n" + expected
