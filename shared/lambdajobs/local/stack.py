"""The local stack: the whole system on an embedded moto server, no Docker and no AWS account.

moto's server holds SQS, DynamoDB, S3, SSM and Scheduler state on a loopback port; queues, the table,
the bucket and the schedules are provisioned from the same job specs CDK reads; an event source
mapping per job polls its queue like Lambda and invokes the job's function. With `processes=True`
(`lambdajobs dev`) each function runs as on Lambda, in worker processes of its own from its staged
asset, with the environment synth gives it (`build_fleet`, `lambdajobs.local.functions`); else every
job runs in threads of this process, through the same handler a deployed function runs
(`lambdajobs.runtime.handler.make_handler` around a `Worker`). A local scheduler fires cron jobs and
one-time schedules.

Nothing here writes `os.environ`: in threads mode the stack's `config` (endpoint, credentials,
resources) is passed to the worker, the emulator and the scheduler, and the worker binds it while a
job runs, so a job's own `enqueue` or `ctx.client("s3")` reaches this stack; while the stack runs it
is also the process's fallback configuration (`set_process_default`), for threads a job starts
itself. A function's process gets it as Lambda would, in its environment. `environment()` is what
another shell exports to reach it.

A stack starts empty unless it is given a `state_dir` (`lambdajobs dev` gives it build/local/): then
it restores what it held when it last stopped and saves it again as it runs and when it stops (see
`lambdajobs.local.persist`). Tests and `make demo` give none: they always start fresh.
"""

from __future__ import annotations

import logging
import shutil
import threading
import urllib.request
from pathlib import Path
from typing import Any

from lambdajobs.local import atomic, event_sources, fast_index, persist
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.local.functions import Fleet, LocalFunction, function_path, max_environments
from lambdajobs.local.outcomes import JobOutcomes
from lambdajobs.local.provision import JobQueues, Provisioned, provision
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.ops import QueueHealth, queue_health
from lambdajobs.runtime.config import StackConfig, set_process_default
from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.settings import (
    CONTINUER_BATCH_SIZE,
    CONTINUER_HANDLER,
    CONTINUER_MAX_CONCURRENCY,
    CONTINUER_MEMORY_MB,
    CONTINUER_TIMEOUT_SECONDS,
    ENV_JOBS,
    ENV_STACK,
    ENV_TRACING,
    SERVICE_NAME,
    WORKER_HANDLER,
    queue_key,
)
from lambdajobs.runtime.spec import JobSpec, ensure_loaded, jobs_in, registered_jobs
from lambdajobs.staging import environment as function_env

REGION = "us-east-1"
#: The key of the continuer's event source in `LocalStack.mappings`.
WORKFLOWS = "(workflows)"
LOCAL_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
#: How often a stack with a `state_dir` saves while it runs: what a crash (kill -9) can lose at most.
SAVE_EVERY_SECONDS = 10.0
log = logging.getLogger("lambdajobs.local")


