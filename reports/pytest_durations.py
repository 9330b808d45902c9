"""A pytest plugin that writes build/reports/tests.json: the session's wall time and CPU time, the
outcome counts, and each test's and module's duration and CPU seconds (`python -m reports.tests` loads
it; `-p reports.pytest_durations` does too, e.g. in `make test`).

Under pytest-xdist each test's CPU seconds are measured in the worker that ran it (the worker's own
CPU time, its threads' included, and that of the processes it started and waited for) and travel to
the controlling process on the test's report, which writes the file. CPU is what the suite's budget
spends on a 2-core machine: wall time can only fall to about the total CPU seconds over the cores.
"""

from __future__ import annotations

import json
import resource
import time
from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

from reports import ROOT, run_info

REPORT = ROOT / "build" / "reports" / "tests.json"

_started = 0.0
_cpu_started = 0.0
_tests: dict[str, float] = {}
_cpu: dict[str, float] = {}
_outcomes: Counter[str] = Counter()


def cpu_seconds() -> float:
    """This process's CPU seconds (user and system, every thread) and its waited-for children's."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started, _cpu_started
    _started = time.monotonic()
    _cpu_started = cpu_seconds()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    # the phase's CPU: from the end of the previous phase's report (or the test's start) to now
    now = cpu_seconds()
    report.cpu_seconds = round(now - getattr(item, "_cpu_mark", now), 3)
    item._cpu_mark = now  # type: ignore[attr-defined]
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item._cpu_mark = cpu_seconds()  # type: ignore[attr-defined]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _tests[report.nodeid] = _tests.get(report.nodeid, 0.0) + report.duration
    _cpu[report.nodeid] = _cpu.get(report.nodeid, 0.0) + float(getattr(report, "cpu_seconds", 0.0))
    if report.when == "call" or (report.when == "setup" and not report.passed):
        _outcomes["failed" if report.failed else report.outcome] += 1
    elif report.when == "teardown" and report.failed:
        _outcomes["errors"] += 1


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controlling process writes the report of the whole run
    modules: dict[str, dict[str, Any]] = {}
    for nodeid, seconds in _tests.items():
        module = modules.setdefault(
            nodeid.split("::", 1)[0], {"tests": 0, "seconds": 0.0, "cpu_seconds": 0.0}
        )
        module["tests"] += 1
        module["seconds"] = round(module["seconds"] + seconds, 3)
        module["cpu_seconds"] = round(module["cpu_seconds"] + _cpu.get(nodeid, 0.0), 3)
    given = [str(a) for a in session.config.invocation_params.args]
    # the command as run, less the `-p reports.pytest_durations` that loaded this plugin
    args = [a for i, a in enumerate(given) if a != __name__ and given[i + 1 : i + 2] != [__name__]]
    workers = (
        session.config.getoption("numprocesses", None)
        if session.config.pluginmanager.has_plugin("xdist")
        else None
    )
    data = {
        "run": run_info(),
        "args": args,
        # no paths given: pytest ran its testpaths, the whole suite
        "whole_suite": session.config.args_source is pytest.Config.ArgsSource.TESTPATHS,
        "workers": int(workers or 0),
        "exitstatus": int(exitstatus),
        "seconds": round(time.monotonic() - _started, 1),
        # every process of the run: this one, its xdist workers and what they started
        "cpu_seconds": round(cpu_seconds() - _cpu_started, 1),
        "outcomes": dict(_outcomes),
        "modules": modules,
        "tests": {nodeid: round(seconds, 3) for nodeid, seconds in _tests.items()},
        "tests_cpu_seconds": {nodeid: round(seconds, 3) for nodeid, seconds in _cpu.items()},
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(data, indent=2) + "\n")
