"""`make bench` (`python -m bench`): every comparison, `build/reports/bench.json` and a table.

Each comparison alternates its sides (A B A B ...) on one backend and reports medians with their
spread; ratios are of medians. Phases that run a worker run in a child process of their own
(`bench.phases`), so the two sides of a comparison share a fresh interpreter and nothing else runs
in it. `--quick` runs everything at a tiny size (the test); `--write-doc` rewrites
docs/reports/benchmarks.md from the figures (`--doc-only`: from the last bench.json, without measuring).

Every target (`TARGETS`, the issues' numbers) is in bench.json's `targets` with its value and whether
it is met. A full run exits 1 when one is missed (a figure that could not be measured counts as
missed); a `--quick` run reports them the same way but always exits 0: its sizes are too small for
the figures to mean anything (`exit_status`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import reports
from bench.common import BUILD, FAKE_CREDENTIALS, ROOT, moto_server, ratio, ratio_interval, summary

REPORT = ROOT / "build" / "reports" / "bench.json"

#: Sizes: (rounds per side, records or jobs per round).
FULL: dict[str, Any] = {
    "cold": 25,  # issue 31: the median of at least 25 alternated rounds
    "cpu": (9, 1000),
    "moto": (9, 300),
    "wru": 50,
    "durable": 50,
    "enqueue": (9, 300),
    "synth_jobs": 200,
}
QUICK: dict[str, Any] = {
    "cold": 1,
    "cpu": (1, 20),
    "moto": (1, 20),
    "wru": 10,
    "durable": 2,
    "enqueue": (1, 20),
    "synth_jobs": 4,  # one job of each kind: cron, levels, fanout, plain (tests.big_app.kinds)
}

#: The targets (key: comparison, value): a full run exits 1 when one is missed.
TARGETS = {
    # issue 31: against the hand-written Powertools worker (bench/powertools_worker.py)
    "log_bytes_ratio_vs_powertools": ("<=", 1.0),
    "worker_cpu_ratio_vs_powertools": ("<=", 1.2),
    "cold_start_ratio_vs_powertools": ("<=", 1.05),
    "cold_start_ratio_vs_powertools_paused_gc": ("<=", 1.10),
    "dynamodb_wru_per_job_light": ("<=", 1.0),
    "usd_per_million_jobs_ratio_vs_powertools": ("<=", 1.0),
    "usd_per_million_jobs_ratio_repo_stack_vs_powertools": ("<=", 1.0),
    "usd_per_million_jobs_ratio_light_vs_powertools": ("<=", 0.7),
    # issue 15
    "dynamodb_wru_per_job": ("<=", 2.0),
    "moto_worker_speed_ratio_vs_powertools": (">=", 0.8),
    # issue 27: the 200-job app synthesizes within 3 minutes on this machine (2 cores)
    "synth_seconds_many_jobs": ("<=", 180),
}
#: Targets reported with a 90% interval beside them (`details` key of the interval).
INTERVALS = {
    "cold_start_ratio_vs_powertools": "cold_start_ratio_interval_90",
    "cold_start_ratio_vs_powertools_paused_gc": "cold_start_ratio_paused_gc_interval_90",
}

#: us-east-1 on-demand prices (USD), as of the run; what the cost figures assume.
PRICES = {
    "dynamodb_per_million_wru": 0.625,
    "dynamodb_per_million_rru": 0.125,
    "sqs_per_million_requests": 0.40,
    "lambda_per_million_requests": 0.20,
    "lambda_per_gb_second_arm64": 0.0000133334,
    "cloudwatch_logs_per_gb_ingested": 0.50,
}
#: Assumptions of the cost model (see docs/reports/benchmarks.md).
MEMORY_MB = 256  # JobSpec.memory_mb's default: send_email's function
DYNAMODB_WRITE_LATENCY_MS = 5.0  # each write's round trip, waited for inside the invocation
DYNAMODB_READ_LATENCY_MS = 5.0  # each read's round trip (assumed no faster than a write)
BATCH_SIZE = 10  # Lambda's SQS batch: one invocation, one ReceiveMessage, one DeleteMessageBatch


def _phase(name: str, params: dict[str, Any], *, stdout: Any = subprocess.DEVNULL) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    try:
        env = {**os.environ, **FAKE_CREDENTIALS, "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("AWS_ENDPOINT_URL", None)
        done = subprocess.run(
            [sys.executable, "-m", "bench.phases", name, json.dumps(params), str(out)],
            cwd=ROOT,
            env=env,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"bench phase {name} failed:\n{done.stderr[-4000:]}")
        result: dict[str, Any] = json.loads(out.read_text())
        return result
    finally:
        out.unlink(missing_ok=True)


def _duration_ms(cpu_ms: float, writes: float, reads: float) -> float:
    """A job's billed Lambda time: its CPU (measured, DynamoDB stubbed) and the round trips of its
    DynamoDB calls (measured counts, assumed latencies), waited for inside the invocation."""
    return cpu_ms + writes * DYNAMODB_WRITE_LATENCY_MS + reads * DYNAMODB_READ_LATENCY_MS


def _cost(
    *,
    wru: float,
    sqs_requests: float,
    lambda_requests: float,
    duration_ms: float,
    log_bytes: float,
    rru: float = 0.0,
) -> dict[str, float]:
    """USD per million jobs, by component."""
    gb_seconds = MEMORY_MB / 1024 * duration_ms / 1000
    parts = {
        "dynamodb": wru * PRICES["dynamodb_per_million_wru"] + rru * PRICES["dynamodb_per_million_rru"],
        "sqs": sqs_requests * PRICES["sqs_per_million_requests"],
        "lambda": lambda_requests * PRICES["lambda_per_million_requests"]
        + gb_seconds * 1e6 * PRICES["lambda_per_gb_second_arm64"],
    }
    logs = log_bytes / 1e9 * 1e6 * PRICES["cloudwatch_logs_per_gb_ingested"]
    return {
        **{k: round(v, 3) for k, v in parts.items()},
        "total": round(sum(parts.values()), 3),
        "cloudwatch_logs": round(logs, 3),
        "total_with_logs": round(sum(parts.values()) + logs, 3),
    }


def run(sizes: dict[str, Any], *, progress: bool = True) -> dict[str, Any]:
    from bench import coldstart

    def say(text: str) -> None:
        if progress:
            print(f"==> {text}", flush=True)

    started = time.perf_counter()
    BUILD.mkdir(parents=True, exist_ok=True)
    figures: dict[str, Any] = {}
    details: dict[str, Any] = {}

    with moto_server() as endpoint:
        say(f"cold start: {sizes['cold']} fresh processes per side, alternating (moto server {endpoint})")
        # instructions (valgrind) in a full run only: a minute of the quick test's budget otherwise
        cold = coldstart.measure(endpoint, sizes["cold"], count_instructions=sizes["cold"] > 1)
        # the targets' timing: from starting the process to the record handled (issue 31), round by round
        side = {name: [_process_seconds(r) for r in runs] for name, runs in cold["runs"].items()}
        inside = {name: [r["seconds"] for r in runs] for name, runs in cold["runs"].items()}
        parts = {
            f"{name}_{part}": [r[part] for r in runs]
            for name, runs in cold["runs"].items()
            for part in ("import_seconds", "handle_seconds", "process_seconds")
            if all(part in r for r in runs)
        }
        details["cold_start_seconds"] = {name: summary(v, 4) for name, v in side.items()}
        details["cold_start_in_process_seconds"] = {name: summary(v, 4) for name, v in inside.items()}
        details["cold_start_parts_seconds"] = {k: summary(v, 4) for k, v in parts.items()}
        figures["cold_start_ratio_vs_powertools"] = ratio(side["lambdajobs"], side["powertools"])
        details["cold_start_ratio_interval_90"] = ratio_interval(side["lambdajobs"], side["powertools"])
        # send_email as deployed (its rate limit's first-record reads and writes included)
        figures["cold_start_send_email_ratio_vs_powertools"] = ratio(side["send_email"], side["powertools"])
        # against a hand-written worker that pauses its collector as lambdajobs does: the rest of the gap
        figures["cold_start_ratio_vs_powertools_paused_gc"] = ratio(
            side["lambdajobs"], side["powertools_paused_gc"]
        )
        details["cold_start_ratio_paused_gc_interval_90"] = ratio_interval(
            side["lambdajobs"], side["powertools_paused_gc"]
        )
        # the same process timing under its earlier name; and inside the process (import + first record)
        figures["cold_start_process_ratio_vs_powertools"] = figures["cold_start_ratio_vs_powertools"]
        figures["cold_start_in_process_ratio_vs_powertools"] = ratio(
            inside["lambdajobs"], inside["powertools"]
        )
        details["cold_start_rounds_paired"] = len(side["lambdajobs"])
        # the processes' CPU time, start to record handled: steadier than wall time on a loaded machine
        used = {name: [r.get("cpu_seconds") for r in runs] for name, runs in cold["runs"].items()}
        for suffix, base in (("", "powertools"), ("_paused_gc", "powertools_paused_gc")):
            key = f"cold_start_cpu_ratio_vs_powertools{suffix}"
            a, b = used["lambdajobs"], used[base]
            if a and b and None not in a and None not in b:
                figures[key] = ratio(a, b)
                details[f"cold_start_cpu_ratio{suffix}_interval_90"] = ratio_interval(a, b)
            else:
                figures[key] = None
        if all(v and None not in v for v in used.values()):
            details["cold_start_cpu_seconds"] = {name: summary(v, 4) for name, v in used.items()}
        # instructions from process start to record handled: the same whatever the machine's load
        counted = cold.get("instructions") or {}
        figures.update(instruction_ratios(counted))
        if counted:
            details["cold_start_instructions"] = counted
        details["cold_start_modules_loaded"] = cold.get("modules_loaded")
        figures["lambda_asset_kb"] = cold["asset_kb"]
        details["lambda_asset"] = {
            "files": cold["asset_files"],
            "pyc_files": cold["asset_pyc"],
            "job_modules": cold["modules"],
        }

        rounds, jobs = sizes["enqueue"]
        say(f"enqueue: {rounds} rounds x {jobs} jobs per producer, rotating, against the moto server")
        enq = _phase("enqueue", {"rounds": rounds, "jobs": jobs, "endpoint": endpoint})

    speeds = enq["jobs_per_second"]
    details["enqueue_jobs_per_second"] = {k: summary(v, 1) for k, v in speeds.items()}
    figures["enqueue_many_speedup_vs_send_loop"] = ratio(speeds["enqueue_many"], speeds["send_loop"], 2)
    figures["enqueue_many_speedup_vs_batch_loop"] = ratio(speeds["enqueue_many"], speeds["batch_loop"], 2)
    if "celery" in speeds:
        figures["enqueue_many_speedup_vs_celery"] = ratio(speeds["enqueue_many"], speeds["celery"], 2)
    else:
        figures["enqueue_many_speedup_vs_celery"] = None
        details["enqueue_many_speedup_vs_celery_missing"] = enq["celery_error"]
    figures["sqs_calls_per_enqueued_job"] = round(statistics.median(enq["sqs_calls_per_enqueued_job"]), 3)

    rounds, records = sizes["cpu"]
    say(f"worker CPU, DynamoDB stubbed: {rounds} rounds x {records} records per side, alternating")
    with tempfile.TemporaryFile() as logs:  # both workers' log lines: their size is a cost
        cpu = _phase("cpu", {"rounds": rounds, "records": records}, stdout=logs)
    per_record = cpu["cpu_seconds_per_record"]
    details["worker_cpu_ms_per_record"] = {
        k: summary([x * 1000 for x in v], 4) for k, v in per_record.items()
    }
    figures["worker_cpu_ratio_vs_powertools"] = ratio(per_record["lambdajobs"], per_record["powertools"], 2)
    if "lambdajobs_light" in per_record:
        figures["worker_cpu_ratio_light_vs_powertools"] = ratio(
            per_record["lambdajobs_light"], per_record["powertools"], 2
        )
    else:
        figures["worker_cpu_ratio_light_vs_powertools"] = None
    log_bytes = {k: round(statistics.median(v), 1) for k, v in cpu["log_bytes_per_record"].items()}
    figures["log_bytes_per_job"] = log_bytes
    figures["log_bytes_ratio_vs_powertools"] = ratio(
        cpu["log_bytes_per_record"]["lambdajobs"], cpu["log_bytes_per_record"]["powertools"]
    )
    details["log_lines_per_job"] = {
        k: {"log": _median(v), "metric": _median(cpu["metric_lines_per_record"][k])}
        for k, v in cpu["log_lines_per_record"].items()
    }
    if cpu.get("light_missing"):
        details["light_mode_missing"] = cpu["light_missing"]
    details["dynamodb_calls_per_record_stubbed"] = cpu["dynamodb_calls_per_record"]

    rounds, records = sizes["moto"]
    say(f"worker speed on moto (in-process): {rounds} rounds x {records} records per side, alternating")
    moto = _phase("moto", {"rounds": rounds, "records": records})
    rps = moto["records_per_second"]
    details["moto_records_per_second"] = {k: summary(v, 1) for k, v in rps.items()}
    figures["moto_worker_speed_ratio_vs_powertools"] = ratio(rps["lambdajobs"], rps["powertools"])

    durable_jobs = sizes.get("durable", 0)
    say(
        f"DynamoDB write units: {sizes['wru']} plain jobs per table; {durable_jobs} durable jobs of 5 steps, "
        "steps in one invocation and one per invocation"
    )
    wru = _phase("wru", {"jobs": sizes["wru"], "durable_jobs": durable_jobs})
    durable = wru.pop("durable", None)
    if wru.get("light_missing"):
        details["light_mode_missing"] = wru["light_missing"]
    figures["dynamodb_wru_per_job"] = round(wru["off"]["wru_per_job"], 3)
    figures["dynamodb_wru_per_job_job_index_finished"] = round(wru["finished"]["wru_per_job"], 3)
    figures["dynamodb_wru_per_job_repo_stack"] = round(wru["repo_stack"]["wru_per_job"], 3)
    figures["repo_stack_job_index"] = wru["repo_stack"]["job_index"]
    figures["dynamodb_wru_per_job_light"] = round(wru["light"]["wru_per_job"], 3) if wru["light"] else None
    figures["dynamodb_wru_per_job_powertools"] = round(wru["powertools"]["wru_per_job"], 3)
    figures["dynamodb_rru_per_job"] = {
        name: round(wru[key]["rru_per_job"], 3) if wru[key] else None
        for name, key in (
            ("lambdajobs", "off"),
            ("lambdajobs_repo_stack", "repo_stack"),
            ("lambdajobs_light", "light"),
            ("powertools", "powertools"),
        )
    }
    details["dynamodb_writes"] = wru
    if durable is not None:
        figures["dynamodb_wru_per_durable_job_5_steps"] = round(durable["inline"]["wru_per_job"], 3)
        figures["dynamodb_wru_per_durable_job_5_steps_continuing"] = round(
            durable["continuing"]["wru_per_job"], 3
        )
        figures["dynamodb_wru_per_step"] = round(durable["wru_per_step"], 3)
        figures["dynamodb_wru_per_continuation"] = round(durable["wru_per_continuation"], 3)
        details["dynamodb_writes_durable"] = durable

    say(f"synth: a generated app of {sizes['synth_jobs']} jobs, and this project's beside it")
    synthesized = _phase("synth", {"jobs": sizes["synth_jobs"]})
    figures["synth_seconds_many_jobs"] = synthesized["many"]["seconds"]
    figures["synth_seconds_ratio_many_jobs_vs_project"] = ratio(
        [synthesized["many"]["seconds"]], [synthesized["project"]["seconds"]], 2
    )
    details["synth"] = synthesized

    cpu_ms = {k: statistics.median(v) * 1000 for k, v in per_record.items()}
    sqs_lj = figures["sqs_calls_per_enqueued_job"] + 2 / BATCH_SIZE
    # (cost line, wru phase's run, CPU phase's side, SQS requests per job, Lambda requests per job)
    designs = {
        "lambdajobs": ("off", "lambdajobs", sqs_lj, 1 / BATCH_SIZE),
        "lambdajobs_repo_stack": ("repo_stack", "lambdajobs", sqs_lj, 1 / BATCH_SIZE),
        "lambdajobs_job_index_finished": ("finished", "lambdajobs", sqs_lj, 1 / BATCH_SIZE),
        "lambdajobs_light": ("light", "lambdajobs_light", sqs_lj, 1 / BATCH_SIZE),
        "powertools": ("powertools", "powertools", 3 / BATCH_SIZE, 1 / BATCH_SIZE),
        "naive": ("powertools", "powertools", 3.0, 1.0),
    }
    usd: dict[str, Any] = {}
    durations: dict[str, float] = {}
    dynamodb_calls: dict[str, dict[str, float]] = {}
    for name, (run_key, cpu_side, sqs_requests, lambda_requests) in designs.items():
        measured = wru.get(run_key)
        if not measured or cpu_side not in cpu_ms:  # the light mode, where lambdajobs has none
            continue
        writes, reads = measured["write_calls_per_job"], measured.get("read_calls_per_job", 0.0)
        durations[name] = _duration_ms(cpu_ms[cpu_side], writes, reads)
        dynamodb_calls[name] = {"writes": round(writes, 3), "reads": round(reads, 3)}
        usd[name] = _cost(
            wru=measured["wru_per_job"],
            rru=measured.get("rru_per_job", 0.0),
            sqs_requests=sqs_requests,
            lambda_requests=lambda_requests,
            duration_ms=durations[name],
            log_bytes=log_bytes[cpu_side],
        )
    figures["usd_per_million_jobs"] = usd

    def usd_ratio(name: str) -> float | None:
        if name not in usd:
            return None
        return round(usd[name]["total_with_logs"] / usd["powertools"]["total_with_logs"], 3)

    figures["usd_per_million_jobs_ratio_vs_powertools"] = usd_ratio("lambdajobs")
    figures["usd_per_million_jobs_ratio_repo_stack_vs_powertools"] = usd_ratio("lambdajobs_repo_stack")
    figures["usd_per_million_jobs_ratio_light_vs_powertools"] = usd_ratio("lambdajobs_light")
    figures["cost_assumptions"] = {
        "prices_usd": PRICES,
        "region": "us-east-1, on-demand",
        "memory_mb": MEMORY_MB,
        "duration_ms_per_job": {k: round(v, 2) for k, v in durations.items()},
        "dynamodb_calls_per_job": dynamodb_calls,
        "duration_model": "measured CPU per record (DynamoDB stubbed) + the time waiting on its DynamoDB "
        f"calls: the measured write calls per job x {DYNAMODB_WRITE_LATENCY_MS:g} ms and read calls x "
        f"{DYNAMODB_READ_LATENCY_MS:g} ms (latencies assumed)",
        "sqs_requests_per_job": {
            "lambdajobs": round(sqs_lj, 3),
            "powertools": 3 / BATCH_SIZE,
            "naive": 3.0,
        },
        "sqs_model": f"send (measured for enqueue_many; one SendMessageBatch per {BATCH_SIZE} for the "
        f"hand-written producer) + one ReceiveMessage and one DeleteMessageBatch per Lambda batch of "
        f"{BATCH_SIZE} (naive: batch size 1, SendMessage per job); empty long-poll receives not counted",
        "lambda_requests_per_job": {"lambdajobs": 1 / BATCH_SIZE, "powertools": 1 / BATCH_SIZE, "naive": 1.0},
        "dynamodb": "write and read units measured (naive: the hand-written worker's); reads at the read "
        "unit price (eventually consistent: half a unit per 4 KB)",
        "repo_stack": f"this repository's stack (infra/app.py, cdk.json): job index "
        f"'{wru['repo_stack']['job_index']}'",
        "logs": "CloudWatch Logs ingestion of the measured log bytes per job (JSON lines and EMF metrics); "
        "in total_with_logs only; Lambda's own START/END/REPORT lines are the same for all; the "
        "usd_per_million_jobs_ratio_* figures compare total_with_logs",
    }

    # Earlier names (before issue 15), kept: same meaning, now against the hand-written worker.
    figures["cold_start_baseline_seconds"] = details["cold_start_in_process_seconds"]["powertools"]["median"]
    figures["cold_start_lambdajobs_seconds"] = details["cold_start_in_process_seconds"]["lambdajobs"][
        "median"
    ]
    figures["cold_start_ratio"] = figures["cold_start_ratio_vs_powertools"]
    figures["baseline_records_per_second"] = details["moto_records_per_second"]["powertools"]["median"]
    figures["lambdajobs_records_per_second"] = details["moto_records_per_second"]["lambdajobs"]["median"]
    figures["throughput_ratio"] = figures["moto_worker_speed_ratio_vs_powertools"]
    figures["dynamodb_writes_per_job"] = round(wru["off"]["write_calls_per_job"], 3)

    figures["targets"] = targets(figures, details)
    figures["details"] = details
    figures["run"] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "seconds": round(time.perf_counter() - started, 1),
        "quick": sizes == QUICK,
        "sizes": sizes,
        "machine": reports.machine(),
        "commit": reports.commit(),
    }
    return figures


def instruction_ratios(counted: Mapping[str, int | None]) -> dict[str, float | None]:
    """The cold start's instruction ratios from one run's counts per side (None where a side was not
    counted: a quick run, no valgrind)."""
    ratios: dict[str, float | None] = {}
    for suffix, base in (("", "powertools"), ("_paused_gc", "powertools_paused_gc")):
        a, b = counted.get("lambdajobs"), counted.get(base)
        ratios[f"cold_start_instructions_ratio_vs_powertools{suffix}"] = (
            round(a / b, 3) if a is not None and b else None
        )
    return ratios


def _median(values: list[float], digits: int = 3) -> float | None:
    return round(statistics.median(values), digits) if values else None


def _process_seconds(run: dict[str, float]) -> float:
    """One cold start's time from starting the process to the record handled (`bench.coldstart`)."""
    return run["process_seconds"]


