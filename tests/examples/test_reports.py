"""The example `daily_report` job: counts the day's jobs, writes them to S3, emails a link."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from handlers.emails import SendEmail
from lambdajobs import enqueue, get_status
from lambdajobs.runtime import aws
from lambdajobs.runtime.spec import get_spec


def send_scheduled(stack, job: str, slot: str) -> None:
    """What EventBridge Scheduler sends to the job's queue for the run at `slot`."""
    body = json.dumps(get_spec(job).scheduled_envelope(slot))
    aws.client("sqs").send_message(QueueUrl=stack.provisioned.queues[job].queue_url, MessageBody=body)


def test_daily_report_counts_the_day_writes_to_s3_and_emails_a_link(stack, sender, clock):
    # GIVEN a day of email jobs: three delivered, one dead (invalid address)
    for to in ("a@example.com", "b@example.com", "c@example.com", "not-an-address"):
        enqueue("send_email", SendEmail(to=to, subject="s", body="b"))
    emails = stack.runner("send_email")
    for _ in range(3):  # the provider's quota spaces them out: move the stopped clock along
        emails.drain()
        clock.shift(1)
    # WHEN the report for the next morning's slot runs
    clock.shift(3600)
    slot = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    send_scheduled(stack, "daily_report", slot)
    stack.runner("daily_report").drain()
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
