"""The local stack: the whole system on an embedded moto server, no Docker and no AWS account.

moto's server holds SQS, DynamoDB, S3, SSM and Scheduler state on a loopback port; queues, the table,
the bucket and the schedules are provisioned from the same job specs CDK reads; an event source
mapping per job polls its queue like Lambda and calls the deployed handler
(`handlers.entry.lambda_handler`); a local scheduler fires cron jobs and one-time schedules. Every
boto3 client, Powertools' included, reaches the server through `AWS_ENDPOINT_URL`.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from pathlib import Path
from typing import Any

from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.ops import QueueHealth, queue_health
from lambdajobs.local.provision import Provisioned, provision
from lambdajobs.runtime import aws, manifest
from lambdajobs.runtime.settings import ENV_JOB, SERVICE_NAME
from lambdajobs.runtime.spec import JobSpec, registered_jobs

REGION = "us-east-1"
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
    """Use as a context manager: `with LocalStack() as local: local.start_workers() ...`."""

    def __init__(
        self,
        specs: list[JobSpec] | None = None,
        *,
        stack: str = "local",
        port: int = 0,
        log_file: Path | None = None,
        wait_seconds: int = 1,
    ) -> None:
        self._specs = specs
        self.stack, self.port, self.log_file, self.wait_seconds = stack, port, log_file, wait_seconds
        self.server: Any = None
        self.endpoint = ""
        self.provisioned: Provisioned | None = None
        self.mappings: dict[str, EventSourceMapping] = {}
        self.scheduler: LocalScheduler | None = None
        self._saved_env: dict[str, str | None] = {}

    @property
    def specs(self) -> list[JobSpec]:
        return self._specs if self._specs is not None else registered_jobs()

    def environment(self) -> dict[str, str]:
        """What a producer, the CLI or boto3 in another shell needs to reach this stack."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            **LOCAL_CREDENTIALS,
            "AWS_DEFAULT_REGION": REGION,
            "LAMBDAJOBS_STACK": self.stack,
        }

    def _set_env(self, values: dict[str, str]) -> None:
        for key, value in values.items():
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value

    def start(self) -> LocalStack:
        from moto.server import ThreadedMotoServer

        import handlers  # noqa: F401  (declares every job)

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request from the server
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        host, port = self.server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        # moto keeps its state per process, not per server: start from an empty account every time.
        urllib.request.urlopen(
            urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST"), timeout=10
        )
        # One process serves every job: no LAMBDAJOBS_JOB, the worker finds the job from the queue.
        self._saved_env.setdefault(ENV_JOB, os.environ.pop(ENV_JOB, None))
        self._set_env(
            {
                **self.environment(),
                "AWS_REGION": REGION,
                "POWERTOOLS_METRICS_DISABLED": "true",  # EMF lines are for CloudWatch, not a terminal
            }
        )
        aws.reset_clients()
        manifest.clear_cache()
        self.provisioned = provision(self.specs, stack=self.stack)
        self._set_env(self.provisioned.environment())
        if self.log_file:
            route_worker_logs(self.log_file)
        return self

    def start_workers(self, *, scheduler: bool = True) -> None:
        from handlers.entry import lambda_handler

        assert self.provisioned is not None, "start() first"
        for spec in self.specs:
            queues = self.provisioned.queues[spec.name]
            mapping = EventSourceMapping(
                queue_url=queues.queue_url,
                queue_arn=queues.queue_arn,
                handler=lambda_handler,
                function_name=f"{self.stack}-{spec.name}",
                timeout_seconds=spec.timeout_seconds,
                batch_size=spec.batch_size,
                max_batching_window_seconds=spec.max_batching_window_seconds,
                max_concurrency=spec.max_concurrency,
                memory_mb=spec.memory_mb,
                wait_seconds=self.wait_seconds,
                region=REGION,
            )
            mapping.start()
            self.mappings[spec.name] = mapping
        self.scheduler = LocalScheduler(
            self.specs,
            queue_urls={job: q.queue_url for job, q in self.provisioned.queues.items()},
            one_time_group=self.provisioned.one_time_group,
        )
        if scheduler:
            self.scheduler.start()

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
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        aws.reset_clients()
        manifest.clear_cache()

    def __enter__(self) -> LocalStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def health(self, job: str) -> QueueHealth:
        assert self.provisioned is not None
        return queue_health(job, self.provisioned.queues[job].queue_url, self.provisioned.queues[job].dlq_url)
