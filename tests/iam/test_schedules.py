"""Schedules deliver as their execution roles: a cron job's schedule as the role the template gives
it, a one-time schedule (`enqueue(..., run_at=...)`) as the one-time schedule role. The local
scheduler stands in for EventBridge Scheduler; only its delivery to the queue (what AWS makes with
the schedule's role) runs as that role."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from handlers.emails import SendEmail
from lambdajobs.local.scheduler import LocalScheduler, slot_text
from lambdajobs.runtime.producer import enqueue, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import ensure_loaded, get_spec


def test_a_cron_slot_is_delivered_as_its_schedule_role_and_the_report_runs(deployment, sender, clock):
    ensure_loaded(deployment.stack.jobs)
    spec = get_spec("daily_report")
    role = deployment.cron_schedule("daily_report")
    queue = deployment.stack.provisioned.queues["daily_report"]
    # GIVEN daily_report's schedule, and its next slot (09:00 in New York)
    scheduler = LocalScheduler(
        [spec],
        queue_urls={"daily_report": queue.queue_url},
        clock=lambda: datetime.now(UTC),
        config=deployment.scheduler_as_service(role),
    )
    [slot] = spec.schedule.next_fire_times(1, datetime.now(UTC))
    # WHEN the slot comes and Scheduler delivers the run, as the schedule's role
    clock.move_to(slot)
    sent = scheduler.run_due()
    # THEN the run is in daily_report's queue, sent by that role
    assert sent == [f"daily_report@{slot_text(slot)}"]
    assert [(c.action, c.resources) for c in deployment.calls_by(role)] == [
        ("sqs:SendMessage", (queue.queue_arn,))
    ]
    # AND daily_report's function runs it, and send_email's sends the report
    deployment.runner("daily_report").drain()
    assert get_status(sent[0]).state == "succeeded"
    deployment.runner("send_email").drain()
    assert sender.sent == ["ops@example.com"]


def test_a_one_time_schedule_is_delivered_as_the_one_time_role(deployment, sender, clock):
    group = deployment.stack.provisioned.one_time_group
    # GIVEN a job the producer scheduled 2 hours ahead
    run_at = datetime.now(UTC) + timedelta(hours=2)
    job_id = enqueue(
        "send_email",
        SendEmail(to="ada@example.com", subject="Hi", body="Hello"),
        run_at=run_at,
        config=deployment.producer_config(),
    )
    name = one_time_schedule_name("send_email", job_id)
    schedule = deployment.harness.client("scheduler").get_schedule(Name=name, GroupName=group)
    assert schedule["Target"]["RoleArn"] == deployment.role_arn(deployment.one_time_schedules)
    # WHEN its time comes and Scheduler delivers it, as the role the schedule names
    clock.move_to(run_at + timedelta(minutes=1))
    scheduler = LocalScheduler(
        [],
        queue_urls={},
        one_time_group=group,
        config=deployment.scheduler_as_service(deployment.one_time_schedules),
    )
    # THEN it is in send_email's queue (and the schedule is gone), and the job runs
    assert scheduler.run_due() == [job_id]
    queue_arn = deployment.stack.provisioned.queues["send_email"].queue_arn
    assert [(c.action, c.resources) for c in deployment.calls_by(deployment.one_time_schedules)] == [
        ("sqs:SendMessage", (queue_arn,))
    ]
    assert deployment.harness.client("scheduler").list_schedules(GroupName=group)["Schedules"] == []
    deployment.runner("send_email").drain()
    assert get_status(job_id).state == "succeeded"
    assert sender.sent == ["ada@example.com"]


@pytest.mark.parametrize("schedule", ["cron", "one-time"])
def test_a_run_scheduler_cannot_deliver_goes_to_the_scheduler_dlq_as_its_role(deployment, clock, schedule):
    # GIVEN a schedule's role and dead-letter queue: the template's for the cron job, the ones the
    # producer names for a one-time schedule
    if schedule == "cron":
        role = deployment.cron_schedule("daily_report")
        target = deployment.schedule_target("daily_report")
        dlq_arn = deployment.resolver.resolve(target["DeadLetterConfig"]["Arn"], "cron schedule target")
    else:
        role = deployment.one_time_schedules
        run_at = datetime.now(UTC) + timedelta(hours=2)
        email = SendEmail(to="ada@example.com", subject="Hi", body="Hello")
        job_id = enqueue("send_email", email, run_at=run_at, config=deployment.producer_config())
        created = deployment.harness.client("scheduler").get_schedule(
            Name=one_time_schedule_name("send_email", job_id),
            GroupName=deployment.stack.provisioned.one_time_group,
        )
        dlq_arn = created["Target"]["DeadLetterConfig"]["Arn"]
    assert dlq_arn == deployment.stack.provisioned.scheduler_dlq_arn
    # WHEN Scheduler gives up on a run and sends it to the dead-letter queue, as the schedule's role
    undeliverable = json.dumps({"reason": "target queue refused the message"})
    deployment.config_for(role, deployment.harness).client("sqs").send_message(
        QueueUrl=deployment.stack.provisioned.scheduler_dlq_url, MessageBody=undeliverable
    )
    # THEN it is there
    attributes = deployment.harness.client("sqs").get_queue_attributes(
        QueueUrl=deployment.stack.provisioned.scheduler_dlq_url,
        AttributeNames=["ApproximateNumberOfMessages"],
    )["Attributes"]
    assert attributes["ApproximateNumberOfMessages"] == "1"
