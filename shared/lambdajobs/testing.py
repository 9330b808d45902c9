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
`lambdajobs[local]` extra (moto). The worker's metrics land in moto's CloudWatch as CloudWatch Logs
would extract them from its EMF lines (`lambdajobs.local.emf`), so `count_finished` counts what a
test ran, from the metrics as on AWS.

Time, when a test says so. `TestStack(..., clock=True)` (or a `datetime` to start at) stops the clock
of this process while the stack runs, and only the test moves it (`stack.clock`, built on
time-machine): moto's SQS visibility timeouts, message delays and redrive, Powertools' idempotency
expiry and the job records' times all read it. A retry put off by its backoff, even by 0 s, comes back
only once the test moves the clock past it; `runner.attempt()` delivers one batch and says what became
of each job in it (docs/how-to/testing.md):

    def test_a_failed_charge_is_retried(stack):          # TestStack("myjobs", clock=True)
        job_id = stack.enqueue("charge_order", {"order_id": "42", "amount_cents": 1999})
        first = stack.runner("charge_order").attempt()
        assert first.job(job_id).state == "retrying"
        stack.clock.advance_past_backoff()
        ...

Jobs declared for one test only: `with isolated_registry(): ...` (`keep=True` to start from the jobs
already declared) puts a registry of their own in effect for the block, and the previous one back
after it.

One clock for everything that waits: a feature that puts work off until a time (a retry's backoff
today) tells the clock when it is due (`TestClock.wake_at`), and the test moves past it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

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
from lambdajobs.runtime.errors import ClockError, ConfigurationError
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.records import JobStatus, get_status, get_statuses
from lambdajobs.runtime.settings import (
    ATTR_RESUME,
    CONTINUER_BATCH_SIZE,
    CONTINUER_TIMEOUT_SECONDS,
    queue_key,
)
from lambdajobs.runtime.spec import (
    JobSpec,
    Registry,
    active_registry,
    ensure_loaded,
    get_spec,
    jobs_in,
    registered_jobs,
    using_registry,
)
from lambdajobs.runtime.worker import Worker, attempt_of

__all__ = [
    "FAKE_CREDENTIALS",
    "ClockError",
    "ContinuerRunner",
    "Delivery",
    "JobAttempt",
    "JobRunner",
    "TestClock",
    "TestStack",
    "isolated_registry",
]

#: Credentials moto accepts; set while a TestStack runs so no real ones are ever used.
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}

__test__ = False  # not a test module, whatever pytest's patterns say


@contextmanager
def isolated_registry(*, keep: bool = False) -> Iterator[Registry]:
    """Declare jobs in a block without touching the registry outside it: a fresh `Registry` is in
    effect inside the block (`@job` declares there, `get_spec` reads there), and the previous one is
    back on exit, even when the block raises.

    With `keep=True` the block starts with a copy of the jobs already declared (and of the jobs
    packages loaded): the block sees them, and what it declares goes to the copy only. A jobs package
    loaded inside the block (`load_jobs`, `ensure_loaded`, `TestStack`) loads into the block's
    registry; the registry outside loads it again when it needs it.

        from lambdajobs import job
        from lambdajobs.testing import isolated_registry

        def test_a_job_declared_for_one_test():
            with isolated_registry() as registry:
                @job
                def ping(payload: Ping) -> None: ...

                assert registry.names() == ["ping"]
            # here ping is not declared: the registry outside is back
    """
    registry = active_registry().copy() if keep else Registry()
    with using_registry(registry):
        yield registry


