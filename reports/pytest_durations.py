"""A pytest plugin that writes build/reports/tests.json: the session's wall time, outcome counts, and
each test's and module's duration (`python -m reports.tests` loads it; `-p reports.pytest_durations`
does too, e.g. in `make test`). Reports arrive in the controlling process, so it works under xdist."""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import pytest

from reports import ROOT, run_info

REPORT = ROOT / "build" / "reports" / "tests.json"

_started = 0.0
_tests: dict[str, float] = {}
_outcomes: Counter[str] = Counter()


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _tests[report.nodeid] = _tests.get(report.nodeid, 0.0) + report.duration
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _outcomes["failed" if report.failed else report.outcome] += 1
    elif report.when == "teardown" and report.failed:
        _outcomes["errors"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    modules: dict[str, dict[str, Any]] = {}
    for nodeid, seconds in _tests.items():
        module = modules.setdefault(nodeid.split("::", 1)[0], {"tests": 0, "seconds": 0.0})
        module["tests"] += 1
        module["seconds"] = round(module["seconds"] + seconds, 3)
    given = [str(a) for a in session.config.invocation_params.args]
    # the command as run, less the `-p reports.pytest_durations` that loaded this plugin
    args = [a for i, a in enumerate(given) if a != __name__ and given[i + 1 : i + 2] != [__name__]]
    data = {
        "run": run_info(),
        "args": args,
        # no paths given: pytest ran its testpaths, the whole suite
        "whole_suite": session.config.args_source is pytest.Config.ArgsSource.TESTPATHS,
        "exitstatus": int(exitstatus),
        "seconds": round(time.monotonic() - _started, 1),
        "outcomes": dict(_outcomes),
        "modules": modules,
        "tests": {nodeid: round(seconds, 3) for nodeid, seconds in _tests.items()},
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(data, indent=2) + "\n")
