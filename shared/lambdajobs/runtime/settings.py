"""Names and defaults that more than one layer needs, written once.

The CDK constructs (`lambdajobs.cdk`) set these environment variables on every worker function;
`StackConfig.from_environment` (lambdajobs.runtime.config) is the only reader. Change a name here and
every layer follows.
"""

from __future__ import annotations

import re

#: Names a job: lower-case letters, digits and underscores, starting with a letter. It becomes part
#: of the queue name (SQS allows letters, digits, '-' and '_', at most 80 characters) and of an
#: environment variable name.
JOB_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
#: Names a priority level: lower-case letters and digits (no '_' or '-': it becomes part of queue names
#: and environment variable names after the job's), at most 16.
PRIORITY_NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,15}$")

ENV_JOB = "LAMBDAJOBS_JOB"  # the job a worker function serves
ENV_JOBS = "LAMBDAJOBS_JOBS"  # the user's jobs package (e.g. "myjobs"), named once in configuration
ENV_MODULES = "LAMBDAJOBS_MODULES"  # the job modules a function imports: its own and those it enqueues
ENV_TABLE = "LAMBDAJOBS_TABLE"  # the job table
ENV_STACK = "LAMBDAJOBS_STACK"  # the stack whose manifest producers read
ENV_QUEUE_URL_PREFIX = "LAMBDAJOBS_QUEUE_URL_"  # + JOB_NAME upper-cased
ENV_DLQ_URL_PREFIX = "LAMBDAJOBS_DLQ_URL_"  # + JOB_NAME upper-cased
ENV_RECORD_TTL_DAYS = "LAMBDAJOBS_RECORD_TTL_DAYS"
ENV_BUCKET = "LAMBDAJOBS_BUCKET"  # the stack's data bucket, for jobs that declare uses=("bucket",)
ENV_QUEUE_ARN_PREFIX = "LAMBDAJOBS_QUEUE_ARN_"  # + JOB_NAME upper-cased
# A priority level's queue (every level but the job's lowest, which uses the job's own queue):
# + LEVEL + "_" + JOB_NAME, upper-cased (a level has no underscore, so the split is unambiguous).
ENV_LEVEL_QUEUE_URL_PREFIX = "LAMBDAJOBS_PRIORITY_QUEUE_URL_"
ENV_LEVEL_QUEUE_ARN_PREFIX = "LAMBDAJOBS_PRIORITY_QUEUE_ARN_"
ENV_LEVEL_DLQ_URL_PREFIX = "LAMBDAJOBS_PRIORITY_DLQ_URL_"
# Workflows (chain, group, chord): the stack's workflow queue, where a job worker sends one notice
# when its member may have finished a stage; the continuer function reads it and sends the next stage.
ENV_WORKFLOW_QUEUE_URL = "LAMBDAJOBS_WORKFLOW_QUEUE_URL"
CONTINUER_HANDLER = "lambdajobs.runtime.continuer_entry.lambda_handler"
#: Every job function's entry point (`LAMBDAJOBS_JOB` says which job).
WORKER_HANDLER = "lambdajobs.runtime.entry.lambda_handler"
#: The continuer reads and updates a workflow item and sends a stage's jobs: seconds of work. Its
#: queue's visibility timeout is 6 times this (AWS: at least 6 x the function timeout). The CDK
#: construct, the local stack, the test harness and the chaos soak all read these.
CONTINUER_TIMEOUT_SECONDS = 120
CONTINUER_MEMORY_MB = 256
#: Notices per invocation, and concurrent invocations at most: workflow items take conditional
#: updates, so a few continuers keep contention (and retried notices) low; 2 is Lambda's minimum.
CONTINUER_BATCH_SIZE = 10
CONTINUER_MAX_CONCURRENCY = 5
#: A notice the continuer fails on five times goes to the workflow DLQ (the job queues' default).
WORKFLOW_MAX_RECEIVE_COUNT = 5
# For enqueue(run_at=...) beyond 15 minutes: a one-time EventBridge Scheduler schedule.
ENV_SCHEDULER_ROLE_ARN = "LAMBDAJOBS_SCHEDULER_ROLE_ARN"
ENV_SCHEDULER_GROUP = "LAMBDAJOBS_SCHEDULER_GROUP"
ENV_SCHEDULER_DLQ_ARN = "LAMBDAJOBS_SCHEDULER_DLQ_ARN"
#: Where the stack is, beyond the region (Lambda's own AWS_REGION): with the naming rule
#: (`queue_name`) these give the URL and ARN of every queue of the stack, so a function's environment
#: holds no variable per queue and does not grow with the jobs.
ENV_ACCOUNT = "LAMBDAJOBS_ACCOUNT"
ENV_PARTITION = "LAMBDAJOBS_PARTITION"  # aws, aws-cn, aws-us-gov, ...
ENV_URL_SUFFIX = "LAMBDAJOBS_URL_SUFFIX"  # the partition's DNS suffix: amazonaws.com, amazonaws.com.cn, ...