class TestClock:
    """The clock of a `TestStack(..., clock=...)`: stopped at `start` while the stack runs, moved only
    by the test. Built on time-machine, so whatever reads the wall clock in this process follows it
    (`time.time`, `datetime.now`): moto's SQS (visibility timeouts, delays, receive counts, redrive),
    DynamoDB, Powertools' idempotency expiry, the job records' times. `time.monotonic` is not moved:
    an invocation's remaining time (the Lambda context) is real time.

    On a stopped clock nothing put off comes back until the clock moves: a message made visible again
    "now" (a retry whose jittered backoff is 0 s) stays out of sight until the next move, so one
    delivery is one attempt whatever the jitter drew. SQS delays are whole seconds, and a message is
    back once the clock has moved past its time: `advance_past_backoff()` moves 1 s past it.

    What waits tells the clock when it is due (`wake_at`): the runners note every retry's backoff.
    """

    __test__ = False

    def __init__(self, start: datetime) -> None:
        if start.tzinfo is None:
            raise ClockError(f"clock start {start!r} has no time zone; give an aware datetime (tzinfo=UTC).")
        self.start = start.astimezone(UTC)
        self._travel: Any = None
        self._traveller: Any = None
        self._due: list[tuple[float, str]] = []  # (epoch seconds, what is due then)

    def _begin(self) -> None:
        try:
            import time_machine
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "TestStack(clock=...) needs time-machine: pip install 'time-machine>=3,<4'",
                name="time_machine",
            ) from exc

        self._travel = time_machine.travel(self.start, tick=False)
        self._traveller = self._travel.start()

    def _end(self) -> None:
        if self._travel is not None:
            self._travel.stop()
            self._travel = self._traveller = None
        self._due.clear()

    @property
    def running(self) -> bool:
        return self._traveller is not None

    def now(self) -> datetime:
        """The time on the clock (aware, UTC)."""
        return datetime.now(UTC)

    def advance(self, seconds: float) -> datetime:
        """Move the clock `seconds` forward; returns the new time.

        Raises:
            ClockError: a negative move, the stack stopped, or another time-machine travel started
                inside the stack's (it would hide this clock: use `stack.clock` alone).
        """
        if seconds < 0:
            raise ClockError(f"advance({seconds}): the clock only moves forward; give seconds >= 0.")
        if self._traveller is None:
            raise ClockError("the stack's clock is not running: advance it inside `with TestStack(...)`.")
        expected = time.time() + seconds
        self._traveller.shift(seconds)
        if abs(time.time() - expected) > 0.001:
            raise ClockError(
                "another time-machine travel is in effect inside the stack's clock, so moving the stack's "
                "clock changes nothing; use stack.clock alone (drop the other travel or fixture)."
            )
        return self.now()

    def advance_to(self, moment: datetime) -> datetime:
        """Move the clock to `moment` (aware); returns the new time."""
        return self.advance((moment - self.now()).total_seconds())

    def wake_at(self, when: datetime | float, what: str = "retry") -> None:
        """Note that something (`what`: "retry") is due at `when` (a datetime, or epoch seconds). The
        runners note each retry's backoff here; whatever else puts work off until a time notes it the
        same way, and the test moves the clock past it."""
        self._due.append((when.timestamp() if isinstance(when, datetime) else float(when), what))

    def due(self, what: str | None = None) -> list[datetime]:
        """When the things noted and not passed yet (of kind `what`) are due, soonest first."""
        now = time.time()
        return sorted(
            datetime.fromtimestamp(when, UTC)
            for when, kind in self._due
            if when >= now and (what is None or kind == what)
        )

    def advance_past_wake(self) -> datetime:
        """Move the clock 1 s past the soonest wake-up of a parked durable job (a sleep, a signal
        wait's timeout, a continuation: every copy the runners saw sent to continue one); returns the
        new time. Then deliver again (`runner.attempt()`), after `stack.run_schedules()` for a wake-up
        more than 15 minutes away (a one-time schedule).

        Raises:
            ClockError: no durable job is parked.
        """
        waiting = self.due("wake")
        if not waiting:
            raise ClockError(
                "no durable job is parked: deliver a job that sleeps or waits first (runner.attempt()), "
                "or move the clock by seconds (stack.clock.advance(seconds))."
            )
        return self.advance_to(waiting[0] + timedelta(seconds=1))

    def advance_past_backoff(self) -> datetime:
        """Move the clock 1 s past the latest retry that waits for its backoff (every retry the
        runners saw put off and not due yet); returns the new time.

        Raises:
            ClockError: no retry is waiting (nothing failed, or the clock already passed them).
        """
        waiting = self.due("retry")
        if not waiting:
            raise ClockError(
                "no retry is waiting for its backoff: deliver a failing job first (runner.attempt()), "
                "or move the clock by seconds (stack.clock.advance(seconds))."
            )
        moved = self.advance_to(waiting[-1] + timedelta(seconds=1))
        self._due = [(when, kind) for when, kind in self._due if when >= time.time()]
        return moved


