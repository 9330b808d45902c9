"""Template assertions: each guards a real failure mode (see ../shared/guide/AWS_FACTS.md)."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import pytest

from lambdajobs.runtime.durable import wake_schedule_prefix
from lambdajobs.runtime.settings import manifest_parameter, queue_name
from lambdajobs.runtime.spec import get_spec, load_jobs

JOBS = [spec.name for spec in load_jobs("handlers")]
#: Every queue of every job: (job, priority level), None for the job's own queue (its lowest level).
LEVELS = [(spec.name, level) for spec in load_jobs("handlers") for level in spec.levels]
POWERTOOLS = importlib.metadata.version("aws-lambda-powertools")
ROOT = Path(__file__).resolve().parents[2]


def resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def logical_id(stack, construct) -> str:
    return stack.resolve(construct.node.default_child.logical_id)


def props(template, stack, construct) -> dict[str, Any]:
    return template["Resources"][logical_id(stack, construct)]["Properties"]


def level_queues(stack, job: str, level: str | None):
    """The `LevelQueues` of one of a job's queues (None: its own)."""
    [found] = [q for q in stack.workers[job].all_levels if q.level == level]
    return found


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


def construct_prefix(job: str) -> tuple[str, str]:
    """The logical-id prefixes of a job's resources in this project's stack: its `JobWorker`'s, and
    its alarms' (under the monitoring construct)."""
    from lambdajobs.cdk.stack import construct_id

    return f"LambdaJobs{construct_id(job)}", f"LambdaJobsMonitoring{construct_id(job)}"


def sqs_names(value: Any) -> set[str]:
    """The queue names of the SQS ARNs written from a name (`Fn::Join` of `arn:`, the partition,
    `:sqs:`, region, account and `:<name>`) anywhere inside a template value."""
    found: set[str] = set()
    if isinstance(value, dict):
        join = value.get("Fn::Join")
        if join and join[1] and join[1][0] == "arn:" and ":sqs:" in join[1]:
            found.add(join[1][-1].lstrip(":"))
        for v in value.values():
            found |= sqs_names(v)
    elif isinstance(value, list):
        for v in value:
            found |= sqs_names(v)
    return found


def test_every_declared_job_has_a_worker(stack):
    assert sorted(stack.workers) == JOBS and JOBS


@pytest.mark.parametrize(("job", "level"), LEVELS)
def test_queue_settings(template, stack, job, level):
    spec, worker = get_spec(job), level_queues(stack, job, level)
    queue, dlq = props(template, stack, worker.queue), props(template, stack, worker.dead_letter_queue)
    assert queue["QueueName"] == queue_name(stack.stack_name, job, level)
    # visibility timeout = 6 x function timeout + batching window
    assert queue["VisibilityTimeout"] == 6 * spec.timeout_seconds + spec.max_batching_window_seconds
    # redrive to its own DLQ after max_attempts receives
    assert queue["RedrivePolicy"]["maxReceiveCount"] == spec.max_attempts + 1
    assert queue["RedrivePolicy"]["deadLetterTargetArn"] == {
        "Fn::GetAtt": [logical_id(stack, worker.dead_letter_queue), "Arn"]
    }
    # the DLQ keeps messages 14 days, longer than the source
    assert dlq["MessageRetentionPeriod"] == 14 * 86400
    assert dlq["MessageRetentionPeriod"] > queue["MessageRetentionPeriod"]
    # encryption at rest on both
    assert queue["SqsManagedSseEnabled"] is True and dlq["SqsManagedSseEnabled"] is True


@pytest.mark.parametrize(("job", "level"), LEVELS)
def test_dlq_allows_redrive_from_its_source_only(template, stack, job, level):
    worker = level_queues(stack, job, level)
    queue, dlq = props(template, stack, worker.queue), props(template, stack, worker.dead_letter_queue)
    policy = dlq["RedriveAllowPolicy"]
    assert policy["redrivePermission"] == "byQueue"
    [source] = policy["sourceQueueArns"]
    assert json.dumps(source).endswith(f':{queue["QueueName"]}"]]}}')