#: The job index: the job table's one global secondary index (in every stack, whatever its mode),
#: which lists a job's records by state, newest first (the board, `lambdajobs jobs`), counts them
#: over a time range (`count_finished` when the mode holds finished jobs; in mode "off" it reads the
#: worker's metrics, `job_metrics`), and holds the search entries of
#: searchable fields (`SEARCH_ID_PREFIX`). Partition key `ix` = "<job>#<state>" (a search entry's:
#: "<job>?<field>=<value>"), sort key `ix_at` = when the record entered that state (a search entry's:
#: when its job was enqueued); keys only. Sparse: a record carries `ix` only in the states its mode
#: indexes (see `lambdajobs.runtime.job_record.JobIndex`): in mode "off", `dead` records only.
JOB_INDEX = "by_job_state"
JOB_INDEX_KEY = "ix"
JOB_INDEX_SORT_KEY = "ix_at"
#: The job index's mode a worker writes in ("off", "finished" or "all"); CDK and the local stack set it.
ENV_JOB_INDEX = "LAMBDAJOBS_JOB_INDEX"
JOB_INDEX_MODES = ("off", "finished", "all")
#: Tracing for every job of the stack ("1"; CDK sets it with the stack's `tracing` option): the
#: producer's trace context goes in each message, and the worker makes a span per record, linked to it
#: (`lambdajobs.runtime.tracing`; a job alone: `@job(tracing=True)`).
ENV_TRACING = "LAMBDAJOBS_TRACING"
#: SQS message attributes (String) that carry the sender's W3C trace context (`traceparent`, and
#: `tracestate` when it has one), under the W3C header names: any producer's OpenTelemetry SDK sets them.
ATTR_TRACEPARENT = "traceparent"
ATTR_TRACESTATE = "tracestate"

DEFAULT_STACK_NAME = "lambdajobs"
DEFAULT_RECORD_TTL_DAYS = 7
METRICS_NAMESPACE = "LambdaJobs"
SERVICE_NAME = "lambdajobs"

#: SSM parameter per job holding {"queue_url", "queue_arn", "dlq_url"}: the manifest producers read.
MANIFEST_PREFIX = "/lambdajobs/{stack}/jobs/"
#: SSM parameter per stack: {"table", "bucket", "scheduler_role_arn", "one_time_group", "cron_group",
#: "scheduler_dlq_arn"}.
STACK_MANIFEST = "/lambdajobs/{stack}/stack"

#: SQS message attributes the worker writes on a message it moves to the dead-letter queue.
ATTR_ERROR_TYPE = "lambdajobs.error_type"
ATTR_REASON = "lambdajobs.reason"
ATTR_ATTEMPTS = "lambdajobs.attempts"
ATTR_FAILED_AT = "lambdajobs.failed_at"
DLQ_ATTRIBUTES = (ATTR_ERROR_TYPE, ATTR_REASON, ATTR_ATTEMPTS, ATTR_FAILED_AT)

