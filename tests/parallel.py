"""How `make test` spreads the suite over the machine's cores: pytest-xdist's `--dist loadfile`, refined.

A work unit is one test module, so a module's fixtures are built once, on one worker, except that the
modules sharing this repository's synthesized app (`SHARED_SYNTH`: their `synthesized` fixture calls
`tests.infra.conftest.synthesize`) are one unit, so the app is synthesized once per run as it is in
one process: a jsii synthesis costs seconds of CPU, and its objects cannot cross processes. A test
that uses the shared synthesis from a module not in `SHARED_SYNTH` stops the run at collection, saying
so. Units are handed out longest first (the longest-processing-time rule, so the last unit to start is
a short one and the workers finish together), by the seconds each module took in the last run on this
machine (build/reports/tests.json), or else in the committed generated page docs/reports/tests.md; a
module neither knows goes first, as it may be long.

xdist 3.8's `--dist loadgroup` cannot express the units under pytest 9 (it renames the node ids, which
pytest 9 no longer lets it do): the scheduler below is `loadfile` with its own idea of a file.
Without xdist (`pytest tests/unit`, `-p no:xdist`, `-n 0`) the order is pytest's own.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAST_RUN = ROOT / "build" / "reports" / "tests.json"
PAGE = ROOT / "docs" / "reports" / "tests.md"
SYNTH = "synth"
#: The modules whose tests use the session's one synthesis of this repository's app.
SHARED_SYNTH = frozenset(
    {
        "tests/functional/test_upgrade_guard.py",
        "tests/iam/test_board.py",
        "tests/iam/test_cli.py",
        "tests/iam/test_durable.py",
        "tests/iam/test_example_paths.py",
        "tests/iam/test_flow_control.py",
        "tests/iam/test_harness.py",
        "tests/iam/test_many_jobs.py",
        "tests/iam/test_producer.py",
        "tests/iam/test_records.py",
        "tests/iam/test_schedules.py",
        "tests/iam/test_workers.py",
        "tests/iam/test_workflows.py",
        "tests/infra/test_cdk_cli.py",
        "tests/infra/test_flow_control.py",
        "tests/infra/test_limits.py",
        "tests/infra/test_local_matches_template.py",
        "tests/infra/test_monitoring.py",
        "tests/infra/test_operations.py",
        "tests/infra/test_priorities.py",
        "tests/infra/test_records.py",
        "tests/infra/test_schedules.py",
        "tests/infra/test_stack.py",
        "tests/infra/test_workflows.py",
    }
)
_ROW = re.compile(r"^\| `(?P<module>[^`]+\.py)` \| \d+ \| (?P<seconds>[0-9.]+) \|")

# An xdist worker starts with COLUMNS=80 in its environment (the controlling process has none), and
# rich's Console fixes its width from COLUMNS when it is made, at the CLI's import: the CLI tests, which
# pass their own COLUMNS to each command, would then see 80 columns. A worker runs as the suite does.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)


def unit_of(nodeid: str) -> str:
    """The work unit of a test: its module, or `synth` for a module of the shared synthesis."""
    module = nodeid.split("::", 1)[0]
    return SYNTH if module in SHARED_SYNTH else module


def module_seconds(last_run: Path = LAST_RUN, page: Path = PAGE) -> dict[str, float]:
    """Seconds per test module: the committed page's, overridden by the last run's on this machine."""
    seconds: dict[str, float] = {}
    if page.exists():
        for line in page.read_text().splitlines():
            if match := _ROW.match(line):
                seconds[match["module"]] = float(match["seconds"])
    try:
        modules = json.loads(last_run.read_text())["modules"]
        seconds |= {name: float(module["seconds"]) for name, module in modules.items()}
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return seconds


def plan(nodeids: list[str], seconds: dict[str, float]) -> list[int]:
    """The order to run the tests in (indexes into `nodeids`): by unit, each unit's tests in pytest's
    order, the longest unit first."""
    units: dict[str, list[int]] = {}
    for index, nodeid in enumerate(nodeids):
        units.setdefault(unit_of(nodeid), []).append(index)
    weight: dict[str, float] = {}
    for unit, members in units.items():
        modules = {nodeids[i].split("::", 1)[0] for i in members}
        known = [seconds[m] for m in modules if m in seconds]
        weight[unit] = sum(known) if len(known) == len(modules) else float("inf")
    order = sorted(units, key=lambda unit: -weight[unit])  # stable: ties keep pytest's order
    return [index for unit in order for index in units[unit]]


def uses_shared_synthesis(item: pytest.Item) -> bool:
    """True when the test's `synthesized` fixture is one that calls `tests.infra.conftest.synthesize`
    (a module's own `synthesized`, of an app of its own, is not)."""
    info = getattr(item, "_fixtureinfo", None)
    if "synthesized" not in item.fixturenames or info is None:
        return False
    definitions = info.name2fixturedefs.get("synthesized", ())
    called = [d.func.__globals__.get("synthesize") for d in definitions[-1:]]  # the one the test gets
    return any(getattr(f, "__module__", None) == "tests.infra.conftest" for f in called)


def strays(items: list[pytest.Item]) -> list[str]:
    """The modules whose tests use the shared synthesis but are not in `SHARED_SYNTH`."""
    modules = {item.nodeid.split("::", 1)[0] for item in items if uses_shared_synthesis(item)}
    return sorted(modules - SHARED_SYNTH)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if missing := strays(items):
        raise pytest.UsageError(
            f"tests of {', '.join(missing)} use the session's synthesized app: add the module to SHARED_SYNTH"
            " in tests/parallel.py, so that the app is synthesized once when the suite runs in parallel."
        )
    if hasattr(config, "workerinput"):  # an xdist worker: the scheduler hands out the units in this order
        items[:] = [items[i] for i in plan([item.nodeid for item in items], module_seconds())]


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # optional: `-p no:xdist` has no such hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Units(LoadFileScheduling):
        """`loadfile` whose file is `unit_of`, its units in the workers' (planned) order."""

        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # keep the planned order, not "most tests first"
    return Units(config, log)
