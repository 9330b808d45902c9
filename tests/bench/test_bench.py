"""`make bench` works: the harness at a tiny size writes every key, with positive numbers.

No thresholds here: the targets live in the bench (`bench.harness.TARGETS`) and docs/reports/benchmarks.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import WriteUnits, alternate, item_size, summary, write_kind

ROOT = Path(__file__).resolve().parents[2]

RATIOS = (
    "cold_start_ratio_vs_powertools",
    "cold_start_process_ratio_vs_powertools",
    "cold_start_ratio_vs_powertools_paused_gc",
    "worker_cpu_ratio_vs_powertools",
    "moto_worker_speed_ratio_vs_powertools",
    "enqueue_many_speedup_vs_send_loop",
    "enqueue_many_speedup_vs_batch_loop",
    "sqs_calls_per_enqueued_job",
    "dynamodb_wru_per_job",
    "dynamodb_wru_per_job_job_index_finished",
    "dynamodb_wru_per_job_powertools",
    "dynamodb_wru_per_durable_job_5_steps",
    "dynamodb_wru_per_durable_job_5_steps_continuing",
    "dynamodb_wru_per_step",
    "dynamodb_wru_per_continuation",
    "lambda_asset_kb",
    "synth_seconds_many_jobs",
    "synth_seconds_ratio_many_jobs_vs_project",
)


def test_the_quick_bench_writes_every_key_with_positive_figures(tmp_path: Path) -> None:
    # GIVEN the harness at its tiny size
    out = tmp_path / "bench.json"
    # WHEN it runs end to end (moto server, fresh cold-start processes, every phase)
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    # THEN every key is there, and every figure is a positive number
    for key in RATIOS:
        assert isinstance(figures[key], int | float) and figures[key] > 0, key
    celery = figures["enqueue_many_speedup_vs_celery"]
    assert celery is None or celery > 0
    if celery is None:  # Celery is bench-only: when it is missing, the reason is recorded
        assert figures["details"]["enqueue_many_speedup_vs_celery_missing"]
    for design in ("lambdajobs", "lambdajobs_job_index_finished", "powertools", "naive"):
        assert figures["usd_per_million_jobs"][design]["total"] > 0
    assert figures["cost_assumptions"]["prices_usd"]["dynamodb_per_million_wru"] > 0
    assert set(figures["targets"]) == {
        "cold_start_ratio_vs_powertools",
        "dynamodb_wru_per_job",
        "moto_worker_speed_ratio_vs_powertools",
        "synth_seconds_many_jobs",
    }
    # the many-job app held every limit (at its quick size: one stack)
    many = figures["details"]["synth"]["many"]
    assert many["max_resources"] < 500 and many["max_environment_characters"] < 4096
    assert many["nag_errors"] == 0 and many["cfn_lint_findings"] == 0
    # the staged asset ships source only, and the table is printed
    assert figures["details"]["lambda_asset"]["pyc_files"] == 0
    assert "cold start" in done.stdout
    # the durable job wrote 5 checkpoints either way, and parked 4 times between its steps one at a time
    durable = figures["details"]["dynamodb_writes_durable"]
    for mode in ("inline", "continuing"):
        kinds = durable[mode]["by_kind_per_job"]
        assert sum(v["calls"] for k, v in kinds.items() if k.startswith("checkpoint:")) == 5, kinds
    assert durable["continuing"]["continuations_per_job"] == 4
    assert durable["continuing"]["by_kind_per_job"]["park"]["calls"] == 4
    assert "park" not in durable["inline"]["by_kind_per_job"]
    assert (
        figures["dynamodb_wru_per_durable_job_5_steps_continuing"]
        > figures["dynamodb_wru_per_durable_job_5_steps"]
    )


@pytest.mark.parametrize(
    ("name", "params", "kind"),
    [
        ("PutItem", {"Item": {"id": {"S": "j"}, "state": {"S": "running"}}}, "acquire"),
        ("PutItem", {"Item": {"id": {"S": "j"}, "state": {"S": "succeeded"}}}, "complete"),
        (
            "UpdateItem",
            {"UpdateExpression": "SET job = :job, #state = :running, started_at = :now_iso"},
            "acquire",
        ),
        (
            "UpdateItem",
            {
                "ExpressionAttributeValues": {":step": {"M": {}}, ":lock": {"N": "1"}},
                "ExpressionAttributeNames": {"#step": "step:encode-4k"},
            },
            "checkpoint:encode-4k",
        ),
        (
            "UpdateItem",
            {"ExpressionAttributeValues": {":wake": {"N": "1"}, ":state": {"S": "sleeping"}}},
            "park",
        ),
        ("UpdateItem", {"ExpressionAttributeValues": {":result": {"S": "{}"}}}, "complete"),
        ("DeleteItem", {}, "DeleteItem"),
    ],
)
def test_writes_are_told_apart_by_kind(name: str, params: dict[str, object], kind: str) -> None:
    assert write_kind(name, params) == kind


def test_sides_alternate_and_medians_come_with_their_spread() -> None:
    order: list[str] = []
    got = alternate(3, {"a": lambda: order.append("a") or 1.0, "b": lambda: order.append("b") or 2.0})
    assert order == ["a", "b", "a", "b", "a", "b"]
    assert summary([3.0, 1.0, 2.0])["median"] == 2.0
    assert summary([3.0, 1.0, 2.0])["min"] == 1.0 and summary([3.0, 1.0, 2.0])["max"] == 3.0
    assert got == {"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.0]}


def test_item_size_follows_dynamodb_rules() -> None:
    # names count, strings by UTF-8 bytes, numbers by significant digits
    assert item_size({"id": {"S": "abc"}}) == 5
    assert item_size({"n": {"N": "12345"}}) == 1 + 4
    assert item_size({"m": {"M": {"a": {"S": "x"}}}}) == 1 + 3 + 1 + 1 + 1


class _Events:
    def __init__(self) -> None:
        self.handlers: dict[str, object] = {}

    def register(self, name: str, handler: object) -> None:
        self.handlers[name] = handler


class _Model:
    def __init__(self, name: str) -> None:
        self.name = name


class _Reader:
    def __init__(self, items: list[dict[str, object] | None], gsi: bool) -> None:
        self.items = items
        self.gsi = gsi

    def describe_table(self, TableName: str) -> dict[str, object]:
        table: dict[str, object] = {"KeySchema": [{"AttributeName": "id"}]}
        if self.gsi:
            table["GlobalSecondaryIndexes"] = [
                {
                    "KeySchema": [{"AttributeName": "ix"}, {"AttributeName": "ix_at"}],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ]
        return {"Table": table}

    def get_item(self, **_: object) -> dict[str, object]:
        item = self.items.pop(0)
        return {"Item": item} if item is not None else {}


@pytest.mark.parametrize(
    ("before", "after", "gsi", "units"),
    [
        (None, {"id": {"S": "j"}}, False, 1),  # a small put: 1
        (None, {"id": {"S": "j"}, "ix": {"S": "a"}, "ix_at": {"S": "t"}}, True, 2),  # + entry put
        (
            {"id": {"S": "j"}, "ix": {"S": "a"}, "ix_at": {"S": "t"}},
            {"id": {"S": "j"}, "ix": {"S": "b"}, "ix_at": {"S": "t"}},
            True,
            3,
        ),  # + key change: 2
        ({"id": {"S": "j"}, "pad": {"S": "x" * 1500}}, {"id": {"S": "j"}}, False, 2),  # larger of the two
    ],
)
def test_write_units_count_item_size_and_index_entries(
    before: dict[str, object] | None, after: dict[str, object], gsi: bool, units: int
) -> None:
    events = _Events()
    client = type("Client", (), {"meta": type("Meta", (), {"events": events})()})()
    meter = WriteUnits(client, _Reader([before, after], gsi))
    params = {"TableName": "t", "Key": {"id": {"S": "j"}}}
    events.handlers["before-parameter-build.dynamodb"](model=_Model("UpdateItem"), params=params)  # type: ignore[operator]
    events.handlers["after-call.dynamodb"](model=_Model("UpdateItem"), parsed={})  # type: ignore[operator]
    assert meter.units == units
    assert meter.kinds == {"UpdateItem": {"calls": 1, "units": units}}
