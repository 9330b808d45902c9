"""Template assertions: each guards a real failure mode (see ../shared/guide/AWS_FACTS.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import handlers  # noqa: F401
from lambdajobs.runtime.settings import manifest_parameter
from lambdajobs.runtime.spec import get_spec, registered_jobs

JOBS = [spec.name for spec in registered_jobs()]
ROOT = Path(__file__).resolve().parents[2]


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def logical_id(stack, construct) -> str:
    return stack.resolve(construct.node.default_child.logical_id)


def props(template, stack, construct) -> dict[str, Any]:
    return template["Resources"][logical_id(stack, construct)]["Properties"]


def ref_ids(value: Any) -> set[str]:
    """Logical ids referenced (Ref / Fn::GetAtt) anywhere inside a template value."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value:
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            found.add(value["Fn::GetAtt"][0])
        for v in value.values():
            found |= ref_ids(v)
    elif isinstance(value, list):
        for v in value:
            found |= ref_ids(v)
    return found


def test_every_declared_job_has_a_worker(stack):
    assert sorted(stack.workers) == JOBS and JOBS


@pytest.mark.parametrize("job", JOBS)
def test_queue_settings(template, stack, job):
    spec, worker = get_spec(job), stack.workers[job]
    queue, dlq = props(template, stack, worker.queue), props(template, stack, worker.dead_letter_queue)
    # visibility timeout = 6 x function timeout + batching window
    assert queue["VisibilityTimeout"] == 6 * spec.timeout_seconds + spec.max_batching_window_seconds
    # redrive to its own DLQ after max_attempts receives
    assert queue["RedrivePolicy"]["maxReceiveCount"] == spec.max_attempts
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": [logical_id(stack, worker.dead_letter_queue), "Arn"]
    }
    # the DLQ keeps messages 14 days, longer than the source
    assert dlq["MessageRetentionPeriod"] == 14 * 86400
    assert dlq["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]
    # encryption at rest on both
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True


@pytest.mark.parametrize("job", JOBS)
def test_dlq_allows_redrive_from_its_source_only(template, stack, job):
    worker = stack.workers[job]
    queue, dlq = props(template, stack, worker.queue), props(template, stack, worker.dead_letter_queue)
    policy = dlq["RedriveAllowPolicy"]
    assert policy["redrivePermission"] == "byQueue"
    [source] = policy["sourceQueueArns"]
    assert json.dumps(source).endswith(f':{queue["QueueName"]}"]]}}')


@pytest.mark.parametrize("job", JOBS)
def test_queues_refuse_plain_http(template, stack, job):
    worker = stack.workers[job]
    for queue in (worker.queue, worker.dead_letter_queue):
        qid = logical_id(stack, queue)
        policies = [
            p
            for p in resources(template, "AWS::SQS::QueuePolicy").values()
            if qid in ref_ids(p["Properties"]["Queues"])
        ]
        statements = [s for p in policies for s in p["Properties"]["PolicyDocument"]["Statement"]]
        assert any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        ), f"{job}: {qid} accepts requests without TLS"


@pytest.mark.parametrize("job", JOBS)
def test_worker_function(template, stack, job):
    spec, worker = get_spec(job), stack.workers[job]
    fn = props(template, stack, worker.function)
    assert fn["Architectures"] == ["arm64"]
    assert fn["Runtime"] == "python3.13"
    assert fn["Handler"] == "handlers.entry.lambda_handler"
    assert fn["Timeout"] == spec.timeout_seconds
    assert fn["MemorySize"] == spec.memory_mb
    assert "S3Bucket" in fn["Code"] and "ZipFile" not in fn["Code"]  # an asset, not inline code
    env = fn["Environment"]["Variables"]
    assert env["LAMBDAJOBS_JOB"] == job
    assert ref_ids(env["LAMBDAJOBS_TABLE"]) == {logical_id(stack, stack.table)}
    assert ref_ids(env[f"LAMBDAJOBS_DLQ_URL_{job.upper()}"]) == {logical_id(stack, worker.dead_letter_queue)}
    assert ref_ids(env[f"LAMBDAJOBS_QUEUE_URL_{job.upper()}"]) == {logical_id(stack, worker.queue)}
    # Powertools (and pydantic) come from the official public layer: synth needs no network
    [layer] = fn["Layers"]
    assert "017000801446:layer:AWSLambdaPowertoolsPythonV3-python313-arm64:" in json.dumps(layer)


@pytest.mark.parametrize("job", JOBS)
def test_log_retention_is_set(template, stack, job):
    fn = props(template, stack, stack.workers[job].function)
    [group_id] = ref_ids(fn["LoggingConfig"]["LogGroup"])
    assert template["Resources"][group_id]["Properties"]["RetentionInDays"] == 30


