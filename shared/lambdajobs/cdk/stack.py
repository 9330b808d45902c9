"""The lambdajobs stack: a job table, a data bucket, schedule groups, and one `JobWorker` per job."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aws_cdk import Aws, CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from lambdajobs.cdk.job_worker import JobWorker
from lambdajobs.cdk.monitoring import Monitoring
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    ENV_BUCKET,
    JOB_STATS_INDEX,
    MANIFEST_PREFIX,
    bucket_prefix,
    queue_url_env,
    schedule_group_names,
    stack_manifest_parameter,
)
from lambdajobs.runtime.spec import JobSpec

#: The official public Powertools layer (v3, Python 3.13, arm64). It carries Powertools and pydantic,
#: so the function asset holds only our code and synth needs no network. Override the version with
#: the `powertools_layer_version` context value in cdk.json.
POWERTOOLS_ACCOUNT = "017000801446"
POWERTOOLS_LAYER = "AWSLambdaPowertoolsPythonV3-python313-arm64"
#: Reports and other job outputs expire from the data bucket after this many days.
DATA_EXPIRY_DAYS = 90


def construct_id(job: str) -> str:
    return "".join(part.capitalize() for part in job.split("_")) + "Job"


class LambdaJobsStack(Stack):
    """Attributes: `table`, `bucket`, `workers` (job name -> JobWorker), `scheduler_dlq`,
    `cron_group`, `one_time_group`, `scheduler_role`, `producer_policy`, `monitoring`."""

    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        jobs: Sequence[JobSpec],
        asset_dir: str,
        powertools_layer_version: int,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        alarm_email: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id_, **kwargs)
        self.table = dynamodb.Table(
            self,
            "JobTable",
            partition_key=dynamodb.Attribute(name="id", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            # TTL deletion is lazy (up to days): correctness comes from the conditions on `expiration`.
            time_to_live_attribute="expiration",
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Finished jobs by job and time, for reports: only items with finished_at are indexed.
        self.table.add_global_secondary_index(
            index_name=JOB_STATS_INDEX,
            partition_key=dynamodb.Attribute(name="job", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="finished_at", type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=["state"],
        )
        self.bucket = s3.Bucket(
            self,
            "DataBucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            lifecycle_rules=[
                s3.LifecycleRule(id="expire-job-outputs", expiration=Duration.days(DATA_EXPIRY_DAYS))
            ],
            removal_policy=RemovalPolicy.RETAIN,
        )
        # Where Scheduler puts runs it could not deliver (a standard queue, as Scheduler requires).
        self.scheduler_dlq = sqs.Queue(
            self,
            "SchedulerDeadLetterQueue",
            retention_period=Duration.seconds(DLQ_RETENTION_SECONDS),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        cron_group_name, once_group_name = schedule_group_names(self.stack_name)
        self.cron_group = scheduler.ScheduleGroup(self, "CronSchedules", schedule_group_name=cron_group_name)
        self.one_time_group = scheduler.ScheduleGroup(
            self, "OneTimeSchedules", schedule_group_name=once_group_name
        )

        layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            f"arn:{Aws.PARTITION}:lambda:{Aws.REGION}:{POWERTOOLS_ACCOUNT}:layer:"
            f"{POWERTOOLS_LAYER}:{powertools_layer_version}",
        )
        code = lambda_.Code.from_asset(asset_dir)
        self.workers = {
            spec.name: JobWorker(
                self,
                construct_id(spec.name),
                spec=spec,
                table=self.table,
                code=code,
                layers=[layer],
                log_retention=log_retention,
                cron_group=self.cron_group,
                scheduler_dlq=self.scheduler_dlq,
            )
            for spec in jobs
        }
        for spec in jobs:
            self._wire(spec)

        # The role one-time schedules (enqueue(run_at=...)) run with: send to the job queues only.
        self.scheduler_role = iam.Role(
            self,
            "OneTimeScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com", conditions={"StringEquals": {"aws:SourceAccount": Aws.ACCOUNT_ID}}
            ),
            description="lambdajobs: EventBridge Scheduler sends one-time jobs to their queues",
        )
        for worker in self.workers.values():
            worker.queue.grant_send_messages(self.scheduler_role)
        self.scheduler_dlq.grant_send_messages(self.scheduler_role)
        self.producer_policy = self._producer_policy()
        self.monitoring = Monitoring(self, "Monitoring", workers=self.workers, alarm_email=alarm_email)

        ssm.StringParameter(
            self,
            "StackManifest",
            parameter_name=stack_manifest_parameter(self.stack_name),
            string_value=self.to_json_string(
                {
                    "table": self.table.table_name,
                    "bucket": self.bucket.bucket_name,
                    "scheduler_role_arn": self.scheduler_role.role_arn,
                    "cron_group": cron_group_name,
                    "one_time_group": once_group_name,
                    "scheduler_dlq_arn": self.scheduler_dlq.queue_arn,
                }
            ),
            description="lambdajobs stack manifest: table, bucket, scheduler settings",
        )
        CfnOutput(self, "JobTableName", value=self.table.table_name, description="lambdajobs job table")
        CfnOutput(
            self, "AlarmTopicArn", value=self.monitoring.topic.topic_arn, description="alarm notifications"
        )
        CfnOutput(
            self,
            "DashboardName",
            value=self.monitoring.dashboard.dashboard_name,
            description="CloudWatch dashboard of the jobs",
        )
        CfnOutput(
            self, "DataBucketName", value=self.bucket.bucket_name, description="reports and job outputs"
        )
        CfnOutput(
            self,
            "ProducerPolicyArn",
            value=self.producer_policy.managed_policy_arn,
            description="attach to roles that enqueue jobs or read their status",
        )

    def _wire(self, spec: JobSpec) -> None:
        """Give a job what it declared beyond its own queue: other jobs' queues, the bucket, stats."""
        fn = self.workers[spec.name].function
        for target in spec.enqueues:
            if target not in self.workers:
                raise ValueError(
                    f"job '{spec.name}' enqueues unknown job '{target}'; declared: {sorted(self.workers)}."
                )
            queue = self.workers[target].queue
            queue.grant_send_messages(fn)
            fn.add_environment(queue_url_env(target), queue.queue_url)
        if "bucket" in spec.uses:
            # Each job reads and writes under its own prefix of the data bucket, nothing else.
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:PutObject"],
                    resources=[self.bucket.arn_for_objects(bucket_prefix(spec.name) + "*")],
                )
            )
            fn.add_environment(ENV_BUCKET, self.bucket.bucket_name)
        if "job_stats" in spec.uses:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:Query"], resources=[f"{self.table.table_arn}/index/{JOB_STATS_INDEX}"]
                )
            )

    def _producer_policy(self) -> iam.ManagedPolicy:
        """Everything a producer needs: send jobs, schedule later ones, read the manifest and statuses."""
        return iam.ManagedPolicy(
            self,
            "ProducerPolicy",
            description="lambdajobs producers: enqueue jobs, schedule later ones, read status",
            statements=[
                iam.PolicyStatement(
                    actions=["sqs:SendMessage"], resources=[w.queue.queue_arn for w in self.workers.values()]
                ),
                iam.PolicyStatement(
                    actions=["ssm:GetParameter"],
                    resources=[
                        self.format_arn(
                            service="ssm",
                            resource="parameter",
                            resource_name=MANIFEST_PREFIX.format(stack=self.stack_name).strip("/") + "/*",
                        ),
                        self.format_arn(
                            service="ssm",
                            resource="parameter",
                            resource_name=stack_manifest_parameter(self.stack_name).strip("/"),
                        ),
                    ],
                ),
                iam.PolicyStatement(actions=["dynamodb:GetItem"], resources=[self.table.table_arn]),
                iam.PolicyStatement(
                    actions=["scheduler:CreateSchedule"],
                    resources=[
                        self.format_arn(
                            service="scheduler",
                            resource="schedule",
                            resource_name=f"{self.one_time_group.schedule_group_name}/*",
                        )
                    ],
                ),
                iam.PolicyStatement(
                    actions=["iam:PassRole"],
                    resources=[self.scheduler_role.role_arn],
                    conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
                ),
            ],
        )
