"""Flow control in the template: what cancel, debounce and concurrency per key may touch, and the
dashboard's counts of them (the calls run under these policies in tests/iam/test_flow_control.py)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

import pytest

from lambdajobs.runtime import debounce, keyslots
from lambdajobs.runtime.producer import one_time_schedule_name
from lambdajobs.runtime.spec import load_jobs
from lambdajobs.runtime.workflow import workflow_key
from tests.infra.policies import statements_of_role
from tests.infra.test_operations import dashboard_body
from tests.infra.test_stack import logical_id, props

JOBS = [spec.name for spec in load_jobs("handlers")]
FLOW_METRICS = ("JobCancelled", "JobSuperseded", "JobKeyBusy")


def actions_of(statement: dict[str, Any]) -> set[str]:
    found = statement["Action"]
    return {found} if isinstance(found, str) else set(found)


def leading_keys(statement: dict[str, Any]) -> list[str]:
    [(operator, keys)] = statement["Condition"].items()
    assert operator == "ForAllValues:StringLike"
    return list(keys["dynamodb:LeadingKeys"])


def reaches(patterns: list[str], item_id: str) -> bool:
    return any(fnmatchcase(item_id, p) for p in patterns)


@pytest.mark.parametrize("job", JOBS)
def test_a_worker_claims_debounce_and_key_slot_items_with_its_record_grants_and_deletes_nothing(
    template, stack, job
):
    """debounce.claim (GetItem, UpdateItem: `claimed`) and keyslots (GetItem, UpdateItem) reach items
    of the job table that the worker's record statement already covers; no item is ever deleted."""
    role = props(template, stack, stack.workers[job].function)["Role"]["Fn::GetAtt"][0]
    table = {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}
    statements = statements_of_role(template, role)
    [records] = [s for s in statements if {"dynamodb:GetItem", "dynamodb:UpdateItem"} <= actions_of(s)]
    assert records["Resource"] == table and "Condition" not in records
    assert not [s for s in statements if "dynamodb:DeleteItem" in actions_of(s)]


def test_producers_read_and_write_debounce_items_only(template, stack):
    """enqueue(..., debounce=...): a consistent GetItem and an UpdateItem of the key's item."""
    statements = props(template, stack, stack.producer_policy)["PolicyDocument"]["Statement"]
    table = {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}
    [keyed] = [
        s
        for s in statements
        if actions_of(s) == {"dynamodb:GetItem", "dynamodb:UpdateItem"} and "Condition" in s
    ]
    assert keyed["Resource"] == table
    patterns = leading_keys(keyed)
    assert all(reaches(patterns, debounce.item_id(job, "doc-42")) for job in JOBS)
    for item in ("order-42", keyslots.item_id(JOBS[0], "c1"), workflow_key("wf-1"), "lambdajobs#ratelimit#x"):
        assert not reaches(patterns, item), item
    # and no DeleteItem: an item expires (its time to live), nobody removes it
    assert not [s for s in statements if "dynamodb:DeleteItem" in actions_of(s)]


@pytest.mark.parametrize("policy", ["producer_policy", "operator_policy"])
def test_producers_and_operators_delete_one_time_schedules_only(template, stack, policy):
    """cancel: a run_at job's schedule and a parked job's wake-up, in the one-time group; never a cron
    schedule. (Its record writes are the signal's UpdateItem of job records: test_schedules.)"""
    statements = props(template, stack, getattr(stack, policy))["PolicyDocument"]["Statement"]
    # (CDK merges it with the run_at statement, on the same resource: CreateSchedule, GetSchedule)
    [deletes] = [s for s in statements if "scheduler:DeleteSchedule" in actions_of(s)]
    assert actions_of(deletes) <= {
        "scheduler:DeleteSchedule",
        "scheduler:CreateSchedule",
        "scheduler:GetSchedule",
    }
    resource = "".join(p if isinstance(p, str) else "<x>" for p in deletes["Resource"]["Fn::Join"][1])
    group = stack.one_time_group.schedule_group_name
    assert resource.endswith(f":schedule/{group}/*")
    assert group != stack.cron_group.schedule_group_name
    assert fnmatchcase(
        f"{group}/{one_time_schedule_name(JOBS[0], 'order-42')}", resource.split(":schedule/")[1]
    )


@pytest.mark.parametrize("job", JOBS)
def test_each_jobs_dashboard_row_counts_cancelled_superseded_and_key_busy_runs(template, stack, job):
    body = dashboard_body(template)
    dims = f'\\"job\\",\\"{job}\\",\\"service\\",\\"lambdajobs\\",\\"stack\\",\\"{stack.stack_name}\\"'
    for name in FLOW_METRICS:
        assert f'[\\"LambdaJobs\\",\\"{name}\\",{dims}' in body, name
