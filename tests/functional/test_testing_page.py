"""docs/how-to/testing.md is true: its code, written out as the project it describes (a jobs package
and its tests), passes, run by pytest as a user runs it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lambdajobs.testing import isolated_registry

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "how-to" / "testing.md"
#: The page's shorter retry and dead-letter tests and its log lines' test, which continue its
#: tests/test_billing.py.
CONTINUED = re.compile(r"```python\n# tests/test_billing\.py, continued[^\n]*\n(?P<code>.*?)```", re.DOTALL)
#: A fenced Python block whose first line names the file it is: "# myjobs/billing.py".
BLOCK = re.compile(r"```python\n# (?P<path>[\w/]+\.py)\n(?P<code>.*?)```", re.DOTALL)


def page_files() -> dict[str, str]:
    return {m["path"]: m["code"] for m in BLOCK.finditer(PAGE.read_text(encoding="utf-8"))}


def test_the_page_shows_a_jobs_package_its_stack_and_its_tests():
    assert sorted(page_files()) == ["myjobs/billing.py", "tests/conftest.py", "tests/test_billing.py"]


def test_the_retry_and_dead_letter_tests_on_the_page_pass(pytester: pytest.Pytester):
    # GIVEN the project the page shows: its jobs package, its fixture and its tests
    files = page_files()
    # AND its two shorter ones, at the end of the same test module
    continued = CONTINUED.findall(PAGE.read_text(encoding="utf-8"))
    assert len(continued) == 2  # the shorter tests, and the log lines'
    files["tests/test_billing.py"] += "".join("\n\n" + code for code in continued)
    for path, code in files.items():
        pytester.path.joinpath(path).parent.mkdir(parents=True, exist_ok=True)
        pytester.path.joinpath(path).write_text(code, encoding="utf-8")
    pytester.path.joinpath("myjobs", "__init__.py").write_text("", encoding="utf-8")
    pytester.syspathinsert()  # the project's root, as an installed or `pythonpath` package would be
    # WHEN pytest runs its tests (the page's jobs declared apart from this process's registry)
    with isolated_registry(keep=True):
        result = pytester.runpytest_inprocess("-q", "-p", "no:cacheprovider", "tests")
    # THEN all five pass
    result.assert_outcomes(passed=5)
