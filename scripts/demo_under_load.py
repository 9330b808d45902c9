#!/usr/bin/env python3
"""The demo on a loaded machine: `python demo.py` N times in a row, each beside a busy loop per core.

    .venv/bin/python scripts/demo_under_load.py                  # 10 runs, os.cpu_count() busy loops
    .venv/bin/python scripts/demo_under_load.py --runs 3 --busy 1
    .venv/bin/python scripts/demo_under_load.py --write-doc      # then docs/reports/demo-under-load.md
    .venv/bin/python scripts/demo_under_load.py --doc-only       # the page from the last JSON, no runs

The busy loops are processes spinning for the whole series (started before the first run, stopped
after the last). Each run keeps its JSON, its output and its workers' log in build/reports/demo_under_load/
(run-NN.json, run-NN.out, run-NN-worker.log); the series is in build/reports/demo_under_load.json: each
run's exit code, duration, the machine's load, what timed out ("timed out waiting for ...") and what was
wrong ("unexpected ..."), how long each of the demo's waits took against its limit (`demo.WAITS`).
Exits non-zero if any run failed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: `reports` is at the repository's root

from reports import header, run_info, write_page  # noqa: E402

REPORT = ROOT / "build" / "reports" / "demo_under_load.json"
RUNS_DIR = ROOT / "build" / "reports" / "demo_under_load"
#: The repository's virtualenv (`make install`) runs the demo, whichever Python runs this script.
PYTHON = (
    ROOT / ".venv" / "bin" / "python"
    if (ROOT / ".venv" / "bin" / "python").exists()
    else Path(sys.executable)
)
PAGE = "demo-under-load"
COMMAND = "python scripts/demo_under_load.py --write-doc"


def spin() -> None:
    """One busy loop: a core's worth of other work."""
    while True:
        pass


def one_run(index: int) -> dict[str, Any]:
    """`python demo.py` once; its exit code, duration and what its JSON says went wrong."""
    report = RUNS_DIR / f"run-{index:02d}.json"
    output = RUNS_DIR / f"run-{index:02d}.out"
    report.unlink(missing_ok=True)  # a run that crashes must not be read from an earlier one's JSON
    command = [str(PYTHON), "demo.py", "--report", str(report)]
    command += ["--log-file", str(RUNS_DIR / f"run-{index:02d}-worker.log")]
    started = time.monotonic()
    with output.open("w") as out:
        code = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    seconds = round(time.monotonic() - started, 1)
    figures: dict[str, Any] = json.loads(report.read_text()) if report.exists() else {}
    wrong = list(figures.get("wrong", []))
    if not figures:  # no JSON: the demo crashed before writing it; its output's last line says why
        lines = output.read_text(errors="replace").strip().splitlines()
        wrong = [f"no report written (exit {code}): {lines[-1] if lines else 'no output'}"]
    return {
        "run": index,
        "exit_code": code,
        "ok": code == 0 and figures.get("ok") is True,
        "seconds": seconds,
        "demo_seconds": figures.get("seconds"),
        "load_1min": round(os.getloadavg()[0], 2),
        "timed_out": list(figures.get("timed_out", [])),
        "not_measured": dict(figures.get("not_measured", {})),
        "wrong": wrong,
        "waits": {k: w.get("seconds") for k, w in figures.get("waits", {}).items()},
        "limits": {k: [w.get("what"), w.get("limit")] for k, w in figures.get("waits", {}).items()},
        "output": str(output.relative_to(ROOT)),
    }


def describe(result: dict[str, Any]) -> str:
    seconds = f"{result['seconds']:.0f} s"
    if result["ok"]:
        return f"ok in {seconds}"
    first = (result["timed_out"] + result["wrong"] + ["no reason recorded"])[0]
    return f"FAILED (exit {result['exit_code']}) in {seconds}: {first}"


def wait_stats(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each of the demo's waits over the runs: its limit, and its longest and median duration."""
    stats: dict[str, dict[str, Any]] = {}
    for result in results:
        for key, (what, limit) in result["limits"].items():
            entry = stats.setdefault(key, {"what": what, "limit": limit, "seconds": []})
            if result["waits"].get(key) is not None:
                entry["seconds"].append(result["waits"][key])
    for entry in stats.values():
        taken = entry.pop("seconds")
        entry["longest"] = max(taken) if taken else None
        entry["median"] = round(statistics.median(taken), 1) if taken else None
    return stats


def run_series(runs: int, busy: int) -> dict[str, Any]:
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    loops = [multiprocessing.Process(target=spin, daemon=True) for _ in range(busy)]
    for loop in loops:
        loop.start()
    print(f"{busy} busy loop(s) on {os.cpu_count()} CPU(s); {runs} run(s) of demo.py, output in {RUNS_DIR}")
    results: list[dict[str, Any]] = []
    try:
        for index in range(1, runs + 1):
            result = one_run(index)
            results.append(result)
            print(f"run {index}/{runs}: {describe(result)} (load {result['load_1min']})", flush=True)
    finally:
        for loop in loops:
            loop.terminate()
        for loop in loops:
            loop.join()
    return {
        "run": run_info(),
        "runs": runs,
        "busy_loops": busy,
        "ok": all(r["ok"] for r in results),
        "results": results,
        "waits": wait_stats(results),
    }


def summary(data: dict[str, Any]) -> list[str]:
    """The series in a few lines: runs passed, durations, the longest of each wait against its limit."""
    results = data["results"]
    durations = [r["seconds"] for r in results]
    passed = sum(r["ok"] for r in results)
    timed_out = sum(bool(r["timed_out"]) for r in results)
    wrong = sum(bool(r["wrong"]) for r in results)
    lines = [
        f"{passed}/{len(results)} runs passed beside {data['busy_loops']} busy loop(s): {timed_out} with a "
        f"wait timed out, {wrong} with an outcome wrong",
    ]
    if durations:
        lines.append(
            f"durations: min {min(durations):.0f} s, median {statistics.median(durations):.0f} s, "
            f"max {max(durations):.0f} s"
        )
    for key, entry in data["waits"].items():
        lines.append(
            f"wait {key}: longest {_seconds(entry['longest'])}, median {_seconds(entry['median'])}, "
            f"limit {entry['limit']:.0f} s"
        )
    for r in results:
        lines += [f"run {r['run']}: {line}" for line in r["timed_out"] + r["wrong"]]
    return lines


def render(data: dict[str, Any]) -> list[str]:
    """docs/reports/demo-under-load.md: the series' runs and the demo's waits against their limits."""
    results = data["results"]
    passed = sum(r["ok"] for r in results)
    lines = header("Demo under load", str(REPORT.relative_to(ROOT)), COMMAND, data.get("run"))
    lines += [
        f"`python demo.py` {len(results)} times in a row, each beside {data['busy_loops']} busy loop(s) "
        "(processes spinning, one per core by default, for the whole series): "
        f"**{passed} of {len(results)} runs passed**. A run fails when an outcome is wrong or when one of "
        "the demo's waits runs out of its limit (`WAITS` in `demo.py`); a timed-out wait is reported as "
        "such, and the outcomes depending on it as not measured, never as wrong values.",
        "",
        "| run | exit code | seconds | load (1 min) | outcome |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        outcome = "ok" if r["ok"] else "; ".join(r["timed_out"] + r["wrong"]) or "failed"
        lines.append(
            f"| {r['run']} | {r['exit_code']} | {r['seconds']:.1f} | {r['load_1min']} | "
            f"{outcome.replace('|', chr(92) + '|')} |"
        )
    lines += [
        "",
        "## The demo's waits",
        "",
        "How long each wait took over the runs, against its limit: a wait whose longest comes near its "
        "limit needs a larger one.",
        "",
        "| wait | what it waits for | longest (s) | median (s) | limit (s) |",
        "|---|---|---|---|---|",
    ]
    for key, entry in data["waits"].items():
        lines.append(
            f"| `{key}` | {entry['what']} | {_seconds(entry['longest'], '')} | "
            f"{_seconds(entry['median'], '')} | {entry['limit']:.0f} |"
        )
    return lines


def _seconds(value: float | None, unit: str = " s") -> str:
    return "not measured" if value is None else f"{value:.1f}{unit}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/demo_under_load.py", description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of demo.py in a row (10)")
    parser.add_argument(
        "--busy", type=int, default=os.cpu_count() or 1, help="busy loops beside them (one per core)"
    )
    parser.add_argument("--write-doc", action="store_true", help=f"also write docs/reports/{PAGE}.md")
    parser.add_argument("--doc-only", action="store_true", help="write the page from the last JSON, no runs")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.doc_only:
        data = json.loads(REPORT.read_text())
        print(f"wrote {write_page(PAGE, render(data))} from {REPORT}")
        return 0 if data["ok"] else 1
    if args.runs < 1 or args.busy < 0:
        parser.error("--runs must be at least 1 and --busy at least 0")
    data = run_series(args.runs, args.busy)
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(data, indent=2) + "\n")
    print("\n".join(summary(data)))
    print(f"wrote {REPORT}")
    if args.write_doc:
        print(f"wrote {write_page(PAGE, render(data))}")
    return 0 if data["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
