"""Dashboard and alarms for every job, from the job declarations: what operators watch."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from lambdajobs.cdk.job_worker import JobWorker, LevelQueues
from lambdajobs.runtime.alarms import Alarms
from lambdajobs.runtime.settings import METRICS_NAMESPACE, SERVICE_NAME

if TYPE_CHECKING:
    from aws_cdk import aws_lambda as lambda_

    from lambdajobs.cdk.workflows import Workflows

ONE_MINUTE = Duration.minutes(1)
FIVE_MINUTES = Duration.minutes(5)
JOB_METRICS = (
    "JobSucceeded",
    "JobFailed",
    "JobRetried",
    "JobDeadLettered",
    "JobHandedBack",
    "JobRateLimited",
)


def job_metric(stack: str, job: str, name: str) -> cw.Metric:
    """A metric the worker emits (EMF, Powertools: dimensions job, stack and service)."""
    return cw.Metric(
        namespace=METRICS_NAMESPACE,
        metric_name=name,
        dimensions_map={"job": job, "stack": stack, "service": SERVICE_NAME},
        statistic="Sum",
        period=ONE_MINUTE,
        label=name.removeprefix("Job").lower(),
    )


#: The workflow queue's alarms: the job queues' defaults (any dead letter, a notice waiting over 15
#: minutes, ...) and the continuer's errors and throttles as a worker's.
WORKFLOW_ALARMS = Alarms()


class Monitoring(Construct):
    """One dashboard (a row per job: each priority level's queue and DLQ, then the worker; a row for the
    workflow queue and its continuer), alarms per job, per priority level and for the workflow queue,
    one SNS topic for alarm and OK notifications.

    Attributes: `topic`, `dashboard`, `alarms` (job -> {name: Alarm}: the job's own queue and DLQ, and
    its function), `level_alarms` (job -> level -> {name: Alarm}: the queue and DLQ of each priority
    level above the job's lowest; {} for a job without priorities), `workflow_alarms` ({name: Alarm}:
    the workflow queue and DLQ, `ContinuerErrors` and `ContinuerThrottles`; {} without `workflows`).

    Raises:
        jsii.errors.JSIIError: CDK refuses the alarm email address.

    Example:
        >>> monitoring = Monitoring(stack, "Monitoring", workers=jobs.workers, alarm_email="ops@example.com")
        >>> monitoring.alarms["send_email"]["DeadLetters"]
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        workers: Mapping[str, JobWorker],
        alarm_email: str | None = None,
        scheduler_dlq: sqs.IQueue | None = None,
        workflows: Workflows | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.topic = sns.Topic(
            self, "AlarmTopic", display_name=f"lambdajobs {stack.stack_name} alarms", enforce_ssl=True
        )
        # enforce_ssl gives the topic a policy, which replaces the default one: without this statement
        # CloudWatch may not publish, and no alarm would ever be delivered. Only this account's alarms.
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[self.topic.topic_arn],
                conditions={
                    "ArnLike": {
                        "aws:SourceArn": stack.format_arn(
                            service="cloudwatch",
                            resource="alarm",
                            resource_name="*",
                            arn_format=ArnFormat.COLON_RESOURCE_NAME,
                        )
                    },
                    "StringEquals": {"aws:SourceAccount": stack.account},
                },
            )
        )
        if alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=f"{stack.stack_name}-jobs")
        self.alarms: dict[str, dict[str, cw.Alarm]] = {}
        self.level_alarms: dict[str, dict[str, dict[str, cw.Alarm]]] = {}
        for job, worker in sorted(workers.items()):
            self.dashboard.add_widgets(*self._row(job, worker))
            self.alarms[job] = self._alarms(job, worker)
            self.level_alarms[job] = {
                level: self._queue_alarms(
                    worker.spec.alarms,
                    queues.queue,
                    queues.dead_letter_queue,
                    f"{worker.node.id}-{level}-",
                    f"job {queues.label}",
                )
                for level, queues in worker.levels.items()
            }
        self.workflow_alarms: dict[str, cw.Alarm] = {}
        if workflows is not None:
            # Notices the continuer failed on five times: their workflows wait until redriven.
            self.dashboard.add_widgets(
                *self._queue_widgets("workflows", workflows.queue, workflows.dead_letter_queue),
                self._function_widget("workflows: continuer", workflows.function),
            )
            self.workflow_alarms = {
                **self._queue_alarms(
                    WORKFLOW_ALARMS,
                    workflows.queue,
                    workflows.dead_letter_queue,
                    "Workflows",
                    "workflow queue",
                ),
                **self._made(
                    self._function_alarms(WORKFLOW_ALARMS, workflows.function, "Continuer"),
                    "Workflows",
                    "workflow queue",
                ),
            }
        self.scheduler_alarm: cw.Alarm | None = None
        if scheduler_dlq is not None:
            # Scheduled runs Scheduler could not deliver to a queue (after 185 tries or 24 hours).
            undelivered = scheduler_dlq.metric_approximate_number_of_messages_visible(
                period=ONE_MINUTE, statistic="Maximum", label="undelivered runs"
            )
            self.dashboard.add_widgets(
                cw.GraphWidget(title="scheduler: undelivered runs (its DLQ)", left=[undelivered], width=24)
            )
            self.scheduler_alarm = self._alarm(
                "SchedulerDeadLetters",
                scheduler_dlq.metric_approximate_number_of_messages_visible(
                    period=ONE_MINUTE, statistic="Maximum"
                ),
                threshold=0,
                periods=1,
                description="lambdajobs: scheduled runs EventBridge Scheduler could not deliver "
                "(the Scheduler DLQ holds them). Runbook: lambdajobs docs/how-to/runbooks.md.",
            )

    def _row(self, job: str, worker: JobWorker) -> list[cw.IWidget]:
        """The job's widgets: each level's queue and DLQ, highest priority first, then its function
        (one for every level). A row wider than the dashboard's 24 columns wraps."""
        fn = worker.function
        return [
            *(
                widget
                for level in worker.all_levels
                for widget in self._queue_widgets(level.label, level.queue, level.dead_letter_queue)
            ),
            self._function_widget(f"{job}: worker", fn),
            cw.GraphWidget(
                title=f"{job}: duration p99 / concurrency",
                left=[fn.metric_duration(period=ONE_MINUTE, statistic="p99", label="duration p99 (ms)")],
                right=[
                    fn.metric(
                        "ConcurrentExecutions", period=ONE_MINUTE, statistic="Maximum", label="concurrency"
                    )
                ],
                width=5,
            ),
            cw.GraphWidget(
                title=f"{job}: jobs",
                left=[job_metric(Stack.of(self).stack_name, job, name) for name in JOB_METRICS],
                width=5,
            ),
        ]

    @staticmethod
    def _function_widget(title: str, fn: lambda_.IFunction) -> cw.IWidget:
        return cw.GraphWidget(
            title=title,
            left=[
                fn.metric_invocations(period=ONE_MINUTE, label="invocations"),
                fn.metric_errors(period=ONE_MINUTE, label="errors"),
                fn.metric_throttles(period=ONE_MINUTE, label="throttles"),
            ],
            width=5,
        )

    @staticmethod
    def _queue_widgets(label: str, queue: sqs.IQueue, dlq: sqs.IQueue) -> list[cw.IWidget]:
        """A queue's depth, messages in flight and oldest message; its DLQ's depth and oldest."""
        return [
            cw.GraphWidget(
                title=f"{label}: queue",
                left=[
                    queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, label="depth"),
                    queue.metric_approximate_number_of_messages_not_visible(
                        period=ONE_MINUTE, label="in flight"
                    ),
                ],
                right=[queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, label="oldest (s)")],
                width=6,
            ),
            cw.GraphWidget(
                title=f"{label}: dead letters",
                left=[
                    dlq.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, label="DLQ depth")
                ],
                right=[dlq.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, label="oldest (s)")],
                width=3,
            ),
        ]

    def _alarms(self, job: str, worker: JobWorker) -> dict[str, cw.Alarm]:
        """The alarms of the job's own queue and DLQ (under their original ids) and of its function."""
        own: LevelQueues = next(level for level in worker.all_levels if level.level is None)
        limits = worker.spec.alarms
        return {
            **self._queue_alarms(
                limits, own.queue, own.dead_letter_queue, worker.node.id, f"job {own.label}"
            ),
            **self._made(
                self._function_alarms(limits, worker.function, "Worker"), worker.node.id, f"job {job}"
            ),
        }

    @staticmethod
    def _function_alarms(
        limits: Alarms, fn: lambda_.IFunction, role: str
    ) -> dict[str, tuple[Any, cw.Metric, int, str]]:
        """What `_made` alarms on for a function: `<role>Errors` and `<role>Throttles`."""
        return {
            f"{role}Errors": (
                limits.worker_errors_above,
                fn.metric_errors(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"{role.lower()} invocations that crashed or timed out, in 5 minutes",
            ),
            # Throttled invocations still consume receives: good jobs can reach the DLQ.
            f"{role}Throttles": (
                limits.worker_throttles_above,
                fn.metric_throttles(period=FIVE_MINUTES, statistic="Sum"),
                1,
                f"throttled {role.lower()} invocations, in 5 minutes",
            ),
        }

    def _queue_alarms(
        self, limits: Alarms, queue: sqs.IQueue, dlq: sqs.IQueue, id_prefix: str, subject: str
    ) -> dict[str, cw.Alarm]:
        """The alarms of one queue and its DLQ, as `limits` say. `id_prefix` keeps the job's own
        queue's alarms under their original construct ids (`SendEmailJobDeadLetters`); a level's are
        `SendEmailJob-high-DeadLetters` (the dashes keep them apart from any job's), the workflow
        queue's `WorkflowsDeadLetters` (no job's construct id starts so: they end with `Job`)."""
        wanted = {
            # Anything in the DLQ needs a look (alarm on visible messages: redrive drains it to 0).
            "DeadLetters": (
                limits.dlq_messages_above,
                dlq.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum"),
                1,
                "messages in the dead-letter queue",
            ),
            "OldestMessage": (
                limits.oldest_message_age_seconds_above,
                queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, statistic="Maximum"),
                1,
                "seconds the oldest message has waited",
            ),
            "QueueDepth": (
                limits.queue_depth_above,
                queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, statistic="Maximum"),
                3,
                "messages waiting, for 3 minutes",
            ),
            # The DLQ deletes a message 14 days after its first enqueue: look before that.
            "DeadLetterAge": (
                limits.dlq_oldest_message_age_seconds_above,
                dlq.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES, statistic="Maximum"),
                1,
                "seconds the oldest dead letter has been in the DLQ (it may be deleted after 10 days there)",
            ),
        }
        return self._made(wanted, id_prefix, subject)

    def _made(
        self, wanted: Mapping[str, tuple[Any, cw.Metric, int, str]], id_prefix: str, subject: str
    ) -> dict[str, cw.Alarm]:
        """The alarms of `wanted` (name -> threshold, metric, periods, what) whose threshold is set;
        `subject` names what they watch in their descriptions (`job send_email (high)`)."""
        made: dict[str, cw.Alarm] = {}
        for name, (threshold, metric, periods, what) in wanted.items():
            if threshold is not None:
                made[name] = self._alarm(
                    f"{id_prefix}{name}",
                    metric,
                    threshold=threshold,
                    periods=periods,
                    description=(
                        f"lambdajobs {subject}: {what} above {threshold}. "
                        "Runbook: lambdajobs docs/how-to/runbooks.md."
                    ),
                )
        return made

    def _alarm(
        self, alarm_id: str, metric: cw.Metric, *, threshold: int, periods: int, description: str
    ) -> cw.Alarm:
        """An alarm above `threshold` for `periods` periods (no data is fine), alarm and OK to the topic."""
        alarm = metric.create_alarm(
            self,
            alarm_id,
            threshold=threshold,
            evaluation_periods=periods,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        return alarm
