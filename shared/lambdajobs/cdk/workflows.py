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

from collections.abc import Iterable, Sequence
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from constructs import Construct

from lambdajobs.cdk.job_worker import LevelQueues, lambdajobs_function, queue_pair
from lambdajobs.runtime.settings import (
    CONTINUER_BATCH_SIZE,
    CONTINUER_HANDLER,
    CONTINUER_MAX_CONCURRENCY,
    CONTINUER_MEMORY_MB,
    CONTINUER_TIMEOUT_SECONDS,
    ENV_WORKFLOW_QUEUE_URL,
    WORKFLOW_ID_PREFIX,
    WORKFLOW_MAX_RECEIVE_COUNT,
    workflow_queue_name,
)
from lambdajobs.staging import environment as function_env


def workflow_dead_letter_queue_name(stack: str) -> str:
    """`<stack>--workflows-dlq`: named, so the CLI finds it with the workflow queue."""
    return f"{workflow_queue_name(stack)}-dlq"


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

    `job_queues`: every job's queues, each priority level's included; the continuer may send to each
    (not to their DLQs) and finds their URLs in its environment. `code`: an asset holding the runtime
    alone (`stage_function_asset(..., modules=[])`).

    Attributes: `queue`, `dead_letter_queue`, `function` (the continuer), `event_source`.

    Raises:
        ConfigurationError: the continuer's environment (a URL per job queue) exceeds Lambda's 4 KB.

    Example:
        >>> workflows = Workflows(stack, "Workflows", table=table, code=code,
        ...     job_queues=[level for w in workers.values() for level in w.all_levels])
        >>> workflows.grant_notices(worker.function)
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table: dynamodb.ITable,
        code: lambda_.Code,
        job_queues: Iterable[LevelQueues],
        layers: Sequence[lambda_.ILayerVersion] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        job_queues = list(job_queues)
        self.dead_letter_queue, self.queue = queue_pair(
            self,
            name=workflow_queue_name(stack.stack_name),
            dead_letter_queue_name=workflow_dead_letter_queue_name(stack.stack_name),
            visibility_timeout_seconds=6 * CONTINUER_TIMEOUT_SECONDS,
            max_receive_count=WORKFLOW_MAX_RECEIVE_COUNT,
        )
        # it sends now, never later: URLs only (no ARN for one-time schedules)
        environment = function_env.continuer(
            stack=stack.stack_name,
            table=table.table_name,
            job_queues=[(level.job, level.level, level.refs) for level in job_queues],
        )
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
            fix="The workflow continuer holds the URL of every job queue of the stack, each priority "
            "level's included; split the jobs over two stacks, or declare fewer priority levels.",
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
        for level in job_queues:  # the next stage's jobs, at any of their levels; never a DLQ
            level.queue.grant(self.function, "sqs:SendMessage")
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
        """Let a job worker send its notices to the workflow queue (SendMessage only), and say where."""
        self.queue.grant(function, "sqs:SendMessage")
        function.add_environment(ENV_WORKFLOW_QUEUE_URL, self.queue.queue_url)
