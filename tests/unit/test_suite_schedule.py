"""How `make test` spreads the suite over the cores (tests/parallel.py): a unit of work per module,
one unit for the modules sharing the synthesized app (and a module using it unlisted stops the run),
the longest unit first, from the seconds the generated tests report gives."""

from __future__ import annotations

import json
from types import FunctionType, SimpleNamespace

import pytest

from reports.tests import render
from tests.parallel import (
    SHARED_SYNTH,
    SYNTH,
    module_seconds,
    plan,
    pytest_collection_modifyitems,
    strays,
    unit_of,
)


def test_a_module_is_a_unit_and_the_shared_synthesis_is_one():
    assert unit_of("tests/unit/test_spec.py::test_x[a-b]") == "tests/unit/test_spec.py"
    assert {unit_of(f"{module}::test_x") for module in SHARED_SYNTH} == {SYNTH}


def test_the_longest_unit_goes_first_an_unknown_one_before_it_and_each_keeps_its_order():
    nodeids = [
        "tests/a.py::one",
        "tests/a.py::two",
        "tests/infra/test_stack.py::s1",
        "tests/b.py::one",
        "tests/new.py::one",
        "tests/infra/test_workflows.py::w1",
        "tests/infra/test_stack.py::s2",
    ]
    seconds = {
        "tests/a.py": 5.0,
        "tests/b.py": 30.0,
        "tests/infra/test_stack.py": 10.0,
        "tests/infra/test_workflows.py": 12.0,
    }
    # the synth unit weighs its modules together (22 s), between b (30 s) and a (5 s); new.py is unknown
    assert [nodeids[i] for i in plan(nodeids, seconds)] == [
        "tests/new.py::one",
        "tests/b.py::one",
        "tests/infra/test_stack.py::s1",
        "tests/infra/test_workflows.py::w1",
        "tests/infra/test_stack.py::s2",
        "tests/a.py::one",
        "tests/a.py::two",
    ]


def test_the_seconds_come_from_the_generated_page_and_the_last_run_overrides_them(tmp_path):
    run = {"date": "2026-12-02T00:00:00Z", "commit": "abc1234", "machine": {}}
    data = {
        "run": run,
        "args": ["-q"],
        "whole_suite": True,
        "workers": 2,
        "seconds": 300.0,
        "cpu_seconds": 500.0,
        "outcomes": {"passed": 3},
        "modules": {
            "tests/a.py": {"tests": 2, "seconds": 12.5, "cpu_seconds": 11.0},
            "tests/b.py": {"tests": 1, "seconds": 3.0, "cpu_seconds": 2.0},
        },
        "tests": {"tests/a.py::one": 12.5, "tests/b.py::one": 3.0},
    }
    page = tmp_path / "tests.md"
    page.write_text("\n".join(render(data)) + "\n")
    assert module_seconds(last_run=tmp_path / "missing.json", page=page) == {
        "tests/a.py": 12.5,
        "tests/b.py": 3.0,
    }
    last = tmp_path / "tests.json"
    last.write_text(json.dumps({"modules": {"tests/b.py": {"tests": 1, "seconds": 40.0}}}))
    assert module_seconds(last_run=last, page=page) == {"tests/a.py": 12.5, "tests/b.py": 40.0}


def _item(nodeid: str, fixture_globals: dict | None) -> SimpleNamespace:
    """A collected test as the check reads it: its node id, fixture names and `synthesized`'s definition."""
    if fixture_globals is None:
        return SimpleNamespace(nodeid=nodeid, fixturenames=["tmp_path"], _fixtureinfo=SimpleNamespace())
    synthesized = FunctionType(
        compile("def synthesized(): pass", nodeid, "exec").co_consts[0], fixture_globals
    )
    definitions = {"synthesized": [SimpleNamespace(func=synthesized)]}
    return SimpleNamespace(
        nodeid=nodeid,
        fixturenames=["synthesized"],
        _fixtureinfo=SimpleNamespace(name2fixturedefs=definitions),
    )


def test_a_module_using_the_shared_synthesis_outside_the_list_is_named_and_its_own_app_is_not():
    def synthesize():  # stands for tests.infra.conftest.synthesize
        pass

    synthesize.__module__ = "tests.infra.conftest"

    def own_app():
        pass

    items = [
        _item("tests/infra/test_stack.py::t", {"synthesize": synthesize}),  # listed
        _item("tests/infra/test_new.py::t", {"synthesize": synthesize}),  # not listed
        _item("tests/package/test_x.py::t", {"synthesize": own_app}),  # a `synthesized` of its own app
        _item("tests/unit/test_y.py::t", None),  # no synthesis at all
    ]
    assert strays(items) == ["tests/infra/test_new.py"]
    with pytest.raises(
        pytest.UsageError, match=r"tests/infra/test_new.py use .* add the module to SHARED_SYNTH"
    ):
        pytest_collection_modifyitems(SimpleNamespace(), items)
