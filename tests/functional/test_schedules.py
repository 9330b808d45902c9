"""Scheduled and delayed work on moto: one run per slot, run_at."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import get_spec
from tests.jobs.messages import Message

SLOT = "2026-11-30T14:00:00Z"  # 09:00 in New York


def send_scheduled(stack, job: str, slot: str, times: int = 1) -> None:
    body = json.dumps(get_spec(job).scheduled_envelope(slot))
    for _ in range(times):
        aws.client("sqs").send_message(QueueUrl=stack.provisioned.queues[job].queue_url, MessageBody=body)


def queued_bodies(url: str) -> list[dict]:
    got = aws.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


def test_the_same_scheduled_time_delivered_three_times_runs_once(stack, clock):
    # GIVEN Scheduler delivering the 09:00 slot three times (at-least-once, with retries)
    send_scheduled(stack, "digest", SLOT, times=3)
    # WHEN the digest worker drains its queue
    stack.runner("digest").drain()
    # THEN the digest ran once: one record attempt, one message per recipient
    status = get_status(f"digest@{SLOT}")
    assert (status.state, status.attempts) == ("succeeded", 1)
    messages = queued_bodies(stack.provisioned.queues["deliver"].queue_url)
    assert [m["payload"]["to"] for m in messages] == ["ops@example.com"]


def test_a_different_slot_runs_again(stack, clock):
    send_scheduled(stack, "digest", SLOT)
    send_scheduled(stack, "digest", "2026-12-01T14:00:00Z")
    stack.runner("digest").drain()
    assert get_status(f"digest@{SLOT}").state == "succeeded"
    assert get_status("digest@2026-12-01T14:00:00Z").state == "succeeded"


def test_run_at_beyond_15_minutes_creates_a_one_time_schedule(stack, clock):
    # GIVEN a reminder for two days from now
    when = datetime.now(UTC) + timedelta(days=2)
    job_id = enqueue("deliver", Message(to="a@example.com", subject="Reminder", body="b"), run_at=when)
    # THEN nothing is on the queue; a self-deleting one-time schedule targets the queue instead
    assert queued_bodies(stack.provisioned.queues["deliver"].queue_url) == []
    schedule = aws.client("scheduler").get_schedule(
        Name=one_time_schedule_name("deliver", job_id), GroupName=stack.provisioned.one_time_group
    )
    assert schedule["ScheduleExpression"] == f"at({when:%Y-%m-%dT%H:%M:%S})"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["ActionAfterCompletion"] == "DELETE"
    target = schedule["Target"]
    assert target["Arn"] == stack.provisioned.queues["deliver"].queue_arn
    assert target["RoleArn"] == stack.provisioned.scheduler_role_arn
    assert target["DeadLetterConfig"]["Arn"] == stack.provisioned.scheduler_dlq_arn
    envelope = json.loads(target["Input"])
    assert (envelope["job"], envelope["id"], envelope["payload"]["subject"]) == (
        "deliver",
        job_id,
        "Reminder",
    )


def test_the_same_job_scheduled_twice_is_one_schedule(stack, clock):
    when = datetime.now(UTC) + timedelta(hours=3)
    payload = Message(to="a@example.com", subject="s", body="b")
    enqueue("deliver", payload, job_id="remind-1", run_at=when)
    enqueue("deliver", payload, job_id="remind-1", run_at=when)
    listed = aws.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)["Schedules"]
    assert [s["Name"] for s in listed] == [one_time_schedule_name("deliver", "remind-1")]


def test_delay_beyond_15_minutes_also_uses_a_schedule(stack, clock):
    job_id = enqueue("deliver", Message(to="a@example.com", subject="s", body="b"), delay_seconds=3600)
    schedule = aws.client("scheduler").get_schedule(
        Name=one_time_schedule_name("deliver", job_id), GroupName=stack.provisioned.one_time_group
    )
    assert schedule["ScheduleExpression"] == f"at({datetime.now(UTC) + timedelta(hours=1):%Y-%m-%dT%H:%M:%S})"


def test_run_at_within_15_minutes_waits_in_sqs(stack, clock):
    # GIVEN a job for 10 minutes from now (in another time zone, to show only the moment matters)
    when = (datetime.now(UTC) + timedelta(minutes=10)).astimezone(ZoneInfo("Asia/Tokyo"))
    job_id = enqueue("deliver", Message(to="a@example.com", subject="s", body="b"), run_at=when)
    # THEN no schedule, and the message becomes visible only after 10 minutes
    assert (
        aws.client("scheduler").list_schedules(GroupName=stack.provisioned.one_time_group)["Schedules"] == []
    )
    url = stack.provisioned.queues["deliver"].queue_url
    clock.shift(599)
    assert queued_bodies(url) == []
    clock.shift(2)
    assert [b["id"] for b in queued_bodies(url)] == [job_id]


def test_run_at_in_the_past_runs_now(stack, clock):
    job_id = enqueue(
        "deliver",
        Message(to="a@example.com", subject="s", body="b"),
        run_at=datetime.now(UTC) - timedelta(days=1),
    )
    clock.shift(1)
    assert [b["id"] for b in queued_bodies(stack.provisioned.queues["deliver"].queue_url)] == [job_id]


def test_naive_run_at_is_rejected_and_nothing_is_sent(stack):
    with pytest.raises(ValueError, match="time zone"):
        enqueue("deliver", Message(to="a@example.com", subject="s", body="b"), run_at=datetime(2030, 1, 1, 9))
    with pytest.raises(ValueError, match="not both"):
        enqueue(
            "deliver",
            Message(to="a@example.com", subject="s", body="b"),
            run_at=datetime(2030, 1, 1, tzinfo=UTC),
            delay_seconds=5,
        )
    assert queued_bodies(stack.provisioned.queues["deliver"].queue_url) == []


def test_scheduling_a_job_id_again_differently_is_refused(stack, clock):
    when = datetime.now(UTC) + timedelta(hours=3)
    payload = Message(to="a@example.com", subject="s", body="b")
    enqueue("deliver", payload, job_id="remind-2", run_at=when)
    with pytest.raises(ValueError, match="already scheduled"):
        enqueue("deliver", payload, job_id="remind-2", run_at=when + timedelta(hours=1))
    with pytest.raises(ValueError, match="another payload"):
        enqueue("deliver", Message(to="b@example.com", subject="s", body="b"), job_id="remind-2", run_at=when)
