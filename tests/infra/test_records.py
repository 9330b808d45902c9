"""Template assertions for the operator's record reads (issue 30): the job index in every stack,
purge markers, pausing a queue's event sources, a job's logs; and the manifest naming each worker's
log group."""

from __future__ import annotations

import json

from lambdajobs.runtime.settings import JOB_INDEX, log_group_name
from tests.infra.test_stack import logical_id, props


def operator_statements(template, stack) -> list[dict]:
    return props(template, stack, stack.operator_policy)["PolicyDocument"]["Statement"]


def having(statements: list[dict], action: str) -> list[dict]:
    return [
        s for s in statements if action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    ]


def flat(value) -> str:
    """A resolved value as text (an Fn::Join's parts joined, pseudo parameters by name)."""
    if isinstance(value, dict) and "Fn::Join" in value:
        return "".join(flat(v) for v in value["Fn::Join"][1])
    if isinstance(value, dict) and "Ref" in value:
        return f"<{value['Ref']}>"
    return str(value)


def test_the_table_has_the_job_index_whatever_the_mode(template, stack):
    [index] = props(template, stack, stack.table)["GlobalSecondaryIndexes"]
    assert index["IndexName"] == JOB_INDEX


def test_operators_query_the_index_and_write_purge_markers_only(template, stack):
    statements = operator_statements(template, stack)
    [query] = having(statements, "dynamodb:Query")
    assert flat(query["Resource"]).endswith(f"/index/{JOB_INDEX}")
    [put] = having(statements, "dynamodb:PutItem")
    assert put["Action"] == "dynamodb:PutItem"
    assert put["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["lambdajobs#purged#*"]}}
    [batch_get] = having(statements, "dynamodb:BatchGetItem")
    assert batch_get["Resource"] == {"Fn::GetAtt": [logical_id(stack, stack.table), "Arn"]}


def test_operators_pause_only_this_stacks_event_sources(template, stack):
    statements = operator_statements(template, stack)
    [listing] = having(statements, "lambda:ListEventSourceMappings")
    assert listing["Resource"] == "*"  # no resource-level permission
    [update] = having(statements, "lambda:UpdateEventSourceMapping")
    assert sorted(update["Action"]) == ["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"]
    assert flat(update["Resource"]).endswith(":event-source-mapping:*")
    function_arn = flat(update["Condition"]["ArnLike"]["lambda:FunctionArn"])
    assert function_arn.endswith(f":function:{stack.stack_name}-*")
    assert "lambda:CreateEventSourceMapping" not in json.dumps(statements)
    assert "lambda:DeleteEventSourceMapping" not in json.dumps(statements)


def test_operators_query_logs_of_this_stacks_workers_only(template, stack):
    statements = operator_statements(template, stack)
    [start] = having(statements, "logs:StartQuery")
    assert start["Action"] == "logs:StartQuery"
    assert flat(start["Resource"]).endswith(f":log-group:/lambdajobs/{stack.stack_name}/*")
    [results] = having(statements, "logs:GetQueryResults")
    assert "logs:StopQuery" in results["Action"] and "logs:StartQuery" not in results["Action"]
    assert results["Resource"] == "*" and "Condition" not in results  # no resource-level permission


def test_each_worker_logs_to_its_named_group_and_the_manifest_says_which(template, stack):
    for job, worker in stack.workers.items():
        if worker.node.scope is not stack:  # a nested stack's: its own template
            continue
        group = props(template, stack, worker.function.log_group)
        assert group["LogGroupName"] == log_group_name(stack.stack_name, job)
        manifest = props(template, stack, worker.manifest)["Value"]
        assert f'"log_group":"{log_group_name(stack.stack_name, job)}"' in json.dumps(manifest).replace(
            "\\", ""
        ).replace(" ", "")
