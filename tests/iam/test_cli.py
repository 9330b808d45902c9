"""The CLI's read paths under the principal the template intends for operators (its OperatorPolicy),
with that principal's credentials as boto3's defaults."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from handlers.emails import SendEmail
from lambdajobs.cli import app


@pytest.fixture
def cli(deployment):
    runner = CliRunner()

    def run(*args: str):
        with deployment.acting_as(deployment.operator):
            return runner.invoke(
                app,
                ["--stack", deployment.stack.stack, "--jobs", deployment.stack.jobs, *args],
                env={"COLUMNS": "250"},
            )

    return run


def kill_one_email(deployment) -> str:
    job_id = deployment.stack.enqueue("send_email", SendEmail(to="not-an-address", subject="s", body="b"))
    deployment.runner("send_email").drain()
    return job_id


def test_status_shows_a_job(cli, deployment, sender):
    # GIVEN a job that ran
    job_id = deployment.stack.enqueue("send_email", SendEmail(to="ada@example.com", subject="s", body="b"))
    deployment.runner("send_email").drain()
    # WHEN the operator asks for its status
    result = cli("status", job_id)
    # THEN it reads succeeded (manifest from SSM, the record from DynamoDB)
    assert result.exit_code == 0, result.output
    assert "succeeded" in result.output


def test_queues_shows_every_job(cli, deployment):
    # GIVEN a dead email job
    kill_one_email(deployment)
    # WHEN the operator lists the queues
    result = cli("queues")
    # THEN every job is there, send_email failing
    assert result.exit_code == 0, result.output
    assert "daily_report" in result.output and "transcode_video" in result.output
    assert "failing" in result.output


def test_dlq_list_shows_the_dead_letters(cli, deployment):
    # GIVEN a dead email job
    job_id = kill_one_email(deployment)
    # WHEN the operator lists send_email's dead letters
    result = cli("dlq", "list", "send_email")
    # THEN it is there with its reason
    assert result.exit_code == 0, result.output
    assert job_id in result.output and "PermanentError" in result.output


def test_cron_list_needs_no_aws_call(cli, deployment):
    # WHEN the operator lists the cron jobs
    result = cli("cron", "list")
    # THEN daily_report is there, read from the job declarations alone
    assert result.exit_code == 0, result.output
    assert "daily_report" in result.output and "America/New_York" in result.output
    assert deployment.calls_by(deployment.operator) == []


def test_dlq_redrive_and_purge_and_cron_trigger(cli, deployment):
    # GIVEN two dead email jobs
    kill_one_email(deployment)
    kill_one_email(deployment)
    # WHEN the operator sends them back to the job's queue, then purges what died again
    redriven = cli("dlq", "redrive", "send_email")
    # THEN both left the DLQ for the queue (receive, send, delete, visibility: all allowed)
    assert redriven.exit_code == 0, redriven.output
    assert "moved 2 of 2" in redriven.output
    runner = deployment.runner("send_email")
    assert runner.depth(dlq=True) == 0 and runner.depth() == 2
    runner.drain()  # invalid addresses: dead again at once
    assert runner.depth(dlq=True) == 2
    purged = cli("dlq", "purge", "send_email", "--yes")
    assert purged.exit_code == 0, purged.output
    assert runner.depth(dlq=True) == 0
    # AND a cron job can be run now (a send to its queue)
    triggered = cli("cron", "trigger", "daily_report")
    assert triggered.exit_code == 0, triggered.output
    assert deployment.runner("daily_report").depth() == 1


def test_enqueue_now_and_later(cli, deployment):
    # WHEN the operator enqueues a job now and one for two hours later (a one-time schedule)
    now = cli(
        "enqueue", "send_email", '{"to": "ada@example.com", "subject": "s", "body": "b"}', "--id", "op-1"
    )
    later = cli(
        "enqueue",
        "send_email",
        '{"to": "ada@example.com", "subject": "s", "body": "b"}',
        "--id",
        "op-2",
        "--run-at",
        "2099-01-01T09:00:00+00:00",
    )
    # THEN both are accepted under the operator's policy
    assert now.exit_code == 0 and now.output.strip() == "op-1", now.output
    assert later.exit_code == 0 and later.output.strip() == "op-2", later.output
    assert deployment.runner("send_email").depth() == 1


def test_every_priority_level_is_listed_redriven_and_purged(cli, deployment, sender):
    # GIVEN a dead email at high priority and one at normal priority
    for priority in ("high", "normal"):
        deployment.stack.enqueue(
            "send_email", SendEmail(to="not-an-address", subject="s", body="b"), priority=priority
        )
        deployment.runner("send_email", priority=priority).drain()
    # WHEN the operator looks: one row per level, and the dead letters of both levels
    queues = cli("queues")
    listed = cli("dlq", "list", "send_email")
    high_only = cli("dlq", "list", "send_email", "--priority", "high")
    # THEN
    assert queues.exit_code == 0, queues.output
    assert "send_email (high)" in queues.output and "send_email (normal)" in queues.output
    assert listed.exit_code == 0 and "2 shown" in listed.output, listed.output
    assert high_only.exit_code == 0 and "1 shown" in high_only.output, high_only.output
    # AND a redrive sends each level's dead letter back to its own level's queue
    redriven = cli("dlq", "redrive", "send_email")
    assert redriven.exit_code == 0 and "moved 2 of 2" in redriven.output, redriven.output
    high, normal = deployment.runner("send_email", priority="high"), deployment.runner("send_email")
    assert (high.depth(), normal.depth()) == (1, 1)
    # AND an unknown level is one line, and purge names the count of every level's DLQ
    bad = cli("dlq", "list", "send_email", "--priority", "urgent")
    assert bad.exit_code == 1 and "no priority 'urgent'" in bad.output and "Traceback" not in bad.output
    high.drain()
    normal.drain()
    purged = cli("dlq", "purge", "send_email", "--yes")
    assert purged.exit_code == 0 and "purged the 2 DLQs of send_email (2 messages)" in purged.output, (
        purged.output
    )


def test_the_operator_reads_a_workflow_and_redrives_the_workflow_dlq(cli, deployment, sender):
    from lambdajobs.runtime.workflow import chord, group, sig

    # GIVEN a chord of two emails whose notice SQS moved to the workflow DLQ
    mails = group(
        sig("send_email", SendEmail(to=f"u{i}@example.com", subject="s", body="b")) for i in range(2)
    )
    wid = chord(mails, sig("send_email", SendEmail(to="ops@example.com", subject="done", body="b"))).enqueue(
        workflow_id="ops-flow", config=deployment.harness
    )
    deployment.runner("send_email").drain()
    sqs, provisioned = deployment.harness.client("sqs"), deployment.stack.provisioned
    [notice] = sqs.receive_message(QueueUrl=provisioned.workflow_queue_url)["Messages"]
    sqs.send_message(QueueUrl=provisioned.workflow_dlq_url, MessageBody=notice["Body"])
    sqs.delete_message(QueueUrl=provisioned.workflow_queue_url, ReceiptHandle=notice["ReceiptHandle"])
    # WHEN the operator, with the OperatorPolicy, looks at the workflow and redrives the workflow DLQ
    shown = cli("workflow", wid)
    assert shown.exit_code == 0 and "running" in shown.output, shown.output
    redriven = cli("dlq", "redrive", "workflows")
    # THEN it is allowed, and the continuer (its role) sends the callback
    assert redriven.exit_code == 0 and "moved 1 of 1" in redriven.output, redriven.output
    deployment.continuer_runner().drain()
    deployment.runner("send_email").drain()
    assert "ops@example.com" in sender.sent


def test_signal_wakes_a_waiting_job_or_keeps_the_signal(cli, deployment, encoder, clock):
    """`lambdajobs signal` (issue 28) under the operator policy: the signal onto the job's record
    (UpdateItem), its wake-up to the job's queue (SendMessage), and the record read back (GetItem)."""
    from handlers.video import APPROVAL, TranscodeVideo
    from lambdajobs.runtime.records import get_status

    # GIVEN a transcode that waits for its review, and a job id that has not started
    video = TranscodeVideo(
        video_id="v9", source_uri="s3://in/v9.mov", formats=["720p"], review_timeout_seconds=600
    )
    job_id = deployment.stack.enqueue("transcode_video", video, job_id="review-me")
    deployment.runner("transcode_video").drain()
    assert get_status(job_id).state == "waiting_signal"
    # WHEN the operator signals both
    woke = cli("signal", job_id, APPROVAL, "--data", '{"approved": true, "reviewer": "ada"}')
    kept = cli("signal", "not-started", APPROVAL, "--data", '{"approved": false, "reviewer": "bob"}')
    # THEN the waiting one continues, and the other keeps its signal for when it waits
    assert woke.exit_code == 0, woke.output
    assert kept.exit_code == 0, kept.output
    deployment.runner("transcode_video").drain()
    status = get_status(job_id)
    assert status.state == "succeeded", status.error
    assert status.result["published"] is True and status.result["review"]["reviewer"] == "ada"
    assert get_status("not-started").state == "pending"
    actions = {c.action for c in deployment.calls_by(deployment.operator) if c.allowed}
    assert {"dynamodb:UpdateItem", "sqs:SendMessage", "dynamodb:GetItem"} <= actions


