"""The operator reads on the local stack: counts from the records (no CloudWatch metrics there), and
no CloudWatch call for what the local stack never publishes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench.board_seed import seed
from lambdajobs import ops
from lambdajobs.local.stack import LocalStack


@pytest.fixture(scope="module")
def seeded():
    with LocalStack("handlers", stack="opsl", port=0) as local:
        yield local, seed(local.config, local.specs, records=200, dead_letters=40, unrecorded=4)


def cloudwatch_calls(local: LocalStack) -> list[str]:
    calls: list[str] = []
    client = local.config.client("cloudwatch")
    client.meta.events.register("before-call.cloudwatch", lambda model, **_: calls.append(model.name))
    return calls


def test_the_oldest_age_on_the_local_stack_costs_no_cloudwatch_call(seeded):
    local, _ = seeded
    calls = cloudwatch_calls(local)
    assert ops.oldest_age_seconds(local.config.queue_url("send_email"), config=local.config) is None
    assert calls == []


def test_counts_on_the_local_stack_come_from_the_records(seeded):
    local, done = seeded
    # the job index is off (daily_report's job_stats no longer turns it on): the dead on the index,
    # the succeeded by a counting Scan of the local table (count_finished, issue 31)
    assert local.provisioned.job_index == "off"
    calls = cloudwatch_calls(local)
    reads: list[str] = []
    local.config.client("dynamodb").meta.events.register(
        "before-call.dynamodb", lambda model, **_: reads.append(model.name)
    )
    now = datetime.now(UTC)
    day = {"succeeded": 0, "dead": 0}
    for spec in local.specs:
        counts = ops.job_counts(spec.name, now - timedelta(hours=25), now, config=local.config)
        assert counts is not None
        day = {k: day[k] + counts[k] for k in day}
    assert day == {"succeeded": done.records["succeeded"], "dead": done.records["dead"]}
    assert calls == []  # no metrics read: the local stack has none
    assert set(reads) == {"Query", "Scan"}


def test_counts_from_the_metrics_read_cloudwatch_once_per_window(seeded):
    local, _ = seeded
    calls = cloudwatch_calls(local)
    now = datetime.now(UTC)
    found = ops.job_counts("send_email", now - timedelta(hours=1), now, source="metrics", config=local.config)
    assert found == {"succeeded": 0, "dead": 0} and calls == ["GetMetricData"]


def test_a_function_of_the_local_stack_counts_from_the_records_too(seeded, monkeypatch):
    # GIVEN the configuration a function's process builds on the local stack: no endpoint of its own,
    # boto3 sent to the local server by AWS_ENDPOINT_URL (lambdajobs.local.functions)
    from lambdajobs.runtime import aws
    from lambdajobs.runtime.records import count_finished

    local, done = seeded
    monkeypatch.setenv("AWS_ENDPOINT_URL", str(local.config.endpoint_url))
    aws.reset_clients()
    function = local.config.with_resources(endpoint_url=None)
    calls: list[str] = []
    function.client("cloudwatch").meta.events.register(
        "before-call.cloudwatch", lambda model, **_: calls.append(model.name)
    )
    # WHEN daily_report's count runs there
    now = datetime.now(UTC)
    day = {"succeeded": 0, "dead": 0}
    for spec in local.specs:
        counts = count_finished(spec.name, now - timedelta(hours=25), now, config=function)
        day = {k: day[k] + counts[k] for k in day}
    # THEN it counts the records, as the local stack itself does, and reads no metric
    assert day == {"succeeded": done.records["succeeded"], "dead": done.records["dead"]}
    assert calls == []
    aws.reset_clients()
