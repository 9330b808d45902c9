"""The worker's metrics (`Worker._metric`): every value it adds reaches an EMF document, in order,
with its unit, and no document holds more than Powertools' 100 values of a metric (it flushes then),
also when the worker appends a known metric's values itself."""

from __future__ import annotations

import json

import pytest
from aws_lambda_powertools.metrics import MetricUnit

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.records import JobRecordStore
from lambdajobs.runtime.worker import Worker, metrics


@pytest.fixture
def worker(monkeypatch):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.delenv("POWERTOOLS_DEV", raising=False)
    config = StackConfig(stack="t", region="us-east-1", table="t-jobs")
    metrics.clear_metrics()
    yield Worker("any", config=config, store=JobRecordStore(config, client=object()))
    metrics.clear_metrics()


def test_every_value_reaches_a_document_of_at_most_100_values(worker, capsys):
    # WHEN the worker adds 250 counts and 250 durations (as 250 successful records do)
    for i in range(250):
        worker._count("JobSucceeded", 1)
        worker._metric("JobDuration", MetricUnit.Milliseconds, i)
    metrics.flush_metrics()
    # THEN the documents hold them all, in order, with their units, at most 100 values each
    documents = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    durations = [v for d in documents for v in d.get("JobDuration", [])]
    counts = [v for d in documents for v in d.get("JobSucceeded", [])]
    assert durations == [float(i) for i in range(250)] and counts == [1.0] * 250
    assert all(len(d.get(name, [])) <= 100 for d in documents for name in ("JobDuration", "JobSucceeded"))
    units = {m["Name"]: m["Unit"] for d in documents for m in d["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert units == {"JobSucceeded": "Count", "JobDuration": "Milliseconds"}


def test_nothing_is_added_with_metrics_disabled(worker, monkeypatch, capsys):
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    for _ in range(150):
        worker._count("JobSucceeded", 1)
    assert metrics.metric_set == {} and '"_aws"' not in capsys.readouterr().out
