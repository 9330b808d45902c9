"""Operations in the template: cdk-nag clean, the dashboard, alarms from the declarations."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from lambdajobs.cdk import nag_errors
from lambdajobs.runtime.spec import get_spec, load_jobs
from tests.infra.conftest import ALARM_EMAIL
from tests.infra.test_stack import logical_id, props, ref_ids, resources

JOBS = [spec.name for spec in load_jobs("handlers")]


def test_cdk_nag_reports_no_unsuppressed_error(synthesized):
    _, outdir, stack, assembly = synthesized
    assert nag_errors(assembly) == []
    [report_path] = Path(outdir).glob(f"AwsSolutions-*{stack.stack_name}-NagReport.csv")
    with report_path.open() as report:
        rows = list(csv.DictReader(report))
    assert rows, "the nag report is empty: did the checks run?"
    assert [
        r["Rule ID"] for r in rows if r["Compliance"] == "Non-Compliant" and r["Rule Level"] == "Error"
    ] == []
    # every suppression carries a reason that says something
    for row in rows:
        if row["Compliance"] == "Suppressed":
            assert len(row["Exception Reason"]) > 40, row


def test_suppressions_are_specific(template):
    accepted = set()
    for resource in template["Resources"].values():
        for entry in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", []):
            accepted.add(entry["id"])
            if entry["id"] in ("AwsSolutions-IAM4", "AwsSolutions-IAM5"):
                assert entry.get("applies_to"), f"{entry['id']} suppressed without naming what it accepts"
    assert accepted <= {
        "AwsSolutions-IAM4",
        "AwsSolutions-IAM5",
        "AwsSolutions-L1",
        "AwsSolutions-S1",
        "AwsSolutions-SQS3",
    }


def dashboard_body(template) -> str:
    [dashboard] = resources(template, "AWS::CloudWatch::Dashboard").values()
    return json.dumps(dashboard["Properties"]["DashboardBody"])


@pytest.mark.parametrize("job", JOBS)
def test_dashboard_has_a_row_per_job(template, stack, job):
    body = dashboard_body(template)
    worker = stack.workers[job]
    for title in ("worker", "duration p99 / concurrency", "jobs"):
        assert f'\\"title\\":\\"{job}: {title}\\"' in body
    # a queue and a DLQ graph per queue of the job, named with the priority when it has levels
    for level in worker.all_levels:
        label = f"{job} ({level.priority})" if get_spec(job).priorities else job
        for title in ("queue", "dead letters"):
            assert f'\\"title\\":\\"{label}: {title}\\"' in body
        assert logical_id(stack, level.queue) in body
    for metric in (
        "ApproximateNumberOfMessagesVisible",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateAgeOfOldestMessage",
        "Invocations",
        "Errors",
        "Throttles",
        "Duration",
        "ConcurrentExecutions",
    ):
        assert metric in body
    assert '\\"stat\\":\\"p99\\"' in body
    for name in (
        "JobSucceeded",
        "JobFailed",
        "JobRetried",
        "JobDeadLettered",
        "JobHandedBack",
        "JobRateLimited",
    ):
        # the stack is a dimension: staging and prod in one account keep their own figures
        dims = f'\\"job\\",\\"{job}\\",\\"service\\",\\"lambdajobs\\",\\"stack\\",\\"{stack.stack_name}\\"'
        assert f'[\\"LambdaJobs\\",\\"{name}\\",{dims}' in body
    assert logical_id(stack, worker.dead_letter_queue) in body and logical_id(stack, worker.function) in body


@pytest.mark.parametrize("job", JOBS)
def test_alarms_follow_the_declaration_and_notify_the_topic(template, stack, job):
    limits = get_spec(job).alarms
    alarms = {name: props(template, stack, alarm) for name, alarm in stack.monitoring.alarms[job].items()}
    expected = {
        "DeadLetters": ("ApproximateNumberOfMessagesVisible", limits.dlq_messages_above),
        "DeadLetterAge": ("ApproximateAgeOfOldestMessage", limits.dlq_oldest_message_age_seconds_above),
        "OldestMessage": ("ApproximateAgeOfOldestMessage", limits.oldest_message_age_seconds_above),
        "QueueDepth": ("ApproximateNumberOfMessagesVisible", limits.queue_depth_above),
        "WorkerErrors": ("Errors", limits.worker_errors_above),
        "WorkerThrottles": ("Throttles", limits.worker_throttles_above),
    }
    assert set(alarms) == set(expected)
    topic = logical_id(stack, stack.monitoring.topic)
    worker = stack.workers[job]
    for name, (metric, threshold) in expected.items():
        alarm = alarms[name]
        assert (alarm["MetricName"], alarm["Threshold"]) == (metric, threshold)
        assert alarm["ComparisonOperator"] == "GreaterThanThreshold"
        assert alarm["TreatMissingData"] == "notBreaching"
        assert ref_ids(alarm["AlarmActions"]) == {topic} and ref_ids(alarm["OKActions"]) == {topic}
    assert ref_ids(alarms["DeadLetters"]["Dimensions"]) == {logical_id(stack, worker.dead_letter_queue)}
    assert ref_ids(alarms["QueueDepth"]["Dimensions"]) == {logical_id(stack, worker.queue)}
    assert ref_ids(alarms["WorkerErrors"]["Dimensions"]) == {logical_id(stack, worker.function)}
    # dead letters are looked at before the DLQ's 14 days delete them; throttles use up attempts
    assert ref_ids(alarms["DeadLetterAge"]["Dimensions"]) == {logical_id(stack, worker.dead_letter_queue)}
    # its age counts from the move to the DLQ, its expiry from the first enqueue (up to 4 days earlier)
    from lambdajobs.runtime.settings import DLQ_RETENTION_SECONDS, QUEUE_RETENTION_SECONDS

    age = limits.dlq_oldest_message_age_seconds_above
    assert age is not None and age + QUEUE_RETENTION_SECONDS <= DLQ_RETENTION_SECONDS - 86400
    assert ref_ids(alarms["WorkerThrottles"]["Dimensions"]) == {logical_id(stack, worker.function)}


def test_undelivered_scheduled_runs_alarm_and_show(template, stack):
    alarm = props(template, stack, stack.monitoring.scheduler_alarm)
    assert alarm["MetricName"] == "ApproximateNumberOfMessagesVisible" and alarm["Threshold"] == 0
    assert ref_ids(alarm["Dimensions"]) == {logical_id(stack, stack.scheduler_dlq)}
    assert ref_ids(alarm["AlarmActions"]) == {logical_id(stack, stack.monitoring.topic)}
    assert "scheduler: undelivered runs" in dashboard_body(template)


def test_defaults_and_a_per_job_override():
    assert get_spec("send_email").alarms.oldest_message_age_seconds_above == 900
    assert get_spec("send_email").alarms.queue_depth_above == 1000
    assert get_spec("transcode_video").alarms.queue_depth_above == 100


def test_alarm_topic_requires_tls_and_mails_nobody(template, stack):
    # the alarm email is on the email topic, which only the root composite alarm notifies
    # (tests/infra/test_monitoring.py): the alarm topic is for machines
    topic = logical_id(stack, stack.monitoring.topic)
    [subscription] = resources(template, "AWS::SNS::Subscription").values()
    assert subscription["Properties"]["Endpoint"] == ALARM_EMAIL
    assert subscription["Properties"]["TopicArn"] != {"Ref": topic}
    [policy] = [
        p
        for p in resources(template, "AWS::SNS::TopicPolicy").values()
        if {"Ref": topic} in p["Properties"]["Topics"]
    ]
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
    )


def test_cloudwatch_may_publish_this_accounts_alarms_to_the_topic(template, stack):
    # The TLS-only policy replaces the topic's default policy: without an explicit allow, CloudWatch
    # is refused (sns:Publish not authorized) and no alarm is ever delivered.
    topic = logical_id(stack, stack.monitoring.topic)
    [policy] = [
        p
        for p in resources(template, "AWS::SNS::TopicPolicy").values()
        if {"Ref": topic} in p["Properties"]["Topics"]
    ]
    [allow] = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert allow["Action"] == "sns:Publish" and allow["Resource"] == {"Ref": topic}
    assert allow["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    source = json.dumps(allow["Condition"]["ArnLike"]["aws:SourceArn"])
    assert ":cloudwatch:" in source and ":alarm:*" in source and "AWS::AccountId" in source


def test_cfn_lint_finds_nothing_in_the_template(synthesized, tmp_path):
    import subprocess
    import sys

    template = tmp_path / "template.json"
    template.write_text(json.dumps(synthesized[0]))
    # W3005: CDK writes a DependsOn that a GetAtt already implies (harmless, not ours to change)
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    out = subprocess.run(
        [str(cfn_lint), "--ignore-checks", "W3005", "--", str(template)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr
