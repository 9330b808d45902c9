"""docs/reports/tests.md: how long the test suite took, from a real pytest run.

    python -m reports.tests                 # the whole suite (what `make test` runs), then the page
    python -m reports.tests tests/unit -q   # any pytest arguments

It runs pytest with the plugin `reports.pytest_durations`, which writes build/reports/tests.json (the
wall time, the outcome counts, each module's and each test's durations: setup, call and teardown
together), then writes the page from it; `--doc-only` rewrites the page from the last tests.json. The
issues after this one keep `make test` within its budget: this page is where its duration is stated.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from reports import ROOT, header, write_page

REPORT = ROOT / "build" / "reports" / "tests.json"
#: `make test` must finish within this on an idle 2-core machine (issue 24).
BUDGET_SECONDS = 6 * 60
SLOWEST = 15


def render(data: dict[str, Any]) -> list[str]:
    seconds = data["seconds"]
    counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(data["outcomes"].items()))
    lines = header("Test suite", "build/reports/tests.json", "python -m reports.tests", data.get("run"))
    command = " ".join(["pytest", *data["args"]])
    scope = "the whole suite" if data.get("whole_suite") else "a part of the suite, not all of it"
    workers = data.get("workers") or 1
    how = f"in {workers} worker processes" if workers > 1 else "in one process"
    cpu = f", using {data['cpu_seconds']:.0f} CPU seconds" if data.get("cpu_seconds") is not None else ""
    lines += [
        f"`{command}` ({scope}, {how}) took {seconds:.0f} s{cpu}: {counts}. The budget of `make test`, the"
        f" whole suite, is {BUDGET_SECONDS // 60} minutes on an idle 2-core machine.",
        "",
        "## By module",
        "",
        "A module's seconds are its tests' (setup, call and teardown), in the worker that ran them; its CPU"
        " seconds are those of that worker and of the processes its tests started and waited for (a process"
        " that outlives a test, such as jsii's Node or a browser, counts only in the run's total).",
        "",
        "| module | tests | seconds | CPU seconds |",
        "|---|---|---|---|",
    ]
    modules = sorted(data["modules"].items(), key=lambda kv: -kv[1]["seconds"])
    lines += [
        f"| `{name}` | {m['tests']} | {m['seconds']:.1f} | {m.get('cpu_seconds', 0.0):.1f} |"
        for name, m in modules
    ]
    lines += ["", f"## The {SLOWEST} slowest tests", "", "| test | seconds |", "|---|---|"]
    slowest = sorted(data["tests"].items(), key=lambda kv: -kv[1])[:SLOWEST]
    lines += [f"| `{name}` | {secs:.2f} |" for name, secs in slowest]
    return lines


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--doc-only"]:
        print(f"wrote {write_page('tests', render(json.loads(REPORT.read_text())))} from {REPORT}")
        return 0
    import pytest

    code = int(pytest.main(["-p", "reports.pytest_durations", *args]))
    if not REPORT.exists():
        return code or 1
    print(f"wrote {write_page('tests', render(json.loads(REPORT.read_text())))}")
    return code


if __name__ == "__main__":
    sys.exit(main())