@pytest.mark.parametrize("job", JOBS)
def test_event_source_reports_partial_failures_and_caps_concurrency(template, stack, job):
    spec, worker = get_spec(job), stack.workers[job]
    fid = logical_id(stack, worker.function)
    [esm] = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fid}
    ]
    # without ReportBatchItemFailures a returned failure list is ignored and failed messages deleted
    assert esm["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    assert esm["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}
    assert esm["BatchSize"] == spec.batch_size
    assert esm["EventSourceArn"] == {"Fn::GetAtt": [logical_id(stack, worker.queue), "Arn"]}


def test_job_table(template, stack):
    table = props(template, stack, stack.table)
    assert table["KeySchema"] == [{"AttributeName": "id", "KeyType": "HASH"}]
    assert table["TimeToLiveSpecification"] == {"AttributeName": "expiration", "Enabled": True}
    assert table["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert table["BillingMode"] == "PAY_PER_REQUEST"
    assert template["Resources"][logical_id(stack, stack.table)]["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize("job", JOBS)
def test_worker_permissions_are_least_privilege(template, stack, job):
    worker = stack.workers[job]
    fn = template["Resources"][logical_id(stack, worker.function)]
    role_id = fn["Properties"]["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"]["Roles"]
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]
    granted: dict[str, set[str]] = {}
    for s in statements:
        assert s["Effect"] == "Allow"
        assert s["Resource"] != "*" and "*" not in json.dumps(s["Action"])
        for target in ref_ids(s["Resource"]):
            actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
            granted.setdefault(target, set()).update(actions)
    spec = get_spec(job)
    queue, dlq, table = (logical_id(stack, c) for c in (worker.queue, worker.dead_letter_queue, stack.table))
    expected = {
        queue: {
            "sqs:ReceiveMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:GetQueueUrl",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
        },
        dlq: {"sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"},
        table: {"dynamodb:GetItem", "dynamodb:UpdateItem"},
    }
    for target in spec.enqueues:  # only the queues of the jobs it declared it enqueues
        expected[logical_id(stack, stack.workers[target].queue)] = {
            "sqs:SendMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
        }
    if "job_stats" in spec.uses:
        expected[table] = expected[table] | {"dynamodb:Query"}
    if "bucket" in spec.uses:
        expected[logical_id(stack, stack.bucket)] = {"s3:GetObject", "s3:PutObject"}
    assert granted == expected


@pytest.mark.parametrize("job", JOBS)
def test_manifest_and_outputs_for_producers(template, stack, job):
    worker = stack.workers[job]
    param = props(template, stack, worker.manifest)
    assert param["Name"] == manifest_parameter(stack.stack_name, job)
    assert ref_ids(param["Value"]) == {
        logical_id(stack, worker.queue),
        logical_id(stack, worker.dead_letter_queue),
    }
    outputs = template["Outputs"]
    assert "JobTableName" in outputs
    assert any(ref_ids(o["Value"]) == {logical_id(stack, worker.queue)} for o in outputs.values())


def test_asset_holds_only_runtime_code(synthesized):
    from infra.app import VENDORED_PACKAGES

    template, outdir, stack, _ = synthesized
    fn = props(template, stack, next(iter(stack.workers.values())).function)
    asset_hash = fn["Code"]["S3Key"].removesuffix(".zip")
    asset = Path(outdir) / f"asset.{asset_hash}"
    top = sorted(p.name for p in asset.iterdir())
    # our runtime packages, and the pure-Python ones @cron validates with; no infra, tests, caches
    assert top == sorted(["handlers", "shared", *VENDORED_PACKAGES])
    ours = [p for name in ("handlers", "shared") for p in (asset / name).rglob("*") if p.is_file()]
    assert ours and all(p.suffix == ".py" for p in ours)
    assert not list(asset.rglob("__pycache__"))


def test_handler_imports_from_the_asset_alone(synthesized, tmp_path):
    """The asset plus what the layer and runtime provide (Powertools, pydantic, boto3) is enough:
    import the entry point with only the asset on the path for project code."""
    import subprocess
    import sys

    template, outdir, stack, _ = synthesized
    fn = props(template, stack, next(iter(stack.workers.values())).function)
    asset = Path(outdir) / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}"
    code = (
        "import json, handlers.entry, shared, aws_cron_expression_validator as v\n"
        "print(json.dumps([handlers.entry.__file__, shared.__file__, v.__file__]))"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(asset), "LAMBDAJOBS_JOB": "send_email"}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    files = json.loads(out.stdout.strip().splitlines()[-1])
    assert all(f.startswith(str(asset)) for f in files), files
