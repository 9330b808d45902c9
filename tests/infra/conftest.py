"""Synthesize the CDK app once per test session (jsii start-up and synthesis take seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

ALARM_EMAIL = "oncall@example.com"


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Any, Any]:
    from infra.app import build_app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app, stack = build_app(outdir=str(outdir), context={"alarm_email": ALARM_EMAIL})
    assembly = app.synth()
    template = json.loads(Path(assembly.get_stack_by_name(stack.stack_name).template_full_path).read_text())
    return template, outdir, stack, assembly


@pytest.fixture(scope="session")
def template(synthesized) -> dict[str, Any]:
    return synthesized[0]


@pytest.fixture(scope="session")
def stack(synthesized):
    """The `LambdaJobs` construct of this project's stack (its `resolve` and `stack_name` are the stack's)."""
    return synthesized[2].lambdajobs
