"""Stack configuration: where a stack's resources are, built once and passed as an argument.

A `StackConfig` says which stack (its name), where AWS is (region, endpoint, profile), which jobs
package declares the jobs, and whatever resource names are already known (table, queue URLs, bucket,
scheduler settings). Anything not known is read once from the stack's manifest in SSM Parameter
Store, which the stack publishes:

    /lambdajobs/<stack>/jobs/<job>   {"queue_url", "queue_arn", "dlq_url",
                                      "levels": {"<priority>": {"queue_url", "queue_arn", "dlq_url"}}}
    /lambdajobs/<stack>/stack        {"table", "bucket", "scheduler_role_arn", "cron_group", ...}

What the environment does not say comes from `lambdajobs.runtime.manifest` (the naming rule, `Where`,
and the manifest's reads), loaded the first time it is needed: a worker whose environment names its
table and queues (what CDK sets) never loads it.

Who builds it: the Lambda entry point from the environment CDK sets (`StackConfig.from_environment`,
once per cold start); the CLI from its options; the local stack and `lambdajobs.testing` from what
they provisioned. The producer, the worker and the status readers take it as an argument (`config=`);
when none is given they use `current()`: the configuration of the worker running the job, else one
built from the environment.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import aws, lazy
from lambdajobs.runtime.errors import ConfigurationError, QueueNotFoundError
from lambdajobs.runtime.settings import (
    DEFAULT_RECORD_TTL_DAYS,
    DEFAULT_STACK_NAME,
    ENV_ACCOUNT,
    ENV_BUCKET,
    ENV_DLQ_URL_PREFIX,
    ENV_JOB_INDEX,
    ENV_JOBS,
    ENV_LEVEL_DLQ_URL_PREFIX,
    ENV_LEVEL_QUEUE_ARN_PREFIX,
    ENV_LEVEL_QUEUE_URL_PREFIX,
    ENV_PARTITION,
    ENV_QUEUE_ARN_PREFIX,
    ENV_QUEUE_URL_PREFIX,
    ENV_RECORD_TTL_DAYS,
    ENV_SCHEDULER_DLQ_ARN,
    ENV_SCHEDULER_GROUP,
    ENV_SCHEDULER_ROLE_ARN,
    ENV_STACK,
    ENV_TABLE,
    ENV_URL_SUFFIX,
    ENV_WORKFLOW_QUEUE_URL,
    JOB_INDEX_MODES,
    queue_key,
)

if TYPE_CHECKING:  # the naming rule, in `manifest` (loaded when a queue is not in the environment)
    from lambdajobs.runtime.manifest import Where as Where


@dataclass(frozen=True)
class QueueAddress:
    """A job's queue and dead-letter queue. Any part may be unknown (empty) until the manifest says."""

    url: str = ""
    arn: str = ""
    dlq_url: str = ""