def function_name(stack: str, job: str) -> str:
    """A function's name in the local stack: `<stack>-<job>` (`<stack>-workflows`: the continuer)."""
    return f"{stack}-{job}"


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

    `processes=True` runs each job's function as Lambda would (`lambdajobs.local.functions`): in worker
    processes of its own, from its staged asset, with its synthesized environment, killed at its
    timeout; `max_processes` caps them (default `LAMBDAJOBS_LOCAL_MAX_PROCESSES`, else 4 per core).
    It needs `jobs` (the processes import your jobs package's modules from their assets). By default
    every job runs in threads of this process, on this process's imports.

    `tracing=True` traces every job, as a stack deployed with `tracing=True`: its workers and
    continuer, and its producers (`environment()` exports `LAMBDAJOBS_TRACING=1`). Spans are exported
    where an OpenTelemetry SDK is set up: in this process for its threads.

    `state_dir` keeps the stack's state across restarts in `<state_dir>/state.json`: queued messages,
    the job table, the bucket and pending one-time schedules are restored by `start()` (unless
    `fresh`: then the old file is kept as `state.previous.json` and the stack starts empty), saved
    every `save_every_seconds` while it runs and by `stop()` after the in-flight batches finish.
    Without it (the default) the stack starts empty and keeps nothing. What `start()` and `stop()` say
    about the state (restored, set aside, not restored, saved) is in `state_notes`, one line each.
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
        state_dir: Path | None = None,
        fresh: bool = False,
        save_every_seconds: float = SAVE_EVERY_SECONDS,
        processes: bool = False,
        max_processes: int | None = None,
        tracing: bool = False,
    ) -> None:
        self.jobs = jobs
        #: Trace every job, as a stack deployed with `tracing=True` (`LAMBDAJOBS_TRACING=1` on every
        #: function, and for the producers in `environment()`).
        self.tracing = tracing
        #: Each function in worker processes of its own, from its staged asset (`lambdajobs.local.
        #: functions`); else every job runs in threads of this process (tests, `make demo`).
        self.processes, self.max_processes = processes, max_processes
        #: The execution environments, in process mode (after `start_workers`).
        self.fleet: Fleet | None = None
        self._functions_dir: Path | None = None
        self._log_stream: Any = None
        #: The job index's mode ("off", "finished", "all"; default: as the stack derives it).
        self.job_index = job_index
        self._specs = specs
        self.stack, self.port, self.log_file, self.wait_seconds = stack, port, log_file, wait_seconds
        self.state_file = persist.StateFile(state_dir, stack) if state_dir is not None else None
        self.fresh, self.save_every_seconds = fresh, save_every_seconds
        self.state_notes: list[str] = []
        #: What the state file held when it was restored (None: nothing restored).
        self.restored: persist.Counts | None = None
        self._capture: persist.Capture | None = None
        self._save_lock = threading.Lock()
        self._saver: threading.Thread | None = None
        self._saver_stop = threading.Event()
        #: The state now of every job this stack's workers delivered (the live line's counts).
        self.outcomes: JobOutcomes | None = None
        self.server: Any = None
        self.endpoint = ""
        self.provisioned: Provisioned | None = None
        self.config = StackConfig(stack=stack, jobs=jobs, tracing=tracing)
        self.mappings: dict[str, EventSourceMapping] = {}
        #: Each mapping's UUID in the server's Lambda (`lambdajobs.local.event_sources`), by its key.
        self.mapping_uuids: dict[str, str] = {}
        self.scheduler: LocalScheduler | None = None
        self._previous_default: StackConfig | None = None
        self._atomic = False
        self._changes: persist.ChangeCounter | None = None
        #: `changes` when the state file was last written (None: not yet).
        self._saved_at_changes: int | None = None

    @property
    def specs(self) -> list[JobSpec]:
        if self._specs is None:
            ensure_loaded(self.jobs)
            self._specs = jobs_in(self.jobs) if self.jobs else registered_jobs()
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
        if self.tracing:
            env[ENV_TRACING] = "1"
        return env

    def start(self) -> LocalStack:
        """Start the server, provision, restore the saved state (with a `state_dir`).

        Raises:
            StateInUseError: another running stack keeps its state in `state_dir`.
        """
        specs = self.specs  # load the jobs first: a bad declaration fails before the server starts
        if self.state_file is not None:
            self.state_file.lock()  # before the server starts: a second stack on the folder is refused
        try:
            return self._start(specs)
        except BaseException:
            self.stop()  # what did start stops; the lock is released
            raise

    def _start(self, specs: list[JobSpec]) -> LocalStack:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request from the server
        # The server answers each request on its own thread and moto's conditional writes are
        # check-then-write without a lock: make each DynamoDB and SQS request atomic (issue 11).
        atomic.install()
        # a Query of the job index in milliseconds, not moto's second at thousands of records
        fast_index.install()
        self._atomic = True
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        # counts the requests that may change the state: a stack with a state file saves only then
        self._changes = persist.ChangeCounter(self.server._server.app)
        self.server._server.app = self._changes
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
            tracing=self.tracing,
        )
        self.provisioned = provision(specs, stack=self.stack, config=base, job_index=self.job_index)
        self.config = self.provisioned.config(base)
        # Threads a job starts itself see no bound configuration: they fall back to this stack, never
        # to real AWS.
        self._previous_default = set_process_default(self.config)
        self.outcomes = JobOutcomes(self.config)
        if self.log_file:
            route_worker_logs(self.log_file)
        if self.state_file is not None:
            self._restore()
            self._start_saving()
        return self

    # -- state across restarts (state_dir) ----------------------------------------------------------

    def _restore(self) -> None:
        assert self.state_file is not None and self.provisioned is not None
        self._capture = persist.Capture(self.config, self.provisioned, REGION)
        if self.fresh:
            self.state_notes.append(self.state_file.move_to_previous())
            return
        state, note = self.state_file.load()
        if state is None:
            self.state_notes.append(note or "Starting empty.")
            return
        try:
            restored = persist.restore(
                state, config=self.config, provisioned=self.provisioned, region=REGION, file=self.state_file
            )
        except Exception as exc:  # a bug or a moto change must not cost the saved state: keep it
            why = f"restoring it failed: {type(exc).__name__}: {exc}"
            self.state_notes.append(self.state_file.set_aside(why))
            return
        self.restored = restored.counts
        saved_at = state.get("saved_at")
        self.state_notes.append(
            f"Restored {restored.counts.describe(restored=True)} from {self.state_file.path} "
            f"(saved {saved_at})."
        )
        self.state_notes.extend(restored.notes)

    def _start_saving(self) -> None:
        if self.save_every_seconds <= 0:
            return
        self._saver_stop.clear()
        self._saver = threading.Thread(target=self._save_periodically, name="state-saver", daemon=True)
        self._saver.start()

    def _save_periodically(self) -> None:
        while not self._saver_stop.wait(self.save_every_seconds):
            if self.changes == self._saved_at_changes:
                continue  # nothing changed since the last save: no table read, no file written
            try:
                self.save()
            except Exception:  # try again at the next tick; the save on stop says so if it fails too
                log.exception("local stack: saving the state failed; trying again")

    @property
    def changes(self) -> int:
        """How many requests so far may have changed the stack's state (`persist.ChangeCounter`)."""
        return self._changes.count if self._changes is not None else 0

    def save(self) -> persist.Counts:
        """Write the stack's state to its state file now (queues, table, bucket, one-time schedules)."""
        assert self.state_file is not None and self._capture is not None, "a started stack with a state_dir"
        with self._save_lock:
            changes = self.changes  # read first: what changes while it reads is saved next time
            state, counts = self._capture()
            self.state_file.write(state)
            self._saved_at_changes = changes
            return counts

    def _save_on_stop(self) -> None:
        """The last save (skipped when nothing changed since the one before), noted in `state_notes`."""
        assert self.state_file is not None
        if self.changes == self._saved_at_changes:
            self.state_notes.append(f"Nothing changed since the last save to {self.state_file.path}.")
            return
        try:
            counts = self.save()
        except Exception as exc:  # say it: what the stack held is not on disk
            self.state_notes.append(
                f"Could not save the state to {self.state_file.path} ({type(exc).__name__}: {exc}): "
                "what the stack held since its last periodic save is lost."
            )
        else:
            self.state_notes.append(f"Saved {counts.describe()} to {self.state_file.path}.")

    def start_workers(self, *, scheduler: bool = True) -> None:
        from lambdajobs.runtime.handler import make_handler
        from lambdajobs.runtime.worker import Worker

        assert self.provisioned is not None, "start() first"
        # One worker serves every job (it finds the job from the queue), as the deployed handler
        # would with LAMBDAJOBS_JOB set; no EMF lines in a terminal. In process mode it only reads
        # the job ids of the records (for the live line's counts): the functions' processes run them.
        worker = Worker(config=self.config, emit_metrics=False)
        handler = make_handler(worker)
        if self.processes:
            self.fleet = self._fleet()
        # each mapping in the server's Lambda too, where queue_control pauses and resumes it
        if not self.mapping_uuids:  # once per server: started again, the workers keep their mappings
            self.mapping_uuids = event_sources.register(self.config, self._sources())
        for spec in self.specs:
            if self.fleet is not None:
                handler = self.fleet.handler(function_name(self.stack, spec.name))
            for queues in self.provisioned.levels(spec.name):  # one event source per priority level
                observed = self._observed(queues.key, spec, worker, handler)
                self.mappings[queues.key] = self._mapping(spec, queues, observed)
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

    # -- process mode ---------------------------------------------------------------------------------

    def _fleet(self) -> Fleet:
        """Every function staged as synth stages it, for its worker processes."""
        if not self.jobs:
            raise ConfigurationError(
                "a local stack in process mode runs your jobs package's modules from their assets: "
                "give LocalStack(jobs='<your jobs package>')."
            )
        assert self.provisioned is not None
        root = self.state_file.path.parent / "functions" if self.state_file is not None else None
        if self.log_file is not None:
            self.log_file.parent.mkdir(parents=True, exist_ok=True)
            self._log_stream = self.log_file.open("a", encoding="utf-8")
        fleet, self._functions_dir = build_fleet(
            self.specs,
            jobs=self.jobs,
            provisioned=self.provisioned,
            endpoint=self.endpoint,
            root=root,
            log_stream=self._log_stream,
            tracing=self.tracing,
            max_processes=self.max_processes,
        )
        return fleet

    def _observed(self, key: str, spec: JobSpec, worker: Any, handler: Any) -> Any:
        """`handler`, noting in `outcomes` the job id of every record it is given."""
        from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

        def handler_observed(event: dict[str, Any], context: Any) -> Any:
            if self.outcomes is not None:
                # the job id as the worker reads it (envelope id, idempotency key, else message id)
                records = [SQSRecord(r) for r in event.get("Records", [])]
                self.outcomes.received(key, [worker.job_id_of(spec, r) for r in records])
            return handler(event, context)

        return handler_observed

    def _sources(self) -> list[event_sources.Source]:
        """Every event source of the stack, as CDK maps them: one per queue of a job, the workflow
        queue's."""
        assert self.provisioned is not None
        found = [
            event_sources.Source(
                key=queues.key,
                function_name=function_name(self.stack, spec.name),
                handler=WORKER_HANDLER,
                queue_arn=queues.queue_arn,
                batch_size=spec.batch_size,
                window_seconds=int(spec.max_batching_window_seconds),
                max_concurrency=spec.concurrency_of(queues.level),
            )
            for spec in self.specs
            for queues in self.provisioned.levels(spec.name)
        ]
        found.append(
            event_sources.Source(
                key=WORKFLOWS,
                function_name=function_name(self.stack, "workflows"),
                handler=CONTINUER_HANDLER,
                queue_arn=self.provisioned.workflow_queue_arn,
                batch_size=CONTINUER_BATCH_SIZE,
                window_seconds=0,
                max_concurrency=CONTINUER_MAX_CONCURRENCY,
            )
        )
        return found

    def _enabled(self, key: str, queue_arn: str) -> Any:
        uuid = self.mapping_uuids.get(key)
        return event_sources.enabled_reader(queue_arn, uuid) if uuid else None

    def _mapping(self, spec: JobSpec, queues: JobQueues, handler: Any) -> EventSourceMapping:
        return EventSourceMapping(
            enabled=self._enabled(queues.key, queues.queue_arn),
            queue_url=queues.queue_url,
            queue_arn=queues.queue_arn,
            handler=handler,
            function_name=function_name(self.stack, spec.name),
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
        assert self.provisioned is not None
        if self.fleet is not None:
            handler = self.fleet.handler(function_name(self.stack, "workflows"))
        else:
            from lambdajobs.runtime.continuer import Continuer, logger

            continuer = Continuer(config=self.config)

            @logger.inject_lambda_context(clear_state=True)
            def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
                return continuer.handle(event, context)

        return EventSourceMapping(
            enabled=self._enabled(WORKFLOWS, self.provisioned.workflow_queue_arn),
            queue_url=self.provisioned.workflow_queue_url,
            queue_arn=self.provisioned.workflow_queue_arn,
            handler=handler,
            function_name=function_name(self.stack, "workflows"),
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
        if self.fleet is not None:
            self.fleet.close()
        if self._log_stream is not None:
            self._log_stream.close()
            self._log_stream = None
        if self._functions_dir is not None and self.state_file is None:
            shutil.rmtree(self._functions_dir, ignore_errors=True)
        self._functions_dir = None

    def stop(self) -> None:
        """Stop the workers (in-flight batches finish first), save the state (with a `state_dir`),
        stop the server."""
        self.stop_workers()
        if self._saver is not None:
            self._saver_stop.set()
            self._saver.join()
            self._saver = None
        if self.server and self.state_file is not None and self._capture is not None:
            self._save_on_stop()
        if self.state_file is not None:
            self.state_file.unlock()
        if self.server:
            self.server.stop()
            self.server = None
            if self.provisioned is not None:  # start() got as far as making this stack the default
                set_process_default(self._previous_default)
        if self._atomic:
            fast_index.uninstall()
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


# -- process mode: the functions as synth builds them -------------------------------------------------


def build_fleet(
    specs: list[JobSpec],
    *,
    jobs: str,
    provisioned: Provisioned,
    endpoint: str,
    root: Path | None = None,
    log_stream: Any = None,
    max_processes: int | None = None,
    tracing: bool = False,
) -> tuple[Fleet, Path]:
    """Stage each job's function and the continuer into `root` (default: a new temporary folder) as
    synth stages them, with your declared dependencies built for this machine and what Lambda
    provides linked beside them, each with its synthesized environment: the `Fleet` that runs them,
    and the folder. `tracing`: as a stack deployed with `tracing=True` (`LAMBDAJOBS_TRACING=1` on
    every function)."""
    traced = {ENV_TRACING: "1"} if tracing else {}
    import tempfile

    from lambdajobs.staging import dependencies as deps
    from lambdajobs.staging.asset import modules_for, stage_function_asset, stage_runtime_layer
    from lambdajobs.staging.platform import link_provided

    # absolute: a function's process runs in its asset's folder, where a relative path means another
    root = (root or Path(tempfile.mkdtemp(prefix="lambdajobs-functions-"))).resolve()
    root.mkdir(parents=True, exist_ok=True)
    # your dependencies, the locked versions built for this machine; what Lambda provides, linked
    built = deps.build(deps.declared(), for_lambda=False)
    provided = root / "provided"
    if provided.exists():
        shutil.rmtree(provided)
    link_provided(provided)
    fleet = Fleet(
        endpoint=endpoint, credentials=LOCAL_CREDENTIALS, max_processes=max_processes, log_stream=log_stream
    )
    by_name = {spec.name: spec for spec in specs}
    stack = provisioned.stack
    runtime_layer = stage_runtime_layer(root / "runtime-layer")
    for spec in specs:
        modules = modules_for(spec, by_name)
        asset = stage_function_asset(root / spec.name, jobs_package=jobs, modules=modules, runtime=False)
        fleet.add(
            LocalFunction(
                name=function_name(stack, spec.name),
                handler=WORKER_HANDLER,
                path=function_path(asset, built.folder, provided, runtime_layer),
                environment={**worker_environment(spec, provisioned, jobs, modules), **traced},
                timeout_seconds=spec.timeout_seconds,
                memory_mb=spec.memory_mb,
                max_environments=max_environments(
                    [spec.concurrency_of(level) for level in spec.levels], spec.reserved_concurrency
                ),
                region=REGION,
            )
        )
    asset = stage_function_asset(root / "workflow-continuer", jobs_package=jobs, modules=[])
    fleet.add(
        LocalFunction(
            name=function_name(stack, "workflows"),
            handler=CONTINUER_HANDLER,
            path=function_path(asset, None, provided),
            environment={**continuer_environment(provisioned), **traced},
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            memory_mb=CONTINUER_MEMORY_MB,
            max_environments=CONTINUER_MAX_CONCURRENCY,
            region=REGION,
        )
    )
    return fleet, root


def worker_environment(
    spec: JobSpec, provisioned: Provisioned, jobs: str, modules: list[str]
) -> dict[str, str]:
    """A job's function's environment on these resources, as synth computes it
    (`lambdajobs.staging.environment.worker`)."""
    p = provisioned
    return function_env.worker(
        spec,
        stack=p.stack,
        table=p.table,
        jobs_package=jobs,
        modules=modules,
        place=p.place(),
        scheduler_role_arn=p.scheduler_role_arn,
        bucket=p.bucket,
        job_index=p.job_index,
    )


def continuer_environment(provisioned: Provisioned) -> dict[str, str]:
    """The workflow continuer's environment on these resources, as synth computes it."""
    return {
        **function_env.continuer(stack=provisioned.stack, table=provisioned.table, place=provisioned.place()),
        **function_env.powertools(),
    }
