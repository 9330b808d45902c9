"""The stack's `tracing` option: `LAMBDAJOBS_TRACING=1` on every job function and on the workflow
continuer when it is on, on none when it is off (the default); a job's own `tracing=True` needs no
variable (the worker reads the job's spec)."""

from __future__ import annotations

import sys
import textwrap
from typing import Any

import pytest

from lambdajobs.runtime.settings import ENV_TRACING
from lambdajobs.testing import isolated_registry

JOBS = """
from pydantic import BaseModel

from lambdajobs import job


class Ping(BaseModel):
    n: int


@job
def ping(payload: Ping) -> None:
    pass


@job(tracing=True)
def pong(payload: Ping) -> None:
    pass
"""


@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Two stacks of one small jobs package in one app: tracing on ("traced") and the default ("plain")."""
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from lambdajobs.cdk import LambdaJobsStack

    root = tmp_path_factory.mktemp("traced")
    (root / "probe_traced").mkdir()
    (root / "probe_traced" / "__init__.py").write_text("")
    (root / "probe_traced" / "pings.py").write_text(textwrap.dedent(JOBS))
    sys.path.insert(0, str(root))
    try:
        with isolated_registry():
            app = App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
            traced = LambdaJobsStack(app, "traced", jobs="probe_traced", tracing=True)
            plain = LambdaJobsStack(app, "plain", jobs="probe_traced")
            return {
                "traced": dict(Template.from_stack(traced).to_json()),
                "plain": dict(Template.from_stack(plain).to_json()),
            }
    finally:
        sys.path.remove(str(root))


def variables(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each lambdajobs function's environment, by the job it serves (the continuer: "(continuer)")."""
    found = {}
    for resource in template["Resources"].values():
        if resource["Type"] != "AWS::Lambda::Function":
            continue
        env = resource["Properties"].get("Environment", {}).get("Variables", {})
        handler = resource["Properties"].get("Handler", "")
        if "LAMBDAJOBS_JOB" in env:
            found[env["LAMBDAJOBS_JOB"]] = env
        elif "continuer" in handler:
            found["(continuer)"] = env
    return found


def test_a_stack_with_tracing_on_sets_the_variable_on_every_job_function_and_the_continuer(templates):
    env = variables(templates["traced"])
    assert set(env) == {"ping", "pong", "(continuer)"}
    assert {name: e.get(ENV_TRACING) for name, e in env.items()} == {
        "ping": "1",
        "pong": "1",
        "(continuer)": "1",
    }


def test_tracing_is_off_by_default_and_a_jobs_own_tracing_needs_no_variable(templates):
    env = variables(templates["plain"])
    assert set(env) == {"ping", "pong", "(continuer)"}
    assert [name for name, e in env.items() if ENV_TRACING in e] == []
