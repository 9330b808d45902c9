"""Names and defaults that more than one layer needs, written once.

The CDK constructs (`lambdajobs.cdk`) set these environment variables on every worker function;
`StackConfig.from_environment` (lambdajobs.runtime.config) is the only reader. Change a name here and
every layer follows.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from lambdajobs.runtime import lazy

if TYPE_CHECKING:  # the naming rule's functions, in `naming` (loaded on first use)
    from lambdajobs.runtime.naming import PRIORITY_NAME_RE as PRIORITY_NAME_RE
    from lambdajobs.runtime.naming import dead_letter_queue_name as dead_letter_queue_name
    from lambdajobs.runtime.naming import dead_letter_queue_pattern as dead_letter_queue_pattern
    from lambdajobs.runtime.naming import dlq_url_env as dlq_url_env
    from lambdajobs.runtime.naming import job_queue_pattern as job_queue_pattern
    from lambdajobs.runtime.naming import level_env as level_env
    from lambdajobs.runtime.naming import log_group_name as log_group_name
    from lambdajobs.runtime.naming import log_group_pattern as log_group_pattern
    from lambdajobs.runtime.naming import manifest_parameter as manifest_parameter
    from lambdajobs.runtime.naming import queue_arn_env as queue_arn_env
    from lambdajobs.runtime.naming import queue_name as queue_name
    from lambdajobs.runtime.naming import queue_url_env as queue_url_env
    from lambdajobs.runtime.naming import schedule_group_names as schedule_group_names
    from lambdajobs.runtime.naming import scheduler_dead_letter_queue_name as scheduler_dead_letter_queue_name
    from lambdajobs.runtime.naming import stack_manifest_parameter as stack_manifest_parameter
    from lambdajobs.runtime.naming import workflow_dead_letter_queue_name as workflow_dead_letter_queue_name
    from lambdajobs.runtime.naming import workflow_queue_name as workflow_queue_name

#: Names a job: lower-case letters, digits and underscores, starting with a letter. It becomes part
#: of the queue name (SQS allows letters, digits, '-' and '_', at most 80 characters) and of an
#: environment variable name.
JOB_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")

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


#: A dead-letter queue's name is its source queue's and this.
DLQ_SUFFIX = "-dlq"


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


def bucket_prefix(job: str) -> str:
    """Where a job that uses the data bucket may read and write: its own prefix."""
    return f"{job}/"


#: The naming rule of a stack's queues, schedule groups, log groups and manifest parameters, the
#: environment variables of a job's queues, and the rule of a priority level's name: in
#: `lambdajobs.runtime.naming`, importable from here (CDK, the local stack, the manifest's reads, the
#: priorities' check): a worker's cold start does not compile them.
NAMING = frozenset(
    {
        "PRIORITY_NAME_RE",
        "dead_letter_queue_name",
        "dead_letter_queue_pattern",
        "dlq_url_env",
        "job_queue_pattern",
        "level_env",
        "log_group_name",
        "log_group_pattern",
        "manifest_parameter",
        "queue_arn_env",
        "queue_name",
        "queue_url_env",
        "schedule_group_names",
        "scheduler_dead_letter_queue_name",
        "stack_manifest_parameter",
        "workflow_dead_letter_queue_name",
        "workflow_queue_name",
    }
)
__getattr__ = lazy.exports(__name__, dict.fromkeys(NAMING, "lambdajobs.runtime.naming"))
