"""Reads of the metrics the worker already emits (`worker.metrics`: namespace `settings.METRICS_NAMESPACE`,
dimensions service, job and stack, one EMF line per invocation): a job's counts without the job index.

The worker writes `JobSucceeded` and `JobDeadLettered` for every job, whatever else the stack turns
on; CloudWatch Logs turns the EMF lines into metrics at no write cost to the job. So a job that counts
finished jobs (`uses=("job_stats",)`, `records.count_finished`) reads these with one GetMetricData
call, and the other jobs pay nothing for it: the job index would cost every job of the stack a third
write unit (issue 31).

What the metrics can and cannot say (CloudWatch's own rules, see its GetMetricData reference):
- Standard-resolution metrics are kept per minute (per 5 minutes after 15 days, per hour after 63
  days): a job counts in the minute the worker flushed its metrics, the end of the invocation that ran
  it. A window is therefore counted in whole minutes: `finished_counts` rounds both ends down to the
  minute (to 5 minutes, or the hour, for windows that start that far back), so adjacent windows never
  count a job twice.
- A metric is visible a few minutes after the line is written (EMF extraction is asynchronous):
  a window that ends now may miss its last minutes.
- The metrics count events, not records: a job that died, was redriven and then succeeded counts once
  in each; a record whose last attempt crashed (SQS, not the worker, moved its message) counts in
  neither, as it has no entry in the job index either.

Runtime code, imported only by the calls that read metrics (never at a cold start); the CloudWatch
client is created on the first call (`StackConfig.client`).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lambdajobs.runtime.settings import METRICS_NAMESPACE, SERVICE_NAME

if TYPE_CHECKING:
    from lambdajobs.runtime.config import StackConfig

#: The worker's metric per finished state, as `count_finished` names the states.
FINISHED_METRICS = {"succeeded": "JobSucceeded", "dead": "JobDeadLettered"}

#: How CloudWatch keeps standard-resolution datapoints as they age: (age up to, seconds per datapoint).
#: A query must use a period that is a multiple of its start's resolution, or it gets no data.
RESOLUTIONS: tuple[tuple[timedelta, int], ...] = (
    (timedelta(days=15), 60),
    (timedelta(days=63), 300),
)
OLDEST_RESOLUTION_SECONDS = 3600


def job_dimensions(job: str, stack: str) -> list[dict[str, str]]:
    """The dimensions the worker's metrics carry (`Worker._handle` adds job and stack to Powertools'
    service): a metric is found only with all three, exactly."""
    return [
        {"Name": "service", "Value": SERVICE_NAME},
        {"Name": "job", "Value": job},
        {"Name": "stack", "Value": stack},
    ]


def metric_sums(
    job: str, names: list[str], since: datetime, until: datetime, period: int, config: StackConfig
) -> dict[str, dict[datetime, float]]:
    """Sums of the worker's metrics `names` for `job` in this stack per `period` seconds, by metric
    name and period start (UTC), over [since, until): one GetMetricData call (more only past its
    page of datapoints)."""
    dimensions = job_dimensions(job, config.stack)
    queries = [
        {
            "Id": f"m{i}",
            "Label": name,
            "MetricStat": {
                "Metric": {"Namespace": METRICS_NAMESPACE, "MetricName": name, "Dimensions": dimensions},
                "Period": period,
                "Stat": "Sum",
            },
        }
        for i, name in enumerate(names)
    ]
    found: dict[str, dict[datetime, float]] = {name: {} for name in names}
    paginator = config.client("cloudwatch").get_paginator("get_metric_data")
    for page in paginator.paginate(MetricDataQueries=queries, StartTime=since, EndTime=until):
        for result in page.get("MetricDataResults", []):
            series = found[names[int(result["Id"][1:])]]
            for at, value in zip(result.get("Timestamps", []), result.get("Values", []), strict=False):
                at = at.astimezone(UTC)
                series[at] = series.get(at, 0.0) + float(value)
    return found


def resolution_seconds(since: datetime, now: datetime | None = None) -> int:
    """The resolution CloudWatch still keeps for datapoints at `since` (60, 300 or 3600 seconds)."""
    age = (now or datetime.now(UTC)) - since
    return next((seconds for limit, seconds in RESOLUTIONS if age <= limit), OLDEST_RESOLUTION_SECONDS)


def window(since: datetime, until: datetime, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[since, until) as the metrics can count it: both ends rounded down to the resolution kept at
    `since` (the minute, for a window that starts within 15 days)."""
    since, until = _utc(since), _utc(until)
    grain = resolution_seconds(since, now)

    def down(moment: datetime) -> datetime:
        return datetime.fromtimestamp(int(moment.timestamp()) // grain * grain, UTC)

    return down(since), down(until)


def finished_counts(job: str, since: datetime, until: datetime, config: StackConfig) -> dict[str, int]:
    """How many of `job`'s runs succeeded and were dead-lettered in [since, until), counted from the
    worker's `JobSucceeded` and `JobDeadLettered` metrics by the minute the worker flushed them (see
    the module's notes): one GetMetricData call, one datapoint per metric (the window is one period)."""
    start, end = window(since, until)
    counts = dict.fromkeys(FINISHED_METRICS, 0)
    if end <= start:  # less than a minute (or the window is reversed): no whole minute to count
        return counts
    period = int((end - start).total_seconds())
    sums = metric_sums(job, list(FINISHED_METRICS.values()), start, end, period, config)
    for state, name in FINISHED_METRICS.items():
        counts[state] = round(sum(sums[name].values()))
    return counts


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
