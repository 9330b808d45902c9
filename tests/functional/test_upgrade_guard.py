"""Upgrades that lose nothing silently (issue 27): `lambdajobs diff` and `lambdajobs deploy` name every
queue of a deployed lambdajobs stack the new app would delete, with the messages it holds, and a job
index it would drop; `deploy` stops before it starts on a queue that holds messages unless given
`--allow-deleting-queues`, and `diff` only says.

"Deployed" is moto (in-process): every queue of a template created as CloudFormation would name it,
and its SSM manifest written with the queues' URLs, as a deploy of that template would write it. The
new app is a cloud assembly written by a stand-in for the CDK CLI's synth (`deploy.run_cli`
monkeypatched: no CDK CLI runs): small templates shaped as lambdajobs synthesizes them, and once the
real synthesized template of this repository.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lambdajobs import deploy, upgrade
from lambdajobs.cli import app
from lambdajobs.runtime import aws
from lambdajobs.runtime.config import StackConfig, clear_manifest_cache
from lambdajobs.runtime.settings import JOB_INDEX
from tests.infra.conftest import synthesize

STACK = "shop"


# -- templates shaped as lambdajobs synthesizes them ---------------------------------------------------


def json_join(value: Any) -> Any:
    """`value` as CDK's `Stack.to_json_string` writes it: JSON text whose tokens ({"Ref": ...},
    {"Fn::GetAtt": ...}) are parts of an Fn::Join."""
    tokens: list[Any] = []

    def mark(item: Any) -> Any:
        if isinstance(item, dict) and len(item) == 1 and next(iter(item)) in ("Ref", "Fn::GetAtt"):
            tokens.append(item)
            return f"@token{len(tokens) - 1}@"
        if isinstance(item, dict):
            return {k: mark(v) for k, v in item.items()}
        return item

    text = json.dumps(mark(value), separators=(",", ":"))
    parts: list[Any] = []
    for i, piece in enumerate(text.split("@token")):
        if i:
            number, _, piece = piece.partition("@")
            parts.append(tokens[int(number)])
        parts.append(piece)
    return {"Fn::Join": ["", [p for p in parts if p != ""]]}


def logical(*words: str) -> str:
    return "".join(w.title().replace("_", "") for w in words)


def lambdajobs_template(
    jobs: Mapping[str, Sequence[str]],
    *,
    stack: str = STACK,
    job_index: str = "off",
    index: bool | None = None,
) -> dict[str, Any]:
    """A template with a lambdajobs stack's queues, DLQs, manifest and job table: a queue per job and
    per priority level (`jobs`: job -> its levels above the lowest), each with its DLQ, the workflow
    queue and DLQ, the scheduler DLQ. The queues' names are strings, the DLQs' an Fn::Join on
    AWS::StackName (both shapes CDK writes). `index`: whether the table has the job index (default:
    when `job_index` is not "off")."""
    resources: dict[str, Any] = {}

    def queue(logical_id: str, name: str) -> dict[str, Any]:
        resources[logical_id] = {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": name}}
        dlq_name = {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, name.removeprefix(stack) + "-dlq"]]}
        resources[logical_id + "Dlq"] = {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": dlq_name}}
        return {
            "queue_url": {"Ref": logical_id},
            "queue_arn": {"Fn::GetAtt": [logical_id, "Arn"]},
            "dlq_url": {"Ref": logical_id + "Dlq"},
        }

    for job, levels in jobs.items():
        entry = queue(logical(job, "queue"), f"{stack}_{job}")
        entry["levels"] = {
            level: queue(logical(job, level, "queue"), f"{stack}_{job}--{level}") for level in levels
        }
        resources[logical(job, "manifest")] = {
            "Type": "AWS::SSM::Parameter",
            "Properties": {
                "Type": "String",
                "Name": f"/lambdajobs/{stack}/jobs/{job}",
                "Value": json_join(entry),
            },
        }
    workflows = queue("WorkflowsQueue", f"{stack}--workflows")
    resources["SchedulerDlq"] = {
        "Type": "AWS::SQS::Queue",
        "Properties": {"QueueName": f"{stack}--scheduler-dlq"},
    }
    table: dict[str, Any] = {"KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}]}
    if index if index is not None else job_index != "off":
        table["GlobalSecondaryIndexes"] = [
            {"IndexName": JOB_INDEX, "Projection": {"ProjectionType": "KEYS_ONLY"}}
        ]
    resources["JobTable"] = {"Type": "AWS::DynamoDB::Table", "Properties": table}
    manifest = {
        "table": {"Ref": "JobTable"},
        "scheduler_dlq_url": {"Ref": "SchedulerDlq"},
        "workflow_queue_url": workflows["queue_url"],
        "workflow_dlq_url": workflows["dlq_url"],
        "job_index": job_index,
    }
    resources["StackManifest"] = {
        "Type": "AWS::SSM::Parameter",
        "Properties": {"Type": "String", "Name": f"/lambdajobs/{stack}/stack", "Value": json_join(manifest)},
    }
    return {"Resources": resources}


# -- "deployed": a template as CloudFormation would deploy it, on moto ---------------------------------


@pytest.fixture
def moto_aws() -> Iterator[None]:
    from moto import mock_aws

    with mock_aws():
        aws.reset_clients()  # clients made before moto started would not be intercepted
        clear_manifest_cache()
        yield
    aws.reset_clients()
    clear_manifest_cache()


def sqs() -> Any:
    return aws.client("sqs")


def resolve(value: Any, stack_name: str, urls: Mapping[str, str], arns: Mapping[str, str]) -> str:
    """A template value as CloudFormation resolves it on deploy, for the refs this test makes."""
    if isinstance(value, str):
        return value
    if "Ref" in value:
        return stack_name if value["Ref"] == "AWS::StackName" else urls.get(value["Ref"], "x")
    if "Fn::GetAtt" in value:
        return arns.get(value["Fn::GetAtt"][0], "x")
    if "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return separator.join(resolve(p, stack_name, urls, arns) for p in parts)
    return "x"


def deploy_template(template: Mapping[str, Any], stack_name: str) -> dict[str, str]:
    """Create the template's queues (a queue without a QueueName gets a name as CloudFormation gives
    it: `<stack>-<logical id>-<suffix>`) and write its SSM parameters; returns queue name -> URL."""
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] == "AWS::SQS::Queue":
            given = resource.get("Properties", {}).get("QueueName")
            name = resolve(given, stack_name, {}, {}) if given else f"{stack_name}-{logical_id}-1A2B3C4D5E6F"
            urls[logical_id] = sqs().create_queue(QueueName=name)["QueueUrl"]
            arns[logical_id] = f"arn:aws:sqs:us-east-1:123456789012:{name}"
    ssm = aws.client("ssm")
    for resource in template["Resources"].values():
        if resource["Type"] == "AWS::SSM::Parameter":
            props = resource["Properties"]
            value = resolve(props["Value"], stack_name, urls, arns)
            ssm.put_parameter(Name=props["Name"], Value=value, Type="String", Overwrite=True)
    return {url.rsplit("/", 1)[-1]: url for url in urls.values()}


def hold(url: str, *, waiting: int = 0, in_flight: int = 0, delayed: int = 0) -> None:
    for i in range(waiting + in_flight):
        sqs().send_message(QueueUrl=url, MessageBody=json.dumps({"n": i}))
    if in_flight:
        sqs().receive_message(QueueUrl=url, MaxNumberOfMessages=in_flight, VisibilityTimeout=600)
    for i in range(delayed):
        sqs().send_message(QueueUrl=url, MessageBody=json.dumps({"d": i}), DelaySeconds=600)


def stack_template(template: Mapping[str, Any], stack_name: str = STACK) -> upgrade.StackTemplate:
    return upgrade.StackTemplate(stack_name=stack_name, template=template)


def found(report: upgrade.Report) -> dict[str, int | None]:
    return {d.queue.name: d.messages for d in report.deletions}


# -- the check itself ----------------------------------------------------------------------------------


def test_removing_a_job_names_its_queue_and_dlq_with_every_message_they_hold(moto_aws):
    # GIVEN a deployed stack with jobs send_email and resize; resize's queue holds 2 waiting, 1 in
    # flight and 1 delayed message, its DLQ 3 dead letters
    deployed = deploy_template(lambdajobs_template({"send_email": [], "resize": []}), STACK)
    hold(deployed["shop_resize"], waiting=2, in_flight=1, delayed=1)
    hold(deployed["shop_resize-dlq"], waiting=3)
    # WHEN the new app has send_email only
    report = upgrade.check([stack_template(lambdajobs_template({"send_email": []}))], StackConfig())
    # THEN resize's queue and DLQ are named, with all their messages; nothing else is deleted
    assert found(report) == {"shop_resize": 4, "shop_resize-dlq": 3}
    assert {d.queue.what for d in report.deletions} == {"queue of job resize", "DLQ of job resize"}
    assert len(report.stopping) == 2 and report.index_drops == ()
    assert "shop_resize-dlq (DLQ of job resize), holding 3 messages" in "\n".join(report.lines())


def test_removing_a_priority_level_names_that_levels_queues(moto_aws):
    deployed = deploy_template(lambdajobs_template({"send_email": ["high", "urgent"]}), STACK)
    hold(deployed["shop_send_email--high"], waiting=5)
    report = upgrade.check([stack_template(lambdajobs_template({"send_email": ["urgent"]}))], StackConfig())
    assert found(report) == {"shop_send_email--high": 5, "shop_send_email--high-dlq": 0}
    assert report.deletions[0].queue.what == "queue of job send_email, priority high"


def test_renaming_a_job_deletes_its_old_queues(moto_aws):
    deployed = deploy_template(lambdajobs_template({"resize": []}), STACK)
    hold(deployed["shop_resize"], waiting=1)
    report = upgrade.check([stack_template(lambdajobs_template({"resize_image": []}))], StackConfig())
    assert found(report) == {"shop_resize": 1, "shop_resize-dlq": 0}


def test_the_same_app_deletes_nothing_and_a_new_stack_has_nothing_to_lose(moto_aws):
    deploy_template(lambdajobs_template({"send_email": ["high"]}, job_index="finished"), STACK)
    same = lambdajobs_template({"send_email": ["high"]}, job_index="finished")
    other = lambdajobs_template({"send_email": []}, stack="fresh")
    report = upgrade.check([stack_template(same), stack_template(other, "fresh")], StackConfig())
    assert report.deletions == () and report.index_drops == ()
    assert report.lines() == [
        "stack 'shop': the deploy deletes no queue of lambdajobs.",
        "stack 'fresh': not deployed yet (no /lambdajobs/fresh/stack).",
    ]


def test_an_upgrade_that_renames_every_queue_names_them_all(moto_aws):
    # GIVEN a stack deployed by a lambdajobs whose queues were `<stack>-<job>` and whose DLQs
    # CloudFormation named (no QueueName)
    old = lambdajobs_template({"send_email": []})
    for resource in old["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SQS::Queue" and isinstance(props.get("QueueName"), dict):
            del props["QueueName"]
        elif resource["Type"] == "AWS::SQS::Queue":
            props["QueueName"] = props["QueueName"].replace("shop_", "shop-")
    deployed = deploy_template(old, STACK)
    hold(deployed["shop-send_email"], waiting=2)
    # THEN deploying it again keeps them all (the unnamed DLQs by their logical ids) ...
    assert upgrade.check([stack_template(old)], StackConfig()).deletions == ()
    # ... and the new naming deletes every one of them
    report = upgrade.check([stack_template(lambdajobs_template({"send_email": []}))], StackConfig())
    assert found(report) == {
        "shop-send_email": 2,
        "shop-SendEmailQueueDlq-1A2B3C4D5E6F": 0,
        "shop-WorkflowsQueueDlq-1A2B3C4D5E6F": 0,
    }


def test_a_queue_already_gone_is_said_and_stops_nothing(moto_aws):
    deployed = deploy_template(lambdajobs_template({"resize": []}), STACK)
    sqs().delete_queue(QueueUrl=deployed["shop_resize-dlq"])
    report = upgrade.check([stack_template(lambdajobs_template({}))], StackConfig())
    assert found(report)["shop_resize-dlq"] is None and report.stopping == ()
    assert "shop_resize-dlq (DLQ of job resize), already gone." in "\n".join(report.lines())


@pytest.mark.parametrize(
    ("job_index", "index"), [("off", False), ("finished", False)], ids=["turned off", "index left out"]
)
def test_dropping_the_job_index_is_named(moto_aws, job_index, index):
    deploy_template(lambdajobs_template({"send_email": []}, job_index="all"), STACK)
    new = lambdajobs_template({"send_email": []}, job_index=job_index, index=index)
    report = upgrade.check([stack_template(new)], StackConfig())
    assert report.index_drops == (upgrade.IndexDrop(STACK, "all"),)
    assert report.deletions == () and report.stopping == ()
    assert f"drops the job index {JOB_INDEX} (job_index 'all' now)" in report.lines()[0]


def test_an_index_that_was_off_is_not_dropped(moto_aws):
    deploy_template(lambdajobs_template({"send_email": []}), STACK)
    assert (
        upgrade.check([stack_template(lambdajobs_template({"send_email": []}))], StackConfig()).index_drops
        == ()
    )


def test_the_job_entries_are_read_page_by_page(moto_aws):
    # GetParametersByPath answers at most 10 parameters a page
    jobs = {f"job{i}": [] for i in range(23)}
    deploy_template(lambdajobs_template(jobs), STACK)
    deployed = upgrade.deployed_stack(STACK, StackConfig())
    assert deployed is not None
    assert {q.job for q in deployed.queues} == {*jobs, None}
    report = upgrade.check([stack_template(lambdajobs_template({"job0": []}))], StackConfig())
    assert len(report.deletions) == 22 * 2


def test_queue_names_resolve_from_join_and_sub_and_nested_stacks_match_any_stack_name():
    # a root template's AWS::StackName is its stack's name; a nested one's is decided at deploy time
    root = {
        "Resources": {
            "A": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "${AWS::StackName}_a"}}},
            "M": {
                "Type": "AWS::SSM::Parameter",
                "Properties": {
                    "Name": {"Fn::Join": ["/", ["", "lambdajobs", {"Ref": "AWS::StackName"}, "stack"]]},
                    "Value": '{"job_index": "off"}',
                },
            },
        }
    }
    nested = {
        "Resources": {
            "B": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"QueueName": {"Fn::Join": ["", [{"Ref": "AWS::StackName"}, "_b"]]}},
            },
            "C": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Ref": "AWS::StackName"}}},
        }
    }
    (planned,) = upgrade.planned_stacks([upgrade.StackTemplate("shop", root, nested=(nested,))])
    assert planned.stack == "shop" and planned.job_index == "off"
    assert planned.keeps("shop_a") and not planned.keeps("other_a")
    assert planned.keeps("shop-Inner-1X2Y_b") and not planned.keeps("shop_c")  # C's name says nothing


def test_nested_templates_are_found_by_asset_metadata_or_by_their_template_url(tmp_path):
    # GIVEN an assembly whose root template holds two nested stacks: one with CDK's asset metadata,
    # one found through the asset manifest by its TemplateURL's object key
    def nested_stack(metadata: dict[str, Any], key: str) -> dict[str, Any]:
        url = {
            "Fn::Join": ["", ["https://s3.", {"Ref": "AWS::Region"}, ".amazonaws.com/bucket/", f"{key}.json"]]
        }
        return {
            "Type": "AWS::CloudFormation::Stack",
            "Properties": {"TemplateURL": url},
            "Metadata": metadata,
        }

    root = {
        "Resources": {
            "One": nested_stack({"aws:asset:path": "One.nested.template.json"}, "k1"),
            "Two": nested_stack({}, "k2"),
        }
    }
    (tmp_path / "Root.template.json").write_text(json.dumps(root))
    for name, queue in (("One", "first"), ("Two", "second")):
        template = {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": queue}}}}
        (tmp_path / f"{name}.nested.template.json").write_text(json.dumps(template))
    assets = {
        "files": {
            "k2": {
                "source": {"path": "Two.nested.template.json"},
                "destinations": {"d": {"objectKey": "k2.json"}},
            }
        }
    }
    (tmp_path / "Root.assets.json").write_text(json.dumps(assets))
    manifest = {
        "artifacts": {
            "Root": {
                "type": "aws:cloudformation:stack",
                "environment": "aws://123456789012/eu-west-1",
                "properties": {"templateFile": "Root.template.json", "stackName": "shop-prod"},
            }
        }
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    # WHEN it is read
    (stack,) = upgrade.read_assembly([tmp_path / "Root.template.json"])
    # THEN the stack's name and region are the manifest's, and both nested templates are there
    assert (stack.stack_name, stack.region) == ("shop-prod", "eu-west-1")
    names = {r["Properties"]["QueueName"] for t in stack.nested for r in t["Resources"].values()}
    assert names == {"first", "second"}


# -- the CLI: deploy stops, diff says --------------------------------------------------------------------


class StandIn:
    """The CDK CLI, monkeypatched in as `deploy.run_cli`: its synth writes `assembly` (stack name ->
    template) into the project's cdk.out, every call is recorded."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.calls: list[list[str]] = []
        self.assembly: dict[str, dict[str, Any]] = {}
        self.copy_from: Path | None = None

    def __call__(self, script: Path, args: Sequence[str], *, cwd: Path, **_: Any) -> int:
        assert cwd == self.project
        self.calls.append(list(args))
        if args[0] == "synth":
            out = self.project / "cdk.out"
            shutil.rmtree(out, ignore_errors=True)
            if self.copy_from is not None:
                shutil.copytree(self.copy_from, out)
                return 0
            out.mkdir()
            artifacts = {}
            for name, template in self.assembly.items():
                (out / f"{name}.template.json").write_text(json.dumps(template))
                artifacts[name] = {
                    "type": "aws:cloudformation:stack",
                    "properties": {"templateFile": f"{name}.template.json"},
                }
            (out / "manifest.json").write_text(json.dumps({"version": "55.0.0", "artifacts": artifacts}))
        return 0

    @property
    def commands(self) -> list[str]:
        return [call[0] for call in self.calls]


