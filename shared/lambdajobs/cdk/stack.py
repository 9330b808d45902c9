"""`LambdaJobs`: every resource of a jobs package, as one construct to put in your own stack; and
`LambdaJobsStack`, a stack holding just that. A job table, a data bucket, schedule groups, a producer
policy, dashboard and alarms, one `JobWorker` per job, and the workflow queue with its continuer
(`Workflows`), all derived from the job declarations.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aws_cdk import ArnFormat, Aws, CfnOutput, Duration, NestedStack, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_scheduler as scheduler
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from lambdajobs.cdk import layout
from lambdajobs.cdk.job_worker import RUNTIME, JobWorker, queue_arn
from lambdajobs.cdk.monitoring import FIRST_PART, Monitoring
from lambdajobs.cdk.quotas import (
    ACCOUNT_CONCURRENCY_CONTEXT,
    account_concurrency_quota,
    max_reserved_concurrency,
)
from lambdajobs.cdk.workflows import Workflows, send_to_job_queues, workflow_items_statement
from lambdajobs.runtime.debounce import ITEM_PREFIX as DEBOUNCE_ITEM_PREFIX
from lambdajobs.runtime.durable import wake_schedule_prefix
from lambdajobs.runtime.errors import ConfigurationError, DeclarationError
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    ENV_JOB_INDEX,
    ENV_TRACING,
    JOB_INDEX,
    JOB_INDEX_KEY,
    JOB_INDEX_SORT_KEY,
    MANIFEST_PREFIX,
    PURGED_ID_PREFIX,
    RESERVED_ID_PREFIX,
    bucket_prefix,
    dead_letter_queue_pattern,
    job_queue_pattern,
    log_group_pattern,
    queue_name,
    schedule_group_names,
    scheduler_dead_letter_queue_name,
    stack_manifest_parameter,
    workflow_dead_letter_queue_name,
    workflow_queue_name,
)
from lambdajobs.runtime.spec import JobSpec, ensure_loaded, job_index_mode, jobs_in
from lambdajobs.staging import dependencies as deps
from lambdajobs.staging import environment as function_env
from lambdajobs.staging import platform
from lambdajobs.staging.asset import modules_for, stage_function_asset, stage_runtime_layer
from lambdajobs.staging.imports import Provided, check_asset_imports

#: The official public Powertools layer carries Powertools and pydantic, so the function asset holds
#: only our code. Its ARN is not written here: AWS publishes it per Powertools version, runtime and
#: architecture in a public SSM parameter, resolved by CloudFormation at deploy time (synthesis stays
#: offline, and the account and partition are whatever AWS publishes there). The version defaults to
#: the Powertools installed here, so Lambda runs the Powertools the tests ran.
POWERTOOLS_PARAMETER = "/aws/service/powertools/python/{arch}/{runtime}/{version}"


def installed_powertools_version() -> str:
    from importlib.metadata import version

    return version("aws-lambda-powertools")


def powertools_layer_parameter(version: str | None = None) -> str:
    """The public SSM parameter holding the Powertools layer ARN for `version` (default: installed)."""
    return POWERTOOLS_PARAMETER.format(
        arch="arm64", runtime=RUNTIME.name, version=version or installed_powertools_version()
    )


#: Reports and other job outputs expire from the data bucket after this many days.
DATA_EXPIRY_DAYS = 90
_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def log_retention(days: int) -> logs.RetentionDays:
    """CloudWatch Logs retention for a number of days.

    Raises:
        ConfigurationError: not a retention CloudWatch offers here.
    """
    if days not in _RETENTION:
        raise ConfigurationError(
            f"log_retention_days={days} is not supported; use one of {sorted(_RETENTION)}."
        )
    return _RETENTION[days]


def _staging_root() -> Path:
    """A temporary folder for the function assets; CDK copies them into cdk.out during synth."""
    root = Path(tempfile.mkdtemp(prefix="lambdajobs-assets-"))
    atexit.register(shutil.rmtree, root, True)
    return root


#: A job that enqueues more queues than this (its targets' priority levels counted) is granted every
#: job queue of the stack by the stack's name pattern: a list of that many ARNs would take most of the
#: 10,240 characters IAM allows a role's inline policies.
MAX_TARGET_QUEUES = 40


def _check_function(
    asset: Path, provided: Provided, name: str, dependency_bytes: int, layers: Sequence[Path] = ()
) -> None:
    """What ships is what runs: every import of the asset resolves on Lambda (`layers`: the folders of
    layers staged here, the runtime's), and the function fits.

    Raises:
        ConfigurationError: an import that would fail on Lambda; more than 250 MB unzipped.
    """
    check_asset_imports(asset, provided, function=name, python=platform.PYTHON_VERSION, layers=layers)
    total = (
        deps.folder_bytes(asset)
        + sum(deps.folder_bytes(folder) for folder in layers)
        + dependency_bytes
        + platform.layer_unzipped_bytes()
    )
    if total > platform.MAX_UNZIPPED_BYTES:
        raise ConfigurationError(
            f"function '{name}' would be {total / 2**20:.0f} MB unzipped with its layers (its asset, your "
            f"dependencies {dependency_bytes / 2**20:.0f} MB, the Powertools layer), over Lambda's 250 MB; "
            f"ship fewer or smaller libraries in [tool.lambdajobs] dependencies."
        )


def signal_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """What `lambdajobs.signal()` writes: UpdateItem of job records (the signal kept on the record,
    created when the job has not run yet; then the record's wake-up), and of no item of lambdajobs'
    own (workflows, rate limiters: ids under `settings.RESERVED_ID_PREFIX`, which no job id may take).
    A job id is any string, so no condition narrows it further."""
    return iam.PolicyStatement(
        actions=["dynamodb:UpdateItem"],
        resources=[table.table_arn],
        conditions={"ForAllValues:StringNotLike": {"dynamodb:LeadingKeys": [f"{RESERVED_ID_PREFIX}*"]}},
    )


def debounce_statement(table: dynamodb.ITable) -> iam.PolicyStatement:
    """What `enqueue(..., debounce=...)` calls besides the send: GetItem (consistent) and UpdateItem
    of the key's item (`lambdajobs#debounce#<job>#<hash>`), of any job of the stack; no other item.
    (A worker's claim, an UpdateItem of the same item, is in its table statement: `JobWorker`.)"""
    return iam.PolicyStatement(
        actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
        resources=[table.table_arn],
        conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{DEBOUNCE_ITEM_PREFIX}*"]}},
    )


def construct_id(job: str) -> str:
    return "".join(part.capitalize() for part in job.split("_")) + "Job"


class LambdaJobs(Construct):
    """Everything the jobs of one jobs package need on AWS. One per stack (queue names, schedule
    groups and the manifest are named after the stack).

    Args:
        jobs: your jobs package, e.g. "myjobs" (loaded here; its jobs become workers).
        powertools_version: the Powertools release whose official layer the functions use (default:
            the one installed here, so Lambda runs what the tests ran).
        log_retention_days: worker log retention (1, 3, 5, 7, 14, 30, 60, 90, 180 or 365).
        alarm_email: an address subscribed to the alarm topic, or None.
        staging_dir: where function assets are staged (default: a temporary folder).
        job_index: the job index's mode: "off", "finished" or "all" (`lifecycle.JobIndex`; default
            "off", whatever the jobs declare: `uses=("job_stats",)` counts from the worker's metrics
            with the index off). It lists jobs by state (the board, `lambdajobs jobs`), and
            count_finished reads it when on, for 1 write unit per job ("finished") or 3 ("all",
            running jobs too), for every job of the stack.
        tracing: trace every job with OpenTelemetry (`LAMBDAJOBS_TRACING=1` on every job function and
            the workflow continuer): a span per record, linked to its producer's; one job alone:
            `@job(tracing=True)`. The functions need opentelemetry-api (your dependencies, or AWS's
            OpenTelemetry layer): see docs/how-to/tracing.md. Default off.
        dependencies: the third-party libraries your jobs need on Lambda, as requirement strings
            (default: `[tool.lambdajobs] dependencies` / `requirements` in your project's
            pyproject.toml). Built for Lambda's platform into a layer every job function gets, locked
            in `lambdajobs.lock` beside pyproject.toml (`lambdajobs.staging.dependencies`).
        stacks_file: where synth records which stack holds each job (default `lambdajobs.stacks.json`
            beside pyproject.toml, or `$LAMBDAJOBS_STACKS_FILE`; commit it): past what one stack
            holds, jobs go to nested stacks, and a job once placed stays (`lambdajobs.cdk.layout`).

    Attributes: `table`, `bucket`, `workers` (job name -> JobWorker), `workflows` (the workflow queue
    and its continuer function), `scheduler_dlq`, `cron_group`, `one_time_group`, `scheduler_role`,
    `producer_policy`, `operator_policy`, `monitoring`, `specs`.

    Raises:
        ConfigurationError: the jobs package cannot be found, or declares no job; a bad option; a
            function's environment larger than Lambda's 4 KB; a dependency that conflicts with what
            Lambda provides or has no wheel for its platform; a module a function imports that it
            would not find on Lambda (`lambdajobs.staging.imports`); a function over Lambda's 250 MB.
        DeclarationError: a job enqueues a job that is not declared.

    Example:
        >>> from aws_cdk import App, Stack
        >>> from lambdajobs.cdk import LambdaJobs
        >>> app = App(); stack = Stack(app, "orders")
        >>> jobs = LambdaJobs(stack, "Jobs", jobs="myjobs", alarm_email="oncall@example.com")
        >>> jobs.workers["send_invoice"].queue
    """

    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        jobs: str,
        powertools_version: str | None = None,
        log_retention_days: int = 30,
        alarm_email: str | None = None,
        staging_dir: str | Path | None = None,
        job_index: str | None = None,
        dependencies: Sequence[str] | None = None,
        stacks_file: str | Path | None = None,
        tracing: bool = False,
    ) -> None:
        super().__init__(scope, construct_id_)
        self.jobs_package = jobs
        ensure_loaded(jobs)
        specs = jobs_in(jobs)
        if not specs:
            raise ConfigurationError(f"jobs package '{jobs}' declares no job; declare one with @job.")
        self.job_index = job_index_mode(specs, job_index)
        self.specs = {spec.name: spec for spec in specs}
        reserved = {s.name: s.reserved_concurrency for s in specs if s.reserved_concurrency}
        # Lambda keeps 100 of the account's concurrency unreserved: the quota is the account's (context
        # lambdajobs:accountConcurrency, default 1000; new accounts have less), not this stack's to know
        quota = account_concurrency_quota(self)
        cap = max_reserved_concurrency(quota)
        if sum(reserved.values()) > cap:
            raise ConfigurationError(
                f"jobs reserve {sum(reserved.values())} concurrent executions in all ({reserved}); Lambda "
                f"keeps 100 of the account's quota ({quota}, context {ACCOUNT_CONCURRENCY_CONTEXT}) "
                f"unreserved, so at most {cap}: reserve less, or raise the quota and pass "
                f"-c {ACCOUNT_CONCURRENCY_CONTEXT}=<quota>."
            )
        retention = log_retention(log_retention_days)
        staging = Path(staging_dir) if staging_dir else _staging_root()
        stack = Stack.of(self)
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
        # The job index, in every stack: a job's records by state, newest first, keys only; sparse,
        # so only the states of its mode are written (settings.JOB_INDEX; mode "off": dead records),
        # and the entries of searchable fields. One index for all: CloudFormation changes one global
        # secondary index per update, so the mode changes what is written, never the table.
        self.table.add_global_secondary_index(
            index_name=JOB_INDEX,
            partition_key=dynamodb.Attribute(name=JOB_INDEX_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=JOB_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.KEYS_ONLY,
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
            queue_name=scheduler_dead_letter_queue_name(stack.stack_name),
            retention_period=Duration.seconds(DLQ_RETENTION_SECONDS),
            encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True,
        )
        cron_group_name, once_group_name = schedule_group_names(stack.stack_name)
        # Deleted with the stack (with the schedules in them): a group left behind would make the next
        # deploy of the same stack name fail, and its one-time schedules would keep firing at deleted
        # queues. Pending run_at jobs are lost on destroy (docs/how-to/deploying.md).
        self.cron_group = scheduler.ScheduleGroup(
            self, "CronSchedules", schedule_group_name=cron_group_name, removal_policy=RemovalPolicy.DESTROY
        )
        self.one_time_group = scheduler.ScheduleGroup(
            self,
            "OneTimeSchedules",
            schedule_group_name=once_group_name,
            removal_policy=RemovalPolicy.DESTROY,
        )
        # The role one-time schedules (enqueue(run_at=...), a durable job's wake-up beyond 15 minutes)
        # run with: only Scheduler acting for this account's one-time group may assume it; it may only
        # send to the job queues.
        self.scheduler_role = iam.Role(
            self,
            "OneTimeScheduleRole",
            assumed_by=iam.ServicePrincipal(
                "scheduler.amazonaws.com",
                conditions={
                    "StringEquals": {
                        "aws:SourceAccount": Aws.ACCOUNT_ID,
                        "aws:SourceArn": self.one_time_group.schedule_group_arn,
                    }
                },
            ),
            description="lambdajobs: EventBridge Scheduler sends one-time jobs to their queues",
        )

        self.powertools_parameter = powertools_layer_parameter(powertools_version)
        layer = lambda_.LayerVersion.from_layer_version_arn(
            self,
            "Powertools",
            ssm.StringParameter.value_for_string_parameter(self, self.powertools_parameter),
        )
        for spec in specs:  # a job that enqueues an undeclared job fails before anything is staged
            unknown = [t for t in spec.enqueues if t not in self.specs]
            if unknown:
                raise DeclarationError(
                    f"job '{spec.name}' enqueues {unknown}, not declared in jobs package '{jobs}' "
                    f"(declared: {sorted(self.specs)})."
                )
        requirements = deps.declared(dependencies)
        if requirements is None and dependencies is None:
            deps.remove_stale_lock()  # the project declares none now: nothing ships, nothing is locked
        self.dependencies = deps.build(requirements)
        job_layers: list[lambda_.ILayerVersion] = [layer]  # the Powertools layer, then ours
        if self.dependencies.folder is not None:
            #: Your jobs' libraries, built for Lambda's platform (lambdajobs.staging.dependencies).
            self.dependencies_layer = lambda_.LayerVersion(
                self,
                "Dependencies",
                code=lambda_.Code.from_asset(str(self.dependencies.folder), exclude=[".complete"]),
                compatible_runtimes=[RUNTIME],
                compatible_architectures=[lambda_.Architecture.ARM_64],
                description="lambdajobs: the jobs' dependencies, "
                + ", ".join(f"{n} {v}" for n, v in sorted(self.dependencies.pins.items()))[:200],
            )
            job_layers.append(self.dependencies_layer)
        provided = Provided(
            dependencies=self.dependencies.modules,
            layer=platform.layer_modules(),
            runtime=platform.runtime_modules(),
            stdlib=platform.stdlib_modules(),
        )
        # The runtime, as a layer every job function has: in the cloud assembly once, not per job.
        runtime_layer_dir = stage_runtime_layer(staging / "runtime-layer")
        self.runtime_layer = lambda_.LayerVersion(
            self,
            "Runtime",
            code=lambda_.Code.from_asset(str(runtime_layer_dir)),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[lambda_.Architecture.ARM_64],
            description="lambdajobs: the runtime every job function runs",
        )
        runtime_python = runtime_layer_dir / "python"
        check_asset_imports(
            runtime_python, provided, function="lambdajobs runtime layer", python=platform.PYTHON_VERSION
        )
        job_layers.insert(1, self.runtime_layer)
        # Which stack holds each job: the first group here, each further one in a nested stack
        # (lambdajobs.cdk.layout); a job placed once stays where it is.
        layout_file = Path(stacks_file) if stacks_file else layout.layout_path()
        self.groups = layout.assign(
            specs,
            layout.read_layout(layout_file, stack.stack_name),
            root_room=layout.GROUP_RESOURCES - layout.ROOT_RESOURCES,
            group_room=layout.GROUP_RESOURCES,
        )
        layout.write_layout(layout_file, stack.stack_name, self.groups)
        #: The nested stacks holding the groups after the first, by name (`Jobs2`, ...).
        self.job_stacks: dict[str, NestedStack] = {}
        self.workers: dict[str, JobWorker] = {}
        for index, names in enumerate(self.groups):
            if not names:
                continue
            where: Construct = self
            if index:
                nested = NestedStack(
                    self,
                    f"Jobs{index + 1}",
                    description=f"lambdajobs {stack.stack_name}: jobs {', '.join(names)}"[:1024],
                )
                self.job_stacks[nested.node.id] = nested
                where = nested
            for name in names:
                spec = self.specs[name]
                modules = modules_for(spec, self.specs)
                asset = stage_function_asset(
                    staging / spec.name, jobs_package=jobs, modules=modules, runtime=False
                )
                _check_function(
                    asset, provided, spec.name, self.dependencies.unzipped_bytes, layers=[runtime_python]
                )
                self.workers[spec.name] = JobWorker(
                    where,
                    construct_id(spec.name),
                    spec=spec,
                    table=self.table,
                    code=lambda_.Code.from_asset(str(asset)),
                    jobs_package=jobs,
                    modules=modules,
                    layers=job_layers,
                    log_retention=retention,
                    cron_group=self.cron_group,
                    scheduler_dlq=self.scheduler_dlq,
                )
        for spec in specs:
            self._wire(spec)
            # what the worker writes to the job index (nothing when "off")
            self.workers[spec.name].function.add_environment(ENV_JOB_INDEX, self.job_index)
            if tracing:  # every job traced (`lambdajobs.runtime.tracing`)
                self.workers[spec.name].function.add_environment(ENV_TRACING, "1")
        # Workflows: every worker sends a notice to the workflow queue when its member may have ended a
        # stage; the continuer (the runtime alone: it imports no job module) sends the next stage.
        continuer_asset = stage_function_asset(staging / "workflow-continuer", jobs_package=jobs, modules=[])
        _check_function(continuer_asset, provided, "workflow continuer", 0)
        self.workflows = Workflows(
            self,
            "Workflows",
            table=self.table,
            code=lambda_.Code.from_asset(str(continuer_asset)),
            layers=[layer],
            log_retention=retention,
        )
        for worker in self.workers.values():
            self.workflows.grant_notices(worker.function)
        if tracing:  # a span per notice, linked to the member's; the next stage linked to it
            self.workflows.function.add_environment(ENV_TRACING, "1")

        # one-time schedules (run_at) at any priority: every job queue, no DLQ but the Scheduler's
        for statement in send_to_job_queues(self, stack.stack_name):
            self.scheduler_role.add_to_policy(statement)
        self.scheduler_dlq.grant_send_messages(self.scheduler_role)
        self.producer_policy = self._producer_policy()
        self.operator_policy = self._operator_policy()
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            alarm_email=alarm_email,
            scheduler_dlq=self.scheduler_dlq,
            workflows=self.workflows,
            stack_name=stack.stack_name,  # the root's name: the `stack` dimension the workers emit
        )
        for index, names in enumerate(self.groups):
            if names:  # each group's alarms and dashboards in its own stack (Jobs2 is part 2)
                part = index + FIRST_PART
                self.monitoring.add_jobs(
                    {name: self.workers[name] for name in names},
                    part=part,
                    scope=Construct(self.job_stacks[f"Jobs{part}"], "Monitoring") if index else None,
                )

        ssm.StringParameter(
            self,
            "StackManifest",
            parameter_name=stack_manifest_parameter(stack.stack_name),
            string_value=stack.to_json_string(
                {
                    "table": self.table.table_name,
                    "bucket": self.bucket.bucket_name,
                    "scheduler_role_arn": self.scheduler_role.role_arn,
                    "cron_group": cron_group_name,
                    "one_time_group": once_group_name,
                    "scheduler_dlq_arn": self.scheduler_dlq.queue_arn,
                    "scheduler_dlq_url": self.scheduler_dlq.queue_url,
                    "workflow_queue_url": self.workflows.queue.queue_url,
                    "workflow_dlq_url": self.workflows.dead_letter_queue.queue_url,
                    "job_index": self.job_index,
                }
            ),
            description="lambdajobs stack manifest: table, bucket, scheduler settings, workflow queue",
        )
        # Stack outputs under plain names (JobTableName, ...), wherever this construct sits: operators
        # and scripts read them by name.
        for name, value, description in (
            ("JobTableName", self.table.table_name, "lambdajobs job table"),
            ("AlarmTopicArn", self.monitoring.topic.topic_arn, "alarm notifications"),
            (
                "AlarmEmailTopicArn",
                self.monitoring.email_topic.topic_arn,
                "alarm email: only the stack's composite alarm notifies it",
            ),
            ("DashboardName", self.monitoring.dashboard.dashboard_name, "CloudWatch dashboard of the jobs"),
            ("DataBucketName", self.bucket.bucket_name, "reports and job outputs"),
            ("WorkflowQueueUrl", self.workflows.queue.queue_url, "workflow notices, read by the continuer"),
            (
                "WorkflowDeadLetterQueueUrl",
                self.workflows.dead_letter_queue.queue_url,
                "DLQ of the workflow queue",
            ),
            (
                "ProducerPolicyArn",
                self.producer_policy.managed_policy_arn,
                "attach to roles that enqueue jobs or read their status",
            ),
            (
                "OperatorPolicyArn",
                self.operator_policy.managed_policy_arn,
                "attach to operators: the lambdajobs CLI's queues, status, dlq and cron commands",
            ),
        ):
            CfnOutput(self, name, value=value, description=description).override_logical_id(name)

    def _wire(self, spec: JobSpec) -> None:
        """Give a job what it declared beyond its own queue: other jobs' queues (now or later, with
        `run_at`), the bucket, stats; and what any job may do: its durable wake-ups."""
        fn = self.workers[spec.name].function
        # every level's queue of each target (the job may enqueue it at any of its priorities), by
        # name: no reference to a queue in another nested stack
        targets = [
            queue_name(self.stack_name, target, level)
            for target in spec.enqueues
            for level in self.specs[target].levels
        ]
        self.workers[spec.name].sends_by_pattern = len(targets) > MAX_TARGET_QUEUES
        if len(targets) > MAX_TARGET_QUEUES:
            resources = [queue_arn(fn, job_queue_pattern(self.stack_name))]
        else:
            resources = [queue_arn(fn, name) for name in targets]
        if targets:
            fn.add_to_role_policy(iam.PolicyStatement(actions=["sqs:SendMessage"], resources=resources))
        if spec.enqueues:
            # A job that enqueues jobs may start a workflow of them: it creates the workflow's items (its
            # role has GetItem and UpdateItem on the table, no PutItem), and no other item.
            fn.add_to_role_policy(workflow_items_statement(self.table, "dynamodb:PutItem"))
            # enqueue(..., run_at=...) beyond 15 minutes: a one-time schedule in the stack's group (its
            # own wake-ups, below, are in the group too).
            fn.add_to_role_policy(self._run_at_statement())
        elif spec.record_mode != "light":
            # Any job in the full record mode may be durable (whether its code sleeps shows in no
            # declaration): a sleep or a signal wait that wakes it more than 15 minutes on is a one-time
            # schedule it creates, named `durable.wake_schedule_name`, in the one-time group: its own
            # job's wake-ups only. A light job has no durable state (its steps, sleeps and waits are
            # dead at once: `light`), so it schedules none.
            fn.add_to_role_policy(self._wake_up_statement(spec.name))
        # A job that schedules passes the one-time schedule role (which sends to the job queues) to
        # Scheduler, and only to Scheduler. A durable job's checkpoints and parking are UpdateItems of
        # its own record (`JobWorker`'s table statement); the copy that wakes it within 15 minutes goes
        # to its own queue (`JobWorker._consume`). `lambdajobs.signal()` from a job: the same
        # UpdateItem, and SendMessage to the queue of a job it declares in `enqueues` (above), only.
        if spec.enqueues or spec.record_mode != "light":
            fn.add_to_role_policy(self._pass_scheduler_role_statement())
        if "bucket" in spec.uses:
            # Each job reads and writes under its own prefix of the data bucket, nothing else.
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["s3:GetObject", "s3:PutObject"],
                    resources=[self.bucket.arn_for_objects(bucket_prefix(spec.name) + "*")],
                )
            )
        wired = function_env.worker_wired(
            spec, scheduler_role_arn=self.scheduler_role.role_arn, bucket=self.bucket.bucket_name
        )
        for key, value in wired.items():
            fn.add_environment(key, value)
        if "job_stats" in spec.uses:
            # count_finished: the worker's own metrics with the job index off (the default: every job
            # emits them anyway, so the other jobs pay nothing for this one's counts); GetMetricData
            # supports no resource-level permission (cdk-nag suppression in `nag.suppress`).
            fn.add_to_role_policy(iam.PolicyStatement(actions=["cloudwatch:GetMetricData"], resources=["*"]))
            if self.job_index != "off":  # a counting Query per state on the index, which holds them
                fn.add_to_role_policy(
                    iam.PolicyStatement(actions=["dynamodb:Query"], resources=[self._job_index_arn()])
                )

    def _job_index_arn(self) -> str:
        return f"{self.table.table_arn}/index/{JOB_INDEX}"

    def _producer_policy(self) -> iam.ManagedPolicy:
        """Everything a producer needs: send jobs, schedule later ones, start workflows, read the
        manifest, statuses and workflows."""
        return iam.ManagedPolicy(
            self,
            "ProducerPolicy",
            description="lambdajobs producers: enqueue jobs and workflows, schedule later ones, read status",
            statements=[
                # every job's queues, at each of its priority levels, by the stack's name pattern; no DLQ
                *send_to_job_queues(self, self.stack_name),
                self._manifest_statement(),
                # status; get_workflow reads the member records of a running stage in one call
                iam.PolicyStatement(
                    actions=["dynamodb:GetItem", "dynamodb:BatchGetItem"], resources=[self.table.table_arn]
                ),
                # enqueuing a workflow creates its items (one transaction of PutItems: the outline,
                # the later stages' payloads) and marks its first stage sent (`sent_0`, what a repeated
                # enqueue checks); on workflow items only
                workflow_items_statement(self.table, "dynamodb:PutItem", "dynamodb:UpdateItem"),
                *self._scheduling_statements(),
                # lambdajobs.signal(): on job records only; its wake-up goes to the job's queue (above)
                signal_statement(self.table),
                # enqueue(..., debounce=...): the key's item, on debounce items only
                debounce_statement(self.table),
                # lambdajobs.cancel() and cancel_workflow(): the records' writes are the signal's
                # UpdateItem (job records only), the reads GetItem (above); and the job's one-time
                # schedule deleted (a run_at job's, a parked job's wake-up)
                self._cancel_schedules_statement(),
            ],
        )

    def _operator_policy(self) -> iam.ManagedPolicy:
        """What the operator CLI calls: queue health and the oldest message's age, job status, the
        dead-letter commands (list, show, redrive back to the job's queue, purge), cron trigger."""
        # Every job queue and DLQ of the stack by its name pattern (a policy of one ARN per queue would
        # pass IAM's 6,144 characters at a few dozen queues), and the workflow queue and its DLQ:
        # health, and the dead-letter commands on stalled notices.
        queues = [
            self._sqs_arn(job_queue_pattern(self.stack_name)),
            self._sqs_arn(workflow_queue_name(self.stack_name)),
        ]
        dlqs = [
            self._sqs_arn(dead_letter_queue_pattern(self.stack_name)),
            self._sqs_arn(workflow_dead_letter_queue_name(self.stack_name)),
        ]
        return iam.ManagedPolicy(
            self,
            "OperatorPolicy",
            description="lambdajobs operators: queue health, job status, dead letters (list, redrive, purge)",
            statements=[
                # health; redrive, cron trigger and enqueue send to the job queues (never to a DLQ: a
                # deny, as the pattern of the job queues names their DLQs too)
                iam.PolicyStatement(actions=["sqs:GetQueueAttributes", "sqs:SendMessage"], resources=queues),
                iam.PolicyStatement(effect=iam.Effect.DENY, actions=["sqs:SendMessage"], resources=[dlqs[0]]),
                # health, and the dead-letter commands (the Scheduler DLQ's too: runs it could not deliver);
                # the board's "redrive all" is SQS's own move task
                iam.PolicyStatement(
                    actions=[
                        "sqs:GetQueueAttributes",
                        "sqs:ReceiveMessage",
                        "sqs:ChangeMessageVisibility",
                        "sqs:DeleteMessage",
                        "sqs:PurgeQueue",
                        "sqs:StartMessageMoveTask",
                        "sqs:ListMessageMoveTasks",
                    ],
                    resources=[*dlqs, self.scheduler_dlq.queue_arn],
                ),
                self._manifest_statement(),
                # job status; `lambdajobs workflow` reads a workflow's member records in one call
                iam.PolicyStatement(
                    actions=["dynamodb:GetItem", "dynamodb:BatchGetItem"], resources=[self.table.table_arn]
                ),
                # `lambdajobs jobs` and the board list and count records on the job index (dead ones in
                # every mode), and search by searchable fields
                iam.PolicyStatement(actions=["dynamodb:Query"], resources=[self._job_index_arn()]),
                # a DLQ purge's marker (`records.mark_purged`; read with GetItem, above): those items only
                iam.PolicyStatement(
                    actions=["dynamodb:PutItem"],
                    resources=[self.table.table_arn],
                    conditions={
                        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{PURGED_ID_PREFIX}*"]}
                    },
                ),
                *self._queue_control_statements(),
                *self._logs_statements(),
                # the oldest message's age; a job's finished counts and runs per minute without the job
                # index (queues, the board). Neither has resource-level permissions: "*" is the only one
                iam.PolicyStatement(
                    actions=["cloudwatch:GetMetricStatistics", "cloudwatch:GetMetricData"], resources=["*"]
                ),
                # lambdajobs enqueue --run-at
                *self._scheduling_statements(),
                # lambdajobs signal: on job records only; its wake-up goes to the job's queue (above)
                signal_statement(self.table),
                # lambdajobs cancel (a job, --workflow): the records' writes are the signal's UpdateItem
                # (job records only), the workflow item and records read with GetItem (above); and
                # the job's one-time schedule deleted (a run_at job's, a parked job's wake-up)
                self._cancel_schedules_statement(),
                # the board's pending one-time schedules (ListSchedules has no resource-level permission)
                iam.PolicyStatement(actions=["scheduler:ListSchedules"], resources=["*"]),
            ],
        )

    def _queue_control_statements(self) -> list[iam.PolicyStatement]:
        """Pause and resume a job's queue (`lambdajobs.queue_control`): its event source mappings
        listed (ListEventSourceMappings has no resource-level permission: "*"), read and enabled or
        disabled only where the mapping's function is one of this stack's (`lambda:FunctionArn`: a
        function CloudFormation names `<stack>-...`, nested stacks' included)."""
        stack = Stack.of(self)
        return [
            iam.PolicyStatement(actions=["lambda:ListEventSourceMappings"], resources=["*"]),
            iam.PolicyStatement(
                actions=["lambda:GetEventSourceMapping", "lambda:UpdateEventSourceMapping"],
                resources=[
                    stack.format_arn(
                        service="lambda",
                        resource="event-source-mapping",
                        resource_name="*",
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
                conditions={
                    "ArnLike": {
                        "lambda:FunctionArn": stack.format_arn(
                            service="lambda",
                            resource="function",
                            resource_name=f"{self.stack_name}-*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    }
                },
            ),
        ]

    def _logs_statements(self) -> list[iam.PolicyStatement]:
        """A job's log lines (`lambdajobs.job_logs`): Logs Insights queries started on the stack's job
        worker log groups only (`settings.log_group_pattern`); a query's results read and stopped by
        its id (GetQueryResults and StopQuery have no resource-level permission: "*")."""
        stack = Stack.of(self)
        return [
            iam.PolicyStatement(
                actions=["logs:StartQuery"],
                resources=[
                    stack.format_arn(
                        service="logs",
                        resource="log-group",
                        resource_name=log_group_pattern(self.stack_name),
                        arn_format=ArnFormat.COLON_RESOURCE_NAME,
                    )
                ],
            ),
            iam.PolicyStatement(actions=["logs:GetQueryResults", "logs:StopQuery"], resources=["*"]),
        ]

    def _sqs_arn(self, name: str) -> str:
        """The ARN of a queue (or a pattern of names) of this stack's account and region."""
        return Stack.of(self).format_arn(service="sqs", resource=name)

    def _manifest_statement(self) -> iam.PolicyStatement:
        """Reading the stack's manifest: every job's entry and the stack's own (how producers and the
        CLI find queues and the table without names typed by hand)."""
        stack = Stack.of(self)
        return iam.PolicyStatement(
            actions=["ssm:GetParameter"],
            resources=[
                stack.format_arn(
                    service="ssm",
                    resource="parameter",
                    resource_name=MANIFEST_PREFIX.format(stack=stack.stack_name).strip("/") + "/*",
                ),
                stack.format_arn(
                    service="ssm",
                    resource="parameter",
                    resource_name=stack_manifest_parameter(stack.stack_name).strip("/"),
                ),
            ],
        )

    def _scheduling_statements(self) -> list[iam.PolicyStatement]:
        """What `enqueue(..., run_at=...)` calls: CreateSchedule, and GetSchedule when the job id is
        already scheduled (a producer's retry), in the one-time group only; PassRole of its role."""
        return [self._run_at_statement(), self._pass_scheduler_role_statement()]

    def _one_time_schedules_arn(self, names: str) -> str:
        """The ARN of the one-time group's schedules named `names` (a name, or a pattern of names)."""
        return Stack.of(self).format_arn(
            service="scheduler",
            resource="schedule",
            resource_name=f"{self.one_time_group.schedule_group_name}/{names}",
        )

    def _run_at_statement(self) -> iam.PolicyStatement:
        """CreateSchedule and GetSchedule of any schedule of the one-time group (`run_at` names a
        schedule after the job id, at run time)."""
        return iam.PolicyStatement(
            actions=["scheduler:CreateSchedule", "scheduler:GetSchedule"],
            resources=[self._one_time_schedules_arn("*")],
        )

    def _cancel_schedules_statement(self) -> iam.PolicyStatement:
        """DeleteSchedule of any schedule of the one-time group: `cancel` deletes a `run_at` job's
        schedule (named after the job id at run time) and a parked durable job's wake-up; nothing in
        the cron group."""
        return iam.PolicyStatement(
            actions=["scheduler:DeleteSchedule"], resources=[self._one_time_schedules_arn("*")]
        )

    def _wake_up_statement(self, job: str) -> iam.PolicyStatement:
        """CreateSchedule of `job`'s own wake-ups (`durable.schedule_wake`): in the one-time group,
        named `<job[:36]>-w<hash>` (`durable.wake_schedule_prefix`). No `run_at` schedule has such a
        name (theirs is `<job[:40]>-<hex>`, and a job name has no `-`), nor does another job's wake-up,
        unless both job names are 36 characters or more and share their first 36. CreateSchedule
        only: a wake-up scheduled twice (a retried park) meets a conflict, which the runtime takes as
        done, without reading the schedule."""
        return iam.PolicyStatement(
            actions=["scheduler:CreateSchedule"],
            resources=[self._one_time_schedules_arn(f"{wake_schedule_prefix(job)}*")],
        )

    def _pass_scheduler_role_statement(self) -> iam.PolicyStatement:
        """PassRole of the one-time schedule role, to EventBridge Scheduler only (what CreateSchedule
        of a schedule that names it as its execution role needs)."""
        return iam.PolicyStatement(
            actions=["iam:PassRole"],
            resources=[self.scheduler_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}},
        )

    @property
    def stack_name(self) -> str:
        return Stack.of(self).stack_name

    def resolve(self, value: Any) -> Any:
        """Resolve a token in this construct's stack (logical ids, in tests)."""
        return Stack.of(self).resolve(value)


class LambdaJobsStack(Stack):
    """A stack that holds one `LambdaJobs` construct (`self.lambdajobs`) and nothing else.

    Takes `LambdaJobs`' options plus any `Stack` option (`env`, `description`, ...).

    Raises:
        ConfigurationError, DeclarationError: as `LambdaJobs`.

    Example:
        >>> from aws_cdk import App
        >>> app = App()
        >>> LambdaJobsStack(app, "orders", jobs="myjobs")
        >>> app.synth()
    """

    def __init__(
        self,
        scope: Construct,
        construct_id_: str,
        *,
        jobs: str,
        powertools_version: str | None = None,
        log_retention_days: int = 30,
        alarm_email: str | None = None,
        staging_dir: str | Path | None = None,
        job_index: str | None = None,
        dependencies: Sequence[str] | None = None,
        stacks_file: str | Path | None = None,
        tracing: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id_, **kwargs)
        self.lambdajobs = LambdaJobs(
            self,
            "LambdaJobs",
            jobs=jobs,
            powertools_version=powertools_version,
            log_retention_days=log_retention_days,
            alarm_email=alarm_email,
            staging_dir=staging_dir,
            job_index=job_index,
            dependencies=dependencies,
            stacks_file=stacks_file,
            tracing=tracing,
        )
