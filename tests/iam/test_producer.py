"""The producer API under a role that holds the template's producer policy and nothing else, knowing
only the stack's name (queues, table and scheduler settings come from the stack's SSM manifest)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from handlers.emails import SendEmail
from lambdajobs.runtime.producer import enqueue, enqueue_many, one_time_schedule_name
from lambdajobs.runtime.records import get_status, wait_for

EMAIL = SendEmail(to="ada@example.com", subject="Hi", body="Hello")


def test_producer_enqueues_and_reads_status(deployment, sender):
    producer = deployment.producer_config()
    # GIVEN a producer that knows only the stack's name
    # WHEN it enqueues one job and a batch of jobs
    one = enqueue("send_email", EMAIL, job_id="mail-1", config=producer)
    batch = enqueue_many(
        "send_email",
        [EMAIL.model_copy(update={"to": f"u{i}@example.com"}) for i in range(3)],
        config=producer,
    )
    # THEN everything was sent (SendMessage, SendMessageBatch) and reads pending until it runs
    assert batch.ok, batch.failed
    assert get_status(one, config=producer).state == "pending"
    # AND once send_email's worker ran them, the producer reads them succeeded (get_status, wait_for).
    # send_email is rate limited: on a loaded machine a job whose start comes too long after its slot
    # does not start then (the limit holds) and comes back a second later, so drain until all are done
    ids = [one, *batch.job_ids]
    deployment.runner("send_email").drain_until(lambda: all(get_status(j, config=producer).done for j in ids))
    assert wait_for(one, timeout_seconds=1, config=producer).state == "succeeded"
    assert {get_status(j, config=producer).state for j in batch.job_ids} == {"succeeded"}
    assert len(sender.sent) == 4
    actions = {c.action for c in deployment.calls_by(deployment.producer)}
    assert {"ssm:GetParameter", "sqs:SendMessage", "dynamodb:GetItem"} <= actions


def test_producer_schedules_a_job_two_hours_ahead(deployment, clock):
    producer = deployment.producer_config()
    run_at = datetime.now(UTC) + timedelta(hours=2)
    # WHEN the producer enqueues a job to run in 2 hours (beyond SQS's 15 minutes)
    job_id = enqueue("send_email", EMAIL, job_id="later-1", run_at=run_at, config=producer)
    # THEN a one-time schedule in the stack's one-time group holds it (CreateSchedule, and PassRole of
    # the one-time schedule role), targeting send_email's queue, sending as that role
    schedule = deployment.harness.client("scheduler").get_schedule(
        Name=one_time_schedule_name("send_email", job_id),
        GroupName=deployment.stack.provisioned.one_time_group,
    )
    assert schedule["ScheduleExpression"] == f"at({run_at:%Y-%m-%dT%H:%M:%S})"
    assert schedule["Target"]["Arn"] == deployment.stack.provisioned.queues["send_email"].queue_arn
    assert schedule["Target"]["RoleArn"] == deployment.role_arn(deployment.one_time_schedules)
    assert json.loads(schedule["Target"]["Input"])["id"] == "later-1"
    # AND nothing is in the queue yet
    assert deployment.stack.runner("send_email").depth() == 0


def test_producer_schedules_the_same_job_id_twice(deployment, clock):
    """Issue 10: the producer policy granted CreateSchedule only, and this was denied GetSchedule."""
    producer = deployment.producer_config()
    run_at = datetime.now(UTC) + timedelta(hours=2)
    # GIVEN a job scheduled 2 hours ahead
    enqueue("send_email", EMAIL, job_id="later-2", run_at=run_at, config=producer)
    # WHEN the producer retries: same job id, payload and time
    again = enqueue("send_email", EMAIL, job_id="later-2", run_at=run_at, config=producer)
    # THEN it is accepted once (the producer read the existing schedule: GetSchedule)
    assert again == "later-2"
    listed = deployment.harness.client("scheduler").list_schedules(
        GroupName=deployment.stack.provisioned.one_time_group
    )["Schedules"]
    assert [s["Name"] for s in listed] == [one_time_schedule_name("send_email", "later-2")]