@pytest.mark.parametrize(("job", "level"), LEVELS)
def test_queues_refuse_plain_http(template, stack, job, level):
    worker = level_queues(stack, job, level)
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
    assert fn["Runtime"] == "python3.14"
    assert fn["Handler"] == "lambdajobs.runtime.entry.lambda_handler"
    assert "ReservedConcurrentExecutions" not in fn  # opt-in: none of this project's jobs reserves
    assert fn["Timeout"] == spec.timeout_seconds
    assert fn["MemorySize"] == spec.memory_mb
    assert "S3Bucket" in fn["Code"] and "ZipFile" not in fn["Code"]  # an asset, not inline code
    env = fn["Environment"]["Variables"]
    assert env["LAMBDAJOBS_JOB"] == job
    assert ref_ids(env["LAMBDAJOBS_TABLE"]) == {logical_id(stack, stack.table)}
    # no variable per queue: the function finds every queue by the stack's naming rule, from its own
    # account, partition and DNS suffix (and Lambda's AWS_REGION)
    assert env["LAMBDAJOBS_ACCOUNT"] == {"Ref": "AWS::AccountId"}
    assert env["LAMBDAJOBS_PARTITION"] == {"Ref": "AWS::Partition"}
    assert env["LAMBDAJOBS_URL_SUFFIX"] == {"Ref": "AWS::URLSuffix"}
    assert not [key for key in env if "QUEUE" in key or "DLQ" in key]
    # Powertools (and pydantic) come from the official public layer, its ARN resolved at deploy time
    # from AWS's public SSM parameter for the Powertools installed here and the function's runtime;
    # then the lambdajobs runtime, a layer every job function shares
    layer, runtime = fn["Layers"]
    assert runtime == {"Ref": logical_id(stack, stack.runtime_layer)}
    parameter = template["Parameters"][layer["Ref"]]
    assert parameter["Type"] == "AWS::SSM::Parameter::Value<String>"
    assert parameter["Default"] == f"/aws/service/powertools/python/arm64/{fn['Runtime']}/{POWERTOOLS}"


def test_the_layer_is_the_powertools_the_tests_ran():
    from aws_lambda_powertools.shared.version import VERSION

    from lambdajobs.cdk.stack import powertools_layer_parameter

    # the Powertools these tests import is the one the deployed functions get, for their runtime
    assert powertools_layer_parameter() == f"/aws/service/powertools/python/arm64/python3.14/{VERSION}"
    assert powertools_layer_parameter("3.23.0") == "/aws/service/powertools/python/arm64/python3.14/3.23.0"


@pytest.mark.parametrize("job", JOBS)
def test_log_retention_is_set(template, stack, job):
    fn = props(template, stack, stack.workers[job].function)
    [group_id] = ref_ids(fn["LoggingConfig"]["LogGroup"])
    assert template["Resources"][group_id]["Properties"]["RetentionInDays"] == 30


