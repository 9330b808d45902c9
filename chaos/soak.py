"""One seed of the chaos soak, phase by phase, on moto in-process.

    setup      a TestStack of `chaos.jobs`; the worker's clients get the fault injector; the producer,
               the readers and the event source emulator get clients of their own (not faulted); the
               continuer polls the workflow queue on the worker's (faulted) clients
    produce    every planned job, in chunks, with producer re-sends and scheduled slots sent 2-3 times
               interleaved, while the emulator polls (the producer waits while the queue is deep); the
               planned chord and chain enqueued among them, and enqueued again with the same id
    settle     poll until the queues are empty (visible, in flight and delayed), no job lock is live
               and every workflow is done; meanwhile the planned redeliveries re-send a completed job's
               very message body (workflow members' too)
    judge      DLQ contents and reasons, record states against where each message is; the workflows:
               what the chord's callback was told against its members' records, stage counts
    redrive    the poison fixed and the faults off: the DLQs redriven with `lambdajobs.ops.redrive`
               (what `lambdajobs dlq redrive` runs), then settle again
    final      lost jobs, stuck records, record states, duplicate effects, redriven jobs; the workflows:
               done, stage counts against the members' records, callbacks run once, chains in order;
               the step jobs: no step ran again once its checkpoint landed, every re-run of a step
               has a cause the soak saw, every record lists the steps checkpointed (`_check_steps`);
               flow control: no cancelled job ran after its cancel, no key over its cap, each
               debounced burst ran once (`_judge_flow`)

Flow control runs among the rest from the produce phase on: bulk jobs cancelled before they run,
`chaos_flow` jobs cancelled while they report progress (a thread of the soak cancels each once it
reported twice), `chaos_flow` jobs capped per key, and bursts of debounced bulk enqueues.

The worker is the real one (`lambdajobs.runtime.worker.Worker`) behind the real event source emulator
(`lambdajobs.local.emulator.EventSourceMapping`, which applies the partial batch response rules).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from chaos.faults import ChaosCrash, FaultInjector, InvocationCrashed
from chaos.jobs import FLOW, FLOW_KEY_CAP, MAX_ATTEMPTS, FlowRun, flow_ledger, ledger
from chaos.plan import SLOW, STEP_FAULTS, WORK, Plan, PlannedJob, PlannedWorkflow, Send, Settings, make_plan
from chaos.report import (
    SHOWN,
    DuplicateEffects,
    FlowCheck,
    Mismatch,
    SeedReport,
    StepsCheck,
    WorkflowCheck,
    non_poison_bound,
)
from chaos.steps import (
    LANDED,
    STEP_ATTRIBUTE,
    STEPS,
    STEPS_MAX_ATTEMPTS,
    rerun_cause,
    step_name,
    step_result,
    steps_ledger,
)
from lambdajobs import Debounce, cancel
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.ops import peek_dead_letters, redrive
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.continuer import Continuer
from lambdajobs.runtime.envelope import encode
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.producer import enqueue, enqueue_many
from lambdajobs.runtime.records import JobStatus, get_statuses
from lambdajobs.runtime.settings import (
    ATTR_ERROR_TYPE,
    ATTR_REASON,
    CONTINUER_BATCH_SIZE,
    CONTINUER_MAX_CONCURRENCY,
    CONTINUER_MEMORY_MB,
    CONTINUER_TIMEOUT_SECONDS,
    SERVICE_NAME,
)
from lambdajobs.runtime.spec import ensure_loaded, get_spec
from lambdajobs.runtime.worker import Worker
from lambdajobs.runtime.workflow import Canvas, WorkflowStatus, chain, chord, get_workflow, group, sig
from lambdajobs.testing import TestStack

JOBS_PACKAGE = "chaos.jobs"
STACK = "chaos"
REGION = "us-east-1"
LOG_DIR = Path("build/chaos")
IDLE_SECONDS = 0.25  # a poller's rest after an empty receive
TICK_SECONDS = 0.25  # the settle loop's period
#: The producer waits at most this long for the queue to drain below `max_depth`.
PACE_TIMEOUT_SECONDS = 120.0
UNSETTLED_STATES = (
    JobState.RUNNING,
    JobState.RETRYING,
    JobState.WAITING,
    JobState.PENDING,
    JobState.SLEEPING,  # a durable job parked, with no copy left to continue it
    JobState.WAITING_SIGNAL,
)
CONTINUER = "(workflows)"  # the continuer's key among the handlers and pollers
#: The jobs' queues (each with its DLQ).
JOB_QUEUES = (WORK, SLOW, STEPS, FLOW)
#: How often the soak looks for running progress jobs to cancel (a run reports every 150 ms).
CANCEL_TICK_SECONDS = 0.05


def _spec(name: str) -> Any:
    """A job of the soak's jobs package (loaded once, explicitly)."""
    ensure_loaded(JOBS_PACKAGE)
    return get_spec(name)


# -- the machinery ----------------------------------------------------------------------------------


class Poller(EventSourceMapping):
    """The event source emulator with short polling and a short rest after an empty receive."""

    def gather(self) -> list[dict[str, Any]]:
        messages = super().gather()
        if not messages:
            time.sleep(IDLE_SECONDS)
        return messages


def _envelope_id(body: str) -> str | None:
    try:
        value = json.loads(body).get("id")
    except (ValueError, AttributeError):
        return None
    return str(value) if value is not None else None