def _met(value: float | None, op: str, target: float) -> bool:
    """Whether a figure meets its target; a figure that could not be measured (None) does not."""
    if value is None:
        return False
    return value <= target if op == "<=" else value >= target


def targets(figures: dict[str, Any], details: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every target of `TARGETS`: its figure, the target beside it, whether it is met, and for those
    of `INTERVALS` the 90% interval of the figure and its upper end."""
    out: dict[str, dict[str, Any]] = {}
    for key, (op, value) in TARGETS.items():
        got = figures.get(key)
        entry: dict[str, Any] = {"target": f"{op} {value}", "value": got, "met": _met(got, op, value)}
        if key in INTERVALS and details.get(INTERVALS[key]):
            entry["interval_90"] = details[INTERVALS[key]]
            entry["upper_90"] = details[INTERVALS[key]][1]
        out[key] = entry
    return out


def missed(figures: dict[str, Any]) -> list[str]:
    """The keys of the targets this run missed."""
    return [key for key, t in figures["targets"].items() if not t["met"]]


def exit_status(figures: dict[str, Any]) -> int:
    """`make bench`'s exit status: 1 when a full run missed a target, else 0. A quick run (`--quick`:
    tiny sizes, the test) reports its targets but always exits 0."""
    if figures["run"].get("quick"):
        return 0
    return 1 if missed(figures) else 0


ROWS = [
    (
        "cold start (process start to 1 record handled), plain job / hand-written",
        "cold_start_ratio_vs_powertools",
    ),
    (
        "cold start, plain job / hand-written pausing its collector too",
        "cold_start_ratio_vs_powertools_paused_gc",
    ),
    (
        "cold start, send_email as deployed (rate limit) / hand-written",
        "cold_start_send_email_ratio_vs_powertools",
    ),
    (
        "cold start inside the process (import + 1 record) / hand-written",
        "cold_start_in_process_ratio_vs_powertools",
    ),
    ("cold start, CPU time of the process / hand-written", "cold_start_cpu_ratio_vs_powertools"),
    (
        "cold start, CPU time of the process / hand-written pausing its collector",
        "cold_start_cpu_ratio_vs_powertools_paused_gc",
    ),
    (
        "cold start, instructions (valgrind) from process start to record handled / hand-written",
        "cold_start_instructions_ratio_vs_powertools",
    ),
    (
        "cold start, instructions / hand-written pausing its collector",
        "cold_start_instructions_ratio_vs_powertools_paused_gc",
    ),
    ("worker CPU per record, DynamoDB stubbed, lambdajobs / hand-written", "worker_cpu_ratio_vs_powertools"),
    ("worker CPU per record, light record mode / hand-written", "worker_cpu_ratio_light_vs_powertools"),
    ("log + metric bytes per successful job, lambdajobs / hand-written", "log_bytes_ratio_vs_powertools"),
    ("records/s on moto, lambdajobs / hand-written", "moto_worker_speed_ratio_vs_powertools"),
    ("enqueue_many speed / send_message loop", "enqueue_many_speedup_vs_send_loop"),
    ("enqueue_many speed / send_message_batch loop", "enqueue_many_speedup_vs_batch_loop"),
    ("enqueue_many speed / Celery apply_async", "enqueue_many_speedup_vs_celery"),
    ("SQS calls per enqueued job", "sqs_calls_per_enqueued_job"),
    ("DynamoDB WRU per job (default stack: no job index)", "dynamodb_wru_per_job"),
    ("DynamoDB WRU per job (light record mode)", "dynamodb_wru_per_job_light"),
    ("DynamoDB WRU per job (this repository's stack, as it deploys)", "dynamodb_wru_per_job_repo_stack"),
    ("DynamoDB WRU per job (job index 'finished')", "dynamodb_wru_per_job_job_index_finished"),
    ("DynamoDB WRU per job (hand-written worker)", "dynamodb_wru_per_job_powertools"),
    (
        "DynamoDB WRU per 5-step durable job (its steps in one invocation)",
        "dynamodb_wru_per_durable_job_5_steps",
    ),
    (
        "DynamoDB WRU per 5-step durable job (one step per invocation: 4 continuations)",
        "dynamodb_wru_per_durable_job_5_steps_continuing",
    ),
    ("DynamoDB WRU per step of a durable job (its checkpoint)", "dynamodb_wru_per_step"),
    ("DynamoDB WRU per continuation (its park and the next acquire)", "dynamodb_wru_per_continuation"),
    (
        "USD per million jobs with logs, default stack / hand-written",
        "usd_per_million_jobs_ratio_vs_powertools",
    ),
    (
        "USD per million jobs with logs, this repository's stack / hand-written",
        "usd_per_million_jobs_ratio_repo_stack_vs_powertools",
    ),
    (
        "USD per million jobs with logs, light record mode / hand-written",
        "usd_per_million_jobs_ratio_light_vs_powertools",
    ),
    ("Lambda asset of send_email, KB", "lambda_asset_kb"),
    ("synth of the generated many-job app, seconds", "synth_seconds_many_jobs"),
    ("synth, many-job app / this project's six jobs", "synth_seconds_ratio_many_jobs_vs_project"),
]


def _mark(target: dict[str, Any] | None) -> str:
    if not target:
        return ""
    upper = f", 90% interval {target['interval_90']}" if "interval_90" in target else ""
    return f"  target {target['target']}: {'met' if target['met'] else 'MISSED'}{upper}"


def table(figures: dict[str, Any]) -> str:
    lines = []
    width = max(len(label) for label, _ in ROWS)
    for label, key in ROWS:
        value = figures.get(key)
        mark = _mark(figures["targets"].get(key))
        lines.append(f"{label:<{width}}  {value if value is not None else 'n/a':>8}{mark}")
    usd = figures["usd_per_million_jobs"]
    lines.append("USD per million jobs (DynamoDB + SQS + Lambda; with CloudWatch Logs):")
    for name, parts in usd.items():
        lines.append(f"  {name:<{width - 2}}  {parts['total']:>8}  ({parts['total_with_logs']} with logs)")
    d = figures["details"]
    lines.append("medians [min, max]:")
    for name in ("lambdajobs", "powertools"):
        c = d["cold_start_seconds"][name]
        m = d["moto_records_per_second"][name]
        u = d["worker_cpu_ms_per_record"][name]
        lines.append(
            f"  {name:<11} cold start {c['median']:.3f} s [{c['min']:.3f}, {c['max']:.3f}]   "
            f"CPU {u['median']:.3f} ms/record [{u['min']:.3f}, {u['max']:.3f}]   "
            f"moto {m['median']:.0f} records/s [{m['min']:.0f}, {m['max']:.0f}]"
        )
    lines.append(f"log lines per job (JSON log lines, EMF metric lines): {d['log_lines_per_job']}")
    missing = sorted(set(figures["targets"]) - {key for _, key in ROWS})
    for key in missing:  # a target without a row of its own
        lines.append(f"{key}  {figures.get(key)}{_mark(figures['targets'][key])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a tiny run: checks that every part works")
    parser.add_argument("--out", type=Path, default=REPORT, help="where to write the JSON figures")
    parser.add_argument(
        "--write-doc", action="store_true", help="rewrite docs/reports/benchmarks.md from the run"
    )
    parser.add_argument("--doc-only", action="store_true", help="rewrite the doc from the last --out file")
    args = parser.parse_args(argv)
    if args.doc_only:
        from bench.doc import write_doc

        print(f"wrote {write_doc(json.loads(args.out.read_text()))}")
        return 0
    figures = run(QUICK if args.quick else FULL)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    print(table(figures))
    print(f"wrote {args.out} in {figures['run']['seconds']} s")
    if args.write_doc:
        from bench.doc import write_doc

        print(f"wrote {write_doc(figures)}")
    return report_targets(figures)


def report_targets(figures: dict[str, Any]) -> int:
    """Say which targets were missed; return the exit status (`exit_status`)."""
    status = exit_status(figures)
    failed = missed(figures)
    if figures["run"].get("quick"):
        print(
            f"quick run: {len(figures['targets'])} targets reported, not enforced "
            f"({len(failed)} missed at this size); exit 0"
        )
    elif failed:
        print(
            f"MISSED {len(failed)} of {len(figures['targets'])} targets: {', '.join(failed)}", file=sys.stderr
        )
    else:
        print(f"all {len(figures['targets'])} targets met")
    return status
