"""`JobWorker`: everything one job needs on AWS, derived from its `JobSpec`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Aws, Duration, Stack, TimeZone
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

from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.settings import (
    DLQ_RETENTION_SECONDS,
    QUEUE_RETENTION_SECONDS,
    SEARCH_ID_PREFIX,
    WORKER_HANDLER,
    dead_letter_queue_name,
    log_group_name,
    manifest_parameter,
    queue_name,
)
from lambdajobs.runtime.spec import JobSpec
from lambdajobs.staging import environment as function_env

DLQ_RETENTION = Duration.seconds(DLQ_RETENTION_SECONDS)  # longer than the source: see settings
QUEUE_RETENTION = Duration.seconds(QUEUE_RETENTION_SECONDS)
#: The newest Python Lambda runs and the official Powertools layer is published for (python3.14).
RUNTIME = lambda_.Runtime.PYTHON_3_14
#: The library's own entry point: every function runs it; LAMBDAJOBS_JOB says which job.
HANDLER = WORKER_HANDLER
#: Lambda: "the total size of all environment variables doesn't exceed 4 KB" (every key and value of
#: the function's own variables; Lambda's reserved ones, AWS_REGION and the like, do not count). Past
#: it the deploy fails, late and far from the cause.
MAX_ENVIRONMENT_CHARACTERS = 4096
#: A token of your own (a value known only at deploy time, in a variable lambdajobs does not set) is
#: counted as this many characters, about a queue URL with a long stack name and region. lambdajobs'
#: own deploy-time variables are counted at the longest value AWS allows for each
#: (`lambdajobs.staging.environment.BOUNDS`), so for them the check is an upper bound, not a guess.
TOKEN_CHARACTERS = 200
#: How CDK writes a token inside a Python string (a string's, or a list's).
_TOKEN = re.compile(r"[$#]\{Token\[[^\]]*\]\}")


def environment_size(variables: Mapping[str, str], bounds: Mapping[str, int] = function_env.BOUNDS) -> int:
    """The characters of a function's environment as Lambda counts them (keys and values): a value
    with a token counted at its bound in `bounds` (the longest it can be), else each unresolved
    token as `TOKEN_CHARACTERS`."""
    total = 0
    for key, value in variables.items():
        if _TOKEN.search(value) and key in bounds:
            total += len(key) + bounds[key]
        else:
            total += len(key) + len(_TOKEN.sub("t" * TOKEN_CHARACTERS, value))
    return total


def check_environment_size(what: str, variables: Mapping[str, str], fix: str) -> None:
    """Refuse an environment larger than Lambda takes (`MAX_ENVIRONMENT_CHARACTERS`), at synth.

    Raises:
        ConfigurationError: naming the function, its size, its largest variables and `fix`.
    """
    size = environment_size(variables)
    if size <= MAX_ENVIRONMENT_CHARACTERS:
        return
    largest = sorted(variables, key=lambda key: -environment_size({key: variables[key]}))[:3]
    raise ConfigurationError(
        f"{what}: its environment would take up to {size} characters ({len(variables)} variables, each "
        f"deploy-time value counted at its longest, or as {TOKEN_CHARACTERS} for a value of your own; "
        f"largest: {', '.join(largest)}), and Lambda allows {MAX_ENVIRONMENT_CHARACTERS} in all. {fix}"
    )


def root_stack(scope: Construct) -> Stack:
    """The deployed stack `scope` belongs to: its stack, or for a nested stack the stack at the top.
    Physical names (queues, the manifest, schedule groups) derive from its name, wherever a job's
    resources sit, so a job keeps its names when the jobs spread over nested stacks."""
    stack = Stack.of(scope)
    while stack.nested_stack_parent is not None:
        stack = stack.nested_stack_parent
    return stack


def queue_arn(scope: Construct, name: str) -> str:
    """The ARN of the queue `name` in `scope`'s account and region (named by the stack's rule: no
    reference to the queue, so no cross-stack reference either)."""
    return Stack.of(scope).format_arn(service="sqs", resource=name)


def place() -> function_env.Place:
    """Where a function's stack is, as deploy-time values (its own account, partition, DNS suffix)."""
    return function_env.Place(Aws.ACCOUNT_ID, Aws.PARTITION, Aws.URL_SUFFIX)