class ChaosHandler:
    """What the event source invokes: the real worker (or the real continuer, `continuer=True`),
    inside the fault injector's scope for one invocation. An injected crash (a BaseException) becomes
    an exception the emulator sees, so the whole batch fails, as it does when a Lambda runtime crashes."""

    def __init__(
        self,
        worker: Worker | Continuer,
        injector: FaultInjector,
        *,
        continuer: bool = False,
        deadline: bool = False,
    ) -> None:
        self.worker, self.injector, self.continuer, self.deadline = worker, injector, continuer, deadline
        self.received_while_running = 0
        self.durations: list[float] = []
        self._lock = threading.Lock()

    def __call__(self, event: dict[str, Any], context: Any) -> Any:
        records = event.get("Records") or []
        held = sum(1 for r in records if (i := _envelope_id(r.get("body", ""))) and ledger.is_running(i))
        if held:
            with self._lock:
                self.received_while_running += held
        started = time.monotonic()
        try:
            with self.injector.invocation(
                len(records), context, continuer=self.continuer, deadline=self.deadline
            ):
                try:
                    return self.worker.handle(event, context)
                except ChaosCrash as crash:
                    raise InvocationCrashed(str(crash)) from None
        finally:
            with self._lock:
                self.durations.append(time.monotonic() - started)

    def timing(self, timeout_seconds: float) -> dict[str, float]:
        """Invocation durations: a run that overran its timeout failed as a whole (not a fault of ours)."""
        ordered = sorted(self.durations) or [0.0]
        return {
            "median_seconds": round(ordered[len(ordered) // 2], 3),
            "max_seconds": round(ordered[-1], 3),
            "over_timeout": sum(1 for d in ordered if d > timeout_seconds),
        }


def _seconds_between(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    parsed = [datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (start, end)]
    return round((parsed[1] - parsed[0]).total_seconds(), 1)


def separate_config(config: StackConfig, n: int) -> StackConfig:
    """The same stack on a connection of its own (its own cached clients, the same moto backend):
    variant 1 names the region, variant 2 also the (fake) credentials."""
    changes: dict[str, Any] = {"region": config.region or REGION}
    if n == 2:
        changes.update(access_key_id="testing", secret_access_key="testing", session_token="testing")
    separate = config.with_resources(**changes)
    if separate.connection == config.connection:
        raise RuntimeError(f"could not give the soak a connection of its own (variant {n})")
    return separate


def route_worker_logs(path: Path) -> None:
    """The worker's Powertools logs, warnings and up, to a file (a soak logs thousands of lines)."""
    import lambdajobs.runtime.worker  # noqa: F401  (creates the Powertools logger)

    path.parent.mkdir(parents=True, exist_ok=True)
    stream = path.open("w", encoding="utf-8")
    service = logging.getLogger(SERVICE_NAME)
    service.setLevel(logging.WARNING)
    for handler in service.handlers:
        if isinstance(handler, logging.StreamHandler):
            handler.setStream(stream)


# -- one seed ---------------------------------------------------------------------------------------


class Soak:
    """The soak of one seed. `run()` returns its `SeedReport`."""

    def __init__(self, seed: int, settings: Settings, mutation: str | None = None) -> None:
        self.seed, self.settings, self.mutation = seed, settings, mutation
        self.plan: Plan = make_plan(seed, settings)
        self.jobs = self.plan.by_id()
        self.report = SeedReport(seed=seed, jobs=len(self.plan.jobs), mutation=mutation)
        self.injector = FaultInjector(
            seed=seed,
            crash_rate=settings.crash_rate,
            throttle_rates={"dynamodb": settings.throttle_dynamodb_rate, "sqs": settings.throttle_sqs_rate},
            workflow_crash_rate=settings.workflow_crash_rate,
            workflow_crash_max=settings.workflow_crash_max,
            crash_after_sending=frozenset(
                w.workflow_id for w in self.plan.workflows if w.crash_after_sending
            ),
            step_faults={j.job_id: j.step_faults for j in self.plan.jobs if j.step_faults},
            observer=steps_ledger,
        )
        self.step_jobs = [j for j in self.plan.jobs if j.job == STEPS]
        self.sent: Counter[str] = Counter()
        #: Still to re-send once the job completed: its body (None: a workflow member's, built then).
        self.redeliveries: dict[str, str | None] = {}
        #: Step jobs: what `_check_steps` found before the redrive (the final check adds to it).
        self.steps_before: list[dict[str, Any]] = []
        self.workflows_before: dict[str, WorkflowStatus] = {}
        #: Members of stages a workflow never sent (it stopped before them): not expected to run.
        self.unsent: set[str] = set()
        self.handlers: dict[str, ChaosHandler] = {}
        self.pollers: dict[str, Poller] = {}
        self.statuses_before: dict[str, JobStatus] = {}
        self.dlq_before: Counter[str] = Counter()
        #: Flow control: the planned flow jobs, the cancels made (job id -> what `cancel` answered, when
        #: it was called and when it returned, epoch s), each debounced burst's enqueues (key -> jobs)
        #: and how long its enqueues took.
        self.flow_jobs = [j for j in self.plan.jobs if j.flow]
        self.cancels: dict[str, tuple[str, float, float]] = {}
        self.bursts: dict[str, list[PlannedJob]] = {}
        for planned in self.flow_jobs:
            if planned.flow == "debounced":
                self.bursts.setdefault(planned.key, []).append(planned)
        self.burst_seconds: dict[str, float] = {}
        #: Per burst, the longest wait between two of its enqueues (one's return to the next's).
        self.burst_gaps: dict[str, float] = {}
        self._stop_cancelling = threading.Event()

    def run(self) -> SeedReport:
        started = time.monotonic()
        ledger.configure(seed=self.seed, transient_rate=self.settings.transient_rate)
        flow_ledger.clear()
        suffix = f"-{self.mutation}" if self.mutation else ""
        route_worker_logs(LOG_DIR / f"seed-{self.seed}{suffix}.log")
        with TestStack(JOBS_PACKAGE, stack=STACK) as stack:  # moto made atomic: lambdajobs.local.atomic
            self.setup(stack)
            canceller = threading.Thread(target=self._cancel_running, name="chaos-canceller", daemon=True)
            canceller.start()
            try:
                self._phase("produce", self.produce)
                self._phase("settle", lambda: self.settle("before_redrive"))
                self._stop_cancelling.set()
                canceller.join(timeout=30)
                self._phase("judge", self.judge_before_redrive)
                self._phase("redrive", self.redrive)
                self._phase("settle_after_redrive", lambda: self.settle("after_redrive"))
                self._phase("final", self.judge_final)
            finally:
                self._stop_cancelling.set()
                self.teardown()
        self.report.elapsed_seconds = round(time.monotonic() - started, 1)
        return self.report

    def _phase(self, name: str, step: Any) -> None:
        started = time.monotonic()
        step()
        self.report.phase_seconds[name] = round(time.monotonic() - started, 1)

    # -- setup --------------------------------------------------------------------------------------

    def setup(self, stack: TestStack) -> None:
        assert stack.provisioned is not None
        self.stack = stack
        worker_config = stack.config
        #: The producer, status readers and operator tools; and the event source's receive and delete.
        self.harness = separate_config(worker_config, 1)
        self.source = separate_config(worker_config, 2)
        self.queues = {job: stack.provisioned.queues[job] for job in JOB_QUEUES}
        for job, seconds in (
            (SLOW, self.settings.slow_visibility_seconds),
            (STEPS, self.settings.step_visibility_seconds),
            (FLOW, self.settings.flow_visibility_seconds),
        ):
            self.harness.client("sqs").set_queue_attributes(
                QueueUrl=self.queues[job].queue_url, Attributes={"VisibilityTimeout": str(seconds)}
            )
        steps_ledger.configure(
            seed=self.seed,
            transient_rate=self.settings.step_transient_rate,
            reader=self.harness.client("dynamodb"),
            table=self.harness.table_name(),
            raise_first={(j.job_id, step_name(j.step_raises)) for j in self.step_jobs if j.step_raises},
        )
        self.workflow_queue = stack.provisioned.workflow_queue_url
        self.harness.client("sqs").set_queue_attributes(
            QueueUrl=self.workflow_queue,
            Attributes={"VisibilityTimeout": str(self.settings.workflow_visibility_seconds)},
        )
        self.injector.install(
            {"dynamodb": worker_config.client("dynamodb"), "sqs": worker_config.client("sqs")}
        )
        for job in JOB_QUEUES:
            if (job == STEPS and not self.step_jobs) or (job == FLOW and not self._flow(FLOW)):
                continue  # no step (flow) jobs in this soak: no poller costing moto's CPU
            spec = _spec(job)
            # The step jobs' invocations stop at their first call past their deadline, as on Lambda:
            # a run that went on would meet the run that took its job over (a checkpoint refused).
            worker = Worker(job, config=worker_config, emit_metrics=False)
            handler = ChaosHandler(worker, self.injector, deadline=job in (STEPS, FLOW))
            poller = Poller(
                queue_url=self.queues[job].queue_url,
                queue_arn=self.queues[job].queue_arn,
                handler=handler,
                function_name=f"{STACK}-{job}",
                timeout_seconds=spec.timeout_seconds,
                batch_size=spec.batch_size,
                max_batching_window_seconds=spec.max_batching_window_seconds,
                max_concurrency=spec.max_concurrency,
                memory_mb=spec.memory_mb,
                wait_seconds=0,
                region=REGION,
                config=self.source,
            )
            poller.start()
            self.handlers[job], self.pollers[job] = handler, poller
        # The continuer, on the worker's clients (so its calls are faulted too), as the stack runs it.
        handler = ChaosHandler(Continuer(config=worker_config), self.injector, continuer=True)
        poller = Poller(
            queue_url=self.workflow_queue,
            queue_arn=stack.provisioned.workflow_queue_arn,
            handler=handler,
            function_name=f"{STACK}-workflows",
            timeout_seconds=CONTINUER_TIMEOUT_SECONDS,
            batch_size=CONTINUER_BATCH_SIZE,
            max_batching_window_seconds=0,
            max_concurrency=min(2, CONTINUER_MAX_CONCURRENCY),  # two at once: each idle poller costs moto CPU
            memory_mb=CONTINUER_MEMORY_MB,
            wait_seconds=0,
            region=REGION,
            config=self.source,
        )
        poller.start()
        self.handlers[CONTINUER], self.pollers[CONTINUER] = handler, poller

    def teardown(self) -> None:
        for poller in self.pollers.values():
            poller.signal_stop()
        for poller in self.pollers.values():
            poller.stop(timeout=30)
        self.injector.uninstall()
        self.report.emulator = {
            job: asdict(poller.stats) | self.handlers[job].timing(poller.timeout_seconds)
            for job, poller in self.pollers.items()
        }

    # -- produce ------------------------------------------------------------------------------------

    def produce(self) -> None:
        chunk = self.settings.chunk
        for start in range(0, len(self.plan.sends), chunk):
            self._enqueue_workflows(start, start + chunk)
            sends = self.plan.sends[start : start + chunk]
            bulk = [s for s in sends if s.copy == "first" and self._is_bulk(s.job)]
            if bulk:
                results = enqueue_many(
                    WORK, [{} for _ in bulk], job_ids=[s.job.job_id for s in bulk], config=self.harness
                )
                if not results.ok:
                    raise RuntimeError(f"enqueue_many failed for {len(results.failed)} jobs")
                self.sent["first"] += len(bulk)
            for send in sends:
                if not (send.copy == "first" and self._is_bulk(send.job)):
                    self._send(send)
            self._pace()

    def _enqueue_workflows(self, start: int, end: int) -> None:
        """The workflows planned in this chunk (before its sends), first or again: the same workflow
        under the same id, as a producer retrying its enqueue does (nothing may run twice)."""
        last = end >= len(self.plan.sends)
        for planned in self.plan.workflows:
            for copy, at in (("workflow", planned.position), ("workflow_again", planned.again)):
                if start <= at < end or (last and at >= end):
                    self._canvas(planned).enqueue(workflow_id=planned.workflow_id, config=self.harness)
                    self.sent[copy] += 1
                    if copy == "workflow":
                        self.redeliveries |= {j.job_id: None for j in planned.jobs if j.redeliver}

    @staticmethod
    def _canvas(planned: PlannedWorkflow) -> Canvas:
        def step(job: PlannedJob) -> Any:
            return sig(job.job, {"kind": job.kind})

        if planned.kind == "chord":
            header, (callback,) = planned.members
            return chord(group(step(j) for j in header), step(callback))
        return chain(*(step(j) for (j,) in planned.members))

    def _member_body(self, job_id: str) -> str:
        """A workflow member's message body as the producer or the continuer sent it (its `parents`:
        what its run was told)."""
        planned = self.jobs[job_id]
        assert planned.workflow is not None
        ref: dict[str, Any] = {"id": planned.workflow, "stage": planned.stage, "index": planned.index}
        if planned.stage:
            ref["parents"] = ledger.parents[job_id][0]
        payload = _spec(WORK).payload_data({"kind": planned.kind})
        return encode(WORK, payload, job_id, workflow=ref)

    @staticmethod
    def _is_bulk(job: PlannedJob) -> bool:
        plain = job.kind == "normal" and job.job == WORK and job.scheduled_at is None
        return plain and not job.redeliver and not job.flow

    def _send(self, send: Send) -> None:
        planned = send.job
        if planned.flow:
            self._send_flow(send)
        elif planned.job == STEPS:
            self._send_steps(send)
        elif planned.scheduled_at is not None:  # the envelope Scheduler sends for a slot, every time
            envelope = _spec(WORK).scheduled_envelope(planned.scheduled_at)
            self._send_body(WORK, json.dumps(envelope))
        elif send.copy == "resend":  # the producer sends the same job again, same job id
            enqueue(WORK, {}, job_id=planned.job_id, config=self.harness)
        elif planned.kind == "poison_invalid":  # a producer in another language: nothing validates it
            self._send_body(WORK, encode(WORK, {"kind": planned.kind}, planned.job_id))
        elif planned.kind == "slow":
            payload = {"kind": "slow", "sleep_ms": self.settings.slow_sleep_ms}
            enqueue(SLOW, payload, job_id=planned.job_id, config=self.harness)
        elif planned.redeliver:  # the body enqueue sends, kept to send again after the job completed
            body = encode(WORK, _spec(WORK).payload_data({}), planned.job_id)
            self.redeliveries[planned.job_id] = body
            self._send_body(WORK, body)
        else:
            enqueue(planned.job, {"kind": planned.kind}, job_id=planned.job_id, config=self.harness)
        self.sent[send.copy] += 1

    def _send_steps(self, send: Send) -> None:
        """A step job: enqueued (again by the producer with the same id, for a `resend`), its body
        kept to send again after it succeeded (`redeliver`)."""
        planned = send.job
        payload = {"steps": planned.steps, "one_per_invocation": planned.one_per_invocation}
        if planned.redeliver and send.copy == "first":
            body = encode(STEPS, _spec(STEPS).payload_data(payload), planned.job_id)
            self.redeliveries[planned.job_id] = body
            self._send_body(STEPS, body)
        else:
            enqueue(STEPS, payload, job_id=planned.job_id, config=self.harness)

    # -- flow control -------------------------------------------------------------------------------

    def _flow(self, *jobs: str) -> list[PlannedJob]:
        """The flow jobs of `jobs` (a job name or a flow of `chaos.plan.FLOWS`)."""
        return [j for j in self.flow_jobs if j.job in jobs or j.flow in jobs]

    def _send_flow(self, send: Send) -> None:
        """A flow job: a bulk job cancelled before it runs (even ones before their message is sent,
        odd ones while it waits out its delay), a progress job (cancelled while it runs by
        `_cancel_running`), a keyed job, or a debounced key's whole burst, one enqueue after another."""
        planned, s = send.job, self.settings
        if planned.flow == "cancel_before":
            if int(planned.job_id.rsplit("-", 1)[1]) % 2 == 0:
                self._cancel(planned.job_id)
                enqueue(WORK, {}, job_id=planned.job_id, config=self.harness)
            else:
                delay = s.cancel_delay_seconds
                enqueue(WORK, {}, job_id=planned.job_id, delay_seconds=delay, config=self.harness)
                self._cancel(planned.job_id)
        elif planned.flow == "cancel_running":
            payload = {"key": planned.key, "mode": "progress", "work_ms": s.progress_part_ms}
            enqueue(FLOW, {**payload, "parts": s.progress_parts}, job_id=planned.job_id, config=self.harness)
        elif planned.flow == "keyed":
            payload = {"key": planned.key, "work_ms": s.keyed_work_ms}
            enqueue(FLOW, payload, job_id=planned.job_id, config=self.harness)
        else:
            called: list[float] = []
            returned: list[float] = []
            for member in self.bursts[planned.key]:
                debounce = Debounce(member.key, seconds=s.debounce_seconds)
                called.append(time.monotonic())
                enqueue(WORK, {}, job_id=member.job_id, debounce=debounce, config=self.harness)
                returned.append(time.monotonic())
            self.burst_seconds[planned.key] = round(returned[-1] - called[0], 3)
            # from one enqueue's call (its message's delay may start then) to the next's return (its
            # claim of the key written by then): the most the two can be apart
            gaps = [later - earlier for earlier, later in zip(called, returned[1:], strict=False)]
            self.burst_gaps[planned.key] = round(max(gaps, default=0.0), 3)

    def _cancel(self, job_id: str) -> None:
        """Cancel a job, noting what `cancel` answered, when it was called and when it returned."""
        called = time.time()
        result = cancel(job_id, config=self.harness)
        self.cancels[job_id] = (result.outcome, called, time.time())

    def _cancel_running(self) -> None:
        """Until the soak settled: cancel each progress job once a run of it reported progress twice."""
        waiting = [j.job_id for j in self._flow("cancel_running")]
        while waiting and not self._stop_cancelling.wait(CANCEL_TICK_SECONDS):
            for job_id in [j for j in waiting if flow_ledger.reported(j) >= 2]:
                self._cancel(job_id)
                waiting.remove(job_id)

    def _send_body(self, job: str, body: str) -> None:
        self.harness.client("sqs").send_message(QueueUrl=self.queues[job].queue_url, MessageBody=body)

    def _depth(self, job: str) -> dict[str, int]:
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        url = self.workflow_queue if job == CONTINUER else self.queues[job].queue_url
        attributes = self.harness.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)[
            "Attributes"
        ]
        return {name.removeprefix("ApproximateNumberOf"): int(attributes.get(name, 0)) for name in names}

    def _pace(self) -> None:
        deadline = time.monotonic() + PACE_TIMEOUT_SECONDS
        while self._depth(WORK)["Messages"] > self.settings.max_depth and time.monotonic() < deadline:
            time.sleep(TICK_SECONDS)

    # -- settle -------------------------------------------------------------------------------------

    def settle(self, phase: str) -> None:
        """Poll until nothing can change any more: the queues empty (visible, in flight, delayed), no
        live job lock, every planned redelivery sent; or until the bounded wait runs out."""
        deadline = time.monotonic() + self.settings.settle_timeout_seconds
        while True:
            self._redeliver_completed()
            # The workflow queue first: a notice is deleted only after its stage was sent to a job
            # queue, and a member's message only after its notice was sent.
            depths = {CONTINUER: self._depth(CONTINUER)}
            depths |= {job: self._depth(job) for job in JOB_QUEUES}
            busy: dict[str, Any] = {job: d for job, d in depths.items() if sum(d.values())}
            live = self._live_locks() if not busy else []
            running = self._workflows_running() if not busy and not live else []
            if running:
                busy["workflows running"] = running
            if not busy and not live:
                # Nothing left that could complete a redelivery candidate: drop the rest.
                self.sent["redelivery_dropped"] += len(self.redeliveries)
                self.redeliveries.clear()
                return
            if time.monotonic() > deadline:
                self.report.unsettled.append(
                    f"{phase}: queues {busy or 'empty'}, live locks {live[:5]} "
                    f"after {self.settings.settle_timeout_seconds:.0f} s"
                )
                return
            time.sleep(TICK_SECONDS)

    def _redeliver_completed(self) -> None:
        """Re-send the very body of a job that completed (as if its delete had been lost)."""
        if not self.redeliveries:
            return
        statuses = get_statuses(list(self.redeliveries), config=self.harness)
        for job_id, status in statuses.items():
            if status.state is JobState.SUCCEEDED:
                body = self.redeliveries.pop(job_id)
                job = self.jobs[job_id].job
                self._send_body(job, body if body is not None else self._member_body(job_id))
                self.sent["redelivery" if body is not None else "member_redelivery"] += 1
            elif status.state is JobState.DEAD:
                self.redeliveries.pop(job_id)
                self.sent["redelivery_dropped"] += 1

    def _raw_records(self, ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        client, table = self.harness.client("dynamodb"), self.harness.table_name()
        found: dict[str, dict[str, Any]] = {}
        ids = list(self.jobs) if ids is None else ids
        for start in range(0, len(ids), 100):
            request: dict[str, Any] = {
                table: {"Keys": [{"id": {"S": i}} for i in ids[start : start + 100]], "ConsistentRead": True}
            }
            while request:
                response = client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(table, []):
                    found[item["id"]["S"]] = item
                request = response.get("UnprocessedKeys") or {}
        return found

    def _workflows(self) -> dict[str, WorkflowStatus]:
        return {w.workflow_id: get_workflow(w.workflow_id, config=self.harness) for w in self.plan.workflows}

    def _workflows_running(self) -> list[str]:
        return [wid for wid, status in self._workflows().items() if not status.done]

    def _live_locks(self) -> list[str]:
        """Job ids whose record is running with an in-progress lock that has not expired yet."""
        now_ms = int(time.time() * 1000)
        return [
            job_id
            for job_id, item in self._raw_records().items()
            if item.get("state", {}).get("S") == JobState.RUNNING
            and int(item.get("in_progress_expiration", {}).get("N", "0")) > now_ms
        ]

    # -- judge --------------------------------------------------------------------------------------

    def _dead_letters(self) -> tuple[Counter[str], int, list[str]]:
        """(job ids in the DLQs, messages with the worker's reason attributes, ids of those without)."""
        ids: Counter[str] = Counter()
        with_reason, without = 0, []
        for job in JOB_QUEUES:
            for letter in peek_dead_letters(self.queues[job].dlq_url, limit=100_000, config=self.harness):
                job_id = letter.job_id or f"(no id: {letter.message_id})"
                ids[job_id] += 1
                if letter.attribute(ATTR_REASON) and letter.attribute(ATTR_ERROR_TYPE):
                    with_reason += 1
                else:
                    without.append(job_id)
        return ids, with_reason, without

    def _check_records(self, phase: str, statuses: dict[str, JobStatus], dlq: Counter[str]) -> None:
        """In the DLQ -> the record reads dead; completed (its effect done) and gone -> succeeded."""
        for job_id in self.jobs:
            status = statuses[job_id]
            if job_id in dlq:
                where, expected = "dlq", JobState.DEAD
            elif ledger.effects[job_id]:
                where, expected = "completed_and_gone", JobState.SUCCEEDED
            else:
                continue
            if status.state is not expected:
                self.report.mismatches.append(
                    Mismatch(phase, job_id, where, expected.value, status.state.value, status.note)
                )
        self.report.record_mismatches = len(self.report.mismatches)

    def judge_before_redrive(self) -> None:
        report = self.report
        dlq, with_reason, without = self._dead_letters()
        self.dlq_before = dlq
        self.statuses_before = get_statuses(list(self.jobs), config=self.harness)
        report.dlq_messages = sum(dlq.values())
        report.dlq_with_reason = with_reason
        report.dlq_without_reason_ids = without[:SHOWN]
        duplicated = sorted(i for i, n in dlq.items() if n > 1)
        report.dlq_duplicates, report.dlq_duplicate_ids = len(duplicated), duplicated[:SHOWN]
        poison = [j.job_id for j in self.plan.jobs if j.poison]
        report.poison_total = len(poison)
        report.poison_in_dlq = sum(1 for i in poison if i in dlq)
        report.poison_missing_from_dlq = [i for i in poison if i not in dlq]
        non_poison = sorted(i for i in dlq if i not in self.jobs or not self.jobs[i].poison)
        report.non_poison_in_dlq = len(non_poison)
        report.non_poison_in_dlq_ids = non_poison[:SHOWN]
        report.non_poison_in_dlq_bound = non_poison_bound(
            jobs=len(self.jobs) - len(poison),
            transient=self.settings.transient_rate,
            crash=self.settings.crash_rate,
            throttle_dynamodb=self.settings.throttle_dynamodb_rate,
            max_attempts=MAX_ATTEMPTS,
        )
        self._check_records("before_redrive", self.statuses_before, dlq)
        self.steps_before = self._check_steps("before_redrive", self.statuses_before, dlq)
        self.workflows_before = self._workflows()
        # A job that died is run again only by a redrive: before it, at most max_attempts runs each.
        again = [
            {"job_id": j.job_id, "runs": ledger.runs[j.job_id], "dlq_messages": dlq[j.job_id]}
            for j in self.plan.jobs
            if j.kind == "poison_raise" and ledger.runs[j.job_id] > MAX_ATTEMPTS
        ]
        report.dead_jobs_run_again, report.dead_jobs_run_again_ids = len(again), again[:SHOWN]

    # -- redrive ------------------------------------------------------------------------------------

    def redrive(self) -> None:
        """The operator's fix: the poison cause fixed, the faults stopped, every DLQ redriven."""
        ledger.fix_poison()
        ledger.faults_on = steps_ledger.faults_on = False
        self.injector.enabled = False
        ledger.mark_redrive()
        moved = 0
        for job in JOB_QUEUES:
            result = redrive(self.queues[job].dlq_url, self.queues[job].queue_url, config=self.harness)
            moved += result.moved
        self.report.redriven = len(self.dlq_before)
        self.sent["redriven_messages"] = moved

    # -- final --------------------------------------------------------------------------------------

    def judge_final(self) -> None:
        report = self.report
        dlq, _, _ = self._dead_letters()
        statuses = get_statuses(list(self.jobs), config=self.harness)
        self._check_records("final", statuses, dlq)
        workflows = self._workflows()
        self.unsent = {
            job.job_id
            for planned in self.plan.workflows
            for stage, members in enumerate(planned.members)
            if workflows[planned.workflow_id].done and not workflows[planned.workflow_id].stages[stage].sent
            for job in members
        }
        flows = {j.job_id for j in self.flow_jobs}
        lost = sorted(
            job_id
            for job_id, status in statuses.items()
            if status.state is not JobState.SUCCEEDED
            and not ledger.effects[job_id]
            and job_id not in dlq
            and job_id not in self.unsent
            and job_id not in flows
        )
        report.flow, wrong = self._judge_flow(statuses)
        lost += wrong  # flow jobs not in the final state planned (cancelled, superseded, succeeded)
        report.lost, report.lost_ids = len(lost), lost[:SHOWN]
        stuck = [s for s in statuses.values() if s.state in UNSETTLED_STATES]
        report.stuck_records = len(stuck)
        report.stuck = [
            {"job_id": s.job_id, "state": s.state.value, "attempts": s.attempts, "error": s.error}
            for s in stuck[:SHOWN]
        ]
        report.duplicate_effects = self._duplicates()
        report.workflows = [
            self._check_workflow(w, workflows[w.workflow_id], statuses) for w in self.plan.workflows
        ]
        self._check_redriven(statuses)
        report.steps = self._judge_steps(self._check_steps("final", statuses, dlq), statuses)
        report.settled = not report.unsettled
        report.faults = self._faults()

    # -- flow control ---------------------------------------------------------------------------------

    def _expected_states(self, planned: PlannedJob) -> tuple[JobState, ...]:
        """The final states a flow job may end in: cancelled (a running job asked to stop may also
        have finished without a check after the cancel: succeeded); superseded, or succeeded for a
        burst's last; succeeded for a keyed job."""
        if planned.flow == "cancel_before":
            return (JobState.CANCELLED,)
        if planned.flow == "cancel_running":
            outcome = self.cancels.get(planned.job_id, ("finished", 0.0, 0.0))[0]
            if outcome == "cancelled":
                return (JobState.CANCELLED,)
            return (
                (JobState.CANCELLED, JobState.SUCCEEDED) if outcome == "requested" else (JobState.SUCCEEDED,)
            )
        if planned.flow == "debounced" and not planned.burst_last:
            return (JobState.SUPERSEDED,)
        return (JobState.SUCCEEDED,)

    def _starts(self, planned: PlannedJob) -> list[float]:
        """When each run of a job started, as the job noted it (epoch seconds)."""
        if planned.job == FLOW:
            return [r.start for r in flow_ledger.runs if r.job_id == planned.job_id]
        return list(ledger.started.get(planned.job_id, []))

    def _judge_flow(self, statuses: dict[str, JobStatus]) -> tuple[FlowCheck, list[str]]:
        """Flow control (`FlowCheck`), and the flow jobs not in a final state their plan allows."""
        s = self.settings
        check = FlowCheck(cap=FLOW_KEY_CAP, burst_size=s.debounce_burst, debounce_seconds=s.debounce_seconds)
        if not self.flow_jobs:
            return check, []
        cancelled = self._flow("cancel_before", "cancel_running")
        check.cancelled_before = len(self._flow("cancel_before"))
        check.cancelled_running = len(self._flow("cancel_running"))
        check.cancel_outcomes = dict(
            Counter(self.cancels[j.job_id][0] for j in cancelled if j.job_id in self.cancels)
        )
        check.cancel_missed = sum(1 for j in cancelled if j.job_id not in self.cancels)
        again: list[dict[str, Any]] = []
        for planned in cancelled:
            if planned.job_id not in self.cancels:
                continue
            recorded = self.cancels[planned.job_id][2]
            starts = [t for t in self._starts(planned) if t > recorded]
            went_on = [
                p
                for p in flow_ledger.progress
                if p.job_id == planned.job_id and p.returned and p.called > recorded
            ]
            if starts or went_on:
                again.append(
                    {
                        "job_id": planned.job_id,
                        "runs_started_after": len(starts),
                        "reports_after": len(went_on),
                        "cancel": self.cancels[planned.job_id][0],
                    }
                )
        check.ran_after_cancel, check.ran_after_cancel_ids = len(again), again[:SHOWN]
        check.stopped_at_check = len({r.job_id for r in flow_ledger.runs if r.ended == "cancelled"})
        check.progress_refused = sum(1 for p in flow_ledger.progress if not p.returned)
        wrong: list[str] = []
        states: dict[str, Counter[str]] = {}
        for planned in self.flow_jobs:
            state = statuses[planned.job_id].state
            states.setdefault(planned.flow, Counter())[state.value] += 1
            if state not in self._expected_states(planned):
                wrong.append(planned.job_id)
                check.states_wrong_ids.append(
                    {"job_id": planned.job_id, "flow": planned.flow, "state": state.value}
                )
        check.states = {flow: dict(counts) for flow, counts in states.items()}
        check.states_wrong, check.states_wrong_ids = len(wrong), check.states_wrong_ids[:SHOWN]
        self._judge_cap(check)
        self._judge_bursts(check)
        return check, wrong

    def _judge_cap(self, check: FlowCheck) -> None:
        """The most runs of one key in progress at once, from the runs' own start and end, each cut at
        its invocation's deadline (its key's slot expires then, and Lambda would have stopped it)."""
        keyed = self._flow("keyed")
        check.keyed_jobs, check.keys = len(keyed), len({j.key for j in keyed})
        events: dict[str, list[tuple[float, int]]] = {}
        runs: list[FlowRun] = list(flow_ledger.runs)
        for run in runs:
            end = min(run.end if run.end is not None else run.deadline, run.deadline)
            events.setdefault(run.key, []).extend([(run.start, 1), (end, -1)])
            check.overran += run.end is None or run.end > run.deadline
        check.keyed_runs = sum(1 for r in runs if r.key in {j.key for j in keyed})
        for key, found in events.items():
            running = peak = 0
            for _, change in sorted(found):  # at the same instant an end comes before a start
                running += change
                peak = max(peak, running)
            if key in {j.key for j in keyed}:
                check.running_per_key[key] = peak
            check.max_running_per_key = max(check.max_running_per_key, peak)

    def _judge_bursts(self, check: FlowCheck) -> None:
        """Each debounced burst: its last enqueue ran once (effects less crashes before completion), no
        other enqueue of it started a run."""
        check.bursts = len(self.bursts)
        check.burst_seconds_max = max(self.burst_seconds.values(), default=0.0)
        check.burst_gap_seconds_max = max(self.burst_gaps.values(), default=0.0)
        for key, members in sorted(self.bursts.items()):
            runs = {m.job_id: len(ledger.started.get(m.job_id, [])) for m in members}
            last = members[-1].job_id
            if self._runs(last) == 1 and all(n == 0 for j, n in runs.items() if j != last):
                check.bursts_ran_once += 1
            else:
                ended = min(ledger.order.get(last, [0]), default=0)
                after = [m.job_id for m in members[:-1] if min(ledger.order.get(m.job_id, [0])) > ended]
                check.superseded_ran_after_last += len(after)
                check.bursts_not_once.append(
                    {
                        "key": key,
                        "ran_after_the_last": after,
                        "runs": runs,
                        "last_effects": ledger.effects[last],
                        "seconds": self.burst_seconds.get(key),
                    }
                )
        check.bursts_not_once = check.bursts_not_once[:SHOWN]

    # -- step jobs ----------------------------------------------------------------------------------

    def _check_steps(
        self, phase: str, statuses: dict[str, JobStatus], dlq: Counter[str]
    ) -> list[dict[str, Any]]:
        """Each step job's record against what happened: the steps it lists are the checkpoints in its
        item, which are the checkpoint writes the soak saw land; its `suspensions` are the park writes
        that landed; a success lists every step, in order, each with its duration, and returns every
        step's result. A job in the DLQ reads dead (`_check_records`); after the redrive every step
        job must have succeeded."""
        items = self._raw_records([j.job_id for j in self.step_jobs])
        found: list[dict[str, Any]] = []
        for planned in self.step_jobs:
            job_id, status = planned.job_id, statuses[planned.job_id]
            item = items.get(job_id, {})
            in_table = sorted(
                attribute.removeprefix(STEP_ATTRIBUTE.format(""))
                for attribute, value in item.items()
                if attribute.startswith(STEP_ATTRIBUTE.format("")) and "r" in value.get("M", {})
            )
            landed = sorted(
                name
                for (j, name), writes in steps_ledger.writes.items()
                if j == job_id and any(outcome in LANDED for _, outcome in writes)
            )
            listed = [s.name for s in status.steps]
            problems = []
            if sorted(listed) != in_table:
                problems.append(f"lists steps {listed}, its item holds checkpoints {in_table}")
            if in_table != landed:
                problems.append(f"its item holds checkpoints {in_table}, the soak saw {landed} land")
            if status.suspensions != steps_ledger.parks[job_id]:
                problems.append(
                    f"suspensions {status.suspensions}, park writes landed {steps_ledger.parks[job_id]}"
                )
            names = [step_name(n) for n in range(1, planned.steps + 1)]
            if status.state is JobState.SUCCEEDED:
                if listed != names:
                    problems.append(f"succeeded listing steps {listed}, not {names}")
                if any(s.duration_ms is None or s.finished_at is None for s in status.steps):
                    problems.append("a step listed without its duration or end")
                expected = {"results": [step_result(job_id, name) for name in names]}
                if status.result != expected:
                    problems.append(f"result {status.result}, expected {expected}")
            elif status.state is not JobState.DEAD or job_id not in dlq or phase == "final":
                problems.append(f"{status.state.value} (in the DLQ: {job_id in dlq})")
            if problems:
                found.append(
                    {"phase": phase, "job_id": job_id, "state": status.state.value, "problems": problems}
                )
        return found

    def _judge_steps(self, final: list[dict[str, Any]], statuses: dict[str, JobStatus]) -> StepsCheck:
        """Every run of every step against the checkpoint writes before it (`chaos.steps`): a run
        after its checkpoint landed (in the table, or seen to land) is a step run again, the gate;
        every other run but a step's first must follow an earlier run that raised, or a write of its
        checkpoint that did not land (crashed before, throttled past its tries, refused, stopped at its
        invocation's deadline: Lambda's timeout), told before it started or, for the run before's own
        write, after (its invocation overran, and the job was taken over before that write)."""
        check = StepsCheck(jobs=len(self.step_jobs), steps=sum(j.steps for j in self.step_jobs))
        check.one_per_invocation = sum(1 for j in self.step_jobs if j.one_per_invocation)
        check.records = self.steps_before + final
        check.record_mismatches = len(check.records)
        check.records = check.records[:SHOWN]
        causes: Counter[str] = Counter()
        again: list[dict[str, Any]] = []
        for (job_id, name), runs in sorted(steps_ledger.executions.items()):
            writes = steps_ledger.writes.get((job_id, name), [])
            check.executions += len(runs)
            landings = [seq for seq, outcome in writes if outcome in LANDED]
            check.checkpoints_landed += len(landings)
            if len(landings) > 1:
                check.landed_twice += 1
                again.append(
                    {"job_id": job_id, "step": name, "why": f"its checkpoint landed {len(landings)} times"}
                )
            for n, run in enumerate(runs):
                after = run.in_table or run.landed_before or any(seq < run.seq for seq in landings)
                if after:
                    if run.overran:
                        check.run_again_after_deadline += 1
                    else:
                        again.append(
                            {
                                "job_id": job_id,
                                "step": name,
                                "run": n + 1,
                                "attempt": run.attempt,
                                "in_table": run.in_table,
                                "seen_landed": run.landed_before,
                            }
                        )
                    continue
                if n == 0:
                    continue
                check.reruns += 1
                cause = rerun_cause(runs[n - 1], run, writes)
                causes[cause] += 1
                if cause == "other":
                    check.reruns_unexplained_ids.append(f"{job_id} {name} run {n + 1}")
        check.run_again = len(again) - check.landed_twice
        check.run_again_ids = again[:SHOWN]
        check.reruns_by_cause = dict(causes)
        check.reruns_unexplained = causes["other"]
        check.reruns_unexplained_ids = check.reruns_unexplained_ids[:SHOWN]
        check.transient = steps_ledger.transient
        check.planned_raises = steps_ledger.planned_raises
        check.parks_landed = sum(steps_ledger.parks.values())
        check.planned_faults = dict(Counter(point for j in self.step_jobs for point, _ in j.step_faults))
        check.fired_faults = {point: self.injector.counts.step_faults[point] for point in STEP_FAULTS}
        check.states = dict(Counter(self.statuses_before[j.job_id].state.value for j in self.step_jobs))
        check.succeeded = sum(1 for j in self.step_jobs if statuses[j.job_id].state is JobState.SUCCEEDED)
        check.max_attempts = STEPS_MAX_ATTEMPTS
        return check

    def _runs(self, job_id: str) -> int:
        """A job id's effects, less those a crash before its completion explains (`_duplicates`)."""
        counts = self.injector.counts
        effects = ledger.effects[job_id]
        return effects - min(
            max(0, effects - 1), counts.completion_crashes[job_id] + counts.completion_overruns[job_id]
        )

    def _check_workflow(
        self, planned: PlannedWorkflow, final: WorkflowStatus, statuses: dict[str, JobStatus]
    ) -> WorkflowCheck:
        """One workflow, judged on what ran (the ledger) and the members' records, before the redrive
        (when the chord's callback ran) and after it (a redriven member counted again, dead to ok)."""
        check = WorkflowCheck(
            workflow_id=planned.workflow_id,
            kind=planned.kind,
            members=len(planned.jobs),
            state=final.state,
            done=final.done,
            state_before_redrive=self.workflows_before[planned.workflow_id].state,
            reason=final.reason,
            seconds=_seconds_between(final.created_at, final.ended_at),
        )
        for phase, status, records in (
            ("before_redrive", self.workflows_before[planned.workflow_id], self.statuses_before),
            ("final", final, statuses),
        ):
            for index, members in enumerate(planned.members):
                if index >= len(status.stages):
                    check.count_mismatches.append(f"{phase}: stage {index} missing from get_workflow")
                    continue
                stage = status.stages[index]
                found = Counter(records[j.job_id].state for j in members)
                real = {"succeeded": found[JobState.SUCCEEDED], "dead": found[JobState.DEAD]}
                counted = {"succeeded": stage.succeeded, "dead": stage.dead}
                check.stages.setdefault(phase, []).append(
                    {"total": stage.total, "sent": stage.sent, **counted}
                )
                if stage.total != len(members) or (stage.sent and counted != real):
                    check.count_mismatches.append(
                        f"{phase}: stage {index} counts {counted} of {stage.total}, member records {real} "
                        f"of {len(members)}"
                    )
        if planned.kind == "chord":
            header, (callback,) = planned.members
            found = Counter(self.statuses_before[j.job_id].state for j in header)
            check.expected_parents = {
                "total": len(header),
                "succeeded": found[JobState.SUCCEEDED],
                "dead": found[JobState.DEAD],
            }
            check.callback_job_id = callback.job_id
            check.callback_effects = ledger.effects[callback.job_id]
            check.callback_runs = self._runs(callback.job_id)
            check.callback_parents = list(ledger.parents.get(callback.job_id, []))
            check.parent_mismatches = sum(1 for p in check.callback_parents if p != check.expected_parents)
            if final.callback_job_id != callback.job_id:
                check.problems.append(f"get_workflow names callback {final.callback_job_id!r}")
            if check.callback_runs != 1:
                check.problems.append(f"the callback ran {check.callback_runs} times (effects less crashes)")
        else:
            check.problems += self._chain_problems(planned, final)
        if not final.done:
            check.problems.append(f"not done: {final.state}")
        return check

    def _chain_problems(self, planned: PlannedWorkflow, final: WorkflowStatus) -> list[str]:
        """Each step sent ran once (effects less crashes before completion), told its step before
        succeeded, and every effect of a step came before any of the next. A step never sent is
        allowed only in a chain that ended dead (a step died: it stopped), and never ran."""
        problems: list[str] = []
        previous_last = 0
        for index, (step,) in enumerate(planned.members):
            order = ledger.order.get(step.job_id, [])
            if not final.stages[index].sent:
                if order or final.state != "dead" or index == 0:
                    problems.append(f"step {index}: never sent, ran {len(order)} times, chain {final.state}")
                continue
            runs = self._runs(step.job_id)
            if runs != 1:
                problems.append(f"step {index}: ran {runs} times (effects less crashes before completion)")
            if order and min(order) < previous_last:
                problems.append(f"step {index}: ran before the step before it finished")
            told = ledger.parents.get(step.job_id, [])
            if index and any(p != {"total": 1, "succeeded": 1, "dead": 0} for p in told):
                problems.append(f"step {index}: told {told}")
            previous_last = max(order, default=previous_last)
        return problems

    def _duplicates(self) -> DuplicateEffects:
        """Attribute each effect beyond a job id's first: to a crash at one of its completion writes
        (or a completion write past its invocation's deadline: Lambda would have killed that
        invocation first), else to a throttled completion write of it, else `other`."""
        found = DuplicateEffects()
        counts = self.injector.counts
        for job_id, effects in sorted(ledger.effects.items()):
            extra = effects - 1
            if extra <= 0:
                continue
            crash = min(extra, counts.completion_crashes[job_id] + counts.completion_overruns[job_id])
            throttle = min(extra - crash, counts.completion_throttles[job_id])
            found.crash_before_completion += crash
            found.completion_write_fault += throttle
            other = extra - crash - throttle
            if other:
                found.other += other
                found.other_ids.append(job_id)
        found.other_ids = found.other_ids[:SHOWN]
        return found

    def _check_redriven(self, statuses: dict[str, JobStatus]) -> None:
        """Each redriven job completed exactly once: succeeded, with one effect after the redrive (none
        when it had already succeeded before it: the redrive delivered a duplicate)."""
        completed, wrong = 0, []
        for job_id in self.dlq_before:
            before = self.statuses_before.get(job_id)
            already = before is not None and before.state is JobState.SUCCEEDED
            after = ledger.effects_after_redrive[job_id]
            state = statuses[job_id].state if job_id in statuses else JobState.PENDING
            if state is JobState.SUCCEEDED and after == (0 if already else 1):
                completed += 1
            else:
                wrong.append({"job_id": job_id, "state": state.value, "effects_after_redrive": after})
        self.report.redriven_completed = completed
        self.report.redriven_not_once = wrong[:SHOWN]

    def _faults(self) -> dict[str, Any]:
        counts = self.injector.counts
        kinds = Counter(j.kind for j in self.plan.jobs)
        return {
            "transient": sum(ledger.transient.values()),
            "poison_invalid": kinds["poison_invalid"],
            "poison_raise": kinds["poison_raise"],
            "producer_resends": self.sent["resend"],
            "forced_redeliveries": self.sent["redelivery"],
            "forced_redeliveries_not_possible": self.sent["redelivery_dropped"],
            "scheduled_slots": sum(1 for j in self.plan.jobs if j.scheduled_at),
            "scheduled_extra_deliveries": self.sent["scheduled"],
            "slow_jobs": kinds["slow"],
            "slow_received_while_running": sum(h.received_while_running for h in self.handlers.values()),
            "crashes": {
                "before_completion": counts.crashes["complete"],
                "before_start": counts.crashes["acquire"],
                "forced_plans": counts.crashes_forced,
                "workflow_after_count": counts.crashes["counted"],
                "workflow_at_notice": counts.crashes["notice"],
                "continuer_after_claim": counts.crashes["claimed"],
                "continuer_before_advanced": counts.crashes["stage_sent"],
            },
            "workflows": len(self.plan.workflows),
            "workflow_enqueued_again": self.sent["workflow_again"],
            "workflow_member_redeliveries": self.sent["member_redelivery"],
            "transaction_conflicts": counts.transaction_conflicts,
            "continuer_invocations": counts.continuer_invocations,
            "throttled_dynamodb": dict(counts.throttled_dynamodb),
            "throttled_sqs": dict(counts.throttled_sqs),
            "throttles_forced": counts.throttles_forced,
            "worker_calls": dict(counts.calls),
            "invocations": counts.invocations,
            "effects_after_deadline": sum(ledger.overruns.values()),
            "completions_after_deadline": sum(counts.completion_overruns.values()),
            "redriven_messages": self.sent["redriven_messages"],
            "steps": {
                **{point: self.injector.counts.step_faults[point] for point in STEP_FAULTS},
                "write_throttles": self.injector.counts.step_throttles,
                "transient": steps_ledger.transient,
                "planned_raises": steps_ledger.planned_raises,
                "parks_landed": sum(steps_ledger.parks.values()),
                "stopped_at_deadline": dict(self.injector.counts.deadline_stops),
                "producer_resends": sum(1 for j in self.step_jobs if j.resend),
            },
        }
