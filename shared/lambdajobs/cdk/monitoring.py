"""Dashboards and alarms for every job, from the job declarations: what operators watch.

Two parts, because an app's jobs may spread over several CloudFormation stacks (the root stack and
nested stacks, `lambdajobs.cdk.layout`):

- `Monitoring`, in the root stack, once: the alarm topics, the stack-wide alarms (the Scheduler DLQ,
  the workflow queue and its continuer, the account's Lambda concurrency), the first dashboard, and
  the composite alarm that emails.
- `Monitoring.add_jobs(workers, part=..., scope=...)`, once per group of jobs (`JobsMonitoring`): the
  alarms of those jobs and their dashboard, created in `scope`. The first group (part 1) is in the
  `Monitoring` construct itself, so its alarms keep the construct ids (and logical ids) they had
  when there was one group (`SendEmailJobDeadLetters`); a later group's scope is a construct inside
  its nested stack (CDK passes the topic's ARN to it as a parameter, and the group's composite alarm's
  ARN back as an output).

Notifications. Every alarm notifies the alarm topic (`topic`, output `AlarmTopicArn`) on ALARM and
on OK: that is the topic for machines (Chatbot, PagerDuty, a queue of your own), which should see
every transition. People get email from a second topic (`email_topic`) that only one alarm
notifies: the root composite alarm `<stack>-any-alarm`, in ALARM while any alarm of the stack is.
Why: SNS throttles an email endpoint at 10 messages per second, and a subscription that goes past it
is suspended (back to PendingConfirmation, then deleted; SNS "email subscription setup"). One
incident can put hundreds of alarms in ALARM within the same minute (an account throttled, a
dependency down for every job), each a message on the alarm topic. The composite changes state once:
one ALARM email when the first alarm fires and one OK email when the last one clears, however many
fire between. The price: while it is in ALARM, a second incident sends no new email (the composite
does not go OK while anything is wrong, so nothing is missed for long; the dashboard, the alarm list
and the alarm topic say what). Its description says where to look.

Composite alarms nest: a group's composite (`<stack>-jobs[-<part>]-any-alarm`) is in ALARM when any
alarm of its jobs is, and the root composite is over the group composites and the stack-wide alarms
(at most `CHILDREN_PER_RULE` of them together: 20-odd groups). A rule may name at most 100 alarms in
at most 10,240 characters (PutCompositeAlarm). CloudFormation names our alarms (names up to 255
characters), so one rule takes `CHILDREN_PER_RULE` of them at worst; a group with more alarms gets a
composite per run of whole jobs (`pack`), and its own composite is over those.

Dashboards are account-wide (one name space for every region of an account), so their names carry
the region: `<stack>-<region>-jobs` for the first group (with the stack-wide rows: the account's
concurrency, the workflow queue, the Scheduler DLQ), `<stack>-<region>-jobs-<part>` for the others
(part 2, 3, ...). A dashboard holds at most 500 widgets and 2,500 metrics (CloudWatch quotas); a
group whose rows would pass either continues on `..._2`, `..._3`.

The account's concurrency: Lambda throttles every function of the account and region once what is
claimed (running unreserved executions plus all reservations, `ClaimedAccountConcurrency`) reaches
the quota, and a throttled receive still counts toward the queue's maxReceiveCount: good jobs reach
the DLQ. A new account's quota may be as low as 10 (`lambdajobs.cdk.quotas`). `AccountConcurrency`
fires when the claim is above `ACCOUNT_CONCURRENCY_ALARM_PERCENT` of the live quota.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import jsii
from aws_cdk import ArnFormat, Duration, IStableStringProducer, Lazy, Stack
from aws_cdk import aws_cloudwatch as cw
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from lambdajobs.cdk.job_worker import JobWorker, LevelQueues
from lambdajobs.cdk.quotas import ACCOUNT_CONCURRENCY_CONTEXT, account_concurrency_quota
from lambdajobs.runtime.alarms import Alarms
from lambdajobs.runtime.errors import ConfigurationError
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
    # flow control: a job cancelled (its message dropped, or its run stopped at a check), a debounced
    # enqueue superseded by a later one of its key, a run handed back because its key is at its cap
    "JobCancelled",
    "JobSuperseded",
    "JobKeyBusy",
)
RUNBOOK = "Runbook: lambdajobs docs/how-to/runbooks.md."
#: The first group of jobs: the one in the root stack, on the first dashboard.
FIRST_PART = 1

#: CloudWatch quotas: "up to 500 widgets per dashboard", "up to 2500 metrics per dashboard, across
#: all widgets" (a math expression and each metric it uses count).
MAX_DASHBOARD_WIDGETS = 500
MAX_DASHBOARD_METRICS = 2500

#: PutCompositeAlarm: a rule names "as many as 100 underlying alarms", in at most 10,240 characters.
ALARM_RULE_MAX_ALARMS = 100
ALARM_RULE_MAX_CHARACTERS = 10_240
#: One child at its longest: `ALARM("<arn>") OR `, the ARN with the longest partition, a 16-character
#: region, and a 255-character name (CloudWatch's limit; CloudFormation names our alarms).
ALARM_RULE_CHILD_CHARACTERS = (
    len('ALARM("") OR ') + len("arn:aws-us-gov:cloudwatch:") + 16 + len(":123456789012:alarm:") + 255
)
#: The children one rule takes at worst (any_of wraps them in parentheses): 31.
CHILDREN_PER_RULE = min(
    ALARM_RULE_MAX_ALARMS, (ALARM_RULE_MAX_CHARACTERS - len("()")) // ALARM_RULE_CHILD_CHARACTERS
)

#: Alarm when the claimed concurrency is above this share of the quota for 5 minutes: Lambda
#: throttles at 100%, and a throttle uses up an attempt of the job it held back. 80% leaves room for a
#: burst and the hours (sometimes days) a quota increase takes; 5 minutes keeps a one-minute burst
#: from paging.
ACCOUNT_CONCURRENCY_ALARM_PERCENT = 80
ACCOUNT_CONCURRENCY_ALARM_MINUTES = 5


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


def claimed_account_concurrency() -> cw.Metric:
    """The account's claimed Lambda concurrency in the region: unreserved executions running plus
    every reservation (AWS/Lambda, no dimensions; Lambda's docs: view it with MAX)."""
    return cw.Metric(
        namespace="AWS/Lambda",
        metric_name="ClaimedAccountConcurrency",
        statistic="Maximum",
        period=ONE_MINUTE,
        label="claimed",
    )


def concurrency_usage() -> cw.Metric:
    """The usage metric of Lambda's concurrent executions quota, which `SERVICE_QUOTA()` reads the
    quota from (AWS/Usage; Service Quotas' usage metric of L-B99A9384)."""
    return cw.Metric(
        namespace="AWS/Usage",
        metric_name="ResourceCount",
        dimensions_map={
            "Service": "Lambda",
            "Resource": "ConcurrentExecutions",
            "Type": "Resource",
            "Class": "None",
        },
        statistic="Maximum",
        period=ONE_MINUTE,
        label="running",
    )


def concurrency_utilization() -> cw.MathExpression:
    """Claimed concurrency as a percentage of the live quota (Lambda's docs: "Utilization =
    (ClaimedAccountConcurrency/SERVICE_QUOTA(ConcurrentExecutions)) * 100%")."""
    return cw.MathExpression(
        expression="100 * claimed / SERVICE_QUOTA(usage)",
        using_metrics={"claimed": claimed_account_concurrency(), "usage": concurrency_usage()},
        period=ONE_MINUTE,
        label="claimed, % of the quota",
    )


@jsii.implements(IStableStringProducer)
class _AnyOf:
    """A rule over alarms that may still be added (the root composite's: groups come later)."""

    def __init__(self, alarms: list[cw.IAlarm]) -> None:
        self._alarms = alarms

    def produce(self) -> str:
        return cw.AlarmRule.any_of(*self._alarms).render_alarm_rule()


def any_alarm(
    scope: Construct, construct_id: str, *, name: str, alarms: Sequence[cw.IAlarm], description: str
) -> cw.CompositeAlarm:
    """A composite alarm in ALARM while any of `alarms` is. Over more than `CHILDREN_PER_RULE`, a
    composite per part of them (`<construct_id>-1`, named `<name>-1`, ...) and this one over those.

    Raises:
        ValueError: no alarm.
    """
    if not alarms:
        raise ValueError(f"composite alarm {name}: no alarm to watch")
    if len(alarms) > CHILDREN_PER_RULE:
        parts = [
            alarms[start : start + CHILDREN_PER_RULE] for start in range(0, len(alarms), CHILDREN_PER_RULE)
        ]
        return any_alarm(
            scope,
            construct_id,
            name=name,
            alarms=[
                any_alarm(
                    scope,
                    f"{construct_id}-{number}",
                    name=f"{name}-{number}",
                    alarms=part,
                    description=f"{description} (part {number})",
                )
                for number, part in enumerate(parts, 1)
            ],
            description=description,
        )
    return cw.CompositeAlarm(
        scope,
        construct_id,
        composite_alarm_name=name,
        alarm_rule=cw.AlarmRule.any_of(*alarms),
        alarm_description=description,
    )


def pack(sizes: Sequence[int], room: int) -> list[list[int]]:
    """Indexes of `sizes` in order, in runs whose sizes add up to at most `room` (a size above it
    alone in its run): which jobs' alarms share a composite."""
    runs: list[list[int]] = []
    used = 0
    for index, size in enumerate(sizes):
        if not runs or used + size > room:
            runs.append([])
            used = 0
        runs[-1].append(index)
        used += size
    return runs


@dataclass
class _Page:
    """A dashboard and what it holds so far (against `MAX_DASHBOARD_WIDGETS` / `_METRICS`)."""

    dashboard: cw.Dashboard
    widgets: int = 0
    metrics: int = 0

    def fits(self, widgets: Sequence[cw.IWidget]) -> bool:
        return (
            self.widgets + len(widgets) <= MAX_DASHBOARD_WIDGETS
            and self.metrics + metric_count(widgets) <= MAX_DASHBOARD_METRICS
        )

    def add(self, widgets: Sequence[cw.IWidget]) -> None:
        self.dashboard.add_widgets(*widgets)
        self.widgets += len(widgets)
        self.metrics += metric_count(widgets)


def metric_count(widgets: Sequence[cw.IWidget]) -> int:
    """The metrics of `widgets` as a dashboard counts them: every row of their `metrics`."""
    return sum(
        len(rendered.get("properties", {}).get("metrics") or [])
        for widget in widgets
        for rendered in widget.to_json()
    )


class _Alarming:
    """Alarms on queues and functions, created in one scope, notifying one topic."""

    def __init__(self, scope: Construct, topic: sns.ITopic) -> None:
        self.scope = scope
        self.topic = topic

    def function_alarms(
        self, limits: Alarms, fn: lambda_.IFunction, role: str, id_prefix: str, subject: str
    ) -> dict[str, cw.Alarm]:
        """`<role>Errors` and `<role>Throttles`, as `limits` say."""
        return self.made(
            {
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
            },
            id_prefix,
            subject,
        )

    def queue_alarms(
        self, limits: Alarms, queue: sqs.IQueue, dlq: sqs.IQueue, id_prefix: str, subject: str
    ) -> dict[str, cw.Alarm]:
        """The alarms of one queue and its DLQ, as `limits` say. `id_prefix` keeps the job's own
        queue's alarms under their original construct ids (`SendEmailJobDeadLetters`); a level's are
        `SendEmailJob-high-DeadLetters` (the dashes keep them apart from any job's), the workflow
        queue's `WorkflowsDeadLetters` (no job's construct id starts so: they end with `Job`)."""
        return self.made(
            {
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
                    queue.metric_approximate_number_of_messages_visible(
                        period=ONE_MINUTE, statistic="Maximum"
                    ),
                    3,
                    "messages waiting, for 3 minutes",
                ),
                # The DLQ deletes a message 14 days after its first enqueue: look before that.
                "DeadLetterAge": (
                    limits.dlq_oldest_message_age_seconds_above,
                    dlq.metric_approximate_age_of_oldest_message(period=FIVE_MINUTES, statistic="Maximum"),
                    1,
                    "seconds the oldest dead letter has been in the DLQ "
                    "(it may be deleted after 10 days there)",
                ),
            },
            id_prefix,
            subject,
        )

    def made(
        self, wanted: Mapping[str, tuple[Any, cw.IMetric, int, str]], id_prefix: str, subject: str
    ) -> dict[str, cw.Alarm]:
        """The alarms of `wanted` (name -> threshold, metric, periods, what) whose threshold is set;
        `subject` names what they watch in their descriptions (`job send_email (high)`)."""
        return {
            name: self.alarm(
                f"{id_prefix}{name}",
                metric,
                threshold=threshold,
                periods=periods,
                description=f"lambdajobs {subject}: {what} above {threshold}. {RUNBOOK}",
            )
            for name, (threshold, metric, periods, what) in wanted.items()
            if threshold is not None
        }

    def alarm(
        self,
        alarm_id: str,
        metric: cw.IMetric,
        *,
        threshold: int,
        periods: int,
        description: str,
        to_alarm: int | None = None,
    ) -> cw.Alarm:
        """An alarm above `threshold` for `periods` periods (no data is fine), ALARM and OK to the
        topic (machines; people get the root composite's email)."""
        alarm = cw.Alarm(
            self.scope,
            alarm_id,
            metric=metric,
            threshold=threshold,
            evaluation_periods=periods,
            datapoints_to_alarm=to_alarm,
            comparison_operator=cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
            treat_missing_data=cw.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        alarm.add_alarm_action(actions.SnsAction(self.topic))
        alarm.add_ok_action(actions.SnsAction(self.topic))
        return alarm


def function_widget(title: str, fn: lambda_.IFunction) -> cw.IWidget:
    return cw.GraphWidget(
        title=title,
        left=[
            fn.metric_invocations(period=ONE_MINUTE, label="invocations"),
            fn.metric_errors(period=ONE_MINUTE, label="errors"),
            fn.metric_throttles(period=ONE_MINUTE, label="throttles"),
        ],
        width=5,
    )


def queue_widgets(label: str, queue: sqs.IQueue, dlq: sqs.IQueue) -> list[cw.IWidget]:
    """A queue's depth, messages in flight and oldest message; its DLQ's depth and oldest."""
    return [
        cw.GraphWidget(
            title=f"{label}: queue",
            left=[
                queue.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, label="depth"),
                queue.metric_approximate_number_of_messages_not_visible(period=ONE_MINUTE, label="in flight"),
            ],
            right=[queue.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, label="oldest (s)")],
            width=6,
        ),
        cw.GraphWidget(
            title=f"{label}: dead letters",
            left=[dlq.metric_approximate_number_of_messages_visible(period=ONE_MINUTE, label="DLQ depth")],
            right=[dlq.metric_approximate_age_of_oldest_message(period=ONE_MINUTE, label="oldest (s)")],
            width=3,
        ),
    ]


