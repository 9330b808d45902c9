"""A test harness for your jobs: a moto-backed stack in-process, and a runner that delivers a job's
messages through the real worker the way Lambda's SQS event source does.

    import pytest
    from lambdajobs.testing import TestStack

    @pytest.fixture
    def stack():
        with TestStack("myjobs") as stack:      # your jobs package
            yield stack

    def test_invoice_is_sent(stack):
        job_id = stack.enqueue("send_invoice", {"order_id": "42"})
        stack.runner("send_invoice").drain()
        assert stack.status(job_id).state == "succeeded"

What is real: the envelope, payload validation, SQS (moto: visibility, receive counts, redrive to
the DLQ), the job records in DynamoDB, Powertools' batch processing and idempotency, the partial batch
response rules (`lambdajobs.local.emulator`). Each DynamoDB and SQS request is atomic, as on AWS, even
from many threads at once (`lambdajobs.local.atomic`: moto alone is not). Nothing reaches AWS: moto
intercepts every client, and the harness sets fake credentials while it runs. Needs the
`lambdajobs[local]` extra (moto).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from lambdajobs.local import atomic
from lambdajobs.local.emulator import BatchOutcome, poll_once
from lambdajobs.local.provision import JobQueues, Provisioned, provision, provision_queues
from lambdajobs.runtime import aws
from lambdajobs.runtime.config import (
    StackConfig,
    clear_manifest_cache,
    set_process_default,
    using,
)
from lambdajobs.runtime.records import JobStatus, get_status
from lambdajobs.runtime.settings import CONTINUER_BATCH_SIZE, CONTINUER_TIMEOUT_SECONDS, queue_key
from lambdajobs.runtime.spec import JobSpec, get_spec, load_jobs, registered_jobs
from lambdajobs.runtime.worker import Worker

#: Credentials moto accepts; set while a TestStack runs so no real ones are ever used.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

__test__ = False  # not a test module, whatever pytest's patterns say


class TestStack:
    """A stack of your jobs on moto, in this process. Use as a context manager (it starts moto, sets
    fake credentials, provisions queues/table/bucket/schedules from the job specs, and makes its
    configuration current); everything is undone on exit.

    `jobs` is your jobs package (loaded here); or give `specs` directly.

    Attributes: `config` (a `StackConfig` with every resource known), `provisioned`.
    """

    __test__ = False

    def __init__(
        self,
        jobs: str | None = None,
        *,
        specs: Iterable[JobSpec] | None = None,
        stack: str = "test",
        job_index: str | None = None,
    ) -> None:
        self.jobs = jobs
        #: The job index's mode ("off", "finished", "all"; default: as the stack derives it).
        self.job_index = job_index
        self._specs = list(specs) if specs is not None else None
        self.stack = stack
        self.provisioned: Provisioned | None = None
        self.config = StackConfig(stack=stack, jobs=jobs)
        self._mock: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._using: Any = None
        self._previous_default: StackConfig | None = None
        self._atomic = False

    @property
    def specs(self) -> list[JobSpec]:
        if self._specs is None:
            self._specs = load_jobs(self.jobs) if self.jobs else registered_jobs()
        return self._specs

    def start(self) -> TestStack:
        try:
            from moto import mock_aws
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "lambdajobs.testing needs moto: pip install 'lambdajobs[local]'", name="moto"
            ) from exc

        specs = self.specs
        for key, value in FAKE_CREDENTIALS.items():  # never real credentials, even by mistake
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ[key] = value
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
            self._saved_env.setdefault(key, os.environ.get(key))
            os.environ.pop(key, None)
        # moto's conditional writes are check-then-write without a lock, and tests deliver from many
        # threads: each DynamoDB and SQS request runs atomically, as on the local stack (issue 11).
        atomic.install()
        self._atomic = True
        self._mock = mock_aws()
        self._mock.start()
        aws.reset_clients()  # clients made before moto started would not be intercepted
        clear_manifest_cache()
        base = StackConfig(stack=self.stack, jobs=self.jobs)
        self.provisioned = provision(specs, stack=self.stack, config=base, job_index=self.job_index)
        self.config = self.provisioned.config(base)
        self._using = using(self.config)
        self._using.__enter__()
        self._previous_default = set_process_default(self.config)  # threads a job starts, too
        return self

    def stop(self) -> None:
        if self._using is not None:
            self._using.__exit__(None, None, None)
            self._using = None
            set_process_default(self._previous_default)
        if self._mock is not None:
            self._mock.stop()
            self._mock = None
        if self._atomic:
            atomic.uninstall()
            self._atomic = False
        aws.reset_clients()
        clear_manifest_cache()
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()

    def __enter__(self) -> TestStack:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- using it ------------------------------------------------------------------------------------

    def add_job(self, spec: JobSpec) -> JobQueues:
        """Provision the queues of a job declared after the stack started (a test-only job); returns
        its own queue (its priority levels' are in `provisioned.queues` too)."""
        assert self.provisioned is not None, "start() first"
        made = provision_queues(spec, self.stack, self.config)
        self.provisioned.queues.update(made)
        addresses = dict(self.config.queues)
        addresses.update({key: q.address for key, q in made.items()})
        self._rebind(self.config.with_resources(queues=addresses))
        return made[spec.name]

    def _rebind(self, config: StackConfig) -> None:
        if self._using is not None:
            self._using.__exit__(None, None, None)
        self.config = config
        self._using = using(config)
        self._using.__enter__()
        set_process_default(config)

    def enqueue(self, job: str, payload: Any, **options: Any) -> str:
        """`lambdajobs.enqueue` on this stack."""
        from lambdajobs.runtime.producer import enqueue

        return enqueue(job, payload, config=self.config, **options)

    def status(self, job_id: str) -> JobStatus:
        """`lambdajobs.get_status` on this stack."""
        return get_status(job_id, config=self.config)

    def runner(self, job: str, *, worker: Worker | None = None, priority: str | None = None) -> JobRunner:
        """A runner for one job's queue (a priority level's with `priority`; a fresh `Worker` unless
        you give one)."""
        return JobRunner(self, job, worker=worker, priority=priority)

    def client(self, service: str) -> Any:
        return self.config.client(service)

    def continuer(self) -> ContinuerRunner:
        """A runner for the workflow queue: delivers workflow notices to the real continuer."""
        return ContinuerRunner(self)

    def workflow(self, workflow_id: str) -> Any:
        """`lambdajobs.get_workflow` on this stack."""
        from lambdajobs.runtime.workflow import get_workflow

        return get_workflow(workflow_id, config=self.config)


class ContinuerRunner:
    """Delivers the workflow queue to the continuer the way its event source mapping would."""

    def __init__(self, stack: TestStack, *, source_config: StackConfig | None = None) -> None:
        from lambdajobs.runtime.continuer import Continuer

        assert stack.provisioned is not None, "start the TestStack first"
        self.stack = stack
        self.continuer = Continuer(config=stack.config)
        self.source_config = source_config or stack.config

    def poll(self) -> BatchOutcome | None:
        assert self.stack.provisioned is not None
        return poll_once(
            queue_url=self.stack.provisioned.workflow_queue_url,
            queue_arn=self.stack.provisioned.workflow_queue_arn,
            handler=self.continuer.handle,
            function_name=f"{self.stack.stack}-workflows",
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            batch_size=CONTINUER_BATCH_SIZE,
            config=self.source_config,
        )

    def drain(self, max_batches: int = 100) -> list[BatchOutcome]:
        """Poll until nothing is visible."""
        return _drain(self.poll, max_batches)


def _drain(poll: Any, max_batches: int) -> list[BatchOutcome]:
    outcomes = []
    for _ in range(max_batches):
        outcome = poll()
        if outcome is None:
            break
        outcomes.append(outcome)
    return outcomes


class JobRunner:
    """Delivers a job's queue to the real worker the way Lambda's event source mapping would: a batch
    of up to `batch_size` records, the partial batch response applied (failures stay, successes are
    deleted), visibility timeouts and receive counts as SQS keeps them."""

    def __init__(
        self,
        stack: TestStack,
        job: str,
        *,
        worker: Worker | None = None,
        source_config: StackConfig | None = None,
        priority: str | None = None,
    ) -> None:
        assert stack.provisioned is not None, "start the TestStack first"
        self.stack = stack
        self.spec = get_spec(job, jobs=stack.config.jobs)
        self.queues = stack.provisioned.queues[queue_key(self.spec.name, self.spec.level_for(priority))]
        self.worker = worker or Worker(self.spec.name, config=stack.config)
        #: Whose credentials the event source receives and deletes with (Lambda's: the function's role).
        self.source_config = source_config or stack.config

    def handler(self, event: dict[str, Any], context: Any) -> Any:
        return self.worker.handle(event, context)

    def poll(self) -> BatchOutcome | None:
        """Receive one batch and run it; None when nothing was visible."""
        return poll_once(
            queue_url=self.queues.queue_url,
            queue_arn=self.queues.queue_arn,
            handler=self.handler,
            function_name=f"{self.stack.stack}-{self.spec.name}",
            timeout_seconds=self.spec.timeout_seconds,
            batch_size=self.spec.batch_size,
            config=self.source_config,
        )

    def drain(self, max_batches: int = 100) -> list[BatchOutcome]:
        """Poll until nothing is visible (retries wait for their backoff: move a clock to see them)."""
        return _drain(self.poll, max_batches)

    def depth(self, dlq: bool = False) -> int:
        """Messages in the queue (or its DLQ): visible, in flight or delayed."""
        url = self.queues.dlq_url if dlq else self.queues.queue_url
        attrs = self.stack.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])[
            "Attributes"
        ]
        counts = (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
        return sum(int(attrs.get(name, 0)) for name in counts)

    def dlq_messages(self) -> list[dict[str, Any]]:
        """Up to 10 dead letters, with their attributes (left visible)."""
        got = self.stack.client("sqs").receive_message(
            QueueUrl=self.queues.dlq_url,
            MaxNumberOfMessages=10,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            VisibilityTimeout=0,
        )
        return list(got.get("Messages", []))