@pytest.fixture
def cdk(tmp_path, monkeypatch, moto_aws) -> StandIn:
    project = tmp_path / "project"
    project.mkdir()
    (project / "cdk.json").write_text('{"app": "python app.py"}')
    monkeypatch.chdir(project)
    stand_in = StandIn(project)
    monkeypatch.setattr(deploy, "run_cli", stand_in)
    monkeypatch.setattr(deploy, "ensure_cli", lambda **_: Path("cdk"))
    monkeypatch.setattr(deploy, "find_node", lambda *_: deploy.Node(node=Path("node"), npm=("npm",)))
    return stand_in


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "250"})


def errors_of(result: Any) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def removed_job(cdk) -> dict[str, str]:
    """Deployed: send_email and resize, resize's queue holding 3 messages; the new app: send_email."""
    deployed = deploy_template(lambdajobs_template({"send_email": [], "resize": []}), STACK)
    hold(deployed["shop_resize"], waiting=3)
    cdk.assembly = {STACK: lambdajobs_template({"send_email": []})}
    return deployed


def test_deploy_stops_before_it_starts_on_a_queue_that_holds_messages(cdk, removed_job):
    result = invoke("deploy", "--yes")
    # THEN it synthesized, and deployed nothing
    assert result.exit_code == 1, result.output
    assert cdk.commands == ["synth"]
    assert "Traceback" not in result.output
    # AND one error line names the queue, its job, its messages and what to do
    (line,) = errors_of(result)
    assert "queue shop_resize (queue of job resize), holding 3 messages" in line
    assert "drain it first" in line and "--allow-deleting-queues" in line
    # AND the empty DLQ that goes with it is listed, without stopping anything by itself
    assert "the deploy deletes queue shop_resize-dlq (DLQ of job resize), empty." in result.stdout


