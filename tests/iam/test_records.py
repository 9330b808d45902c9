"""Issue 30's record reads under the template's policies, IAM enforced: the operator lists and counts
dead jobs from the job index, reads statuses in batches, marks and reads a queue's purge; pauses and
resumes this stack's event source mappings and no other stack's; queries this stack's worker logs
and no other's. And a worker writes its search entries (a job that declares searchable fields)."""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest
from botocore.exceptions import ClientError

from handlers.emails import SendEmail
from lambdajobs.runtime.records import (
    count_dead,
    get_statuses,
    list_dead,
    list_jobs,
    mark_purged,
    purged_at,
    search,
)
from lambdajobs.runtime.settings import log_group_name
from lambdajobs.runtime.spec import get_spec
from tests.iam.deployment import Deployment


def dead_email(deployment: Deployment) -> str:
    job_id = deployment.stack.enqueue("send_email", SendEmail(to="not-an-address", subject="s", body="b"))
    deployment.runner("send_email").drain()
    return job_id


def test_the_operator_lists_and_counts_dead_jobs_and_marks_a_purge(deployment):
    # GIVEN a dead email (the index holds dead records in every mode)
    dead = dead_email(deployment)
    config = deployment.operator_config()
    # WHEN the operator lists, counts and reads them, and marks the DLQ purged
    assert [s.job_id for s in list_dead("send_email", config=config).items] == [dead]
    assert count_dead("send_email", config=config) == 1
    assert [s.job_id for s in list_jobs("send_email", "dead", config=config).items] == [dead]
    assert get_statuses([dead], config=config)[dead].state == "dead"
    assert purged_at("send_email", config=config) is None
    stamp = mark_purged("send_email", config=config)
    # THEN every call was allowed (a denial fails the test), and the marker reads back
    assert purged_at("send_email", config=config) == stamp
    assert list_dead("send_email", after=stamp, config=config).items == []
    allowed = deployment.allowed(deployment.operator)
    assert {"dynamodb:Query", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:GetItem"} <= allowed


def test_the_operator_may_not_put_a_job_record(deployment):
    # GIVEN the operator's PutItem grant, which names purge markers only
    client = deployment.operator_config().client("dynamodb")
    # WHEN it puts any other item THEN IAM refuses it
    with pytest.raises(ClientError, match="AccessDenied"):
        client.put_item(TableName=deployment.stack.config.table_name(), Item={"id": {"S": "order-1"}})
    denied = deployment.recorder.take_denials()
    assert [c.action for c in denied] == ["dynamodb:PutItem"]


def _function(deployment: Deployment, name: str) -> str:
    code = io.BytesIO()
    with zipfile.ZipFile(code, "w") as archive:
        archive.writestr("index.py", "def handler(event, context):\n    return None\n")
    created = deployment.harness.client("lambda").create_function(
        FunctionName=name,
        Runtime="python3.12",
        Role=deployment.role_arn(deployment.worker("send_email")),
        Handler="index.handler",
        Code={"ZipFile": code.getvalue()},
    )
    return str(created["FunctionArn"])


def _mapping(deployment: Deployment, function: str, queue: str) -> tuple[str, str]:
    sqs = deployment.harness.client("sqs")
    url = sqs.create_queue(QueueName=queue)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    created = deployment.harness.client("lambda").create_event_source_mapping(
        EventSourceArn=arn, FunctionName=function, BatchSize=10
    )
    return str(created["UUID"]), arn


def test_the_operator_pauses_and_resumes_this_stacks_mappings_only(deployment):
    stack = deployment.constructs.stack_name
    # GIVEN an event source mapping of one of this stack's functions (CloudFormation names them
    # `<stack>-...`), and one of another stack's function (`<stack>2-...`)
    ours, queue = _mapping(
        deployment, _function(deployment, f"{stack}-LambdaJobsSendEmailJobWorker-AbC123"), "probe-ours"
    )
    theirs, _ = _mapping(deployment, _function(deployment, f"{stack}2-Worker-XyZ789"), "probe-theirs")
    client = deployment.operator_config().client("lambda")
    # WHEN the operator lists (by queue, as `queue_control` does), reads and disables ours, then
    # enables it again
    listed = client.list_event_source_mappings(EventSourceArn=queue)
    assert [m["UUID"] for m in listed["EventSourceMappings"]] == [ours]
    assert client.get_event_source_mapping(UUID=ours)["UUID"] == ours
    client.update_event_source_mapping(UUID=ours, Enabled=False)
    client.update_event_source_mapping(UUID=ours, Enabled=True)
    # THEN each call was allowed; AND the other stack's mapping may not be changed
    with pytest.raises(ClientError, match="AccessDenied"):
        client.update_event_source_mapping(UUID=theirs, Enabled=False)
    denied = deployment.recorder.take_denials()
    assert [c.action for c in denied] == ["lambda:UpdateEventSourceMapping"]
    assert {"lambda:ListEventSourceMappings", "lambda:GetEventSourceMapping"} <= deployment.allowed(
        deployment.operator
    )


def test_the_operator_queries_this_stacks_worker_logs_only(deployment):
    stack = deployment.constructs.stack_name
    logs = deployment.harness.client("logs")
    ours, theirs = log_group_name(stack, "send_email"), log_group_name(f"{stack}-2", "send_email")
    for group in (ours, theirs):
        logs.create_log_group(logGroupName=group)
    client = deployment.operator_config().client("logs")
    query = client.start_query(logGroupName=ours, startTime=0, endTime=10, queryString="fields @message")
    client.get_query_results(queryId=query["queryId"])
    with pytest.raises(ClientError, match="AccessDenied"):
        client.start_query(logGroupName=theirs, startTime=0, endTime=10, queryString="fields @message")
    denied = deployment.recorder.take_denials()
    assert [c.action for c in denied] == ["logs:StartQuery"]
    assert {"logs:StartQuery", "logs:GetQueryResults"} <= deployment.allowed(deployment.operator)


def test_a_worker_writes_its_search_entries_and_the_operator_finds_them(deployment):
    spec = get_spec("send_email")
    assert spec.searchable == ("campaign_id",)  # (handlers/emails.py)
    field = spec.searchable[0]
    payload: dict[str, Any] = {"to": "ada@example.com", "subject": "s", "body": "b", "campaign_id": "spring"}
    job_id = deployment.stack.enqueue("send_email", payload)
    deployment.runner("send_email").drain()
    assert "dynamodb:BatchWriteItem" in deployment.allowed(deployment.worker("send_email"))
    value = payload.get(field, "spring")
    found = search("send_email", field, value, config=deployment.operator_config())
    assert [s.job_id for s in found.items] == [job_id]