@pytest.mark.parametrize("job", JOBS)
def test_event_source_reports_partial_failures_and_caps_concurrency(template, stack, job):
    spec, worker = get_spec(job), stack.workers[job]
    fid = logical_id(stack, worker.function)
    mappings = [
        m["Properties"]
        for m in resources(template, "AWS::Lambda::EventSourceMapping").values()
        if m["Properties"]["FunctionName"] == {"Ref": fid}
    ]
    # one event source per queue of the job (each priority level's), all on the job's one function
    assert len(mappings) == len(spec.levels) == len(worker.all_levels)
    for level in worker.all_levels:
        [esm] = [
            m
            for m in mappings
            if m["EventSourceArn"] == {"Fn::GetAtt": [logical_id(stack, level.queue), "Arn"]}
        ]
        # without ReportBatchItemFailures a returned failure list is ignored and failed messages deleted
        assert esm["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert esm["ScalingConfig"] == {"MaximumConcurrency": spec.concurrency_of(level.level)}
        assert esm["BatchSize"] == spec.batch_size
    # without priorities, the job's one queue keeps max_concurrency
    if not spec.priorities:
        assert mappings[0]["ScalingConfig"] == {"MaximumConcurrency": spec.max_concurrency}


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
    scheduling = [s for s in statements if "scheduler:CreateSchedule" in s["Action"]]
    pseudo = {"AWS::Partition", "AWS::Region", "AWS::AccountId"}
    for s in statements:
        assert s["Effect"] == "Allow"
        assert "*" not in json.dumps(s["Action"])
        if s["Resource"] == "*":  # GetMetricData has no resource-level permission: job_stats only
            granted.setdefault("*", set()).add(s["Action"])
            continue
        if s in scheduling:
            continue
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        for target in ref_ids(s["Resource"]) - pseudo:
            granted.setdefault(target, set()).update(actions)
        for name in sqs_names(s["Resource"]):  # a queue by its name (another job's, the workflow queue)
            granted.setdefault(f"sqs:{name}", set()).update(actions)
    spec = get_spec(job)
    table = logical_id(stack, stack.table)
    # the job record (a first attempt's PutItem) and the rate limiter's item (both in the job table);
    # BatchGetItem: a workflow member's ctx.parent_results (the stage before's records)
    expected = {
        table: {"dynamodb:BatchGetItem", "dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}
    }
    if spec.searchable:  # its search entries, one BatchWriteItem at a first attempt (and nothing else)
        expected[table].add("dynamodb:BatchWriteItem")
        [writes] = [s for s in statements if "dynamodb:BatchWriteItem" in s["Action"]]
        assert writes["Action"] == "dynamodb:BatchWriteItem"
        assert writes["Condition"] == {
            "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["lambdajobs#sx#*"]}
        }
    for level in worker.all_levels:  # each of its queues (every priority level's) and their DLQs
        expected[logical_id(stack, level.queue)] = {
            "sqs:ReceiveMessage",
            "sqs:ChangeMessageVisibility",
            "sqs:GetQueueUrl",
            "sqs:DeleteMessage",
            "sqs:GetQueueAttributes",
            "sqs:SendMessage",  # a record not run goes back to its queue (or its level's) as a copy
        }
        expected[logical_id(stack, level.dead_letter_queue)] = {
            "sqs:SendMessage",
            "sqs:GetQueueAttributes",
            "sqs:GetQueueUrl",
        }
    for target in spec.enqueues:  # only the queues of the jobs it declared it enqueues, every level's,
        for level in get_spec(target).levels:  # by name: no reference into another (nested) stack
            expected[f"sqs:{queue_name(stack.stack_name, target, level)}"] = {"sqs:SendMessage"}
    # a notice to the workflow queue when its member may have ended a stage (every worker)
    expected[f"sqs:{stack.stack_name}--workflows"] = {"sqs:SendMessage"}
    if spec.enqueues:  # it may start a workflow of them: PutItem of the workflow item only (test_workflows)
        expected[table] = expected[table] | {"dynamodb:PutItem"}
    if "job_stats" in spec.uses:  # count_finished: the worker's metrics; the index only when it is on
        expected["*"] = {"cloudwatch:GetMetricData"}
        if stack.job_index != "off":
            expected[table] = expected[table] | {"dynamodb:Query"}
    if "bucket" in spec.uses:
        expected[logical_id(stack, stack.bucket)] = {"s3:GetObject", "s3:PutObject"}
    # every job passes the one-time schedule role to Scheduler (tests/infra/test_schedules.py: only to
    # Scheduler): a durable job's wake-up, and enqueue(run_at=...) of the jobs it enqueues
    expected[logical_id(stack, stack.scheduler_role)] = {"iam:PassRole"}
    [schedules] = scheduling
    group = stack.one_time_group.schedule_group_name
    if spec.enqueues:  # enqueue(run_at=...) of those jobs: one-time schedules in the stack's group
        assert sorted(schedules["Action"]) == ["scheduler:CreateSchedule", "scheduler:GetSchedule"]
        assert schedules["Resource"]["Fn::Join"][1][-1] == f":schedule/{group}/*"
    else:  # its own durable wake-ups only
        assert schedules["Action"] == "scheduler:CreateSchedule"
        assert schedules["Resource"]["Fn::Join"][1][-1] == f":schedule/{group}/{wake_schedule_prefix(job)}*"
    assert granted == expected


@pytest.mark.parametrize("job", JOBS)
def test_manifest_and_outputs_for_producers(template, stack, job):
    worker = stack.workers[job]
    param = props(template, stack, worker.manifest)
    assert param["Name"] == manifest_parameter(stack.stack_name, job)
    # the job's own queue and DLQ, and each priority level's (see test_priorities for the shape)
    assert ref_ids(param["Value"]) == {
        logical_id(stack, c) for level in worker.all_levels for c in (level.queue, level.dead_letter_queue)
    }
    # no output per queue (a template holds at most 200): the manifest and the naming rule say them
    outputs = template["Outputs"]
    assert "JobTableName" in outputs
    assert not [o for o in outputs.values() if ref_ids(o["Value"]) & {logical_id(stack, worker.queue)}]


def asset_of(synthesized, job: str) -> Path:
    template, outdir, stack, _ = synthesized
    fn = props(template, stack.lambdajobs, stack.lambdajobs.workers[job].function)
    return Path(outdir) / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}"


def runtime_layer_of(synthesized) -> Path:
    """The runtime layer's staged folder in the cloud assembly."""
    template, outdir, stack, _ = synthesized
    layer = props(template, stack.lambdajobs, stack.lambdajobs.runtime_layer)
    return Path(outdir) / f"asset.{layer['Content']['S3Key'].removesuffix('.zip')}"


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


#: What each function ships from the jobs package: its own module, those of the jobs it enqueues, and
#: what they import (daily_report enqueues send_email and imports handlers.emails).
EXPECTED_JOB_FILES = {
    "send_email": {"handlers/__init__.py", "handlers/emails.py"},
    "transcode_video": {"handlers/__init__.py", "handlers/video.py"},
    "daily_report": {"handlers/__init__.py", "handlers/emails.py", "handlers/reports.py"},
    "campaign_report": {"handlers/__init__.py", "handlers/emails.py"},  # enqueues send_email: same module
    "make_thumbnails": {"handlers/__init__.py", "handlers/video.py"},
    "notify_uploader": {"handlers/__init__.py", "handlers/video.py"},
}


@pytest.mark.parametrize("job", JOBS)
def test_each_asset_holds_only_the_job_modules_it_needs_and_the_runtime_layer_the_runtime(synthesized, job):
    from lambdajobs.cdk import VENDORED_PACKAGES

    asset = asset_of(synthesized, job)
    assert sorted(p.name for p in asset.iterdir()) == ["handlers"]
    # the runtime layer: the package (its __init__, errors and runtime only), the vendored packages
    layer = runtime_layer_of(synthesized)
    assert [p.name for p in layer.iterdir()] == ["python"]
    assert sorted(p.name for p in (layer / "python").iterdir()) == sorted(["lambdajobs", *VENDORED_PACKAGES])
    ours = files_under(layer / "python" / "lambdajobs")
    assert "__init__.py" in ours and "runtime/worker.py" in ours and "runtime/entry.py" in ours
    shipped = ("__init__.py", "errors.py")  # no cdk, local, cli
    assert all(f in shipped or f.startswith("runtime/") for f in ours), ours
    assert {f"handlers/{f}" for f in files_under(asset / "handlers")} == EXPECTED_JOB_FILES[job]
    assert not list(asset.rglob("__pycache__"))


@pytest.mark.parametrize("job", JOBS)
def test_each_function_runs_the_librarys_entry_point_with_its_modules(template, stack, job):
    from lambdajobs.runtime.settings import ENV_JOB, ENV_JOBS, ENV_MODULES

    fn = props(template, stack, stack.workers[job].function)
    assert fn["Handler"] == "lambdajobs.runtime.entry.lambda_handler"
    env = fn["Environment"]["Variables"]
    modules = {f.removesuffix(".py").replace("/", ".") for f in EXPECTED_JOB_FILES[job]} - {
        "handlers.__init__"
    }
    assert env[ENV_JOB] == job and env[ENV_JOBS] == "handlers"
    assert set(env[ENV_MODULES].split(",")) == modules


@pytest.fixture(scope="module")
def lambda_layer(tmp_path_factory) -> Path:
    """A folder holding only what Lambda and the Powertools layer provide (links into this venv)."""
    from tests.lambda_packages import link_lambda_packages

    return link_lambda_packages(tmp_path_factory.mktemp("layer"))


@pytest.mark.parametrize("job", JOBS)
def test_the_handler_runs_from_the_asset_and_what_lambda_provides(synthesized, lambda_layer, tmp_path, job):
    """A cold start with nothing but the asset and what Lambda provides on the path (no site-packages,
    no system time zones): the entry point imports, the job is declared, and the runtime's vendored
    needs work: cron fire times in a time zone (tzdata), erasing PII fields from log lines."""
    import subprocess
    import sys

    template, _, stack, _ = synthesized
    asset = asset_of(synthesized, job)
    runtime = runtime_layer_of(synthesized) / "python"
    fn = props(template, stack.lambdajobs, stack.lambdajobs.workers[job].function)
    env = {k: v for k, v in fn["Environment"]["Variables"].items() if isinstance(v, str)}
    code = (
        "import json, sys\n"
        "import lambdajobs.runtime.entry\n"
        "from lambdajobs.runtime.spec import get_spec\n"
        "from lambdajobs.runtime.pii import _erase_fields\n"
        "from lambdajobs.runtime.schedule import parse_schedule\n"
        f"spec = get_spec({job!r})\n"
        "times = parse_schedule('cron(0 9 * * ? *)', 'America/New_York').next_fire_times(2)\n"
        "masked = _erase_fields({'to': 'ada@example.com'}, ('to',))\n"
        "ours = {'lambdajobs', 'handlers', 'tzdata', 'pyawscron'}\n"
        "ours.add('aws_cron_expression_validator')\n"
        "mods = {n: getattr(m, '__file__', None) for n, m in sys.modules.items()}\n"
        "mods = {n: f for n, f in mods.items() if n.split('.')[0] in ours}\n"
        "print(json.dumps({'files': mods, 'masked': masked, 'times': len(times)}))"
    )
    env |= {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{asset}:{runtime}:{lambda_layer}",
        "PYTHONTZPATH": "",  # no system zoneinfo: time zones must come from the vendored tzdata
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    out = subprocess.run(
        [sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["masked"] == {"to": "*****"} and found["times"] == 2
    files = {n: f for n, f in found["files"].items() if f}
    assert {n.split(".")[0] for n in files} >= {"lambdajobs", "tzdata", "pyawscron"}
    assert all(f.startswith((str(asset), str(runtime))) for f in files.values()), files
    assert all(f.startswith(str(asset)) for n, f in files.items() if n.startswith("handlers")), files