def test_deploy_goes_on_when_told_and_deploys_the_assembly_it_checked(cdk, removed_job):
    result = invoke("deploy", "--yes", "--allow-deleting-queues", "-c", "alarm_email=oncall@example.com")
    assert result.exit_code == 0, result.output
    assert cdk.commands == ["synth", "deploy"]
    # the synth had the CDK options; the deploy takes the assembly it wrote (no second synth)
    assert cdk.calls[0] == ["synth", "--quiet", "-c", "alarm_email=oncall@example.com"]
    assert cdk.calls[1] == [
        "deploy",
        "--require-approval",
        "never",
        "--app",
        str(cdk.project / "cdk.out"),
        "-c",
        "alarm_email=oncall@example.com",
    ]
    assert "shop_resize (queue of job resize), holding 3 messages." in result.stdout
    assert errors_of(result) == []


def test_empty_queues_are_listed_and_do_not_stop_deploy(cdk):
    deploy_template(lambdajobs_template({"send_email": [], "resize": ["high"]}), STACK)
    cdk.assembly = {STACK: lambdajobs_template({"send_email": []})}
    result = invoke("deploy", "--yes")
    assert result.exit_code == 0, result.output
    assert cdk.commands == ["synth", "deploy"]
    for name in ("shop_resize", "shop_resize-dlq", "shop_resize--high", "shop_resize--high-dlq"):
        assert f"the deploy deletes queue {name} (" in result.stdout
    assert result.stdout.count(", empty.") == 4