class TestStack:
    """A stack of your jobs on moto, in this process. Use as a context manager (it starts moto, sets
    fake credentials, provisions queues/table/bucket/schedules from the job specs, and makes its
    configuration current); everything is undone on exit.

    `jobs` is your jobs package (loaded here); or give `specs` directly.

    `processes=True` runs each job's function as `lambdajobs dev` does, as on Lambda: in worker
    processes of its own, from its staged asset (your declared dependencies built for this machine,
    what Lambda provides, nothing else of your project), with its synthesized environment, killed at
    its timeout. It needs `jobs` (the processes import its modules) and moto's server on a loopback
    port instead of moto in this process; the runners deliver to those processes (their retry delays
    are not seen: `JobAttempt.retry_in_seconds` is None), on the real clock.

    `clock=True` stops the clock while the stack runs (at the time it starts; give a `datetime` to
    start there instead) and `stack.clock` moves it: see `TestClock`. Without it the stack runs on the
    real clock (threads, benchmarks, anything that waits in real time).

    `tracing=True` traces every job, as a stack deployed with `tracing=True`: its enqueues, workers and
    workflow continuer (`LAMBDAJOBS_TRACING=1` on its functions with `processes=True`). A job's own
    `@job(tracing=True)` needs no option.

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
        clock: bool | datetime = False,
        processes: bool = False,
        tracing: bool = False,
    ) -> None:
        self.jobs = jobs
        #: Trace every job, as a stack deployed with `tracing=True` (`StackConfig.tracing`: the stack's
        #: producer, workers and continuer; `LAMBDAJOBS_TRACING=1` on its functions with `processes=True`).
        self.tracing = tracing
        #: Each job's function in worker processes of its own, as on Lambda (`lambdajobs.local.functions`).
        self.processes = processes
        #: The execution environments, with `processes=True`.
        self.fleet: Any = None
        self._server: Any = None
        self._functions_dir: Path | None = None
        #: The job index's mode ("off", "finished", "all"; default: as the stack derives it).
        self.job_index = job_index
        self._specs = list(specs) if specs is not None else None
        self.stack = stack
        self.provisioned: Provisioned | None = None
        self.config = StackConfig(stack=stack, jobs=jobs, tracing=tracing)
        self._mock: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._using: Any = None
        self._previous_default: StackConfig | None = None
        self._atomic = False
        #: Undoes the publishing of the workers' metrics to moto's CloudWatch (`lambdajobs.local.emf`).
        self._metrics_off: Any = None
        self._clock_start = clock
        self._clock: TestClock | None = None

    @property
    def specs(self) -> list[JobSpec]:
        if self._specs is None:
            ensure_loaded(self.jobs)
            self._specs = jobs_in(self.jobs) if self.jobs else registered_jobs()
        return self._specs

    @property
    def clock(self) -> TestClock:
        """The stack's clock (`TestStack(..., clock=True)`), stopped while the stack runs.

        Raises:
            ClockError: the stack runs on the real clock.
        """
        if self._clock is None:
            raise ClockError(
                "this TestStack runs on the real clock; give TestStack(..., clock=True) to stop it and "
                "move it from the test."
            )
        return self._clock

    def start(self) -> TestStack:
        try:
            from moto import mock_aws
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                "lambdajobs.testing needs moto: pip install 'lambdajobs[local]'", name="moto"
            ) from exc

        specs = self.specs
        if self.processes and (self._clock_start is not False or not self.jobs):
            raise ConfigurationError(
                "TestStack(processes=True) needs your jobs package (TestStack('myjobs', processes=True)) "
                "and runs on the real clock (its worker processes cannot share this process's clock): "
                "drop clock=, or processes=."
            )
        try:
            return self._start(mock_aws, specs)
        except BaseException:
            self.stop()  # a start that failed half way leaves nothing behind (clock, moto, variables)
            raise

    def _start(self, mock_aws: Any, specs: list[JobSpec]) -> TestStack:
        if self._clock_start is not False:
            start = self._clock_start if isinstance(self._clock_start, datetime) else None
            # first, so the queues, the table and every record are made on the stack's time
            self._clock = TestClock(start or datetime.now(UTC).replace(microsecond=0))
            self._clock._begin()
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
        if not self.processes:  # the workers of this process: their EMF lines become moto's metrics
            from lambdajobs.local import emf
            from lambdajobs.runtime import worker

            self._metrics_off = emf.install(worker.metrics, lambda: self.config.client("cloudwatch"))
        if self.processes:  # worker processes reach moto through its server
            base = self._start_server()
        else:
            self._mock = mock_aws()
            self._mock.start()
            base = StackConfig(stack=self.stack, jobs=self.jobs, tracing=self.tracing)
        aws.reset_clients()  # clients made before moto started would not be intercepted
        clear_manifest_cache()
        self.provisioned = provision(specs, stack=self.stack, config=base, job_index=self.job_index)
        self.config = self.provisioned.config(base)
        if self.processes:
            from lambdajobs.local.stack import build_fleet

            assert self.jobs is not None
            self.fleet, self._functions_dir = build_fleet(
                specs,
                jobs=self.jobs,
                provisioned=self.provisioned,
                endpoint=str(base.endpoint_url),
                tracing=self.tracing,
            )
        self._using = using(self.config)
        self._using.__enter__()
        self._previous_default = set_process_default(self.config)  # threads a job starts, too
        return self

    def _start_server(self) -> StackConfig:
        import logging
        import urllib.request

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        # moto keeps its state per process, not per server: start from an empty account
        urllib.request.urlopen(
            urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST"), timeout=10
        )
        return StackConfig(
            stack=self.stack,
            jobs=self.jobs,
            region=FAKE_CREDENTIALS["AWS_DEFAULT_REGION"],
            endpoint_url=endpoint,
            access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
            secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            tracing=self.tracing,
        )

    def stop(self) -> None:
        try:
            if self.fleet is not None:
                fleet, self.fleet = self.fleet, None
                fleet.close()
            if self._functions_dir is not None:
                shutil.rmtree(self._functions_dir, ignore_errors=True)
                self._functions_dir = None
            if self._server is not None:
                server, self._server = self._server, None
                server.stop()
            if self._using is not None:
                self._using.__exit__(None, None, None)
                self._using = None
                set_process_default(self._previous_default)
            if self._mock is not None:
                mock, self._mock = self._mock, None
                mock.stop()
        finally:  # whatever failed above, the process gets its environment and its clock back
            if self._atomic:
                atomic.uninstall()
                self._atomic = False
            if self._metrics_off is not None:
                metrics_off, self._metrics_off = self._metrics_off, None
                metrics_off()
            aws.reset_clients()
            clear_manifest_cache()
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env.clear()
            if self._clock is not None:  # last: time is real again after the stack, never before
                self._clock._end()

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

    def run_schedules(self) -> list[str]:
        """Fire the one-time schedules that are due on the stack's clock (`enqueue(run_at=...)`, and a
        durable job's wake-up more than 15 minutes away), as EventBridge Scheduler would: each sends
        its message to its queue and is deleted. Returns the job ids sent."""
        from lambdajobs.local.scheduler import LocalScheduler

        assert self.provisioned is not None, "start the TestStack first"
        fire = LocalScheduler(
            [], queue_urls={}, one_time_group=self.provisioned.one_time_group, config=self.config
        )
        return fire.run_due(datetime.now(UTC))

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
            handler=self._handle,
            function_name=f"{self.stack.stack}-workflows",
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            batch_size=CONTINUER_BATCH_SIZE,
            config=self.source_config,
        )

    def _handle(self, event: dict[str, Any], context: Any) -> Any:
        if self.stack.fleet is not None:  # processes=True: the continuer's function, in its processes
            from lambdajobs.local.stack import function_name

            return self.stack.fleet.invoke(function_name(self.stack.stack, "workflows"), event)
        return self.continuer.handle(event, context)

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


@dataclass(frozen=True)
class JobAttempt:
    """What one delivery of a message did to its job, read from the job's record after the batch."""

    #: The job id the worker derives for the message (None: its envelope cannot be read).
    job_id: str | None
    message_id: str
    #: Which attempt this delivery was (1-based: the receive count, plus the attempts of earlier copies).
    attempt: int
    #: The job's state after the delivery ("succeeded", "retrying", "dead", ...; None: no job id).
    state: JobState | None
    #: The backoff the worker chose before the next attempt (the message's new visibility timeout, in
    #: seconds; full jitter may draw 0); None when it set none.
    retry_in_seconds: int | None = None
    #: The job's last error, as its record keeps it ({"type", "message"}; a job that succeeded on a
    #: retry keeps the error of the attempt before).
    error: dict[str, str] | None = None


