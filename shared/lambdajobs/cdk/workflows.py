"""`Workflows`: the stack's workflow queue and the continuer function that reads it.

A workflow (chain, group, chord) lives in the job table under ids starting `lambdajobs#wf#<id>` (its
outline and counters; its later stages' payloads in `lambdajobs#wf#<id>#later`). A job worker whose
job is a workflow member sends one notice to the workflow queue when its member may have finished a
stage; the continuer reads the notices, updates the workflow item and sends the next stage's jobs to
their queues. So the continuer may send to every job queue of every level, and read and update
workflow items only (an IAM condition on the partition key); it imports no job module and ships the
runtime alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from lambdajobs.cdk.job_worker import lambdajobs_function, place, queue_pair, root_stack, tls_only
from lambdajobs.runtime.settings import (
    CONTINUER_BATCH_SIZE,
    CONTINUER_HANDLER,
    CONTINUER_MAX_CONCURRENCY,
    CONTINUER_MEMORY_MB,
    CONTINUER_TIMEOUT_SECONDS,
    WORKFLOW_ID_PREFIX,
    WORKFLOW_MAX_RECEIVE_COUNT,
    dead_letter_queue_pattern,
    job_queue_pattern,
    workflow_dead_letter_queue_name,
    workflow_queue_name,
)
from lambdajobs.staging import environment as function_env


def send_to_job_queues(scope: Construct, stack: str) -> list[iam.PolicyStatement]:
    """SendMessage to every job queue of `stack`, at every level, and to none of their DLQs: the
    stack's name pattern (`settings.job_queue_pattern`, which no other stack's names match), with an
    explicit deny on the DLQs' (`dead_letter_queue_pattern`)."""
    stack_ = Stack.of(scope)
    return [
        iam.PolicyStatement(
            actions=["sqs:SendMessage"],
            resources=[stack_.format_arn(service="sqs", resource=job_queue_pattern(stack))],
        ),
        iam.PolicyStatement(
            effect=iam.Effect.DENY,
            actions=["sqs:SendMessage"],
            resources=[stack_.format_arn(service="sqs", resource=dead_letter_queue_pattern(stack))],
        ),
    ]


def workflow_items_condition() -> dict[str, Any]:
    """An IAM condition that holds only for workflow items of the job table (`lambdajobs#wf#<id>...`):
    every partition key the request touches must start with the prefix. A transaction's items are
    authorized one by one, as their own actions (PutItem, UpdateItem), each under this condition."""
    return {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{WORKFLOW_ID_PREFIX}*"]}}


def workflow_items_statement(table: dynamodb.ITable, *actions: str) -> iam.PolicyStatement:
    """`actions` on the workflow items of `table` only (not on job records or rate limiters)."""
    return iam.PolicyStatement(
        actions=list(actions), resources=[table.table_arn], conditions=workflow_items_condition()
    )


class Workflows(Construct):
    """The stack's workflow queue (`<stack>--workflows`) with its DLQ (`<stack>--workflows-dlq`), and
    the continuer function consuming it. Usually made by `LambdaJobs`, which lets every job worker
    send notices to the queue (`grant_notices`).

    The continuer may send to every job queue of the stack, each priority level's included (not to
    their DLQs): the stack's name pattern; it finds their URLs by the naming rule. `code`: an asset
    holding the runtime alone (`stage_function_asset(..., modules=[])`).

    Attributes: `queue`, `dead_letter_queue`, `function` (the continuer), `event_source`.

    Example:
        >>> workflows = Workflows(stack, "Workflows", table=table, code=code)
        >>> workflows.grant_notices(worker.function)
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        code: lambda_.Code,
        layers: Sequence[lambda_.ILayerVersion] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = root_stack(self).stack_name
        self.dead_letter_queue, self.queue = queue_pair(
            self,
            name=workflow_queue_name(stack),
            dead_letter_queue_name=workflow_dead_letter_queue_name(stack),
            visibility_timeout_seconds=6 * CONTINUER_TIMEOUT_SECONDS,
            max_receive_count=WORKFLOW_MAX_RECEIVE_COUNT,
        )
        tls_only(self, "QueuePolicy", [self.queue, self.dead_letter_queue])
        environment = function_env.continuer(stack=stack, table=table.table_name, place=place())
        self.function = lambdajobs_function(
            self,
            "Continuer",
            handler=CONTINUER_HANDLER,
            code=code,
            layers=layers,
            log_retention=log_retention,
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            memory_mb=CONTINUER_MEMORY_MB,
            description="lambdajobs workflow continuer: sends each workflow's next stage",
            environment=environment,
            fix="Look at the variables you add to the continuer with add_environment.",
        )
        self.event_source = sources.SqsEventSource(
            self.queue,
            batch_size=CONTINUER_BATCH_SIZE,
            # Without ReportBatchItemFailures Lambda ignores the failure list and deletes every
            # message of a "successful" batch: a lost notice would stall its workflow.
            report_batch_item_failures=True,
            max_concurrency=CONTINUER_MAX_CONCURRENCY,
        )
        self.function.add_event_source(self.event_source)  # grants consume on the workflow queue
        for statement in send_to_job_queues(self, stack):  # the next stage's jobs, at any level
            self.function.add_to_role_policy(statement)
        # The workflow item only: read it, record a member's outcome, move it to its next stage.
        self.function.add_to_role_policy(
            workflow_items_statement(table, "dynamodb:GetItem", "dynamodb:UpdateItem")
        )
        # Re-sending a stage after a crash, it skips the members that already have a record: it reads
        # (never writes) the members' job records, in batches.
        self.function.add_to_role_policy(
            iam.PolicyStatement(actions=["dynamodb:BatchGetItem"], resources=[table.table_arn])
        )

    def grant_notices(self, function: lambda_.Function) -> None:
        """Let a job worker send its notices to the workflow queue (SendMessage only; it finds the
        queue by its name). The queue's ARN from its name: no reference, so a worker in a nested
        stack needs no parameter for it."""
        function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["sqs:SendMessage"],
                resources=[
                    Stack.of(function).format_arn(
                        service="sqs", resource=workflow_queue_name(root_stack(self).stack_name)
                    )
                ],
            )
        )