def test_a_dropped_index_is_said_and_does_not_stop_deploy(cdk):
    deploy_template(lambdajobs_template({"send_email": []}, job_index="finished"), STACK)
    cdk.assembly = {STACK: lambdajobs_template({"send_email": []})}
    result = invoke("deploy", "--yes")
    assert result.exit_code == 0, result.output
    assert cdk.commands == ["synth", "deploy"]
    assert (
        f"stack 'shop': the deploy drops the job index {JOB_INDEX} (job_index 'finished' now)"
        in result.stdout
    )


def test_diff_says_what_deploy_would_stop_on_but_never_stops(cdk, removed_job):
    result = invoke("diff")
    assert result.exit_code == 0, result.output
    assert cdk.commands == ["synth", "diff"]
    assert cdk.calls[1] == ["diff", "--app", str(cdk.project / "cdk.out")]
    assert errors_of(result) == []
    out = result.stdout
    assert "queue shop_resize (queue of job resize), holding 3 messages: drain it first" in out
    assert "shop_resize-dlq (DLQ of job resize), empty." in out


def test_a_check_aws_refuses_is_one_line_and_stops_deploy_unless_told(cdk, removed_job, monkeypatch):
    from botocore.exceptions import ClientError

    def refused(stack: str, config: Any) -> None:
        error = {"Error": {"Code": "AccessDeniedException", "Message": "not allowed"}}
        raise ClientError(error, "GetParameter")

    monkeypatch.setattr(upgrade, "deployed_stack", refused)
    result = invoke("deploy", "--yes")
    assert result.exit_code == 1 and cdk.commands == ["synth"] and "Traceback" not in result.output
    (line,) = [line for line in result.stderr.splitlines() if line.strip()]
    assert line.startswith("error: cannot tell what the deploy deletes (AWS refused GetParameter")
    assert "ssm:GetParametersByPath on /lambdajobs/<stack>/*" in line and "--allow-deleting-queues" in line
    # told to go on, it warns and deploys; diff warns and diffs
    result = invoke("deploy", "--yes", "--allow-deleting-queues")
    assert result.exit_code == 0 and cdk.commands[-1] == "deploy" and "warning: cannot tell" in result.stderr
    result = invoke("diff")
    assert result.exit_code == 0 and cdk.commands[-1] == "diff" and "warning: cannot tell" in result.stderr