@dataclass(frozen=True)
class Delivery:
    """The outcome of one delivery of a job's queue (`JobRunner.attempt`): one batch, as Lambda's event
    source would deliver it, and what became of each job in it."""

    jobs: tuple[JobAttempt, ...]
    #: The batch as the event source saw it (message ids, the ones reported failed, the response).
    batch: BatchOutcome

    def job(self, job_id: str) -> JobAttempt:
        """The attempt of job `job_id` in this delivery.

        Raises:
            KeyError: the job was not in this batch (naming those that were).
        """
        for attempt in self.jobs:
            if attempt.job_id == job_id:
                return attempt
        raise KeyError(
            f"job {job_id!r} was not in this delivery; it delivered {[a.job_id for a in self.jobs]}"
        )

    def _ids(self, state: JobState) -> list[str]:
        return [a.job_id for a in self.jobs if a.state == state and a.job_id is not None]

    @property
    def succeeded(self) -> list[str]:
        return self._ids(JobState.SUCCEEDED)

    @property
    def retrying(self) -> dict[str, int | None]:
        """Job id -> the seconds until its next attempt (None: the worker set no delay)."""
        return {a.job_id: a.retry_in_seconds for a in self.jobs if a.state == JobState.RETRYING and a.job_id}

    @property
    def dead(self) -> list[str]:
        return self._ids(JobState.DEAD)