@dataclass(frozen=True, eq=False)
class StackConfig:
    """Where one stack's resources are. Frozen; `with_resources` returns a copy with more known.

    Example:
        >>> config = StackConfig(stack="prod", region="eu-west-1", jobs="myjobs")
        >>> config.stack
        'prod'
    """

    stack: str = DEFAULT_STACK_NAME
    #: Region, endpoint (the local stack's), profile and credentials (a role's temporary ones with a
    #: session token); None: boto3's defaults.
    region: str | None = None
    endpoint_url: str | None = None
    profile: str | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    #: The package that declares the jobs (e.g. "myjobs"): searched when a job name is unknown.
    jobs: str | None = None
    #: Resource names already known (Lambda's environment, the local stack); the rest come from SSM.
    table: str | None = None
    bucket: str | None = None
    queues: Mapping[str, QueueAddress] = field(default_factory=dict)
    scheduler_role_arn: str | None = None
    one_time_group: str | None = None
    scheduler_dlq_arn: str | None = None
    #: The stack's workflow queue, where job workers send their notices (workflows).
    workflow_queue_url: str | None = None
    record_ttl_days: int = DEFAULT_RECORD_TTL_DAYS
    #: The job index's mode ("off", "finished", "all"; see `lifecycle.JobIndex`): what workers write.
    #: None: not known here; workers then write no index attributes, and readers ask the manifest.
    job_index: str | None = None
    #: Trace every job of the stack (`LAMBDAJOBS_TRACING=1`; `lambdajobs.runtime.tracing`); a job alone
    #: opts in with `@job(tracing=True)`.
    tracing: bool = False
    #: The stack's account, partition and DNS suffix (`LAMBDAJOBS_ACCOUNT`, ...; a function's own):
    #: known, every queue's URL and ARN follow from the naming rule (`where`); else the manifest.
    account: str | None = None
    partition: str = "aws"
    url_suffix: str = "amazonaws.com"

    # -- building ----------------------------------------------------------------------------------

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> StackConfig:
        """The configuration CDK gives a worker function (and any process that sets the same
        variables): `LAMBDAJOBS_STACK`, `LAMBDAJOBS_TABLE`, `LAMBDAJOBS_QUEUE_URL_<JOB>`, ...

        Raises:
            ConfigurationError: `LAMBDAJOBS_RECORD_TTL_DAYS` is not a whole number of days.
        """
        env = os.environ if environ is None else environ
        queues = _queues_from_environment(env)
        index = _job_index_from_environment(env)
        ttl_days = _record_ttl_days_from_environment(env)
        return cls(
            stack=env.get(ENV_STACK) or DEFAULT_STACK_NAME,
            jobs=env.get(ENV_JOBS) or None,
            table=env.get(ENV_TABLE) or None,
            bucket=env.get(ENV_BUCKET) or None,
            queues=queues,
            scheduler_role_arn=env.get(ENV_SCHEDULER_ROLE_ARN) or None,
            one_time_group=env.get(ENV_SCHEDULER_GROUP) or None,
            scheduler_dlq_arn=env.get(ENV_SCHEDULER_DLQ_ARN) or None,
            workflow_queue_url=env.get(ENV_WORKFLOW_QUEUE_URL) or None,
            record_ttl_days=ttl_days,
            job_index=index,
            tracing=_tracing_from_environment(env),
            account=env.get(ENV_ACCOUNT) or None,
            partition=env.get(ENV_PARTITION) or "aws",
            url_suffix=env.get(ENV_URL_SUFFIX) or "amazonaws.com",
        )

    def with_resources(self, **changes: Any) -> StackConfig:
        """A copy with some fields changed (for example `queues=` after provisioning)."""
        return replace(self, **changes)

    # -- AWS -----------------------------------------------------------------------------------------

    @property
    def connection(self) -> aws.Connection:
        return aws.Connection(
            self.region,
            self.endpoint_url,
            self.profile,
            self.access_key_id,
            self.secret_access_key,
            self.session_token,
        )

    def client(self, service: str) -> Any:
        """The shared boto3 client for `service` on this stack's connection (created on first use)."""
        return aws.client(service, self.connection)

    @property
    def record_ttl_seconds(self) -> int:
        return self.record_ttl_days * 86_400

    # -- resources (known, else from the manifest) ----------------------------------------------------

    def queue(self, job: str, level: str | None = None) -> QueueAddress:
        """A job's queue URL, ARN and DLQ URL (a priority level's with `level`; None: the job's own
        queue): what is known, completed from the manifest.

        Raises:
            QueueNotFoundError: the stack has no manifest entry for the job (or the level).
        """
        from lambdajobs.runtime import manifest

        return manifest.queue(self, job, level)

    def queue_url(self, job: str, level: str | None = None) -> str:
        known = self.queues.get(queue_key(job, level))
        return known.url if known and known.url else self.queue(job, level).url

    def dlq_url(self, job: str, level: str | None = None) -> str:
        known = self.queues.get(queue_key(job, level))
        return known.dlq_url if known and known.dlq_url else self.queue(job, level).dlq_url

    def queue_arn(self, job: str, level: str | None = None) -> str:
        known = self.queues.get(queue_key(job, level))
        return known.arn if known and known.arn else self.queue(job, level).arn

    def where(self) -> Where | None:
        """Where the stack's queues are, when the account is known (a function's environment says;
        the region is the configuration's, else Lambda's `AWS_REGION`; the endpoint the
        configuration's, else boto3's `AWS_ENDPOINT_URL_SQS` / `AWS_ENDPOINT_URL`); None: ask the
        manifest."""
        from lambdajobs.runtime import manifest

        return manifest.where(self)

    def stack_entry(self) -> dict[str, str]:
        """The stack's manifest: table, bucket, scheduler settings.

        Raises:
            StackNotFoundError: the stack is not deployed here (wrong name, region or account).
        """
        from lambdajobs.runtime import manifest

        return manifest.stack_entry(self)

    def table_name(self) -> str:
        return self.table or self.stack_entry()["table"]

    def bucket_name(self) -> str:
        return self.bucket or self.stack_entry()["bucket"]

    def workflow_queue(self) -> str:
        """The URL of the stack's workflow queue (known, else from the stack's manifest).

        Raises:
            StackNotFoundError: the stack is not deployed here.
            ConfigurationError: the stack was deployed by a version without workflows.
        """
        from lambdajobs.runtime import manifest

        return manifest.workflow_queue(self)

    def job_index_mode(self) -> str:
        """The job index's mode in this stack ("off", "finished" or "all"): known, else the stack's
        manifest says (a stack deployed before the job index: "off").

        Raises:
            StackNotFoundError: the stack is not deployed here.
        """
        if self.job_index:
            return self.job_index
        return str(self.stack_entry().get("job_index") or "off")

    def scheduler_settings(self) -> tuple[str, str, str]:
        """(role ARN, one-time schedule group, scheduler DLQ ARN) for `enqueue(run_at=...)`."""
        from lambdajobs.runtime import manifest

        return manifest.scheduler_settings(self)

    def _parameter(
        self, name: str, missing: str, error: type[QueueNotFoundError] = QueueNotFoundError
    ) -> dict[str, Any]:
        from lambdajobs.runtime import manifest

        return manifest.parameter(self, name, missing, error)


