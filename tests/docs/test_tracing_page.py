"""docs/how-to/tracing.md's "In tests" example is true: written out as the project it describes (a jobs
package whose `send_invoice` does not ask for tracing, and the page's test), it passes, run by pytest
in a process of its own (OpenTelemetry's tracer provider is set once per process)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "tracing.md"

JOBS = """
from pydantic import BaseModel

from lambdajobs import job


class Invoice(BaseModel):
    order_id: str


@job
def send_invoice(payload: Invoice) -> None:
    pass
"""


def example() -> str:
    section = PAGE.read_text(encoding="utf-8").split("## In tests", 1)[1].split("\n## ", 1)[0]
    [code] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)
    return code


def test_the_in_tests_example_passes_as_written(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    # GIVEN a project of one jobs package and the page's test
    (pytester.path / "acme_jobs").mkdir()
    (pytester.path / "acme_jobs" / "__init__.py").write_text("", encoding="utf-8")
    (pytester.path / "acme_jobs" / "billing.py").write_text(JOBS, encoding="utf-8")
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_traces.py").write_text(example(), encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(pytester.path))
    # WHEN pytest runs it, THEN it passes: the stack traced a job that did not ask (that TestStack's
    # tracing is what makes the span: tests/functional/test_tracing.py)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider", "tests")
    result.assert_outcomes(passed=1)