class JobRunner:
    """Delivers a job's queue to the real worker the way Lambda's event source mapping would: a batch
    of up to `batch_size` records, the partial batch response applied (failures stay, successes are
    deleted), visibility timeouts and receive counts as SQS keeps them.

    `attempt()` delivers one batch and returns what became of each job (`Delivery`); `poll()` and
    `drain()` return the event source's view (`BatchOutcome`). Every retry delay the worker sets while
    the runner delivers is noted on the stack's clock, if it has one (`advance_past_backoff`)."""

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
        ensure_loaded(stack.config.jobs)
        self.spec = get_spec(job)
        self.queues = stack.provisioned.queues[queue_key(self.spec.name, self.spec.level_for(priority))]
        self.worker = worker or Worker(self.spec.name, config=stack.config)
        #: Whose credentials the event source receives and deletes with (Lambda's: the function's role).
        self.source_config = source_config or stack.config

    def handler(self, event: dict[str, Any], context: Any) -> Any:
        if self.stack.fleet is not None:  # processes=True: the job's function, in its own processes
            from lambdajobs.local.stack import function_name

            return self.stack.fleet.invoke(function_name(self.stack.stack, self.spec.name), event)
        return self.worker.handle(event, context)

    def poll(self) -> BatchOutcome | None:
        """Receive one batch and run it; None when nothing was visible."""
        delivered = self._deliver()
        return delivered[0] if delivered else None

    def attempt(self) -> Delivery | None:
        """Receive one batch, run it, and say what became of each job in it (its attempt, its state
        after, the backoff before its next attempt); None when nothing was visible.

        One call is one attempt of each job delivered: a retry is not run again here, whatever its
        backoff. On the stack's clock (`TestStack(..., clock=True)`) it comes back only after the
        clock moves past its backoff (`stack.clock.advance_past_backoff()`), even a 0 s one.
        """
        delivered = self._deliver()
        if delivered is None:
            return None
        batch, records, delays = delivered
        ids = [self.worker.job_id_of(self.spec, record) for record in records]
        statuses = get_statuses([i for i in ids if i], config=self.stack.config)
        jobs = []
        for record, job_id in zip(records, ids, strict=True):
            status = statuses.get(job_id) if job_id else None
            jobs.append(
                JobAttempt(
                    job_id=job_id,
                    message_id=record.message_id,
                    attempt=attempt_of(record),
                    state=status.state if status else None,
                    retry_in_seconds=delays.get(record.receipt_handle),
                    error=status.error if status else None,
                )
            )
        return Delivery(jobs=tuple(jobs), batch=batch)

    def _deliver(self) -> tuple[BatchOutcome, list[SQSRecord], dict[str, int]] | None:
        """One batch through the worker: the event source's outcome, the records it delivered, and the
        retry delay the worker set on each (by receipt handle)."""
        records: list[SQSRecord] = []

        def handler(event: dict[str, Any], context: Any) -> Any:
            records.extend(SQSRecord(r) for r in event.get("Records", []))
            return self.handler(event, context)

        with self._watching_retries() as delays:
            batch = poll_once(
                queue_url=self.queues.queue_url,
                queue_arn=self.queues.queue_arn,
                handler=handler,
                function_name=f"{self.stack.stack}-{self.spec.name}",
                timeout_seconds=self.spec.timeout_seconds,
                batch_size=self.spec.batch_size,
                config=self.source_config,
            )
        return (batch, records, delays) if batch is not None else None

    @contextmanager
    def _watching_retries(self) -> Iterator[dict[str, int]]:
        """The retry delays the worker sets while the block runs: it puts a failed record off by
        changing its message's visibility timeout to the backoff (`Worker._retry_after`); each call
        is seen on the worker's SQS client (a botocore event) and noted on the stack's clock."""
        delays: dict[str, int] = {}
        clock = self.stack._clock if self.stack._clock is not None and self.stack._clock.running else None

        def seen(params: dict[str, Any], **_: Any) -> None:
            seconds = int(params.get("VisibilityTimeout", 0))
            delays[str(params.get("ReceiptHandle"))] = seconds
            if clock is not None:
                clock.wake_at(time.time() + seconds, "retry")

        def woken(params: dict[str, Any], **_: Any) -> None:  # a copy that continues a durable job
            wake = (params.get("MessageAttributes") or {}).get(ATTR_RESUME)
            if clock is not None and wake is not None:
                clock.wake_at(int(wake["StringValue"]) / 1000, "wake")

        def scheduled(params: dict[str, Any], **_: Any) -> None:  # a durable job's one-time schedule
            if clock is not None and '"resume"' in str((params.get("Target") or {}).get("Input", "")):
                moment = str(params.get("ScheduleExpression", ""))[3:-1]
                clock.wake_at(datetime.fromisoformat(moment).replace(tzinfo=UTC), "wake")

        config = self.worker.stack_config
        hooks = [
            (config.client("sqs"), "before-parameter-build.sqs.ChangeMessageVisibility", seen),
            (config.client("sqs"), "before-parameter-build.sqs.SendMessage", woken),
            (config.client("scheduler"), "before-parameter-build.scheduler.CreateSchedule", scheduled),
        ]
        unique = f"lambdajobs-testing-{id(self)}"
        registered = []
        for client, event, hook in hooks:
            events = getattr(getattr(client, "meta", None), "events", None)
            if events is None:  # a client a test injected that is not botocore's: not seen
                continue
            events.register(event, hook, unique_id=unique + event)
            registered.append((events, event))
        try:
            yield delays
        finally:
            for events, event in registered:
                events.unregister(event, unique_id=unique + event)

    def drain(self, max_batches: int = 100) -> list[BatchOutcome]:
        """Poll until nothing is visible. A retry whose backoff has passed is run again; on the stack's
        clock none has until the test moves the clock (`stack.clock`)."""
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
