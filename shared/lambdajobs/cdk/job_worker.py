"""`JobWorker`: everything one job needs on AWS, derived from its `JobSpec`."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import CfnOutput, Duration, Stack, TimeZone
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_scheduler_targets as targets
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    ENV_JOB,
    ENV_JOBS,
    ENV_MODULES,
    ENV_STACK,
    ENV_TABLE,
    METRICS_NAMESPACE,
    QUEUE_RETENTION_SECONDS,
    SERVICE_NAME,
    dlq_url_env,
    manifest_parameter,
    queue_name,
    queue_url_env,
)
from lambdajobs.runtime.spec import JobSpec

DLQ_RETENTION = Duration.seconds(DLQ_RETENTION_SECONDS)  # longer than the source: see settings
QUEUE_RETENTION = Duration.seconds(QUEUE_RETENTION_SECONDS)
#: The newest Python Lambda runs and the official Powertools layer is published for (python3.14).
RUNTIME = lambda_.Runtime.PYTHON_3_14
#: The library's own entry point: every function runs it; LAMBDAJOBS_JOB says which job.
HANDLER = "lambdajobs.runtime.entry.lambda_handler"


class JobWorker(Construct):
    """Queue + dead-letter queue + Lambda worker + event source mapping + manifest entry for one job.

    `code` is the function's asset (the runtime plus `modules` of `jobs_package`: see
    `lambdajobs.cdk.asset`). Usually made by `LambdaJobs`, which wires jobs to each other.

    Raises:
        jsii errors from CDK for settings it refuses (none for a spec `@job` accepted).

    Example:
        >>> asset = stage_function_asset(out, jobs_package="myjobs", modules=["myjobs.billing"])
        >>> worker = JobWorker(stack, "SendInvoiceJob", spec=get_spec("send_invoice", jobs="myjobs"),
        ...     table=table, code=lambda_.Code.from_asset(str(asset)), jobs_package="myjobs",
        ...     modules=["myjobs.billing"])
        >>> worker.queue, worker.dead_letter_queue, worker.function

    Attributes: `queue`, `dead_letter_queue`, `function`, `event_source`, `manifest`, and for cron
    jobs `schedule`.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        spec: JobSpec,
        table: dynamodb.ITable,
        code: lambda_.Code,
        jobs_package: str,
        modules: Sequence[str],
        layers: Sequence[lambda_.ILayerVersion] = (),
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        cron_group: scheduler.IScheduleGroup | None = None,
        scheduler_dlq: sqs.IQueue | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.spec = spec
        stack = Stack.of(self)
        name = queue_name(stack.stack_name, spec.name)
        # The DLQ's redrive-allow policy names its source queue. Referencing the source queue's ARN
        # while the source's redrive policy references the DLQ is a circular dependency in
        # CloudFormation; a derived queue name and a formatted ARN break the cycle.
        source_ref = sqs.Queue.from_queue_arn(
            self, "SourceQueueRef", stack.format_arn(service="sqs", resource=name)
        )
        self.dead_letter_queue = sqs.Queue(
            self,
            "DeadLetterQueue",
            retention_period=DLQ_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            redrive_allow_policy=sqs.RedriveAllowPolicy(
                redrive_permission=sqs.RedrivePermission.BY_QUEUE, source_queues=[source_ref]
            ),
        )
        self.queue = sqs.Queue(
            self,
            "Queue",
            queue_name=name,
            visibility_timeout=Duration.seconds(spec.visibility_timeout_seconds),
            retention_period=QUEUE_RETENTION,
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
            dead_letter_queue=sqs.DeadLetterQueue(
                queue=self.dead_letter_queue, max_receive_count=spec.max_receive_count
            ),
        )
        log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self.function = lambda_.Function(
            self,
            "Worker",
            runtime=RUNTIME,
            architecture=lambda_.Architecture.ARM_64,
            handler=HANDLER,
            code=code,
            layers=list(layers),
            timeout=Duration.seconds(spec.timeout_seconds),
            memory_size=spec.memory_mb,
            log_group=log_group,
            # Lambda's JSON log format: platform lines are JSON too, and the levels filter at the source
            # (Powertools' Logger follows the application level). System INFO keeps the START and
            # REPORT lines (duration, memory used, init duration).
            logging_format=lambda_.LoggingFormat.JSON,
            application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
            system_log_level_v2=lambda_.SystemLogLevel.INFO,
            reserved_concurrent_executions=spec.reserved_concurrency,
            description=f"lambdajobs worker for job {spec.name}",
            environment={
                ENV_JOB: spec.name,
                # the job modules this function ships and imports at cold start (see cdk/asset.py)
                ENV_JOBS: jobs_package,
                ENV_MODULES: ",".join(modules),
                ENV_STACK: stack.stack_name,
                ENV_TABLE: table.table_name,
                # its own queue: for retry delays (ChangeMessageVisibility) without a lookup
                queue_url_env(spec.name): self.queue.queue_url,
                dlq_url_env(spec.name): self.dead_letter_queue.queue_url,
                "POWERTOOLS_SERVICE_NAME": SERVICE_NAME,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
            },
        )
        window = spec.max_batching_window_seconds
        self.event_source = sources.SqsEventSource(
            self.queue,
            batch_size=spec.batch_size,
            max_batching_window=Duration.seconds(window) if window else None,
            # Without ReportBatchItemFailures Lambda ignores the failure list and deletes every
            # message of a "successful" batch: silent loss.
            report_batch_item_failures=True,
            max_concurrency=spec.max_concurrency,
        )
        self.function.add_event_source(self.event_source)  # grants consume on its own queue
        self.dead_letter_queue.grant_send_messages(self.function)
        # A record the worker does not run (its lock held, no time left, a failed record write) goes
        # back to its own queue as a copy, so that receive costs no attempt.
        self.queue.grant_send_messages(self.function)
        # The job record: acquire/complete are UpdateItem, status reads are GetItem. On the table only:
        # Table.grant would add its indexes too, which these actions never touch.
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"], resources=[table.table_arn]
            )
        )

        manifest = ssm.StringParameter(
            self,
            "Manifest",
            parameter_name=manifest_parameter(stack.stack_name, spec.name),
            string_value=stack.to_json_string(
                {
                    "queue_url": self.queue.queue_url,
                    "queue_arn": self.queue.queue_arn,
                    "dlq_url": self.dead_letter_queue.queue_url,
                }
            ),
            description=f"lambdajobs manifest entry for job {spec.name}",
        )
        self.manifest = manifest
        self.schedule = self._schedule(spec, cron_group, scheduler_dlq) if spec.schedule else None
        CfnOutput(self, "QueueUrl", value=self.queue.queue_url, description=f"queue of job {spec.name}")
        CfnOutput(
            self,
            "DeadLetterQueueUrl",
            value=self.dead_letter_queue.queue_url,
            description=f"DLQ of job {spec.name}",
        )

    def _schedule(
        self, spec: JobSpec, group: scheduler.IScheduleGroup | None, dlq: sqs.IQueue | None
    ) -> scheduler.Schedule:
        """An EventBridge Scheduler schedule that sends the job's envelope to its queue (not to the
        function: a scheduled run gets the queue's retries, backoff, DLQ and idempotency). The job id
        holds `<aws.scheduler.scheduled-time>`, stable across Scheduler's retries: one run per slot."""
        assert spec.schedule is not None
        window = spec.schedule.flexible_window_minutes
        envelope = spec.scheduled_envelope(scheduler.ContextAttribute.scheduled_time)
        target = targets.SqsSendMessage(
            self.queue,
            input=scheduler.ScheduleTargetInput.from_object(envelope),
            dead_letter_queue=dlq,
            retry_attempts=185,  # Scheduler's maximum; the job's own retries start once it is queued
            max_event_age=Duration.hours(24),
        )
        return scheduler.Schedule(
            self,
            "Schedule",
            schedule=scheduler.ScheduleExpression.expression(
                spec.schedule.expression, TimeZone.of(spec.schedule.timezone)
            ),
            target=target,
            schedule_group=group,
            time_window=scheduler.TimeWindow.flexible(Duration.minutes(window))
            if window
            else scheduler.TimeWindow.off(),
            description=f"lambdajobs: runs job {spec.name}",
        )
