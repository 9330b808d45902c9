"""Scheduled and delayed work on moto: one run per slot, the daily report, run_at."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from handlers.emails import SendEmail
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import get_spec
from tests.functional.conftest import Runner

SLOT = "2026-11-30T14:00:00Z"  # 09:00 in New York


def send_scheduled(stack, job: str, slot: str, times: int = 1) -> None:
    body = json.dumps(get_spec(job).scheduled_envelope(slot))
    for _ in range(times):
        aws.client("sqs").send_message(QueueUrl=stack.provisioned.queues[job].queue_url, MessageBody=body)


def queued_bodies(url: str) -> list[dict]:
    got = aws.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def test_the_same_scheduled_time_delivered_three_times_runs_once(stack, sender, clock):
    # GIVEN Scheduler delivering the 09:00 slot three times (at-least-once, with retries)
    send_scheduled(stack, "daily_report", SLOT, times=3)
    # WHEN the report worker drains its queue
    Runner(stack, "daily_report").drain()
    # THEN the report ran once: one record attempt, one email per recipient
    status = get_status(f"daily_report@{SLOT}")
    assert (status.state, status.attempts) == ("succeeded", 1)
    emails = queued_bodies(stack.provisioned.queues["send_email"].queue_url)
    assert [e["payload"]["to"] for e in emails] == ["ops@example.com"]


def test_a_different_slot_runs_again(stack, sender, clock):
    send_scheduled(stack, "daily_report", SLOT)
    send_scheduled(stack, "daily_report", "2026-12-01T14:00:00Z")
    Runner(stack, "daily_report").drain()
    assert get_status(f"daily_report@{SLOT}").state == "succeeded"
    assert get_status("daily_report@2026-12-01T14:00:00Z").state == "succeeded"


def test_daily_report_counts_the_day_writes_to_s3_and_emails_a_link(stack, sender, clock):
    # GIVEN a day of email jobs: three delivered, one dead (invalid address)
    for to in ("a@example.com", "b@example.com", "c@example.com", "not-an-address"):
        enqueue("send_email", SendEmail(to=to, subject="s", body="b"))
    emails = Runner(stack, "send_email")
    emails.drain()
    # WHEN the report for the next morning's slot runs
    clock.shift(3600)
    slot = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    send_scheduled(stack, "daily_report", slot)
    Runner(stack, "daily_report").drain()
    # THEN the figures are in the data bucket, under the job's own prefix
    day = datetime.now(UTC).astimezone(ZoneInfo("America/New_York")).strftime("%Y-%m-%d")
    key = f"daily_report/{day}.json"
    report = json.loads(aws.client("s3").get_object(Bucket=stack.provisioned.bucket, Key=key)["Body"].read())
    assert report["jobs"]["send_email"] == {"succeeded": 3, "dead": 1}
    assert report["jobs"]["transcode_video"] == {"succeeded": 0, "dead": 0}
    # AND the recipients get an email job with the link, which the email worker then sends
    emails.drain()
    assert sender.sent[-1] == "ops@example.com"
    status = get_status(f"daily_report@{slot}")
    assert status.result["report"] == f"s3://{stack.provisioned.bucket}/{key}"


def test_run_at_beyond_15_minutes_creates_a_one_time_schedule(stack, clock):
    # GIVEN a reminder for two days from now
    when = datetime.now(UTC) + timedelta(days=2)
    job_id = enqueue("send_email", SendEmail(to="a@example.com", subject="Reminder", body="b"), run_at=when)
    # THEN nothing is on the queue; a self-deleting one-time schedule targets the queue instead
    assert queued_bodies(stack.provisioned.queues["send_email"].queue_url) == []
    schedule = aws.client("scheduler").get_schedule(
        Name=one_time_schedule_name("send_email", job_id), GroupName=stack.provisioned.one_time_group
    )
    assert schedule["ScheduleExpression"] == f"at({when:%Y-%m-%dT%H:%M:%S})"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    target = schedule["Target"]
    assert target["Arn"] == stack.provisioned.queues["send_email"].queue_arn
    assert target["RoleArn"] == stack.provisioned.scheduler_role_arn
    assert target["DeadLetterConfig"]["Arn"] == stack.provisioned.scheduler_dlq_arn
    envelope = json.loads(target["Input"])
    assert (envelope["job"], envelope["id"], envelope["payload"]["subject"]) == (
        "send_email",
        job_id,
        "Reminder",
    )


def test_the_same_job_scheduled_twice_is_one_schedule(stack, clock):
    when = datetime.now(UTC) + timedelta(hours=3)
    payload = SendEmail(to="a@example.com", subject="s", body="b")
    enqueue("send_email", payload, job_id="remind-1", run_at=when)
    enqueue("send_email", payload, job_id="remind-1", run_at=when)
    listed = aws.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)["Schedules"]
    assert [s["Name"] for s in listed] == [one_time_schedule_name("send_email", "remind-1")]


def test_delay_beyond_15_minutes_also_uses_a_schedule(stack, clock):
    job_id = enqueue("send_email", SendEmail(to="a@example.com", subject="s", body="b"), delay_seconds=3600)
    schedule = aws.client("scheduler").get_schedule(
        Name=one_time_schedule_name("send_email", job_id), GroupName=stack.provisioned.one_time_group
    )
    assert schedule["ScheduleExpression"] == f"at({datetime.now(UTC) + timedelta(hours=1):%Y-%m-%dT%H:%M:%S})"


def test_run_at_within_15_minutes_waits_in_sqs(stack, clock):
    # GIVEN a job for 10 minutes from now (in another time zone, to show only the moment matters)
    when = (datetime.now(UTC) + timedelta(minutes=10)).astimezone(ZoneInfo("Asia/Tokyo"))
    job_id = enqueue("send_email", SendEmail(to="a@example.com", subject="s", body="b"), run_at=when)
    # THEN no schedule, and the message becomes visible only after 10 minutes
    assert (
        aws.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)["Schedules"] == []
    )
    url = stack.provisioned.queues["send_email"].queue_url
    clock.shift(599)
    assert queued_bodies(url) == []
    clock.shift(2)
    assert [b["id"] for b in queued_bodies(url)] == [job_id]


def test_run_at_in_the_past_runs_now(stack, clock):
    job_id = enqueue(
        "send_email",
        SendEmail(to="a@example.com", subject="s", body="b"),
        run_at=datetime.now(UTC) - timedelta(days=1),
    )
    clock.shift(1)
    assert [b["id"] for b in queued_bodies(stack.provisioned.queues["send_email"].queue_url)] == [job_id]


def test_naive_run_at_is_rejected_and_nothing_is_sent(stack):
    with pytest.raises(ValueError, match="time zone"):
        enqueue(
            "send_email", SendEmail(to="a@example.com", subject="s", body="b"), run_at=datetime(2030, 1, 1, 9)
        )
    with pytest.raises(ValueError, match="not both"):
        enqueue(
            "send_email",
            SendEmail(to="a@example.com", subject="s", body="b"),
            run_at=datetime(2030, 1, 1, tzinfo=UTC),
            delay_seconds=5,
        )
    assert queued_bodies(stack.provisioned.queues["send_email"].queue_url) == []


def test_scheduling_a_job_id_again_differently_is_refused(stack, clock):
    when = datetime.now(UTC) + timedelta(hours=3)
    payload = SendEmail(to="a@example.com", subject="s", body="b")
    enqueue("send_email", payload, job_id="remind-2", run_at=when)
    with pytest.raises(ValueError, match="already scheduled"):
        enqueue("send_email", payload, job_id="remind-2", run_at=when + timedelta(hours=1))
    with pytest.raises(ValueError, match="another payload"):
        enqueue(
            "send_email", SendEmail(to="b@example.com", subject="s", body="b"), job_id="remind-2", run_at=when
        )