#: The variables of a job's queue (`<prefix><JOB>`) and of a priority level's (`<prefix><LEVEL>_<JOB>`):
#: which part of its `QueueAddress` each one gives.
_QUEUE_VARIABLES = (
    (ENV_QUEUE_URL_PREFIX, "url"),
    (ENV_QUEUE_ARN_PREFIX, "arn"),
    (ENV_DLQ_URL_PREFIX, "dlq_url"),
)
_LEVEL_QUEUE_VARIABLES = (
    (ENV_LEVEL_QUEUE_URL_PREFIX, "url"),
    (ENV_LEVEL_QUEUE_ARN_PREFIX, "arn"),
    (ENV_LEVEL_DLQ_URL_PREFIX, "dlq_url"),
)


def _queues_from_environment(env: Mapping[str, str]) -> dict[str, QueueAddress]:
    """Every queue the environment names, by `queue_key` (a job's own, and its priority levels')."""
    queues: dict[str, QueueAddress] = {}
    for prefix, part in _QUEUE_VARIABLES:
        for key, value in env.items():
            if key.startswith(prefix) and value:
                job = key[len(prefix) :].lower()
                queues[job] = replace(queues.get(job, QueueAddress()), **{part: value})
    for prefix, part in _LEVEL_QUEUE_VARIABLES:
        for key, value in env.items():
            if key.startswith(prefix) and value:
                level, _, job = key[len(prefix) :].lower().partition("_")
                where = queue_key(job, level)
                queues[where] = replace(queues.get(where, QueueAddress()), **{part: value})
    return queues


def _job_index_from_environment(env: Mapping[str, str]) -> str | None:
    index = env.get(ENV_JOB_INDEX) or None
    if index not in (None, *JOB_INDEX_MODES):
        raise ConfigurationError(f"{ENV_JOB_INDEX}={index!r}; use one of {', '.join(JOB_INDEX_MODES)}.")
    return index


def _tracing_from_environment(env: Mapping[str, str]) -> bool:
    from lambdajobs.runtime.settings import ENV_TRACING  # (loaded already: a name, not an import)

    value = (env.get(ENV_TRACING) or "").strip().lower()
    if value not in ("", "0", "1", "true", "false"):
        raise ConfigurationError(f"{ENV_TRACING}={value!r}; use 1 (on) or 0 (off).")
    return value in ("1", "true")


def _record_ttl_days_from_environment(env: Mapping[str, str]) -> int:
    ttl = env.get(ENV_RECORD_TTL_DAYS) or str(DEFAULT_RECORD_TTL_DAYS)
    if not ttl.isdigit() or int(ttl) < 1:
        raise ConfigurationError(f"{ENV_RECORD_TTL_DAYS}={ttl!r}; use a whole number of days, 1 or more.")
    return int(ttl)


_manifest_cache: dict[tuple[aws.Connection, str], dict[str, Any]] = {}
_manifest_lock = threading.Lock()


def clear_manifest_cache() -> None:
    """Forget manifest entries read so far (after a redeploy, or between tests)."""
    with _manifest_lock:
        _manifest_cache.clear()


# -- the current configuration -------------------------------------------------------------------------

_current: ContextVar[StackConfig | None] = ContextVar("lambdajobs_config", default=None)
_from_env: dict[tuple[tuple[str, str], ...], StackConfig] = {}
#: The process-wide fallback: set by the local stack and the test harness, so that code in threads a
#: job starts itself (a ContextVar is not inherited by new threads) still reaches their stack.
_process_default: StackConfig | None = None


def set_process_default(config: StackConfig | None) -> StackConfig | None:
    """Make `config` what `current()` falls back to in every thread with nothing bound (None: the
    environment again); returns the previous fallback, to restore it."""
    global _process_default
    previous, _process_default = _process_default, config
    return previous


def _ours(key: str) -> bool:
    return key.startswith("LAMBDAJOBS_")


def current() -> StackConfig:
    """The configuration in effect: the one bound with `using(...)` in this thread (the worker binds
    its own while a job runs, so a job's `enqueue` reaches its own stack), else the process-wide one
    a local stack or test stack set (`set_process_default`), else the one the environment describes
    (built once per distinct environment: what a Lambda function has)."""
    bound = _current.get()
    if bound is not None:
        return bound
    if _process_default is not None:
        return _process_default
    key = tuple(sorted((k, v) for k, v in os.environ.items() if _ours(k)))
    found = _from_env.get(key)
    if found is None:
        found = _from_env[key] = StackConfig.from_environment()
    return found


@contextmanager
def using(config: StackConfig) -> Iterator[StackConfig]:
    """Make `config` the current configuration inside the block (this thread and context only)."""
    token = _current.set(config)
    try:
        yield config
    finally:
        _current.reset(token)


def resolve(config: StackConfig | None) -> StackConfig:
    """`config`, or the current configuration when None."""
    return config if config is not None else current()


# `Where` lives in `manifest`, loaded on first use
__getattr__ = lazy.exports(__name__, {"Where": "lambdajobs.runtime.manifest"})
