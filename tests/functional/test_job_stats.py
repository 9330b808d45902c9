"""`count_finished` without the job index (issue 31): on AWS it reads the worker's own CloudWatch
metrics, JobSucceeded and JobDeadLettered, by the minute; with the index on it reads the index.

TestStack puts the worker's EMF lines into moto's CloudWatch as CloudWatch Logs extracts them
(`lambdajobs.local.emf`), so a job run here is counted from its metrics as on AWS."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lambdajobs.runtime import aws, job_metrics
from lambdajobs.runtime.records import count_finished
from lambdajobs.runtime.settings import METRICS_NAMESPACE, SERVICE_NAME
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE

NOON = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)  # the `clock` fixture's time


def mail(to: str) -> dict[str, str]:
    return {"to": to, "subject": "News", "body": "Hi"}


def calls(service: str) -> list[str]:
    """The operations of `service` made from now on (the shared client's)."""
    made: list[str] = []
    aws.client(service).meta.events.register(
        f"before-call.{service}", lambda model, **_: made.append(model.name)
    )
    return made


def put(
    stack: TestStack, name: str, at: datetime, value: float = 1, *, job: str = "deliver", **dims: str
) -> None:
    """A datapoint of the worker's metric `name`, with the dimensions its EMF lines declare."""
    dimensions = {"service": SERVICE_NAME, "job": job, "stack": stack.stack, **dims}
    aws.client("cloudwatch").put_metric_data(
        Namespace=METRICS_NAMESPACE,
        MetricData=[
            {
                "MetricName": name,
                "Dimensions": [{"Name": k, "Value": v} for k, v in dimensions.items()],
                "Timestamp": at,
                "Value": value,
                "Unit": "Count",
            }
        ],
    )


def test_with_the_index_off_the_jobs_that_ran_are_counted_from_their_metrics(sink, clock):
    # GIVEN a stack with the job index off (the default) and three deliveries: two sent, one dead
    with TestStack(JOBS_PACKAGE, stack="stats") as stack:
        assert stack.provisioned.job_index == "off"
        for to in ("a@example.com", "not-an-address", "b@example.com"):
            stack.enqueue("deliver", mail(to))
        stack.runner("deliver").drain()
        clock.shift(120)
        dynamodb, cloudwatch = calls("dynamodb"), calls("cloudwatch")
        # WHEN the day is counted
        counted = count_finished("deliver", NOON - timedelta(days=1), NOON + timedelta(minutes=1))
        # THEN the worker's metrics say it, in one GetMetricData call and no read of the job table
        assert counted == {"succeeded": 2, "dead": 1}
        assert cloudwatch == ["GetMetricData"] and dynamodb == []
        # AND another job's counts are its own
        assert count_finished("encode", NOON - timedelta(days=1), NOON + timedelta(minutes=1)) == {
            "succeeded": 0,
            "dead": 0,
        }


def test_the_counted_dimensions_are_the_ones_the_worker_declares(sink, clock, capsys):
    # GIVEN the EMF line the worker prints for a delivery (what CloudWatch Logs turns into metrics)
    with TestStack(JOBS_PACKAGE, stack="stats") as stack:
        capsys.readouterr()
        stack.enqueue("deliver", mail("a@example.com"))
        stack.runner("deliver").drain()
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    [line] = [doc for doc in lines if "JobSucceeded" in doc]
    [directive] = line["_aws"]["CloudWatchMetrics"]
    # THEN its namespace and its one dimension set are what count_finished asks GetMetricData for
    asked = job_metrics.job_dimensions("deliver", "stats")
    assert directive["Namespace"] == METRICS_NAMESPACE
    assert [sorted(names) for names in directive["Dimensions"]] == [sorted(d["Name"] for d in asked)]
    assert {d["Name"]: line[d["Name"]] for d in asked} == {d["Name"]: d["Value"] for d in asked}
    assert {m["Name"] for m in directive["Metrics"]} >= {"JobSucceeded"}


def test_a_window_counts_the_minutes_in_it(clock):
    clock.move_to(NOON + timedelta(hours=2))
    with TestStack(JOBS_PACKAGE, stack="stats") as stack:
        # GIVEN finished jobs around the hour [12:00, 13:00): CloudWatch keeps each by its minute
        put(stack, "JobSucceeded", NOON - timedelta(seconds=1))  # 11:59: before
        put(stack, "JobSucceeded", NOON)  # 12:00: in
        put(stack, "JobDeadLettered", NOON + timedelta(minutes=30, seconds=10))  # in
        put(stack, "JobSucceeded", NOON + timedelta(minutes=59, seconds=59), value=2)  # 12:59: in
        put(stack, "JobSucceeded", NOON + timedelta(hours=1), value=4)  # 13:00: after
        # AND metrics of another stack and another job, and a retry (JobFailed): none of them counted
        put(stack, "JobSucceeded", NOON + timedelta(minutes=5), of="staging")
        put(stack, "JobSucceeded", NOON + timedelta(minutes=5), job="encode")
        put(stack, "JobFailed", NOON + timedelta(minutes=5))
        hour = NOON, NOON + timedelta(hours=1)
        # THEN the hour holds what finished in its minutes, the minute at its end excluded
        assert count_finished("deliver", *hour) == {"succeeded": 3, "dead": 1}
        # AND a window's ends are rounded down to the minute: 12:00:30 to 13:00:30 is the same hour
        late = [t + timedelta(seconds=30) for t in hour]
        assert count_finished("deliver", *late) == {"succeeded": 3, "dead": 1}
        # AND adjacent windows count each job once
        before = count_finished("deliver", NOON - timedelta(hours=1), NOON)
        after = count_finished("deliver", NOON + timedelta(hours=1), NOON + timedelta(hours=2))
        assert before == {"succeeded": 1, "dead": 0} and after == {"succeeded": 4, "dead": 0}
        # AND a window shorter than a minute has no whole minute to count, and asks nothing
        cloudwatch = calls("cloudwatch")
        assert count_finished("deliver", NOON + timedelta(seconds=5), NOON + timedelta(seconds=50)) == {
            "succeeded": 0,
            "dead": 0,
        }
        assert cloudwatch == []


def test_old_windows_are_counted_at_the_resolution_cloudwatch_still_keeps():
    now = NOON
    # within 15 days: the minute; to 63 days: 5 minutes; older: the hour
    at = datetime(2026, 11, 20, 9, 7, 42, tzinfo=UTC)
    assert job_metrics.window(at, at + timedelta(hours=1), now) == (
        datetime(2026, 11, 20, 9, 7, tzinfo=UTC),
        datetime(2026, 11, 20, 10, 7, tzinfo=UTC),
    )
    at = datetime(2026, 10, 20, 9, 7, 42, tzinfo=UTC)
    assert job_metrics.window(at, at + timedelta(hours=1), now) == (
        datetime(2026, 10, 20, 9, 5, tzinfo=UTC),
        datetime(2026, 10, 20, 10, 5, tzinfo=UTC),
    )
    at = datetime(2026, 6, 20, 9, 7, 42, tzinfo=UTC)
    assert job_metrics.window(at, at + timedelta(hours=1), now) == (
        datetime(2026, 6, 20, 9, 0, tzinfo=UTC),
        datetime(2026, 6, 20, 10, 0, tzinfo=UTC),
    )


@pytest.mark.parametrize("mode", ["finished", "all"])
def test_with_the_index_on_the_counts_come_from_the_index(sink, mode):
    # GIVEN a stack whose job index holds finished jobs
    with TestStack(JOBS_PACKAGE, stack="stats", job_index=mode) as stack:
        for to in ("a@example.com", "not-an-address", "b@example.com"):
            stack.enqueue("deliver", mail(to))
        stack.runner("deliver").drain()
        cloudwatch: list[Any] = calls("cloudwatch")
        now = datetime.now(UTC)
        # THEN the count is the index's (the record's state now), and no metric is read
        assert count_finished("deliver", now - timedelta(hours=1), now + timedelta(seconds=1)) == {
            "succeeded": 2,
            "dead": 1,
        }
        assert cloudwatch == []
