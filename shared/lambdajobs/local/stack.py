"""The local stack: the whole system on an embedded moto server, no Docker and no AWS account.

moto's server holds SQS, DynamoDB, S3, SSM and Scheduler state on a loopback port; queues, the table,
the bucket and the schedules are provisioned from the same job specs CDK reads; an event source
mapping per job polls its queue like Lambda and calls the same handler a deployed function runs
(`lambdajobs.runtime.handler.make_handler` around a `Worker`); a local scheduler fires cron jobs and
one-time schedules.

Nothing here writes `os.environ`: the stack's `config` (endpoint, credentials, resources) is passed
to the worker, the emulator and the scheduler, and the worker binds it while a job runs, so a job's
own `enqueue` or `ctx.client("s3")` reaches this stack; while the stack runs it is also the process's
fallback configuration (`set_process_default`), for threads a job starts itself. `environment()` is
what another shell exports to reach it.
"""

from __future__ import annotations

import logging
import urllib.request
from pathlib import Path
from typing import Any

from lambdajobs.local import atomic
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.local.provision import JobQueues, Provisioned, provision
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.ops import QueueHealth, queue_health
from lambdajobs.runtime.config import StackConfig, set_process_default
from lambdajobs.runtime.settings import (
    CONTINUER_BATCH_SIZE,
    CONTINUER_MAX_CONCURRENCY,
    CONTINUER_MEMORY_MB,
    CONTINUER_TIMEOUT_SECONDS,
    ENV_JOBS,
    ENV_STACK,
    SERVICE_NAME,
    queue_key,
)
from lambdajobs.runtime.spec import JobSpec, load_jobs, registered_jobs

REGION = "us-east-1"
#: The key of the continuer's event source in `LocalStack.mappings`.
WORKFLOWS = "(workflows)"
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}


def route_worker_logs(path: Path) -> None:
    """Send the worker's JSON logs (Powertools Logger) to a file instead of stdout."""
    import lambdajobs.runtime.worker  # noqa: F401  (creates the Powertools logger whose handler we redirect)

    path.parent.mkdir(parents=True, exist_ok=True)
    stream = path.open("a", encoding="utf-8")
    for handler in logging.getLogger(SERVICE_NAME).handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)


