"""A job in the light record mode has no durable state (`ctx.step`, `ctx.sleep` and signal waits
make it dead at once: `lambdajobs.runtime.light`), so its role gets no grant for durable wake-ups:
no CreateSchedule of its own wake-ups and, unless it enqueues jobs it may schedule for later
(`enqueue(..., run_at=...)`), no PassRole of the one-time schedule role either. A full-mode job keeps
both, and cdk-nag finds nothing in a stack of both kinds."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.infra.test_schedules import _actions, _schedule_patterns, policy_statements

JOBS = """
from pydantic import BaseModel

from lambdajobs import job


class Ping(BaseModel):
    n: int


@job
def ping(payload: Ping) -> None:
    pass


@job(record_mode="light")
def quiet(payload: Ping) -> None:
    pass


@job(record_mode="light", enqueues=("ping",))
def relay(payload: Ping) -> None:
    pass
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One stack of a small jobs package, with cdk-nag's rules on: its template, the stack, nag's errors."""
    from lambdajobs.cdk.nag import nag_errors
    from tests.big_app import synthesize

    root = tmp_path_factory.mktemp("light")
    (root / "probe_light").mkdir()
    (root / "probe_light" / "__init__.py").write_text("")
    (root / "probe_light" / "pings.py").write_text(JOBS)
    outdir = tmp_path_factory.mktemp("cdk.out")
    assembly, stack = synthesize(
        root, "probe_light", stack="lightgrants", outdir=outdir, stacks_file=root / "stacks.json"
    )
    template = json.loads(Path(assembly.get_stack_by_name("lightgrants").template_full_path).read_text())
    return {"template": template, "stack": stack.lambdajobs, "nag": nag_errors(assembly)}


def grants(built: dict[str, Any], job: str) -> tuple[list[str], set[str]]:
    """A job worker's CreateSchedule patterns in the one-time group, and every action of its role."""
    stack, template = built["stack"], built["template"]
    function = template["Resources"][stack.resolve(stack.workers[job].function.node.default_child.logical_id)]
    statements = policy_statements(template, function["Properties"]["Role"]["Fn::GetAtt"][0])
    patterns = _schedule_patterns(statements, stack.one_time_group.schedule_group_name)
    return patterns, set().union(*(_actions(s) for s in statements))


def test_a_light_job_may_schedule_nothing_and_pass_no_role(built):
    patterns, actions = grants(built, "quiet")
    assert patterns == []
    assert "iam:PassRole" not in actions
    assert not {a for a in actions if a.startswith("scheduler:")}


def test_a_light_job_that_enqueues_may_still_schedule_them_for_later(built):
    patterns, actions = grants(built, "relay")
    assert patterns == ["*"]  # enqueue(run_at=...): schedules named per job id, in the one-time group
    assert "iam:PassRole" in actions


def test_a_full_mode_job_keeps_its_own_wake_ups(built):
    patterns, actions = grants(built, "ping")
    assert patterns == ["ping-w*"]
    assert "iam:PassRole" in actions


def test_cdk_nag_finds_nothing_in_a_stack_of_both_modes(built):
    assert built["nag"] == []
