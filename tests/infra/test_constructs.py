"""The constructs on a project of their own (not this repository's jobs): options a real account needs,
and the hook for per-job permissions and environment."""

from __future__ import annotations

import json
import textwrap

import pytest
from pydantic import BaseModel

from lambdajobs.errors import ConfigurationError, DeclarationError
from lambdajobs.testing import isolated_registry

JOBS = """
from pydantic import BaseModel

from lambdajobs import job


class Invoice(BaseModel):
    order_id: str


@job(max_concurrency=10, reserved_concurrency=20)
def send_invoice(payload: Invoice) -> None:
    pass


class Lookup(BaseModel):
    customer_id: str


@job(searchable=("customer_id",))
def find_customer(payload: Lookup) -> None:
    pass
"""


@pytest.fixture(scope="module")
def acme(tmp_path_factory):
    """A synthesized stack of a small jobs package, with a per-job permission and variable added
    through the documented hook (`workers[job].function`)."""
    import sys

    from aws_cdk import App
    from aws_cdk import aws_iam as iam
    from aws_cdk.assertions import Template

    from lambdajobs.cdk import LambdaJobsStack

    root = tmp_path_factory.mktemp("acme")
    (root / "probe_acme").mkdir()
    (root / "probe_acme" / "__init__.py").write_text("")
    (root / "probe_acme" / "billing.py").write_text(textwrap.dedent(JOBS))
    sys.path.insert(0, str(root))
    try:
        with isolated_registry():
            app = App(outdir=str(tmp_path_factory.mktemp("cdk.out")))
            stack = LambdaJobsStack(app, "acme", jobs="probe_acme")
            fn = stack.lambdajobs.workers["send_invoice"].function
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["ses:SendEmail"],
                    resources=[
                        stack.format_arn(service="ses", resource="identity", resource_name="acme.example")
                    ],
                )
            )
            fn.add_environment("SENDER", "billing@acme.example")
            template = Template.from_stack(stack).to_json()
    finally:
        sys.path.remove(str(root))
    return template, stack


def function_of(template, job):
    [fn] = [
        r["Properties"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Environment", {}).get("Variables", {}).get("LAMBDAJOBS_JOB") == job
    ]
    return fn


def role_statements(template, job):
    """The statements of the inline policies of `job`'s worker role."""
    [role] = [
        r["Properties"]["Role"]["Fn::GetAtt"][0]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::Lambda::Function"
        and r["Properties"].get("Environment", {}).get("Variables", {}).get("LAMBDAJOBS_JOB") == job
    ]
    return [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"].get("Roles", [])
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]


def test_only_a_job_with_searchable_fields_writes_search_entries_and_only_those(acme):
    template, _ = acme

    def batch_writes(job):
        return [
            s
            for s in role_statements(template, job)
            if "dynamodb:BatchWriteItem" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
        ]

    [grant] = batch_writes("find_customer")
    assert grant["Action"] == "dynamodb:BatchWriteItem"
    assert grant["Condition"] == {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["lambdajobs#sx#*"]}}
    assert batch_writes("send_invoice") == []


