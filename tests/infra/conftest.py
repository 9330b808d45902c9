"""Synthesize the CDK app once per test session (jsii start-up and synthesis take seconds)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import lambdajobs.cdk  # noqa: F401  (before any aws_cdk import: it points jsii at the virtualenv's Node)

ALARM_EMAIL = "oncall@example.com"


#: The synthesized app, shared by every test folder that needs it (tests/infra, tests/iam).
_synthesized: list[tuple[dict[str, Any], Path, Any, Any]] = []


def synthesize(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Any, Any]:
    """(template, outdir, stack, assembly), synthesized on first use in this session."""
    if not _synthesized:
        from infra.app import build_app

        outdir = tmp_path_factory.mktemp("cdk.out")
        app, stack = build_app(outdir=str(outdir), context={"alarm_email": ALARM_EMAIL})
        assembly = app.synth()
        template_path = Path(assembly.get_stack_by_name(stack.stack_name).template_full_path)
        _synthesized.append((json.loads(template_path.read_text()), outdir, stack, assembly))
    return _synthesized[0]


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Any, Any]:
    return synthesize(tmp_path_factory)


@pytest.fixture(scope="session")
def template(synthesized) -> dict[str, Any]:
    return synthesized[0]


@pytest.fixture(scope="session")
def stack(synthesized):
    """The `LambdaJobs` construct of this project's stack (its `resolve` and `stack_name` are the stack's)."""
    return synthesized[2].lambdajobs