class LambdaJobsFunction(lambda_.Function):
    """A `lambda_.Function` that keeps its environment variables (`environment_variables`) and refuses,
    at synth, any that would take it past Lambda's 4 KB (`check_environment_size`): variables added
    later through `add_environment` (yours too) are counted.

    `fix` says what to do about a function too large (it ends the error message); the other options
    are `lambda_.Function`'s.

    Raises:
        ConfigurationError: the environment is larger than Lambda allows.
    """

    def __init__(self, scope: Construct, construct_id: str, *, fix: str, **options: Any) -> None:
        self._fix = fix
        self._variables: dict[str, str] = dict(options.get("environment") or {})
        check_environment_size(f"function {construct_id} of {scope.node.path}", self._variables, fix)
        super().__init__(scope, construct_id, **options)

    def add_environment(
        self, key: str, value: str, *, remove_in_edge: bool | None = None
    ) -> lambda_.Function:
        variables = {**self._variables, key: value}
        check_environment_size(f"function {self.node.path}", variables, self._fix)
        self._variables = variables
        return super().add_environment(key, value, remove_in_edge=remove_in_edge)

    @property
    def environment_variables(self) -> dict[str, str]:
        """Every variable set so far (tokens as CDK's placeholders)."""
        return dict(self._variables)


def lambdajobs_function(
    scope: Construct,
    construct_id: str,
    *,
    handler: str,
    code: lambda_.Code,
    layers: Sequence[lambda_.ILayerVersion],
    log_retention: logs.RetentionDays,
    timeout_seconds: int,
    memory_mb: int,
    description: str,
    environment: Mapping[str, str],
    fix: str,
    reserved_concurrency: int | None = None,
    log_group_name: str | None = None,
) -> LambdaJobsFunction:
    """A lambdajobs function in `scope` (a job's worker, the workflow continuer): the Python runtime on
    arm64, the Powertools layer, its own log group (`Logs`) with `log_retention`, JSON logs, and
    Powertools' service name and metrics namespace beside `environment`."""
    return LambdaJobsFunction(
        scope,
        construct_id,
        fix=fix,
        runtime=RUNTIME,
        architecture=lambda_.Architecture.ARM_64,
        handler=handler,
        code=code,
        layers=list(layers),
        timeout=Duration.seconds(timeout_seconds),
        memory_size=memory_mb,
        log_group=logs.LogGroup(scope, "Logs", retention=log_retention, log_group_name=log_group_name),
        # Lambda's JSON log format: platform lines are JSON too, and the levels filter at the source
        # (Powertools' Logger follows the application level). System INFO keeps the START and
        # REPORT lines (duration, memory used, init duration).
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
        system_log_level_v2=lambda_.SystemLogLevel.INFO,
        reserved_concurrent_executions=reserved_concurrency,
        description=description,
        environment={**environment, **function_env.powertools()},
    )


def queue_pair(
    scope: Construct,
    *,
    name: str,
    dead_letter_queue_name: str,
    visibility_timeout_seconds: int,
    max_receive_count: int,
) -> tuple[sqs.Queue, sqs.Queue]:
    """(DLQ, queue) in `scope` (construct ids `DeadLetterQueue`, `Queue`): the queue named `name`,
    redriven to its DLQ (named `dead_letter_queue_name`) after `max_receive_count` receives, the DLQ
    accepting redrives from it only; both SQS-encrypted, the DLQ keeping messages longer than its
    source. TLS-only is `tls_only`'s, one policy for several queues."""
    # The DLQ's redrive-allow policy names its source queue. Referencing the source queue's ARN
    # while the source's redrive policy references the DLQ is a circular dependency in
    # CloudFormation; the source's name and a formatted ARN break the cycle.
    source_ref = sqs.Queue.from_queue_arn(scope, "SourceQueueRef", queue_arn(scope, name))
    dead_letter_queue = sqs.Queue(
        scope,
        "DeadLetterQueue",
        queue_name=dead_letter_queue_name,
        retention_period=DLQ_RETENTION,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        redrive_allow_policy=sqs.RedriveAllowPolicy(
            redrive_permission=sqs.RedrivePermission.BY_QUEUE, source_queues=[source_ref]
        ),
    )
    queue = sqs.Queue(
        scope,
        "Queue",
        queue_name=name,
        visibility_timeout=Duration.seconds(visibility_timeout_seconds),
        retention_period=QUEUE_RETENTION,
        encryption=sqs.QueueEncryption.SQS_MANAGED,
        dead_letter_queue=sqs.DeadLetterQueue(queue=dead_letter_queue, max_receive_count=max_receive_count),
    )
    return dead_letter_queue, queue


def tls_only(scope: Construct, construct_id: str, queues: Sequence[sqs.IQueue]) -> sqs.CfnQueuePolicy:
    """One queue policy for all of `queues` (what `enforce_ssl=True` does, which makes a policy per
    queue): every request without TLS is denied. CloudFormation sets the same document on each queue
    it lists, so a job's queues and DLQs, at every level, cost one resource."""
    document = iam.PolicyDocument(
        statements=[
            iam.PolicyStatement(
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sqs:*"],
                resources=[queue.queue_arn for queue in queues],
                conditions={"Bool": {"aws:SecureTransport": "false"}},
            )
        ]
    )
    return sqs.CfnQueuePolicy(
        scope, construct_id, queues=[queue.queue_url for queue in queues], policy_document=document
    )