#: SQS message attributes the worker writes on a copy of a message it hands back to the job's queue
#: (see `lambdajobs.runtime.worker`): the attempts earlier copies used (the copy's attempt is this plus
#: its receive count), and, when the job's outcome is known and only its bookkeeping is left, that
#: outcome (JSON). Producers never set them; the worker drops both when it dead-letters a message, so
#: a redriven message starts again at attempt 1.
ATTR_PRIOR_ATTEMPTS = "lambdajobs.prior_attempts"
ATTR_SETTLE = "lambdajobs.settle"
#: On a copy handed back to wait for its rate-limit slot: "<attempt>:<slot epoch ms>" (the slot it
#: took, so it does not take another when it comes back for that attempt).
ATTR_RATE_SLOT = "lambdajobs.rate_slot"
#: Job-table ids under this prefix belong to lambdajobs (rate limiters, workflows): no job id may
#: start with it.
RESERVED_ID_PREFIX = "lambdajobs#"
#: A workflow's item in the job table: `lambdajobs#wf#<workflow id>` (IAM conditions name the prefix).
WORKFLOW_ID_PREFIX = RESERVED_ID_PREFIX + "wf#"
#: A search entry of a searchable field (`@job(searchable=...)`): `lambdajobs#sx#<field>#<job id>`,
#: written by the worker at a job's first attempt (IAM conditions name the prefix).
SEARCH_ID_PREFIX = RESERVED_ID_PREFIX + "sx#"
#: When a queue was last purged: `lambdajobs#purged#<queue key>` (`records.mark_purged`).
PURGED_ID_PREFIX = RESERVED_ID_PREFIX + "purged#"
TENANT_FIELD = "@tenant"
"""The searchable "field" that is a job's fair-queue tenant (its message's `MessageGroupId`), not a
payload field: `@job(searchable=("customer_id", TENANT_FIELD))`, then
`records.search("send_email", TENANT_FIELD, "acme")`."""
#: On the copy that continues a parked durable job: its wake-up (epoch ms). A copy that carries it is
#: expected: one that arrives before the record's wake-up (clocks differ) waits for it, where any
#: other copy of a parked job is a duplicate (`lambdajobs.runtime.durable`).
ATTR_RESUME = "lambdajobs.resume"
HANDBACK_ATTRIBUTES = (ATTR_PRIOR_ATTEMPTS, ATTR_SETTLE, ATTR_RATE_SLOT, ATTR_RESUME)
#: On a message `lambdajobs dlq redrive` moved back from a DLQ that the worker did not put there (SQS
#: redrive moved it, without the worker's reason): it is a redrive, which may run a dead job again. A
#: message the worker dead-lettered says so by its `lambdajobs.failed_at`. Dropped on the next move to
#: the DLQ.
ATTR_REDRIVEN = "lambdajobs.redriven"


#: Source queues keep messages 4 days (the SQS default); dead-letter queues 14 days, the SQS maximum:
#: on a standard queue a message keeps its original enqueue time when moved to the DLQ, so the DLQ
#: must keep messages longer than its source.
QUEUE_RETENTION_SECONDS = 4 * 86_400
DLQ_RETENTION_SECONDS = 14 * 86_400


MAX_QUEUE_NAME = 80  # SQS: letters, digits, '-' and '_', at most 80 characters
MAX_SCHEDULE_GROUP_NAME = 64  # EventBridge Scheduler group names: at most 64 characters


def queue_name(stack: str, job: str, level: str | None = None) -> str:
    """A job's queue name, `<stack>_<job>`; a priority level's, `<stack>_<job>--<level>` (None: the
    job's own queue, which its lowest level uses); each one's DLQ adds `-dlq` (`dead_letter_queue_name`).

    The naming rule is what lets a function find any queue of its stack without a variable per queue,
    and a policy grant all of them by one pattern (`job_queue_pattern`): a stack name has no '_'
    (CloudFormation allows letters, digits and '-'), so `<stack>_*` matches no queue of any other
    stack, not even of a neighbour named `<stack>-2`; a job name has no '-' and a level neither
    '-' nor '_', so no two queues of one stack share a name.

    Raises:
        ConfigurationError: a stack name with '_'; a name (its DLQ's included) longer than SQS
            allows. Cutting it short could give two jobs (or two stacks) one queue, so the name is
            refused instead.
    """
    from lambdajobs.runtime.errors import ConfigurationError

    if "_" in stack or not stack:
        problem = "has '_'" if stack else "is empty"
        raise ConfigurationError(
            f"stack name '{stack}' {problem}; use letters, digits and '-' (as CloudFormation does)."
        )
    name = f"{stack}_{job}" if level is None else f"{stack}_{job}--{level}"
    if len(name) + len(DLQ_SUFFIX) > MAX_QUEUE_NAME:
        raise ConfigurationError(
            f"stack '{stack}' and job '{job}' make the queue name '{name}{DLQ_SUFFIX}' of "
            f"{len(name) + len(DLQ_SUFFIX)} characters (a DLQ's); SQS allows {MAX_QUEUE_NAME}: use a "
            f"shorter stack name (or job name)."
        )
    return name


#: A dead-letter queue's name is its source queue's and this.
DLQ_SUFFIX = "-dlq"


def dead_letter_queue_name(stack: str, job: str, level: str | None = None) -> str:
    """The DLQ of a job's queue (of a priority level's with `level`): `<queue name>-dlq`."""
    return queue_name(stack, job, level) + DLQ_SUFFIX