def test_per_job_permissions_and_environment_through_the_hook(acme):
    template, _ = acme
    fn = function_of(template, "send_invoice")
    assert fn["Environment"]["Variables"]["SENDER"] == "billing@acme.example"
    role = fn["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    [ses] = [s for s in statements if s["Action"] == "ses:SendEmail"]
    assert ses["Resource"]["Fn::Join"][1][-1] == ":identity/acme.example"


def test_reserved_concurrency_is_opt_in_and_json_logs_filter_levels(acme):
    template, _ = acme
    fn = function_of(template, "send_invoice")
    assert fn["ReservedConcurrentExecutions"] == 20
    assert fn["LoggingConfig"]["LogFormat"] == "JSON"
    assert (fn["LoggingConfig"]["ApplicationLogLevel"], fn["LoggingConfig"]["SystemLogLevel"]) == (
        "INFO",
        "INFO",
    )


class Tick(BaseModel):
    pass


def tick(payload: Tick) -> None:
    pass


def test_reserved_concurrency_below_max_concurrency_is_refused():
    from lambdajobs import job

    with (
        isolated_registry(),
        pytest.raises(DeclarationError, match="reserved_concurrency=5 is out of range"),
    ):
        job(max_concurrency=10, reserved_concurrency=5)(tick)


def test_a_stack_name_that_would_be_cut_short_is_refused_at_synth():
    from aws_cdk import App

    from lambdajobs.cdk import LambdaJobsStack

    long_name = "s" * 61  # "<stack>-cron" would be 66 characters: Scheduler allows 64
    with pytest.raises(ConfigurationError, match="Scheduler allows 64"):
        LambdaJobsStack(App(), long_name, jobs="tests.jobs")


def test_a_queue_name_that_would_be_cut_short_is_refused():
    from lambdajobs.runtime.settings import queue_name

    assert queue_name("prod", "send_email") == "prod_send_email"
    # cut to 80 characters, two jobs sharing a long prefix would share one queue
    with pytest.raises(ConfigurationError, match="SQS allows 80: use a shorter stack name"):
        queue_name("p" * 40, "j" * 48)


def test_reservations_above_what_lambda_leaves_are_refused(tmp_path, monkeypatch):
    from aws_cdk import App

    from lambdajobs.cdk import LambdaJobsStack

    (tmp_path / "probe_greedy").mkdir()
    (tmp_path / "probe_greedy" / "__init__.py").write_text("")
    (tmp_path / "probe_greedy" / "jobs.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel
            from lambdajobs import job

            class P(BaseModel):
                pass

            @job(max_concurrency=10, reserved_concurrency=500)
            def first(payload: P) -> None: ...

            @job(max_concurrency=10, reserved_concurrency=500)
            def second(payload: P) -> None: ...
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with isolated_registry(), pytest.raises(ConfigurationError, match="reserve 1000 concurrent executions"):
        LambdaJobsStack(App(), "greedy", jobs="probe_greedy")


def test_the_job_index_is_always_there_and_mode_off_indexes_dead_jobs_only(acme):
    # no job of acme's uses job_stats: mode off, yet the table has the index (dead records, search
    # entries), operators query it, and no worker does (none declares job_stats)
    template, stack = acme
    assert stack.lambdajobs.job_index == "off"
    [table] = [r["Properties"] for r in template["Resources"].values() if r["Type"] == "AWS::DynamoDB::Table"]
    [index] = table["GlobalSecondaryIndexes"]
    assert index["IndexName"] == "by_job_state" and index["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert function_of(template, "send_invoice")["Environment"]["Variables"]["LAMBDAJOBS_JOB_INDEX"] == "off"
    querying = [
        r["Type"]
        for r in template["Resources"].values()
        if r["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
        for s in r["Properties"]["PolicyDocument"]["Statement"]
        if "dynamodb:Query" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]
    assert querying == ["AWS::IAM::ManagedPolicy"]  # the operator policy's, no worker's
    [manifest] = [
        r["Properties"]["Value"]
        for r in template["Resources"].values()
        if r["Type"] == "AWS::SSM::Parameter" and r["Properties"]["Name"] == "/lambdajobs/acme/stack"
    ]
    assert '"job_index":"off"' in json.dumps(manifest).replace(" ", "").replace("\\", "")


def test_a_project_that_declares_no_dependencies_any_more_loses_its_stale_lock(tmp_path, monkeypatch):
    import sys

    from aws_cdk import App

    from lambdajobs.cdk import LambdaJobsStack
    from lambdajobs.staging import dependencies as deps

    # GIVEN a project whose synth locked jinja2 once, and which declares no dependencies now
    (tmp_path / "probe_stale").mkdir()
    (tmp_path / "probe_stale" / "__init__.py").write_text("")
    (tmp_path / "probe_stale" / "billing.py").write_text(textwrap.dedent(JOBS))
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "probe_stale"\n')
    deps.write_lock(
        deps.Requirements(("jinja2",), "pyproject.toml [tool.lambdajobs]", tmp_path), ["jinja2==3.1.6"]
    )
    assert (tmp_path / deps.LOCK_NAME).is_file()
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    # WHEN its stack is built
    with isolated_registry():
        stack = LambdaJobsStack(App(outdir=str(tmp_path / "cdk.out")), "stale", jobs="probe_stale")
    sys.modules.pop("probe_stale.billing", None)
    # THEN nothing ships, and no lock says otherwise
    assert stack.lambdajobs.dependencies.folder is None
    assert not (tmp_path / deps.LOCK_NAME).exists()


@pytest.mark.parametrize("mode", ["off", "finished"])
def test_a_job_stats_job_reads_metrics_and_queries_the_index_only_when_it_is_on(tmp_path, monkeypatch, mode):
    # GIVEN a project whose one job counts finished jobs (uses job_stats)
    from aws_cdk import App
    from aws_cdk.assertions import Template

    from lambdajobs.cdk import LambdaJobsStack
    from lambdajobs.cdk.nag import suppress

    (tmp_path / "probe_stats").mkdir()
    (tmp_path / "probe_stats" / "__init__.py").write_text("")
    (tmp_path / "probe_stats" / "report.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel

            from lambdajobs import job


            class P(BaseModel):
                day: str


            @job(uses=("job_stats",))
            def tally(payload: P) -> None: ...
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # WHEN it is synthesized with the job index in `mode`
    with isolated_registry():
        stack = LambdaJobsStack(App(), "stats", jobs="probe_stats", job_index=mode)
        suppress(stack.lambdajobs)  # as check_with_cdk_nag does
        template = Template.from_stack(stack).to_json()
    role = function_of(template, "tally")["Role"]["Fn::GetAtt"][0]
    statements = [
        s
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for s in r["Properties"]["PolicyDocument"]["Statement"]
    ]
    # THEN its role reads the worker's metrics (GetMetricData takes no resource-level permission)
    assert [s["Resource"] for s in statements if s["Action"] == "cloudwatch:GetMetricData"] == ["*"]
    # AND queries the job index only when the index holds finished jobs
    queries = [s["Resource"] for s in statements if s["Action"] == "dynamodb:Query"]
    assert len(queries) == (0 if mode == "off" else 1)
    assert all(q["Fn::Join"][1][-1] == "/index/by_job_state" for q in queries)
    # AND cdk-nag's finding on the wildcard is suppressed for this job, with its reason
    suppressed = [
        rule
        for r in template["Resources"].values()
        if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
        for rule in r.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
        if "job_stats" in rule.get("reason", "")
    ]
    assert [(r["id"], r["applies_to"]) for r in suppressed] == [("AwsSolutions-IAM5", ["Resource::*"])]