class JobsMonitoring:
    """The alarms and dashboard(s) of one group of jobs, created in `scope` (`Monitoring.add_jobs`).

    Attributes: `part`, `scope`, `alarms` (job -> {name: Alarm}: its own queue and DLQ, and its
    function), `level_alarms` (job -> level -> {name: Alarm}: each priority level's queue and DLQ
    above the job's lowest), `dashboards` (the group's, in order), `composite` (in ALARM while any of
    these alarms is; None when the jobs turned every alarm off).
    """

    def __init__(
        self,
        monitoring: Monitoring,
        workers: Mapping[str, JobWorker],
        *,
        part: int,
        scope: Construct,
        first_page: _Page | None = None,
    ) -> None:
        self.part = part
        self.scope = scope
        self._monitoring = monitoring
        self._alarming = _Alarming(scope, monitoring.topic)
        first = part == FIRST_PART
        suffix = "" if first else f"-{part}"
        self._ids = "" if first else f"Jobs{part}"  # a later group's construct ids, apart from the first's
        self._dashboard_name = f"{monitoring.stack_name}-{Stack.of(monitoring).region}-jobs{suffix}"
        self._pages: list[_Page] = [first_page] if first_page else []
        self.alarms: dict[str, dict[str, cw.Alarm]] = {}
        self.level_alarms: dict[str, dict[str, dict[str, cw.Alarm]]] = {}
        for job, worker in sorted(workers.items()):
            self._place(self._row(job, worker))
            self.alarms[job] = self._alarms(job, worker)
            self.level_alarms[job] = {
                level: self._alarming.queue_alarms(
                    worker.spec.alarms,
                    queues.queue,
                    queues.dead_letter_queue,
                    f"{worker.node.id}-{level}-",
                    f"job {queues.label}",
                )
                for level, queues in worker.levels.items()
            }
        self.dashboards = [page.dashboard for page in self._pages]
        self.composite = self._composite(sorted(workers), suffix)

    def _composite(self, jobs: list[str], suffix: str) -> cw.CompositeAlarm | None:
        """Any alarm of these jobs; over whole jobs at a time (`pack`) when they have too many."""
        of_job = {
            job: [
                *self.alarms[job].values(),
                *(alarm for level in self.level_alarms[job].values() for alarm in level.values()),
            ]
            for job in jobs
        }
        watched = [job for job in jobs if of_job[job]]
        if not watched:
            return None
        name = f"{self._monitoring.stack_name}-jobs{suffix}-any-alarm"
        runs = [
            [watched[i] for i in run] for run in pack([len(of_job[j]) for j in watched], CHILDREN_PER_RULE)
        ]
        parts: list[cw.IAlarm] = [
            any_alarm(
                self.scope,
                f"{self._ids}AnyJobAlarm-{number}",
                name=f"{name}-{number}",
                alarms=[alarm for job in run for alarm in of_job[job]],
                description=self._description(run),
            )
            for number, run in enumerate(runs, 1)
            if len(runs) > 1
        ]
        return any_alarm(
            self.scope,
            f"{self._ids}AnyJobAlarm",
            name=name,
            alarms=parts or [alarm for job in watched for alarm in of_job[job]],
            description=self._description(watched),
        )

    def _description(self, jobs: Sequence[str]) -> str:
        """A group composite's description (CloudWatch takes at most 1,024 characters)."""
        named = ", ".join(jobs)
        if len(named) > 600:
            named = named[:600].rsplit(", ", 1)[0] + ", ..."
        return (
            f"lambdajobs {self._monitoring.stack_name}: an alarm of jobs {named} is in ALARM. The "
            f"dashboard {self._dashboard_name} shows them. {RUNBOOK}"
        )

    def _place(self, widgets: list[cw.IWidget]) -> None:
        """A job's row on the group's last dashboard, or on a new one when it would not fit there."""
        if not self._pages or not self._pages[-1].fits(widgets):
            number = len(self._pages) + 1
            self._pages.append(
                _Page(
                    cw.Dashboard(
                        self.scope,
                        f"{self._ids}Dashboard{number if number > 1 else ''}",
                        dashboard_name=self._dashboard_name + (f"_{number}" if number > 1 else ""),
                    )
                )
            )
        self._pages[-1].add(widgets)

    def _row(self, job: str, worker: JobWorker) -> list[cw.IWidget]:
        """The job's widgets: each level's queue and DLQ, highest priority first, then its function
        (one for every level). A row wider than the dashboard's 24 columns wraps."""
        fn = worker.function
        return [
            *(
                widget
                for level in worker.all_levels
                for widget in queue_widgets(level.label, level.queue, level.dead_letter_queue)
            ),
            function_widget(f"{job}: worker", fn),
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
                left=[job_metric(self._monitoring.stack_name, job, name) for name in JOB_METRICS],
                width=5,
            ),
        ]

    def _alarms(self, job: str, worker: JobWorker) -> dict[str, cw.Alarm]:
        """The alarms of the job's own queue and DLQ (under their original ids) and of its function."""
        own: LevelQueues = next(level for level in worker.all_levels if level.level is None)
        limits = worker.spec.alarms
        return {
            **self._alarming.queue_alarms(
                limits, own.queue, own.dead_letter_queue, worker.node.id, f"job {own.label}"
            ),
            **self._alarming.function_alarms(limits, worker.function, "Worker", worker.node.id, f"job {job}"),
        }