def test_the_issue_30_reads_under_the_operator_policy(cli, deployment, sender):
    """`search`, `jobs --since`, `status --json`, `dlq list` (from the records: Query on the index,
    BatchGetItem, the purge marker), `dlq show --job-id` and `dlq redrive --job-id` (receive,
    release, send, delete) as the operator."""
    import json

    # GIVEN a campaign's email that ran, and one that died
    fine = deployment.stack.enqueue(
        "send_email", SendEmail(to="ada@example.com", subject="s", body="b", campaign_id="spring")
    )
    deployment.runner("send_email").drain()
    dead = kill_one_email(deployment)
    # WHEN the operator reads them THEN every read is allowed
    found = cli("search", "send_email", "campaign_id", "spring", "--json")
    assert found.exit_code == 0, found.output
    assert [i["job_id"] for i in json.loads(found.stdout)["items"]] == [fine]
    recent = cli("jobs", "send_email", "--state", "dead", "--since", "1h", "--json")
    assert recent.exit_code == 0, recent.output
    assert dead in {i["job_id"] for i in json.loads(recent.stdout)["states"][0]["items"]}
    status = cli("status", dead, "--json")
    assert status.exit_code == 4 and json.loads(status.stdout)["state"] == "dead", status.output
    listed = cli("dlq", "list", "send_email", "--json")
    assert listed.exit_code == 0, listed.output
    assert dead in {i["job_id"] for q in json.loads(listed.stdout)["queues"] for i in q["items"]}
    shown = cli("dlq", "show", "send_email", "--job-id", dead)
    assert shown.exit_code == 0, shown.output
    moved = cli("dlq", "redrive", "send_email", "--job-id", dead)
    assert moved.exit_code == 0 and "moved 1 message" in moved.output, moved.output


def test_pause_and_resume_under_the_operator_policy(cli, deployment):
    """`lambdajobs pause` and `resume` as the operator: ListEventSourceMappings by the queue's ARN,
    UpdateEventSourceMapping on the stack's worker mapping (CloudFormation names it `<stack>-...`)."""
    import io
    import zipfile

    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    harness = deployment.harness.client("lambda")
    function = harness.create_function(
        FunctionName=f"{deployment.constructs.stack_name}-LambdaJobsSendEmailJobWorker-Cli123",
        Runtime="python3.12",
        Role=deployment.role_arn(deployment.worker("send_email")),
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )["FunctionArn"]
    queue_arn = deployment.stack.config.queue("send_email").arn
    harness.create_event_source_mapping(EventSourceArn=queue_arn, FunctionName=function, BatchSize=10)
    paused = cli("pause", "send_email", "--priority", "normal")
    assert paused.exit_code == 0 and "paused send_email" in paused.output, paused.output
    resumed = cli("resume", "send_email", "--priority", "normal")
    assert resumed.exit_code == 0 and "resumed send_email" in resumed.output, resumed.output
    assert {"lambda:ListEventSourceMappings", "lambda:UpdateEventSourceMapping"} <= deployment.allowed(
        deployment.operator
    )