class LocalStack:
    """The jobs of one jobs package on an embedded AWS. Use as a context manager:

    Example:
        >>> with LocalStack(jobs="myjobs") as local:
        ...     local.start_workers()
        ...     job_id = enqueue("send_email", {...}, config=local.config)

    `jobs` names the jobs package (loaded here); `specs` gives the jobs directly instead (tests).
    """

    def __init__(
        self,
        jobs: str | None = None,
        *,
        specs: list[JobSpec] | None = None,
        stack: str = "local",
        port: int = 0,
        log_file: Path | None = None,
        wait_seconds: int = 1,
        job_index: str | None = None,
    ) -> None:
        self.jobs = jobs
        #: The job index's mode ("off", "finished", "all"; default: as the stack derives it).
        self.job_index = job_index
        self._specs = specs
        self.stack, self.port, self.log_file, self.wait_seconds = stack, port, log_file, wait_seconds
        self.server: Any = None
        self.endpoint = ""
        self.provisioned: Provisioned | None = None
        self.config = StackConfig(stack=stack, jobs=jobs)
        self.mappings: dict[str, EventSourceMapping] = {}
        self.scheduler: LocalScheduler | None = None
        self._previous_default: StackConfig | None = None
        self._atomic = False

    @property
    def specs(self) -> list[JobSpec]:
        if self._specs is None:
            self._specs = load_jobs(self.jobs) if self.jobs else registered_jobs()
        return self._specs

    def environment(self) -> dict[str, str]:
        """What a producer, the CLI or boto3 in another shell exports to reach this stack."""
        env = {
            "AWS_ENDPOINT_URL": self.endpoint,
            **LOCAL_CREDENTIALS,
            "AWS_DEFAULT_REGION": REGION,
            ENV_STACK: self.stack,
        }
        if self.jobs:
            env[ENV_JOBS] = self.jobs
        return env

    def start(self) -> LocalStack:
        from moto.server import ThreadedMotoServer

        specs = self.specs  # load the jobs first: a bad declaration fails before the server starts
        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request from the server
        # The server answers each request on its own thread and moto's conditional writes are
        # check-then-write without a lock: make each DynamoDB and SQS request atomic (issue 11).
        atomic.install()
        self._atomic = True
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto keeps its state per process, not per server: start from an empty account every time.
        urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10
        )
        base = StackConfig(
            stack=self.stack,
            region=REGION,
            endpoint_url=self.endpoint,
            access_key_id=LOCAL_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_access_key=LOCAL_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            jobs=self.jobs,
        )
        self.provisioned = provision(specs, stack=self.stack, config=base, job_index=self.job_index)
        self.config = self.provisioned.config(base)
        # Threads a job starts itself see no bound configuration: they fall back to this stack, never
        # to real AWS.
        self._previous_default = set_process_default(self.config)
        if self.log_file:
            route_worker_logs(self.log_file)
        return self

    def start_workers(self, *, scheduler: bool = True) -> None:
        from lambdajobs.runtime.handler import make_handler
        from lambdajobs.runtime.worker import Worker

        assert self.provisioned is not None, "start() first"
        # One worker serves every job (it finds the job from the queue), as the deployed handler
        # would with LAMBDAJOBS_JOB set; no EMF lines in a terminal.
        handler = make_handler(Worker(config=self.config, emit_metrics=False))
        for spec in self.specs:
            for queues in self.provisioned.levels(spec.name):  # one event source per priority level
                self.mappings[queues.key] = self._mapping(spec, queues, handler)
                self.mappings[queues.key].start()
        self.mappings[WORKFLOWS] = self._continuer_mapping()
        self.mappings[WORKFLOWS].start()
        self.scheduler = LocalScheduler(
            self.specs,
            queue_urls={q.job: q.queue_url for q in self.provisioned.queues.values() if q.level is None},
            one_time_group=self.provisioned.one_time_group,
            config=self.config,
        )
        if scheduler:
            self.scheduler.start()

    def _mapping(self, spec: JobSpec, queues: JobQueues, handler: Any) -> EventSourceMapping:
        return EventSourceMapping(
            queue_url=queues.queue_url,
            queue_arn=queues.queue_arn,
            handler=handler,
            function_name=f"{self.stack}-{spec.name}",
            timeout_seconds=spec.timeout_seconds,
            batch_size=spec.batch_size,
            max_batching_window_seconds=spec.max_batching_window_seconds,
            max_concurrency=spec.concurrency_of(queues.level),
            memory_mb=spec.memory_mb,
            wait_seconds=self.wait_seconds,
            region=REGION,
            config=self.config,
        )

    def _continuer_mapping(self) -> EventSourceMapping:
        """The workflow queue's event source: the continuer, as the CDK construct configures it."""
        from lambdajobs.runtime.continuer import Continuer, logger

        assert self.provisioned is not None
        continuer = Continuer(config=self.config)

        @logger.inject_lambda_context(clear_state=True)
        def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
            return continuer.handle(event, context)

        return EventSourceMapping(
            queue_url=self.provisioned.workflow_queue_url,
            queue_arn=self.provisioned.workflow_queue_arn,
            handler=handler,
            function_name=f"{self.stack}-workflows",
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            batch_size=CONTINUER_BATCH_SIZE,
            max_batching_window_seconds=0,
            max_concurrency=CONTINUER_MAX_CONCURRENCY,
            memory_mb=CONTINUER_MEMORY_MB,
            wait_seconds=self.wait_seconds,
            region=REGION,
            config=self.config,
        )

    def stop_workers(self) -> None:
        """Stop polling and scheduling; in-flight batches finish first."""
        if self.scheduler:
            self.scheduler.stop()
        for mapping in self.mappings.values():
            mapping.signal_stop()  # signal every poller first, then wait for each
        for mapping in self.mappings.values():
            mapping.stop()

    def stop(self) -> None:
        self.stop_workers()
        if self.server:
            self.server.stop()
            self.server = None
            set_process_default(self._previous_default)
        if self._atomic:
            atomic.uninstall()
            self._atomic = False

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def health(self, job: str, priority: str | None = None) -> QueueHealth:
        """A job's queue health (a priority level's with `priority`)."""
        assert self.provisioned is not None
        spec = next(s for s in self.specs if s.name == job)
        queues = self.provisioned.queues[queue_key(job, spec.level_for(priority))]
        return queue_health(job, queues.queue_url, queues.dlq_url, config=self.config)
