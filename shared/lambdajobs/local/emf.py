"""CloudWatch's extraction of the worker's EMF lines, for `TestStack`: the metrics a test's workers
emit land in moto's CloudWatch, as they land in CloudWatch on AWS.

On Lambda the worker prints one embedded-metric-format document per invocation (Powertools'
`Metrics.flush_metrics`) and CloudWatch Logs turns it into metrics; nothing in the function calls
PutMetricData. A test stack has no CloudWatch Logs, so `install` wraps the worker's `flush_metrics`:
the document is still printed as before, and then put into the stack's CloudWatch as CloudWatch
would store it (its namespace, each dimension set, each value; the timestamp at the minute, standard
resolution). `count_finished` and `ops.job_counts` then read the metrics a test ran, with the same
GetMetricData call as on AWS (and, in the IAM-enforced tests, with the worker's role). The put is
the harness's (the stack's default identity), never the worker role's, which has no PutMetricData.

Not covered: the document Powertools prints by itself when one metric reaches 100 values within one
invocation (it does not go through `flush_metrics`); a batch holds at most 10 records.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

#: PutMetricData takes at most 1,000 datapoints a call.
MAX_DATAPOINTS = 1000


def metric_data(document: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The datapoints CloudWatch extracts from one EMF document, by namespace."""
    meta = document["_aws"]
    at = datetime.fromtimestamp(int(meta["Timestamp"]) // 60_000 * 60, UTC)  # kept by the minute
    found: dict[str, list[dict[str, Any]]] = {}
    for directive in meta.get("CloudWatchMetrics", []):
        into = found.setdefault(directive["Namespace"], [])
        for names in directive.get("Dimensions", []):
            dimensions = [{"Name": name, "Value": str(document[name])} for name in names]
            for metric in directive.get("Metrics", []):
                values = document.get(metric["Name"], [])
                for value in values if isinstance(values, list) else [values]:
                    into.append(
                        {
                            "MetricName": metric["Name"],
                            "Dimensions": dimensions,
                            "Timestamp": at,
                            "Value": float(value),
                            "Unit": metric.get("Unit", "None"),
                        }
                    )
    return found


def publish(document: dict[str, Any], client: Any) -> None:
    """Put one EMF document's datapoints into CloudWatch (`client`)."""
    for namespace, data in metric_data(document).items():
        for start in range(0, len(data), MAX_DATAPOINTS):
            client.put_metric_data(Namespace=namespace, MetricData=data[start : start + MAX_DATAPOINTS])


def install(metrics: Any, client: Callable[[], Any]) -> Callable[[], None]:
    """Publish every document `metrics` (a Powertools `Metrics`, the worker's) flushes to the
    CloudWatch that `client()` gives at the time; returns what undoes it."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    had_own = "flush_metrics" in vars(metrics)
    original = metrics.flush_metrics

    def flush_and_publish(raise_on_empty_metrics: bool = False) -> None:
        document = (
            metrics.serialize_metric_set() if metrics.metric_set and not is_metrics_disabled() else None
        )
        original(raise_on_empty_metrics=raise_on_empty_metrics)
        if document is not None:
            publish(document, client())

    metrics.flush_metrics = flush_and_publish

    def uninstall() -> None:
        if had_own:
            metrics.flush_metrics = original
        else:
            vars(metrics).pop("flush_metrics", None)

    return uninstall
