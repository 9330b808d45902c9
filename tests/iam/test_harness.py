"""The IAM harness itself: a missing grant fails, unresolvable template values fail loudly, every role
of the template is exercised, and moto's authorization is off again after a test."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from botocore.exceptions import ClientError

from handlers.emails import SendEmail
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.producer import enqueue
from tests.iam.deployment import RoleRunner
from tests.iam.enforcement import Recorder, enforced
from tests.iam.template_policies import Unresolvable, of_type

#: Roles of the template these tests do not run as, with the reason. Empty: every role is exercised.
NOT_EXERCISED: dict[str, str] = {}


def _resources(statement) -> list[str]:
    found = statement.get("Resource", [])
    return found if isinstance(found, list) else [found]


def test_a_grant_missing_from_the_template_fails_even_when_the_code_swallows_the_error(deployment, sender):
    dlq_arn = deployment.stack.provisioned.queues["send_email"].dlq_arn
    # GIVEN send_email's role without the statement that lets it send to its DLQ
    trimmed = deployment.create(deployment.worker("send_email").without(lambda s: dlq_arn in _resources(s)))
    environment = StackConfig.from_environment(deployment.worker_environment("send_email"))
    runner = RoleRunner(deployment.stack, "send_email", deployment.config_for(trimmed, environment))
    deployment.stack.enqueue("send_email", SendEmail(to="not-an-address", subject="s", body="b"))
    # WHEN the worker moves an invalid job to the DLQ (when that send fails it hands the message back
    # to its queue with the move still to make, so nothing reaches the test)
    runner.drain()
    # THEN the denial is recorded, naming the call, the resource and the principal with its policies
    denied = deployment.recorder.take_denials()
    assert ("sqs:SendMessage", (dlq_arn,)) in [(d.action, d.resources) for d in denied]
    report = deployment.recorder.report(denied)
    assert f"sqs:SendMessage on {dlq_arn}" in report
    assert "by worker of send_email (trimmed)" in report and "WorkerServiceRoleDefaultPolicy" in report
    # AND the message is not lost: still in the queue
    assert runner.depth() == 1


def test_creating_a_schedule_needs_pass_role_of_its_role(deployment, clock):
    role_arn = deployment.role_arn(deployment.one_time_schedules)
    # GIVEN a producer role without iam:PassRole (moto itself never checks it)
    trimmed = deployment.create(deployment.producer.without(lambda s: "iam:PassRole" in str(s.get("Action"))))
    config = deployment.config_for(
        trimmed, StackConfig(stack=deployment.stack.stack, jobs=deployment.stack.jobs)
    )
    # WHEN it schedules a job 2 hours ahead
    with pytest.raises(ClientError, match="iam:PassRole"):
        enqueue(
            "send_email",
            SendEmail(to="ada@example.com", subject="s", body="b"),
            run_at=datetime.now(UTC) + timedelta(hours=2),
            config=config,
        )
    # THEN CreateSchedule is refused for the role it passes, with the condition AWS evaluates
    [denied] = deployment.recorder.take_denials()
    assert (denied.action, denied.resources) == ("iam:PassRole", (role_arn,))
    assert "scheduler.amazonaws.com" in denied.error


def test_a_template_value_with_no_moto_counterpart_fails_loudly(deployment, template):
    resolver = deployment.resolver
    topic = sorted(of_type(template, "AWS::SNS::Topic"))[0]  # the alarm topics: not provisioned by TestStack
    table = deployment.logical_id(deployment.constructs.table)
    for value, says in (
        ({"Ref": topic}, "AWS::SNS::Topic"),
        ({"Fn::GetAtt": [table, "StreamArn"]}, "StreamArn"),
        ({"Fn::GetAtt": ["NotInTheTemplate", "Arn"]}, "not in the template"),
        ({"Fn::ImportValue": "elsewhere"}, "Fn::ImportValue"),
        ({"Fn::Join": ["", ["arn:", {"Ref": "AWS::NoValue"}]]}, "AWS::NoValue"),
    ):
        with pytest.raises(Unresolvable, match=says):
            resolver.resolve({"Resource": value}, "a statement")


def test_every_role_of_the_template_is_a_principal_these_tests_run_as(deployment, template):
    exercised = {p.role_logical_id for p in deployment.principals.values()}
    missing = set(of_type(template, "AWS::IAM::Role")) - exercised - set(NOT_EXERCISED)
    assert not missing, (
        f"roles no IAM test runs as: {sorted(missing)}; add tests (or NOT_EXERCISED with a reason)"
    )


def test_the_only_conditions_moto_does_not_see_are_checked_here(deployment):
    dropped = [
        line for p in deployment.principals.values() for policy in p.policies for line in policy.dropped
    ]
    # iam:PassedToService is evaluated by the implied iam:PassRole check, dynamodb:LeadingKeys against
    # the request's partition keys, lambda:FunctionArn against the mapping's function (enforcement.py)
    checked = ("iam:PassedToService", "dynamodb:LeadingKeys", "lambda:FunctionArn")
    assert all(any(key in line for key in checked) and "not given to moto" in line for line in dropped), (
        dropped
    )


def test_moto_authorization_is_off_again_after_the_block():
    from moto import settings
    from moto.iam.access_control import IAMRequestBase

    before = (settings.INITIAL_NO_AUTH_ACTION_COUNT, IAMRequestBase.check_action_permitted)
    with enforced(Recorder()):
        assert settings.INITIAL_NO_AUTH_ACTION_COUNT == 0
    assert (settings.INITIAL_NO_AUTH_ACTION_COUNT, IAMRequestBase.check_action_permitted) == before
    assert before[0] == float("inf")
