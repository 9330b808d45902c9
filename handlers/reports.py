"""Scheduled reports: `daily_report` runs at 09:00 New York time, writes the day's figures to the
stack's data bucket and emails its recipients a link (through `send_email` jobs)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

from handlers.emails import SendEmail
from lambdajobs import JobContext, bucket_prefix, count_finished, cron, enqueue_many

REPORT_ZONE = "America/New_York"


class DailyReport(BaseModel):
    recipients: list[str] = Field(min_length=1, max_length=100)
    lookback_hours: int = Field(default=24, ge=1, le=24 * 7)
    #: The jobs to count. Named here: each function ships only the job modules it needs, so the
    #: report does not see every job of the project.
    jobs: list[str] = Field(default=["daily_report", "send_email", "transcode_video"], min_length=1)


def report_key(slot: datetime) -> str:
    # Under the job's own prefix of the data bucket: the only place its role may write.
    return f"{bucket_prefix('daily_report')}{slot.astimezone(ZoneInfo(REPORT_ZONE)):%Y-%m-%d}.json"


def report_links(bucket: str, key: str, region: str) -> tuple[str, str]:
    """The S3 URI, and the console address for people with access to the account."""
    console = f"https://{region}.console.aws.amazon.com/s3/object/{bucket}?region={region}&prefix={key}"
    return f"s3://{bucket}/{key}", console


@cron(
    "cron(0 9 * * ? *)",
    timezone=REPORT_ZONE,
    payload={"recipients": ["ops@example.com"]},
    enqueues=("send_email",),
    uses=("bucket", "job_stats"),
    timeout_seconds=120,
    max_attempts=3,
)
def daily_report(payload: DailyReport, ctx: JobContext) -> dict[str, object]:
    slot = ctx.scheduled_at or datetime.now(UTC)
    since = slot - timedelta(hours=payload.lookback_hours)
    figures = {job: count_finished(job, since, slot) for job in payload.jobs}
    ctx.progress(50, "figures gathered")

    bucket, key = ctx.config.bucket_name(), report_key(slot)
    report = {"from": since.isoformat(), "to": slot.isoformat(), "jobs": figures}
    s3 = ctx.client("s3")
    s3.put_object(
        Bucket=bucket, Key=key, Body=json.dumps(report, indent=2).encode(), ContentType="application/json"
    )
    uri, console = report_links(bucket, key, s3.meta.region_name)

    day = f"{slot.astimezone(ZoneInfo(REPORT_ZONE)):%Y-%m-%d}"
    lines = [f"{job}: {c['succeeded']} succeeded, {c['dead']} dead" for job, c in sorted(figures.items())]
    body = "\n".join([f"lambdajobs daily report for {day}", "", *lines, "", f"Report: {uri}", console])
    emails = [
        SendEmail(to=r, subject=f"lambdajobs daily report {day}", body=body) for r in payload.recipients
    ]
    # One email per recipient and day: a retried or re-delivered report sends no duplicates.
    ids = [f"daily_report-{day}-{hashlib.sha256(r.encode()).hexdigest()[:16]}" for r in payload.recipients]
    results = enqueue_many("send_email", emails, job_ids=ids)
    if results.failed:
        raise RuntimeError(f"{len(results.failed)} report emails were not enqueued; retrying")
    return {"report": uri, "emails": len(emails), "jobs": figures}
