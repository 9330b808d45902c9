"""cdk-nag suppressions: each names the rule, the resource, and why the finding does not apply.

Nothing is suppressed stack-wide: every entry targets one construct and, for IAM rules, the exact
wildcard or managed policy it accepts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cdk_nag import NagPackSuppression, NagSuppressions

from lambdajobs.runtime.durable import wake_schedule_prefix
from lambdajobs.runtime.settings import (
    MANIFEST_PREFIX,
    bucket_prefix,
    dead_letter_queue_pattern,
    job_queue_pattern,
    log_group_pattern,
)

if TYPE_CHECKING:
    from lambdajobs.cdk.stack import LambdaJobs

BASIC_EXECUTION = "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"


def suppress(stack: LambdaJobs) -> None:
    """Add the suppressions to a `LambdaJobs` construct's resources (call before synthesis)."""
    stack_name = stack.stack_name
    # The run-time-named wildcards: a job's manifest entry, a job id's one-time schedule (a job's own
    # durable wake-ups: `wake_ups`).
    manifest_entries = (
        "Resource::arn:<AWS::Partition>:ssm:<AWS::Region>:<AWS::AccountId>:parameter/"
        + MANIFEST_PREFIX.format(stack=stack_name).strip("/")
        + "/*"
    )
    one_time_schedules = (
        "Resource::arn:<AWS::Partition>:scheduler:<AWS::Region>:<AWS::AccountId>:schedule/"
        f"{stack.one_time_group.schedule_group_name}/*"
    )

    def wake_ups(job: str) -> str:
        """A job's own durable wake-ups: one-time schedules under its prefix (`stack._wake_up_statement`)."""
        return f"{one_time_schedules.removesuffix('*')}{wake_schedule_prefix(job)}*"

    sqs_arn = "Resource::arn:<AWS::Partition>:sqs:<AWS::Region>:<AWS::AccountId>:"
    job_queues = sqs_arn + job_queue_pattern(stack_name)
    job_dlqs = sqs_arn + dead_letter_queue_pattern(stack_name)
    why_queues = (
        "every job queue of this stack by the stack's name pattern (<stack>_*: a stack name has no '_', "
        "so no other stack's queue matches), as one ARN instead of one per queue, so the policy does not "
        "grow with the jobs; an explicit deny keeps the job DLQs (<stack>_*-dlq) out"
    )
    for what, why in (
        (stack.workflows.function, "the continuer sends a workflow's next stage to any job: " + why_queues),
        (stack.scheduler_role, "one-time schedules send a job at any priority level: " + why_queues),
    ):
        NagSuppressions.add_resource_suppressions(
            what,
            [NagPackSuppression(id="AwsSolutions-IAM5", reason=why + ".", applies_to=[job_queues, job_dlqs])],
            apply_to_children=True,
        )
    for function in [*(worker.function for worker in stack.workers.values()), stack.workflows.function]:
        NagSuppressions.add_resource_suppressions(
            function,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM4",
                    reason="AWSLambdaBasicExecutionRole only lets the function write its own logs "
                    "(CloudWatch Logs create stream / put events); the log group and its retention are ours.",
                    applies_to=[BASIC_EXECUTION],
                ),
            ],
            apply_to_children=True,
        )
    for job, worker in stack.workers.items():
        if worker.sends_by_pattern:
            NagSuppressions.add_resource_suppressions(
                worker.function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason=f"job {job} enqueues more queues than a list of ARNs holds in a role's "
                        f"policy: every job queue of this stack by the stack's name pattern (<stack>_*, "
                        f"which no other stack's queue matches).",
                        applies_to=[job_queues],
                    )
                ],
                apply_to_children=True,
            )
        if worker.spec.enqueues:
            light = worker.spec.record_mode == "light"  # never durable: no wake-ups of its own
            wakes = "" if light else ", and schedules its own durable wake-ups"
            NagSuppressions.add_resource_suppressions(
                worker.function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason=f"job {job} enqueues other jobs and may schedule them for later "
                        f"(enqueue(..., run_at=...)){wakes}: one-time schedules are named per job id "
                        f"at run time, in the stack's one-time group only.",
                        applies_to=[one_time_schedules],
                    )
                ],
                apply_to_children=True,
            )
        elif worker.spec.record_mode != "light":  # a light job schedules no wake-up (`_wire`)
            NagSuppressions.add_resource_suppressions(
                worker.function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason=f"job {job} may sleep or wait for a signal beyond 15 minutes (a durable "
                        f"job): its wake-up is a one-time schedule named per job id and wake-up at run "
                        f"time, in the stack's one-time group, under its own job's name prefix only.",
                        applies_to=[wake_ups(job)],
                    )
                ],
                apply_to_children=True,
            )
        if "job_stats" in worker.spec.uses:
            NagSuppressions.add_resource_suppressions(
                worker.function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason=f"job {job} counts finished jobs (uses job_stats) from the worker's own "
                        f"CloudWatch metrics: cloudwatch:GetMetricData supports no resource-level "
                        f"permission, and it only reads metrics.",
                        applies_to=["Resource::*"],
                    )
                ],
                apply_to_children=True,
            )
        if "bucket" in worker.spec.uses:
            NagSuppressions.add_resource_suppressions(
                worker.function,
                [
                    NagPackSuppression(
                        id="AwsSolutions-IAM5",
                        reason=f"job {job} reads and writes objects under its own prefix of the data bucket, "
                        f"whose keys it chooses at run time (dated reports).",
                        applies_to=[
                            f"Resource::<{stack.resolve(stack.bucket.node.default_child.logical_id)}.Arn>/"  # type: ignore[union-attr]
                            f"{bucket_prefix(job)}*"
                        ],
                    )
                ],
                apply_to_children=True,
            )
    NagSuppressions.add_resource_suppressions(
        stack.bucket,
        [
            NagPackSuppression(
                id="AwsSolutions-S1",
                reason="the data bucket holds job outputs (reports) that expire after 90 days; object access "
                "is private, TLS-only and audited through CloudTrail; server access logs would need a "
                "second bucket per stack for little gain.",
            )
        ],
    )
    NagSuppressions.add_resource_suppressions(
        stack.scheduler_dlq,
        [
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason="this queue is itself a dead-letter queue: EventBridge Scheduler's, for schedule runs "
                "it could not deliver (Scheduler DLQs are not SQS redrive DLQs, so cdk-nag cannot see it).",
            )
        ],
    )
    NagSuppressions.add_resource_suppressions(
        stack.operator_policy,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="operators watch and repair every job queue and DLQ of this stack by the stack's "
                "name patterns (<stack>_* and <stack>_*-dlq, which no other stack's queue matches), "
                "read the manifest entry of any job of this stack (one parameter per job "
                "under the stack's path), schedule jobs for later (one-time schedules named per job id, in "
                "the stack's one-time group only) and delete them (lambdajobs cancel); "
                "cloudwatch:GetMetricStatistics and GetMetricData (the age of a queue's oldest message, "
                "a job's counts), scheduler:ListSchedules (the board's pending runs), "
                "lambda:ListEventSourceMappings and logs:GetQueryResults/StopQuery support no "
                "resource-level permission; pausing a queue reads and updates event source mappings "
                "(named by a UUID CloudFormation gives) only of this stack's functions (a lambda:FunctionArn "
                "condition); a job's logs are queried in this stack's worker log groups only "
                "(/lambdajobs/<stack>/*).",
                applies_to=[
                    manifest_entries,
                    one_time_schedules,
                    "Resource::*",
                    job_queues,
                    job_dlqs,
                    "Resource::arn:<AWS::Partition>:lambda:<AWS::Region>:<AWS::AccountId>:event-source-mapping:*",
                    "Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:"
                    + log_group_pattern(stack_name),
                ],
            )
        ],
    )
    NagSuppressions.add_resource_suppressions(
        stack.producer_policy,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="producers read the manifest entry of any job of this stack (one parameter per job "
                "under the stack's path) and create one-time schedules, named per job id at run time, "
                "in the stack's one-time group only, and delete them (lambdajobs.cancel); they send to "
                + why_queues
                + ".",
                applies_to=[
                    manifest_entries,
                    one_time_schedules,
                    job_queues,
                    job_dlqs,
                ],
            )
        ],
    )


def check_with_cdk_nag(app: Any, *constructs: LambdaJobs) -> None:
    """Run cdk-nag's AwsSolutions rules on every synth of `app`, with lambdajobs' suppressions on
    `constructs` (each suppression names its rule, resource and reason). Errors then show in the
    synthesized assembly: `nag_errors(app.synth())`.

    Example:
        >>> check_with_cdk_nag(app, stack.lambdajobs)
        >>> assert not nag_errors(app.synth())
    """
    from aws_cdk import Aspects
    from cdk_nag import AwsSolutionsChecks

    for construct in constructs:
        suppress(construct)
    Aspects.of(app).add(AwsSolutionsChecks(verbose=True))


def nag_errors(assembly: Any) -> list[str]:
    """Unsuppressed cdk-nag errors (and any other synth errors) in a synthesized assembly."""
    found = []
    for artifact in assembly.stacks:
        for message in artifact.messages:
            if str(message.entry.type) == "aws:cdk:error":
                found.append(f"{message.id}: {message.entry.data}")
    return found