def job_queue_pattern(stack: str) -> str:
    """The names of every job queue and DLQ of `stack`, at every level, and of nothing else: `<stack>_*`
    (an IAM resource pattern: see `queue_name` for why no other stack's names match)."""
    return f"{stack}_*"


def dead_letter_queue_pattern(stack: str) -> str:
    """The names of every job DLQ of `stack`: `<stack>_*-dlq` (no job queue ends so: a level is never
    named `dlq`, and a job name has no '-')."""
    return f"{stack}_*{DLQ_SUFFIX}"


def queue_of(stack: str, queue_arn_or_name: str) -> tuple[str, str | None] | None:
    """(job, priority level or None) whose queue this is (the inverse of `queue_name`), or None."""
    name = queue_arn_or_name.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
    prefix = f"{stack}_"
    if not name.startswith(prefix) or name.endswith(DLQ_SUFFIX):
        return None
    job, _, level = name[len(prefix) :].partition("--")
    return (job, level or None) if "-" not in job else None


def job_for_queue(stack: str, queue_arn_or_name: str) -> str | None:
    """The job whose queue this is (any of its priority levels), or None."""
    found = queue_of(stack, queue_arn_or_name)
    return found[0] if found else None


def queue_key(job: str, level: str | None) -> str:
    """Where a queue's address is kept in `StackConfig.queues`: the job's name for its own queue,
    `<job>@<level>` for a priority level's."""
    return job if level is None else f"{job}@{level}"


def level_env(prefix: str, job: str, level: str) -> str:
    return f"{prefix}{level.upper()}_{job.upper()}"


def queue_url_env(job: str) -> str:
    return ENV_QUEUE_URL_PREFIX + job.upper()


def dlq_url_env(job: str) -> str:
    return ENV_DLQ_URL_PREFIX + job.upper()


def manifest_parameter(stack: str, job: str) -> str:
    return MANIFEST_PREFIX.format(stack=stack) + job


def stack_manifest_parameter(stack: str) -> str:
    return STACK_MANIFEST.format(stack=stack)


def bucket_prefix(job: str) -> str:
    """Where a job that uses the data bucket may read and write: its own prefix."""
    return f"{job}/"


def queue_arn_env(job: str) -> str:
    return ENV_QUEUE_ARN_PREFIX + job.upper()


def schedule_group_names(stack: str) -> tuple[str, str]:
    """(cron group, one-time group). Scheduler group names: 1 to 64 of [0-9a-zA-Z-_.].

    Raises:
        ConfigurationError: the stack name makes them longer than Scheduler allows.
    """
    names = f"{stack}-cron", f"{stack}-once"
    if len(names[0]) > MAX_SCHEDULE_GROUP_NAME:
        from lambdajobs.runtime.errors import ConfigurationError

        raise ConfigurationError(
            f"stack '{stack}' makes the schedule group name '{names[0]}' of {len(names[0])} characters; "
            f"Scheduler allows {MAX_SCHEDULE_GROUP_NAME}: use a stack name of at most "
            f"{MAX_SCHEDULE_GROUP_NAME - 5} characters."
        )
    return names


def log_group_name(stack: str, job: str) -> str:
    """A job worker's log group, `/lambdajobs/<stack>/<job>`: named by rule (and in the job's manifest
    entry), so the operator's Logs Insights grant names the stack's groups by one pattern
    (`log_group_pattern`) that no other stack's group matches (a stack name has no '/')."""
    return f"/lambdajobs/{stack}/{job}"


def log_group_pattern(stack: str) -> str:
    """Every job worker log group of `stack` (an IAM resource pattern's name part)."""
    return f"/lambdajobs/{stack}/*"


def workflow_queue_name(stack: str) -> str:
    """The stack's workflow queue, `<stack>--workflows` (outside `job_queue_pattern`: no '_')."""
    return f"{stack}--workflows"


def workflow_dead_letter_queue_name(stack: str) -> str:
    """`<stack>--workflows-dlq`: named, so the CLI finds it with the workflow queue."""
    return workflow_queue_name(stack) + DLQ_SUFFIX


def scheduler_dead_letter_queue_name(stack: str) -> str:
    """`<stack>--scheduler-dlq`: where EventBridge Scheduler puts runs it could not deliver."""
    return f"{stack}--scheduler{DLQ_SUFFIX}"
