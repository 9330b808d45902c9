"""`make bench` works: the harness at a tiny size writes every key, with positive numbers, and every
target with its target beside it; a full-size run exits non-zero when a target is missed, a quick one
does not (tested on made-up figures: the full bench is not run here).

No thresholds here: the targets live in the bench (`bench.harness.TARGETS`) and docs/reports/benchmarks.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench import harness
from bench.common import WriteUnits, alternate, item_size, ratio, ratio_interval, summary, write_kind
from bench.doc import render

ROOT = Path(__file__).resolve().parents[2]

RATIOS = (
    "cold_start_ratio_vs_powertools",
    "cold_start_process_ratio_vs_powertools",
    "cold_start_in_process_ratio_vs_powertools",
    "cold_start_cpu_ratio_vs_powertools",
    "cold_start_cpu_ratio_vs_powertools_paused_gc",
    "cold_start_ratio_vs_powertools_paused_gc",
    "worker_cpu_ratio_vs_powertools",
    "log_bytes_ratio_vs_powertools",
    "usd_per_million_jobs_ratio_vs_powertools",
    "usd_per_million_jobs_ratio_repo_stack_vs_powertools",
    "dynamodb_wru_per_job_repo_stack",
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
    # every target of the issues is a key, its target beside it, reported but not enforced at this size
    assert figures["run"]["quick"] is True
    assert "targets reported, not enforced" in done.stdout
    assert set(figures["targets"]) == set(harness.TARGETS)
    for key, (op, value) in harness.TARGETS.items():
        assert key in figures, key
        assert figures["targets"][key]["target"] == f"{op} {value}", key
        assert figures["targets"][key]["value"] == figures[key], key
        assert isinstance(figures["targets"][key]["met"], bool), key
    for key, interval in harness.INTERVALS.items():  # the cold start's 90% interval beside its median
        low, high = figures["details"][interval]
        assert low <= figures[key] <= high, (key, low, high)
        assert figures["targets"][key]["upper_90"] == high
    # both jobs log one line per job: the hand-written worker writes it, lambdajobs keeps it and a
    # success writes none (both write a share of one metric line per batch)
    lines = figures["details"]["log_lines_per_job"]
    assert lines["lambdajobs"]["log"] == 0 and lines["powertools"]["log"] == 1, lines
    # the light record mode: measured when lambdajobs has it (None, and a missed target, when not)
    light = figures["dynamodb_wru_per_job_light"]
    if light is None:
        assert figures["targets"]["dynamodb_wru_per_job_light"]["met"] is False
        assert figures["usd_per_million_jobs_ratio_light_vs_powertools"] is None
    else:
        assert light > 0 and figures["usd_per_million_jobs"]["lambdajobs_light"]["total_with_logs"] > 0
        assert figures["usd_per_million_jobs_ratio_light_vs_powertools"] > 0
    # the figures and targets go into the generated report
    doc = render(figures)
    for key, target in figures["targets"].items():
        assert f"`{key}`" in doc and target["target"] in doc, key
    # THEN every key is there, and every figure is a positive number
    for key in RATIOS:
        assert isinstance(figures[key], int | float) and figures[key] > 0, key
    celery = figures["enqueue_many_speedup_vs_celery"]
    assert celery is None or celery > 0
    if celery is None:  # Celery is bench-only: when it is missing, the reason is recorded
        assert figures["details"]["enqueue_many_speedup_vs_celery_missing"]
    for design in (
        "lambdajobs",
        "lambdajobs_repo_stack",
        "lambdajobs_job_index_finished",
        "powertools",
        "naive",
    ):
        assert figures["usd_per_million_jobs"][design]["total"] > 0
    assert figures["cost_assumptions"]["prices_usd"]["dynamodb_per_million_wru"] > 0
    assert figures["cost_assumptions"]["prices_usd"]["dynamodb_per_million_rru"] > 0
    assert figures["repo_stack_job_index"] in ("off", "finished", "all")
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


# -- the exit status: a missed target fails a full run, never a quick one ------------------------------


def _figures(values: dict[str, float | None], *, quick: bool) -> dict[str, object]:
    """A bench.json as `harness.run` writes it, with these figures (the rest meeting their targets)."""
    figures: dict[str, object] = {key: value for key, (_, value) in harness.TARGETS.items()}
    figures.update(values)
    details = {name: [0.9, 1.0] for name in harness.INTERVALS.values()}
    figures["targets"] = harness.targets(figures, details)
    figures["details"] = details
    figures["run"] = {"quick": quick, "seconds": 1.0, "sizes": harness.QUICK if quick else harness.FULL}
    return figures


def test_a_full_run_that_misses_a_target_exits_non_zero() -> None:
    # GIVEN figures of a full-size run, every target met but one
    met = _figures({}, quick=False)
    missed = _figures({"log_bytes_ratio_vs_powertools": 1.01}, quick=False)
    unmeasured = _figures({"dynamodb_wru_per_job_light": None}, quick=False)
    lower_bound = _figures({"moto_worker_speed_ratio_vs_powertools": 0.79}, quick=False)
    # THEN all met exits 0; one missed, one not measured or one under its floor exits 1
    assert harness.exit_status(met) == 0
    assert harness.exit_status(missed) == 1
    assert harness.missed(missed) == ["log_bytes_ratio_vs_powertools"]
    assert harness.exit_status(unmeasured) == 1
    assert unmeasured["targets"]["dynamodb_wru_per_job_light"] == {  # type: ignore[index]
        "target": "<= 1.0",
        "value": None,
        "met": False,
    }
    assert harness.exit_status(lower_bound) == 1


def test_a_quick_run_reports_its_missed_targets_but_exits_zero() -> None:
    figures = _figures({"worker_cpu_ratio_vs_powertools": 2.3}, quick=True)
    assert harness.missed(figures) == ["worker_cpu_ratio_vs_powertools"]
    assert harness.exit_status(figures) == 0


@pytest.mark.parametrize(("quick", "status"), [(False, 1), (True, 0)])
def test_main_returns_the_exit_status_of_the_run(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    quick: bool,
    status: int,
) -> None:
    # GIVEN a run (not measured: made-up figures) that misses the cold start's target
    figures = _figures({"cold_start_ratio_vs_powertools": 1.2}, quick=quick)
    monkeypatch.setattr(harness, "run", lambda sizes, **_: figures)
    monkeypatch.setattr(harness, "table", lambda _: "the table")
    # WHEN `python -m bench` ends
    got = harness.main([*(["--quick"] if quick else []), "--out", str(tmp_path / "bench.json")])
    # THEN a full run fails, naming the target; a quick one says it does not enforce them
    assert got == status
    printed = capsys.readouterr()
    if quick:
        assert "not enforced" in printed.out
    else:
        assert "cold_start_ratio_vs_powertools" in printed.err
    assert json.loads((tmp_path / "bench.json").read_text())["targets"] == figures["targets"]


def test_targets_carry_the_cold_start_interval_beside_the_median() -> None:
    figures = _figures({}, quick=False)
    entry = figures["targets"]["cold_start_ratio_vs_powertools"]  # type: ignore[index]
    assert entry["interval_90"] == [0.9, 1.0] and entry["upper_90"] == 1.0
    assert "interval_90" not in figures["targets"]["dynamodb_wru_per_job"]  # type: ignore[index]


def test_a_full_run_has_at_least_25_cold_start_rounds() -> None:
    from bench import coldstart

    assert harness.FULL["cold"] >= max(25, getattr(coldstart, "FULL_ROUNDS", 25))


def test_the_ratio_interval_is_a_paired_bootstrap_around_the_ratio_of_medians() -> None:
    # identical rounds: no spread, the interval is the ratio itself
    assert ratio_interval([2.0] * 5, [1.0] * 5) == [2.0, 2.0]
    # noisy rounds: the interval holds the ratio of medians, is not empty, and is the same every time
    a = [1.00, 1.10, 0.95, 1.30, 1.05, 0.98, 1.20, 1.02, 1.07, 0.99, 1.15]
    b = [1.00, 1.00, 0.97, 1.10, 1.01, 0.96, 1.05, 1.00, 0.99, 0.98, 1.02]
    low, high = ratio_interval(a, b)
    assert low < ratio(a, b) < high
    assert ratio_interval(a, b) == [low, high]
    # pairs stay pairs: a round slow on both sides moves both (the interval of a against a is [1, 1])
    assert ratio_interval(a, a) == [1.0, 1.0]
    with pytest.raises(ValueError, match="paired"):
        ratio_interval(a, b[:-1])


def test_the_duration_model_waits_on_every_measured_call() -> None:
    got = harness._duration_ms(0.5, writes=1, reads=1)
    assert got == 0.5 + harness.DYNAMODB_WRITE_LATENCY_MS + harness.DYNAMODB_READ_LATENCY_MS
    assert harness._duration_ms(0.5, writes=2, reads=0) == 0.5 + 2 * harness.DYNAMODB_WRITE_LATENCY_MS
    # read units are priced: an eventually consistent read of a small item is half a unit
    cost = harness._cost(wru=1, rru=0.5, sqs_requests=0, lambda_requests=0, duration_ms=0, log_bytes=0)
    assert cost["dynamodb"] == round(0.625 + 0.5 * 0.125, 3)


@pytest.mark.parametrize(
    ("size", "consistent", "units"),
    [(10, False, 0.5), (10, True, 1.0), (5000, False, 1.0), (5000, True, 2.0), (None, False, 0.5)],
)
def test_read_units_count_item_size_and_consistency(size: int | None, consistent: bool, units: float) -> None:
    events = _Events()
    client = type("Client", (), {"meta": type("Meta", (), {"events": events})()})()
    item: dict[str, object] | None = None if size is None else {"id": {"S": "j"}, "pad": {"S": "x" * size}}
    meter = WriteUnits(client, _Reader([item], gsi=False))
    params = {"TableName": "t", "Key": {"id": {"S": "j"}}, "ConsistentRead": consistent}
    events.handlers["before-parameter-build.dynamodb"](model=_Model("GetItem"), params=params)  # type: ignore[operator]
    events.handlers["after-call.dynamodb"](model=_Model("GetItem"), parsed={"Item": item or {}})  # type: ignore[operator]
    assert meter.read_units == units
    assert meter.read_calls == {"GetItem": 1}
    assert meter.units == 0


@pytest.mark.parametrize(
    ("declared", "reason"),
    [(None, "no light record mode"), (ValueError("light mode refuses pii_fields"), "refuses pii_fields")],
)
def test_a_missing_or_refused_light_mode_is_reported_not_fatal(
    monkeypatch: pytest.MonkeyPatch, declared: Exception | None, reason: str
) -> None:
    from bench import phases

    def light() -> None:
        if declared is not None:
            raise declared

    monkeypatch.setattr(phases, "light", light)
    monkeypatch.setattr(phases, "LIGHT_ERRORS", [])
    assert phases._light() is None
    assert reason in phases.LIGHT_ERRORS[-1]


def test_a_cold_start_is_counted_in_instructions_to_its_record_handled(tmp_path: Path) -> None:
    from bench import coldstart

    # GIVEN two entry points that differ only in the work their import does
    for name, work in (("light_entry", "0"), ("heavy_entry", "sum(range(300_000))")):
        (tmp_path / f"{name}.py").write_text(
            f"WORK = {work}\n\ndef lambda_handler(event, context):\n    return {{'batchItemFailures': []}}\n"
        )

    def counted(entry: str) -> int | None:
        env = {
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": str(tmp_path),
            "BENCH_ENTRY": entry,
            "BENCH_ROOT": str(tmp_path / "nowhere"),
            "BENCH_ASSET": str(tmp_path),
        }
        return coldstart.instructions(env, "arn:aws:sqs:us-east-1:123456789012:q", "plain_email")

    # WHEN each cold start runs under valgrind
    light, heavy = counted("light_entry"), counted("heavy_entry")
    # THEN each is a count of instructions, and the import's work is in it (300,000 additions: several
    # million instructions more), the interpreter's exit is not
    assert light is not None and heavy is not None
    assert 10_000_000 < light < heavy
    assert heavy - light > 5_000_000


def test_instruction_ratios_come_from_the_counts_of_one_run() -> None:
    counted = {"lambdajobs": 1_650_000_000, "powertools": 1_500_000_000}
    counted["powertools_paused_gc"] = 1_375_000_000
    assert harness.instruction_ratios(counted) == {
        "cold_start_instructions_ratio_vs_powertools": 1.1,
        "cold_start_instructions_ratio_vs_powertools_paused_gc": 1.2,
    }
    # a quick run counts none: reported as not measured, and no target rests on them
    assert set(harness.instruction_ratios({}).values()) == {None}
    assert not set(harness.instruction_ratios({})) & set(harness.TARGETS)