@dataclass(frozen=True)
class LevelQueues:
    """One priority level's queue, its DLQ and its event source on the job's function.

    `level` is None for the job's own queue (its lowest priority, or its only queue when it has no
    priorities); `priority` is the level's name (the lowest's for the job's own queue, None without
    priorities)."""

    job: str
    level: str | None
    priority: str | None
    queue: sqs.Queue
    dead_letter_queue: sqs.Queue
    event_source: sources.SqsEventSource

    @property
    def label(self) -> str:
        """How dashboards and alarms name it: `send_email (high)`, or just the job without priorities."""
        return f"{self.job} ({self.priority})" if self.priority else self.job


class JobWorker(Construct):
    """Queue + dead-letter queue + Lambda worker + event source mapping + manifest entry for one job;
    with `priorities`, a queue, DLQ and event source per level above the lowest, on the same function.

    `code` is the function's asset (the runtime plus `modules` of `jobs_package`: see
    `lambdajobs.staging.asset`). Usually made by `LambdaJobs`, which wires jobs to each other.

    Raises:
        jsii.errors.JSIIError: CDK refuses a setting (none for a spec that `@job` accepted).

    Example:
        >>> asset = stage_function_asset(out, jobs_package="myjobs", modules=["myjobs.billing"])
        >>> ensure_loaded("myjobs")
        >>> worker = JobWorker(stack, "SendInvoiceJob", spec=get_spec("send_invoice"),
        ...     table=table, code=lambda_.Code.from_asset(str(asset)), jobs_package="myjobs",
        ...     modules=["myjobs.billing"])
        >>> worker.queue, worker.dead_letter_queue, worker.function

    Attributes: `queue`, `dead_letter_queue`, `event_source` (the job's own queue: its lowest
    priority), `levels` (level name -> `LevelQueues`, every level but the lowest), `all_levels` (every
    queue of the job, highest first, the job's own included), `function`, `manifest`, and for cron
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
        #: True when its job enqueues so many queues that its role sends to the stack's name pattern
        #: (`LambdaJobs` decides).
        self.sends_by_pattern = False
        stack = Stack.of(self)
        self.stack_name = root_stack(self).stack_name
        # The job's own queue keeps its construct ids (and so its logical ids: a deployed stack keeps
        # its queue when priorities are added); each level above it lives under its own scope.
        self.dead_letter_queue, self.queue = self._queue_pair(self, spec, None)
        level_scopes = {
            level: Construct(self, f"Priority{level.capitalize()}")
            for level in spec.levels
            if level is not None
        }
        level_pairs = {level: self._queue_pair(where, spec, level) for level, where in level_scopes.items()}
        # TLS only, on every queue and DLQ of the job: one policy
        self.queue_policy = tls_only(
            self,
            "QueuePolicy",
            [
                queue
                for pair in ((self.dead_letter_queue, self.queue), *level_pairs.values())
                for queue in pair
            ],
        )
        self.function = lambdajobs_function(
            self,
            "Worker",
            handler=HANDLER,
            code=code,
            layers=layers,
            log_retention=log_retention,
            timeout_seconds=spec.timeout_seconds,
            memory_mb=spec.memory_mb,
            reserved_concurrency=spec.reserved_concurrency,
            description=f"lambdajobs worker for job {spec.name}",
            environment=function_env.worker_own(
                spec,
                stack=self.stack_name,
                table=table.table_name,
                jobs_package=jobs_package,
                modules=modules,
                place=place(),
            ),
            fix=f"Job {spec.name}: lambdajobs' own variables take well under 1 KB whatever the job "
            f"declares; look at the variables you add with add_environment.",
            # named by rule: in the manifest for the logs panel, and in the operator's grant by pattern
            log_group_name=log_group_name(self.stack_name, spec.name),
        )
        self.event_source = self._consume(spec, None, self.queue, self.dead_letter_queue)
        self.levels: dict[str, LevelQueues] = {
            level: LevelQueues(
                job=spec.name,
                level=level,
                priority=level,
                queue=queue,
                dead_letter_queue=dlq,
                event_source=self._consume(spec, level, queue, dlq),
            )
            for level, (dlq, queue) in level_pairs.items()
        }
        # The job record: a first attempt's acquire is a PutItem that only lands on no record, every
        # other write an UpdateItem, status reads are GetItem; the rate limiter's item (id
        # `lambdajobs#ratelimit#...`) lives in the same table and takes GetItem and UpdateItem.
        # BatchGetItem: a workflow member's `ctx.parent_results` reads the stage before's job records
        # in batches (and so do `get_workflow` and `list_jobs` called from a job). Every worker has it:
        # any job may be a later step of a chain (the producer decides, not the declaration), and
        # whether its code reads its parents shows in no declaration. It reads nothing GetItem of the
        # same table does not already reach (member ids are the workflow's, any string: no key
        # condition could narrow it).
        # On the table only: Table.grant would add its indexes too, which these actions never touch.
        self.function.add_to_role_policy(
            iam.PolicyStatement(
                actions=[
                    "dynamodb:BatchGetItem",
                    "dynamodb:GetItem",
                    "dynamodb:PutItem",
                    "dynamodb:UpdateItem",
                ],
                resources=[table.table_arn],
            )
        )
        if spec.searchable:
            # A job's search entries (`lambdajobs.runtime.search`): one BatchWriteItem of
            # `lambdajobs#sx#<field>#<job id>` items at its first attempt; no other item.
            self.function.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["dynamodb:BatchWriteItem"],
                    resources=[table.table_arn],
                    conditions={
                        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{SEARCH_ID_PREFIX}*"]}
                    },
                )
            )
        # Debounce (`lambdajobs.runtime.debounce.claim`): the arriving enqueue reads its key's item
        # (`lambdajobs#debounce#<job>#<hash>`) and marks it claimed, a superseded one writes its own
        # record; concurrency per key (`lambdajobs.runtime.keyslots`): GetItem and UpdateItem of the
        # key's slots item. All within the statement above: no DeleteItem (nothing is removed).

        manifest = ssm.StringParameter(
            self,
            "Manifest",
            parameter_name=manifest_parameter(self.stack_name, spec.name),
            string_value=stack.to_json_string(
                {
                    "queue_url": self.queue.queue_url,
                    "queue_arn": self.queue.queue_arn,
                    "dlq_url": self.dead_letter_queue.queue_url,
                    # the worker's log group (`lambdajobs.job_logs`: a job's lines on the board)
                    "log_group": log_group_name(self.stack_name, spec.name),
                    # every level but the lowest (which is the job's own queue, above); {} without
                    "levels": {
                        level: {
                            "queue_url": queues.queue.queue_url,
                            "queue_arn": queues.queue.queue_arn,
                            "dlq_url": queues.dead_letter_queue.queue_url,
                        }
                        for level, queues in self.levels.items()
                    },
                }
            ),
            description=f"lambdajobs manifest entry for job {spec.name}",
        )
        self.manifest = manifest
        self.schedule = self._schedule(spec, cron_group, scheduler_dlq) if spec.schedule else None

    @property
    def all_levels(self) -> list[LevelQueues]:
        """Every queue of the job with its DLQ and event source, highest priority first; the job's
        own queue (level None) last. One entry for a job without priorities."""
        own = LevelQueues(
            job=self.spec.name,
            level=None,
            priority=self.spec.priority_of(None),
            queue=self.queue,
            dead_letter_queue=self.dead_letter_queue,
            event_source=self.event_source,
        )
        return [self.levels[level] if level is not None else own for level in self.spec.levels]

    def _queue_pair(self, scope: Construct, spec: JobSpec, level: str | None) -> tuple[sqs.Queue, sqs.Queue]:
        """(DLQ, queue) of one level (None: the job's own), created in `scope`."""
        return queue_pair(
            scope,
            name=queue_name(self.stack_name, spec.name, level),
            dead_letter_queue_name=dead_letter_queue_name(self.stack_name, spec.name, level),
            visibility_timeout_seconds=spec.visibility_timeout_seconds,
            max_receive_count=spec.max_receive_count,
        )

    def _consume(
        self, spec: JobSpec, level: str | None, queue: sqs.Queue, dead_letter_queue: sqs.Queue
    ) -> sources.SqsEventSource:
        """The function's event source on one level's queue, and what the worker does with that level:
        consume it, hand records back to it, dead-letter into its DLQ."""
        window = spec.max_batching_window_seconds
        event_source = sources.SqsEventSource(
            queue,
            batch_size=spec.batch_size,
            max_batching_window=Duration.seconds(window) if window else None,
            # Without ReportBatchItemFailures Lambda ignores the failure list and deletes every
            # message of a "successful" batch: silent loss.
            report_batch_item_failures=True,
            # Per level: a higher level's own cap, so a backlog of lower ones cannot take its slots.
            max_concurrency=spec.concurrency_of(level),
        )
        self.function.add_event_source(event_source)  # grants consume on the queue
        dead_letter_queue.grant_send_messages(self.function)
        # A record the worker does not run (its lock held, no time left, a failed record write, a
        # message for another level) goes to a queue of the job as a copy, so that receive costs no
        # attempt.
        queue.grant_send_messages(self.function)
        return event_source

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
