"""Each job's worker under its own function's role, as the template defines it: the event source
mapping's polling, the job record, retries, the dead-letter queue, and what a job declared
(`enqueues`, `uses`, and `enqueue(..., run_at=...)` from a job)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from handlers.emails import SendEmail
from handlers.reports import report_key
from handlers.video import TranscodeVideo
from lambdajobs.runtime import lifecycle
from lambdajobs.runtime.config import StackConfig, using
from lambdajobs.runtime.producer import enqueue, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE
from tests.iam.deployment import RoleRunner


def test_send_email_succeeds_under_its_role(deployment, sender):
    # GIVEN an email job in send_email's queue
    job_id = deployment.stack.enqueue(
        "send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello")
    )
    # WHEN send_email's function takes it, with its role
    deployment.runner("send_email").drain()
    # THEN the email is sent and the record reads succeeded
    assert sender.sent == ["ada@example.com"]
    status = get_status(job_id)
    assert status.state == "succeeded" and status.attempts == 1
    # AND every call was made by the function's role (polling, record, delete)
    actions = {c.action for c in deployment.calls_by(deployment.worker("send_email"))}
    assert {"sqs:ReceiveMessage", "sqs:DeleteMessage", "dynamodb:UpdateItem"} <= actions


def test_send_email_that_misses_its_rate_limit_slot_gives_its_lock_back_and_runs_later(
    deployment, sender, monkeypatch
):
    # GIVEN an email job whose first run would start after its rate-limit slot's allowance (a loaded
    # machine once made one: the lock's write took longer than the allowance), injected by deciding
    # that first run with a start-by already past
    from lambdajobs.runtime import ratelimit
    from lambdajobs.runtime.gates import Run

    decided = {"runs": 0}
    start_on = ratelimit._start_on

    def first_start_too_late(slot, now_us, room, *, fresh=False):
        decided["runs"] += 1
        if decided["runs"] == 1:
            return Run(start_by_us=now_us - 1)
        return start_on(slot, now_us, room, fresh=fresh)

    monkeypatch.setattr(ratelimit, "_start_on", first_start_too_late)
    job_id = deployment.stack.enqueue(
        "send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello")
    )
    # WHEN send_email's function takes it, with its role, and again once the copy is back
    runner = deployment.runner("send_email")
    runner.drain()
    # THEN the first run did not start (no email): its record waits for a slot, no attempt spent
    first = get_status(job_id)
    assert sender.sent == [] and (first.state, first.attempts) == ("waiting", 0), first
    runner.drain_until(lambda: get_status(job_id).state == "succeeded")
    # AND the copy ran it once, on a fresh slot, its attempt unspent: every call under the role
    assert sender.sent == ["ada@example.com"] and decided["runs"] == 2
    status = get_status(job_id)
    assert status.state == "succeeded" and status.attempts == 1
    actions = {c.action for c in deployment.calls_by(deployment.worker("send_email"))}
    assert {"sqs:SendMessage", "sqs:DeleteMessage", "dynamodb:UpdateItem"} <= actions, sorted(actions)


def test_send_email_retries_after_its_backoff_not_the_visibility_timeout(deployment, sender, clock):
    # GIVEN a provider that times out once
    sender.failures = 1
    job_id = deployment.stack.enqueue(
        "send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello")
    )
    runner = deployment.runner("send_email")
    # WHEN the first attempt fails
    runner.drain()
    assert get_status(job_id).state == "retrying"
    # THEN the worker set the retry delay itself (ChangeMessageVisibility, with its role): the message
    # is back after the first backoff (10 s at most), long before the queue's visibility timeout
    assert runner.spec.backoff.ceiling(1) < runner.spec.visibility_timeout_seconds
    clock.shift(runner.spec.backoff.ceiling(1) + 1)
    runner.drain()
    status = get_status(job_id)
    assert status.state == "succeeded" and status.attempts == 2
    assert sender.sent == ["ada@example.com"]
    actions = {c.action for c in deployment.calls_by(deployment.worker("send_email"))}
    assert "sqs:ChangeMessageVisibility" in actions


def test_send_email_at_high_priority_runs_waits_and_dead_letters_on_its_own_level(deployment, sender, clock):
    # GIVEN a producer with the stack's producer policy sending three emails at high priority
    with using(deployment.producer_config()):
        ids = [
            enqueue("send_email", SendEmail(to=to, subject="Hi", body="Hello"), priority="high")
            for to in ("ada@example.com", "bob@example.com", "not-an-address")
        ]
    high = deployment.runner("send_email", priority="high")
    assert high.depth() == 3 and deployment.runner("send_email").depth() == 0
    # WHEN send_email's function takes them from the high queue, with its role: one sent now, one
    # handed back to the high queue to wait for the provider's quota (the stopped clock), one invalid
    high.drain()
    clock.shift(1)
    high.drain()
    # THEN both good ones were sent, the invalid one is in the high level's DLQ, nothing elsewhere
    assert sorted(sender.sent) == ["ada@example.com", "bob@example.com"]
    assert [get_status(i).state for i in ids] == ["succeeded", "succeeded", "dead"]
    assert high.depth() == 0 and high.depth(dlq=True) == 1
    assert deployment.runner("send_email").depth(dlq=True) == 0
    calls = deployment.calls_by(deployment.worker("send_email"))
    high_queue = deployment.stack.provisioned.queues["send_email@high"]
    sent_to = {r for c in calls if c.action == "sqs:SendMessage" and c.allowed for r in c.resources}
    assert {high_queue.queue_arn, high_queue.dlq_arn} <= sent_to


def test_send_email_moves_an_invalid_address_to_its_dlq(deployment, sender):
    # GIVEN an email job whose address can never work
    job_id = deployment.stack.enqueue(
        "send_email", SendEmail(to="not-an-address", subject="Hi", body="Hello")
    )
    runner = deployment.runner("send_email")
    # WHEN send_email's function takes it (a run that misses its rate-limit slot on a busy machine is
    # handed back for a second, using no attempt: drain until that copy is taken too)
    runner.drain()
    for _ in range(20):
        if runner.depth() == 0:
            break
        time.sleep(0.25)
        runner.drain()
    # THEN it is in the DLQ at once (SendMessage to the DLQ, with the function's role), with its reason
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1
    [letter] = runner.dlq_messages()
    assert letter["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "PermanentError"
    # AND its record reads dead; nothing was sent
    assert get_status(job_id).state == "dead"
    assert sender.sent == []


def test_send_email_hands_back_a_message_whose_lock_is_held_under_its_role(deployment, sender, clock):
    # GIVEN an email whose job record is locked by another invocation for 60 more seconds
    job_id = deployment.stack.enqueue(
        "send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello"), job_id="held-1"
    )
    config = deployment.stack.config
    now = time.time()
    lifecycle.acquire(
        config.client("dynamodb"),
        config.table_name(),
        job_id,
        "send_email",
        expiration=int(now) + 3600,
        in_progress_expiration=int(now * 1000) + 60_000,
    )
    runner = deployment.runner("send_email")
    # WHEN send_email's function takes it
    runner.drain()
    # THEN it sent a copy back to its own queue (SendMessage, with its role), ran nothing, and
    # dead-lettered nothing
    sends = [c for c in deployment.calls_by(deployment.worker("send_email")) if c.action == "sqs:SendMessage"]
    assert sends and all(c.allowed for c in sends)
    assert any(runner.queues.queue_arn in c.resources for c in sends)
    assert sender.sent == [] and runner.depth(dlq=True) == 0
    # AND once the lock has expired the copy runs the job
    clock.shift(61)
    runner.drain()
    assert get_status(job_id).state == "succeeded" and sender.sent == ["ada@example.com"]


def test_transcode_video_reports_progress_under_its_role(deployment, encoder):
    # GIVEN a video to encode in two formats
    job_id = deployment.stack.enqueue(
        "transcode_video",
        TranscodeVideo(video_id="v1", source_uri="s3://videos/v1.mov", formats=["720p", "1080p"]),
    )
    # WHEN transcode_video's function takes it, with its role
    deployment.runner("transcode_video").drain()
    # THEN both stages ran, progress reached 100 and the record reads succeeded
    status = get_status(job_id)
    assert status.state == "succeeded"
    assert status.progress == 100.0 and status.progress_message == "1080p done"
    assert status.result["outputs"] == {
        "720p": "s3://videos/v1-720p.mp4",
        "1080p": "s3://videos/v1-1080p.mp4",
    }


def test_daily_report_reads_stats_writes_its_prefix_and_enqueues_emails(deployment, sender, clock):
    # GIVEN a finished email job (something to count)
    deployment.stack.enqueue("send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello"))
    deployment.runner("send_email").drain()
    clock.shift(3600)
    # AND the report of the current slot in daily_report's queue, for two recipients
    slot = datetime.now(UTC).replace(second=0, microsecond=0)
    deployment.stack.enqueue(
        "daily_report", {"recipients": ["ops@example.com", "cto@example.com"]}, job_id="report-1"
    )
    # WHEN daily_report's function runs it with its role: GetMetricData of the worker's metrics (uses
    # job_stats; the job index is off, and TestStack put the email worker's EMF metrics in CloudWatch
    # as CloudWatch Logs would), a PutObject under its prefix of the data bucket (uses bucket), and
    # SendMessageBatch to send_email's queue (enqueues send_email)
    deployment.runner("daily_report").drain()
    # THEN the report succeeded and counted the email
    status = get_status("report-1")
    assert status.state == "succeeded", status.error
    assert status.result["jobs"]["send_email"] == {"succeeded": 1, "dead": 0}
    # AND the report is in the data bucket, under the job's prefix
    key = report_key(slot)
    stored = deployment.harness.client("s3").get_object(Bucket=deployment.stack.provisioned.bucket, Key=key)
    assert json.loads(stored["Body"].read())["jobs"]["send_email"] == {"succeeded": 1, "dead": 0}
    # AND the recipients' emails were enqueued, and send_email's function sends them (the provider's
    # quota spaces them: the stopped clock moves on for the second)
    emails = deployment.runner("send_email")
    emails.drain()
    clock.shift(1)
    emails.drain()
    assert sorted(sender.sent) == ["ada@example.com", "cto@example.com", "ops@example.com"]
    actions = {c.action for c in deployment.calls_by(deployment.worker("daily_report"))}
    assert {"cloudwatch:GetMetricData", "s3:PutObject", "sqs:SendMessage"} <= actions
    assert "dynamodb:Query" not in actions  # the counts read no job index: it is off


def test_daily_report_without_the_metrics_grant_cannot_count(deployment, clock):
    # GIVEN daily_report's role without its cloudwatch:GetMetricData statement (uses job_stats)
    trimmed = deployment.create(
        deployment.worker("daily_report").without(lambda s: "cloudwatch:GetMetricData" in str(s["Action"]))
    )
    environment = StackConfig.from_environment(deployment.worker_environment("daily_report"))
    runner = RoleRunner(deployment.stack, "daily_report", deployment.config_for(trimmed, environment))
    deployment.stack.enqueue("daily_report", {"recipients": ["ops@example.com"]}, job_id="report-2")
    # WHEN its function runs the report
    runner.drain()
    # THEN counting is denied (the grant the template gives is the one the count needs), and the
    # report is retried, not written
    denied = deployment.recorder.take_denials()
    assert "cloudwatch:GetMetricData" in {d.action for d in denied}
    assert get_status("report-2").state == "retrying"


def test_daily_report_enqueues_an_email_two_hours_ahead(deployment, clock):
    """Issue 10: worker roles had no scheduler permissions, PassRole or scheduler variables, and this
    was denied ssm:GetParameter of the stack manifest (its fallback for the missing variables)."""
    # GIVEN daily_report's function: configured by its environment, running with its role
    config = deployment.worker_config("daily_report")
    run_at = datetime.now(UTC) + timedelta(hours=2)
    # WHEN a job running there enqueues send_email (which it declares in `enqueues`) 2 hours ahead
    with using(config):
        job_id = enqueue(
            "send_email", SendEmail(to="ada@example.com", subject="Hi", body="Hello"), run_at=run_at
        )
    # THEN a one-time schedule in the stack's one-time group will send it to send_email's queue, as the
    # one-time schedule role
    schedule = deployment.harness.client("scheduler").get_schedule(
        Name=one_time_schedule_name("send_email", job_id),
        GroupName=deployment.stack.provisioned.one_time_group,
    )
    assert schedule["ScheduleExpression"] == f"at({run_at:%Y-%m-%dT%H:%M:%S})"
    assert schedule["Target"]["Arn"] == deployment.stack.provisioned.queues["send_email"].queue_arn
    assert schedule["Target"]["RoleArn"] == deployment.role_arn(deployment.one_time_schedules)


def test_send_email_in_the_light_record_mode_runs_under_its_role(deployment, sender, clock):
    # GIVEN send_email declared in the light record mode (`@job(record_mode="light")`): the same queue,
    # function and role, whose worker reads the record eventually consistent and writes it once
    from dataclasses import replace

    from lambdajobs.runtime.spec import get_spec
    from lambdajobs.testing import isolated_registry

    with isolated_registry(keep=True) as registry:
        registry.add(replace(get_spec("send_email"), record_mode="light"))
        runner = deployment.runner("send_email")
        mail = SendEmail(to="ada@example.com", subject="Hi", body="Hello")

        def settle() -> None:  # (send_email's rate limit hands a job back until its slot: move past)
            for _ in range(4):
                runner.drain()
                clock.shift(runner.spec.backoff.ceiling(1) + 1)

        # WHEN a first attempt succeeds (a PutItem), a job fails then succeeds (UpdateItems), and a
        # duplicate of the first is skipped by the read, all with the function's role
        first = deployment.stack.enqueue("send_email", mail, job_id="light-1")
        settle()
        sender.failures = 1
        flaky = deployment.stack.enqueue("send_email", mail, job_id="light-2")
        settle()
        deployment.stack.enqueue("send_email", mail, job_id="light-1")
        settle()
    # THEN each job ran once to success, and every call was allowed to the function's role
    assert sender.sent == ["ada@example.com", "ada@example.com"]
    assert [(get_status(i).state, get_status(i).attempts) for i in (first, flaky)] == [
        ("succeeded", 1),
        ("succeeded", 2),
    ]
    calls = deployment.calls_by(deployment.worker("send_email"))
    assert all(c.allowed for c in calls), [c for c in calls if not c.allowed]
    actions = {c.action for c in calls}
    assert {"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "sqs:DeleteMessage"} <= actions