def test_a_failed_synth_deploys_nothing(cdk, removed_job, monkeypatch):
    monkeypatch.setattr(deploy, "run_cli", lambda script, args, **_: cdk.calls.append(list(args)) or 3)
    result = invoke("deploy", "--yes", "--allow-deleting-queues")
    assert result.exit_code == 3 and cdk.commands == ["synth"]


# -- the real synthesized template -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, Any, Any]:
    return synthesize(tmp_path_factory)  # one synthesis per session, shared with tests/infra


def test_the_synthesized_template_keeps_its_own_queues_and_names_a_retired_jobs(cdk, synthesized):
    template, outdir, stack, _ = synthesized
    name = stack.stack_name
    # GIVEN this repository's stack deployed from its synthesized template, plus a job since retired
    # (its manifest entry and queues, as an earlier deploy left them) whose DLQ holds a dead letter
    deployed = deploy_template(template, name)
    retired = lambdajobs_template({"old_report": []}, stack=name)["Resources"]
    deployed |= deploy_template(
        {"Resources": {k: v for k, v in retired.items() if k.startswith("OldReport")}}, name
    )
    hold(deployed[f"{name}_old_report-dlq"], waiting=1)
    (planned,) = upgrade.planned_stacks(
        upgrade.read_assembly(deploy.templates(outdir, ["--output", str(outdir)]))
    )
    # the index's GSI is in every stack (mode off indexes the dead); this stack's mode is off: job_stats
    # counts from the worker's metrics
    assert planned.stack == name and planned.has_index and planned.job_index == "off"
    # WHEN the same app is deployed again
    cdk.copy_from = outdir
    result = invoke("deploy", "--yes")
    # THEN it stops on the retired job's DLQ only, and names its empty queue; every queue of the
    # template (job queues, levels, DLQs, workflows, scheduler DLQ) is kept
    assert result.exit_code == 1, result.output
    (line,) = errors_of(result)
    assert f"queue {name}_old_report-dlq (DLQ of job old_report), holding 1 message:" in line
    assert "`lambdajobs dlq list old_report`" in line
    assert f"the deploy deletes queue {name}_old_report (queue of job old_report), empty." in result.stdout
    assert result.stdout.count("the deploy deletes queue") == 1
    assert cdk.commands == ["synth"]


def test_a_synth_that_writes_no_stack_template_is_said_and_deploys_as_before(cdk):
    cdk.assembly = {}  # an app with no stack (or its stacks elsewhere): nothing to compare
    result = invoke("deploy", "--yes")
    assert result.exit_code == 0, result.output
    assert cdk.calls == [["synth", "--quiet"], ["deploy", "--require-approval", "never"]]
    assert "not checked: what the deploy deletes" in result.stdout