#: The workflow queue's alarms: the job queues' defaults (any dead letter, a notice waiting over 15
#: minutes, ...) and the continuer's errors and throttles as a worker's.
WORKFLOW_ALARMS = Alarms()


class Monitoring(Construct):
    """The alarm topics, the stack-wide alarms and the first dashboard (in the root stack); each group
    of jobs adds its alarms and dashboard with `add_jobs`. See the module's docstring for the design
    (topics, composite alarms, dashboard names and limits).

    Args:
        alarm_email: an address subscribed to `email_topic` (which only the root composite alarm
            notifies), or None.
        scheduler_dlq: the Scheduler DLQ (an alarm and a widget), or None.
        workflows: the workflow queue and continuer (alarms and a row), or None.
        workers: a first group of jobs, added as `add_jobs(workers, part=1)` (None: add them later).
        stack_name: the name the workers emit their metrics under (default: this stack's name).

    Attributes: `topic` (every alarm's ALARM and OK), `email_topic`, `composite` (the root composite,
    `<stack>-any-alarm`), `dashboard` (the first), `dashboards` (all, every group's), `groups`
    (`JobsMonitoring` by part), `alarms` (job -> {name: Alarm}: the job's own queue and DLQ, and its
    function), `level_alarms` (job -> level -> {name: Alarm}: the queue and DLQ of each priority
    level above the job's lowest; {} for a job without priorities), `workflow_alarms` ({name: Alarm}:
    the workflow queue and DLQ, `ContinuerErrors` and `ContinuerThrottles`; {} without `workflows`),
    `scheduler_alarm`, `account_alarm` (the account's claimed Lambda concurrency), `stack_name`.

    Raises:
        ConfigurationError: a bad `lambdajobs:accountConcurrency` context value.
        jsii.errors.JSIIError: CDK refuses the alarm email address.

    Example:
        >>> monitoring = Monitoring(stack, "Monitoring", alarm_email="ops@example.com")
        >>> monitoring.add_jobs(first_workers, part=1)
        >>> monitoring.add_jobs(more_workers, part=2, scope=Construct(nested_stack, "Monitoring"))
        >>> monitoring.alarms["send_email"]["DeadLetters"]
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        alarm_email: str | None = None,
        scheduler_dlq: sqs.IQueue | None = None,
        workflows: Workflows | None = None,
        workers: Mapping[str, JobWorker] | None = None,
        stack_name: str | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.stack_name = stack_name or stack.stack_name
        self.topic = self._topic("AlarmTopic", f"lambdajobs {self.stack_name} alarms")
        # Only the root composite notifies it: one email per incident, never a burst (module docstring).
        self.email_topic = self._topic("AlarmEmailTopic", f"lambdajobs {self.stack_name} alarm email")
        if alarm_email:
            self.email_topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        dashboard_name = f"{self.stack_name}-{stack.region}-jobs"
        self.dashboard = cw.Dashboard(self, "Dashboard", dashboard_name=dashboard_name)
        self._first_page: _Page | None = _Page(self.dashboard)
        self.dashboards: list[cw.Dashboard] = [self.dashboard]
        self.groups: dict[int, JobsMonitoring] = {}
        self.alarms: dict[str, dict[str, cw.Alarm]] = {}
        self.level_alarms: dict[str, dict[str, dict[str, cw.Alarm]]] = {}
        alarming = _Alarming(self, self.topic)
        self.account_alarm = self._account_row(alarming)
        self.workflow_alarms: dict[str, cw.Alarm] = {}
        if workflows is not None:
            self.workflow_alarms = self._workflow_row(alarming, workflows)
        self.scheduler_alarm: cw.Alarm | None = None
        if scheduler_dlq is not None:
            self.scheduler_alarm = self._scheduler_row(alarming, scheduler_dlq)
        self._root_children: list[cw.IAlarm] = [
            self.account_alarm,
            *self.workflow_alarms.values(),
            *([self.scheduler_alarm] if self.scheduler_alarm else []),
        ]
        self.composite = cw.CompositeAlarm(
            self,
            "AnyAlarm",
            composite_alarm_name=f"{self.stack_name}-any-alarm",
            alarm_rule=cw.AlarmRule.from_string(Lazy.string(_AnyOf(self._root_children))),
            alarm_description=(
                f"lambdajobs {self.stack_name}: an alarm of the stack is in ALARM (a job's, the workflow "
                f"queue's, the Scheduler DLQ's, or the account's Lambda concurrency). This email comes once "
                f"per incident: the dashboard {dashboard_name} and the CloudWatch alarms "
                f"named after the stack say which, and `lambdajobs queues` shows the jobs. {RUNBOOK}"
            ),
        )
        self.composite.add_alarm_action(actions.SnsAction(self.email_topic))
        self.composite.add_ok_action(actions.SnsAction(self.email_topic))
        if workers is not None:
            self.add_jobs(workers, part=FIRST_PART)

    def add_jobs(
        self, workers: Mapping[str, JobWorker], *, part: int, scope: Construct | None = None
    ) -> JobsMonitoring:
        """The alarms and dashboard of a group of jobs, in `scope` (default: this construct, where the
        first group, part 1, keeps its construct ids). Part 1's rows go on the first dashboard
        (`<stack>-<region>-jobs`), a later part's on `<stack>-<region>-jobs-<part>`; the group's
        composite alarm joins the root composite.

        Raises:
            ConfigurationError: a part below 1 or added already, a job in another group, or the root
                composite would watch more than `CHILDREN_PER_RULE` alarms (too many groups).
        """
        if isinstance(part, bool) or not isinstance(part, int) or part < FIRST_PART:
            raise ConfigurationError(f"monitoring: part={part!r}; number the groups of jobs 1, 2, 3, ...")
        if part in self.groups:
            raise ConfigurationError(
                f"monitoring: jobs of part {part} were added already; give each group its own part."
            )
        twice = sorted(set(workers) & set(self.alarms))
        if twice:
            raise ConfigurationError(f"monitoring: jobs {twice} are in two groups; put each job in one.")
        first_page = None
        if part == FIRST_PART:
            first_page, self._first_page = self._first_page, None
        group = JobsMonitoring(self, workers, part=part, scope=scope or self, first_page=first_page)
        if group.composite is not None:
            if len(self._root_children) >= CHILDREN_PER_RULE:
                raise ConfigurationError(
                    f"monitoring: the jobs fill more nested stacks than the stack's composite alarm can "
                    f"watch ({CHILDREN_PER_RULE} alarms: each group's and the stack-wide ones; about 600 "
                    f"plain jobs, docs/reference/limits.md); split the jobs over two stacks of their own."
                )
            self._root_children.append(group.composite)
        self.groups[part] = group
        self.alarms.update(group.alarms)
        self.level_alarms.update(group.level_alarms)
        self.dashboards.extend(d for d in group.dashboards if d is not self.dashboard)
        return group

    def _topic(self, construct_id: str, display_name: str) -> sns.Topic:
        """A TLS-only topic this account's CloudWatch alarms may publish to."""
        stack = Stack.of(self)
        topic = sns.Topic(self, construct_id, display_name=display_name, enforce_ssl=True)
        # enforce_ssl gives the topic a policy, which replaces the default one: without this statement
        # CloudWatch may not publish, and no alarm would ever be delivered. Only this account's alarms.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarmsPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
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
        return topic

    def _add_root_row(self, *widgets: cw.IWidget) -> None:
        assert self._first_page is not None  # stack-wide rows come before any group's
        self._first_page.add(widgets)

    def _account_row(self, alarming: _Alarming) -> cw.Alarm:
        """The account's claimed Lambda concurrency against its quota: a widget and an alarm."""
        assumed = account_concurrency_quota(self)
        self._add_root_row(
            cw.GraphWidget(
                title="account: Lambda concurrency claimed / quota",
                left=[
                    claimed_account_concurrency(),
                    cw.MathExpression(
                        expression="SERVICE_QUOTA(usage)",
                        using_metrics={"usage": concurrency_usage()},
                        period=ONE_MINUTE,
                        label="quota",
                    ),
                ],
                left_annotations=[
                    cw.HorizontalAnnotation(
                        value=assumed, label=f"quota synth assumed ({ACCOUNT_CONCURRENCY_CONTEXT})"
                    )
                ],
                right=[concurrency_utilization()],
                right_annotations=[
                    cw.HorizontalAnnotation(value=ACCOUNT_CONCURRENCY_ALARM_PERCENT, label="alarm (%)")
                ],
                width=24,
            )
        )
        return alarming.alarm(
            "AccountConcurrency",
            concurrency_utilization(),
            threshold=ACCOUNT_CONCURRENCY_ALARM_PERCENT,
            periods=ACCOUNT_CONCURRENCY_ALARM_MINUTES,
            to_alarm=ACCOUNT_CONCURRENCY_ALARM_MINUTES,
            description=(
                f"lambdajobs {self.stack_name}: the account's claimed Lambda concurrency in this region "
                f"(ClaimedAccountConcurrency: unreserved executions plus every reservation) is above "
                f"{ACCOUNT_CONCURRENCY_ALARM_PERCENT}% of its quota for {ACCOUNT_CONCURRENCY_ALARM_MINUTES} "
                f"minutes. At 100% Lambda throttles every function, and throttled receives use up the "
                f"jobs' attempts: request a quota increase (Service Quotas: AWS Lambda, Concurrent "
                f"executions), or lower reservations and max_concurrency. What to do: lambdajobs "
                f"docs/how-to/monitoring.md (the account's Lambda concurrency)."
            ),
        )

    def _workflow_row(self, alarming: _Alarming, workflows: Workflows) -> dict[str, cw.Alarm]:
        """Notices the continuer failed on five times: their workflows wait until redriven."""
        self._add_root_row(
            *queue_widgets("workflows", workflows.queue, workflows.dead_letter_queue),
            function_widget("workflows: continuer", workflows.function),
        )
        return {
            **alarming.queue_alarms(
                WORKFLOW_ALARMS, workflows.queue, workflows.dead_letter_queue, "Workflows", "workflow queue"
            ),
            **alarming.function_alarms(
                WORKFLOW_ALARMS, workflows.function, "Continuer", "Workflows", "workflow queue"
            ),
        }

    def _scheduler_row(self, alarming: _Alarming, scheduler_dlq: sqs.IQueue) -> cw.Alarm:
        """Scheduled runs Scheduler could not deliver to a queue (after 185 tries or 24 hours)."""
        undelivered = scheduler_dlq.metric_approximate_number_of_messages_visible(
            period=ONE_MINUTE, statistic="Maximum", label="undelivered runs"
        )
        self._add_root_row(
            cw.GraphWidget(title="scheduler: undelivered runs (its DLQ)", left=[undelivered], width=24)
        )
        return alarming.alarm(
            "SchedulerDeadLetters",
            scheduler_dlq.metric_approximate_number_of_messages_visible(
                period=ONE_MINUTE, statistic="Maximum"
            ),
            threshold=0,
            periods=1,
            description="lambdajobs: scheduled runs EventBridge Scheduler could not deliver "
            f"(the Scheduler DLQ holds them). {RUNBOOK}",
        )
