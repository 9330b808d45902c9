"""The worker pipeline: one Lambda entry point that runs any job from its SQS queue.

Per record, in order:

1. **Decode once** (`lambdajobs.runtime.delivery`): the record becomes a frozen `Delivery`.
2. **Gates** (`lambdajobs.runtime.gates`, and the rate limit's in `lambdajobs.runtime.ratelimit`): each
   looks at the delivery and returns a decision, or None for the next one: a carried outcome to record,
   too late in the invocation, an envelope that cannot run here, another priority level's message, an
   invalid payload, past the last attempt, the rate limit. None of them decided: run.
3. **Run** under the job's lock (the job record, through Powertools' idempotency utility and
   `JobRecordStore`), and decide from what the run did: succeeded, failed (retry or dead), a duplicate,
   a lock held elsewhere, a success whose write failed.
4. **Carry the decision out** (`lambdajobs.runtime.effects`): hand a copy back, dead-letter, retry.

Powertools' BatchProcessor reports failed records as batch item failures, so only they come back.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled as metrics_disabled
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from pydantic import BaseModel

from lambdajobs.runtime import config as configuration
from lambdajobs.runtime import delivery as deliveries
from lambdajobs.runtime import gates, lifecycle, logbuffer, pii
from lambdajobs.runtime.aws import transient
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.context import JobCancelled, JobContext, LockLost, Suspend
from lambdajobs.runtime.delivery import Delivery, about, attempt_of
from lambdajobs.runtime.effects import Effects
from lambdajobs.runtime.errors import ConfigurationError, FunctionInitError, UnknownJobError
from lambdajobs.runtime.gates import Done, Run
from lambdajobs.runtime.records import (
    IdempotencyConfigPerThread,
    JobRecordStore,
    RunData,
    Uncopied,
    error_fields,
)
from lambdajobs.runtime.settings import METRICS_NAMESPACE, SERVICE_NAME, job_for_queue, queue_of
from lambdajobs.runtime.spec import JobSpec, active_registry, ensure_loaded, get_spec, unloaded_spec

if TYPE_CHECKING:
    from lambdajobs.runtime.gates import Decision
    from lambdajobs.runtime.job_record import JobRecord

__all__ = ["Worker", "attempt_of", "deadline_margin_ms", "logger", "metrics", "transient"]

logger = logbuffer.RecordLogger(service=SERVICE_NAME)
pii.install(logger)  # every line is checked for the current record's personal data
logbuffer.install(logging.getLogger(logger.service))  # a record's INFO lines: kept until it fails
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)


def deadline_margin_ms(spec: JobSpec) -> float:
    """Time kept free at the end of an invocation: 10% of the timeout, between 0.5 s and 5 s.

    A Lambda timeout mid-batch redelivers the whole batch, so after the first record the worker does
    not start another unless the margin plus the longest run of this invocation still fits.
    """
    return max(500.0, min(5000.0, spec.timeout_seconds * 100.0))


class _Invocation:
    """One invocation's timing: the records started, the longest run. (Plain classes on the path of
    every record: a dataclass costs a cold start ten times as much to define.)"""

    __slots__ = ("context", "longest_ms", "started")

    def __init__(self, context: Any) -> None:
        self.context = context
        self.started = 0
        self.longest_ms = 0.0

    def too_late(self, spec: JobSpec) -> str | None:
        """Why a record should not start now, or None. The first record of an invocation always
        starts; a later one only if the margin plus the longest run so far still fits. A record not
        started is handed back without costing an attempt, on its last attempt too."""
        if self.context is None or self.started == 0:
            return None
        remaining_ms = self.context.get_remaining_time_in_millis()
        needed_ms = deadline_margin_ms(spec) + self.longest_ms
        if remaining_ms >= needed_ms:
            return None
        return f"not started: {remaining_ms} ms left, {needed_ms:.0f} ms needed"

    def room(self, spec: JobSpec, wait_ms: float) -> bool:
        """Whether the invocation has time to wait `wait_ms` and then run the job."""
        if self.context is None:
            return True
        needed_ms = wait_ms + deadline_margin_ms(spec) + self.longest_ms
        return bool(self.context.get_remaining_time_in_millis() >= needed_ms)


class _Outcome:
    """What the job function did in this run, whatever Powertools raised around it."""

    __slots__ = ("error", "result", "returned", "start_by_us", "started")

    def __init__(
        self,
        start_by_us: int | None = None,
        *,
        started: bool = False,
        returned: bool = False,
        result: Any = None,
    ) -> None:
        self.start_by_us = start_by_us
        self.started, self.returned, self.result = started, returned, result
        self.error: BaseException | None = None


_outcome: ContextVar[_Outcome] = ContextVar("lambdajobs_outcome")


class Worker:
    """Runs the records of one job's queue (or, with no `job`, of whichever job's queue a batch comes
    from: the local stack serves every job in one process).

    `config` is the stack it works in (default: the current configuration); `emit_metrics=False`
    keeps EMF lines out of a terminal (the local stack).

    Example:
        >>> worker = Worker("send_email", config=StackConfig.from_environment())
        >>> worker.handle(sqs_event, lambda_context)
        {'batchItemFailures': []}
    """

    def __init__(
        self,
        job: str | None = None,
        *,
        config: StackConfig | None = None,
        store: JobRecordStore | None = None,
        emit_metrics: bool = True,
        init_error: FunctionInitError | None = None,
    ) -> None:
        self._job = job
        #: Why the function could not load its job at its cold start (`handler.from_environment`): then
        #: every record is dead-lettered with it, and nothing runs.
        self.init_error = init_error
        self.stack_config = configuration.resolve(config)
        self.store = store or JobRecordStore(self.stack_config)
        self.emit_metrics = emit_metrics
        #: Powertools' idempotency configuration: the lock's expiry, per thread's Lambda context.
        self.idempotency_config = IdempotencyConfigPerThread(
            expires_after_seconds=self.stack_config.record_ttl_seconds
        )
        #: Draws backoff delays (tests replace it).
        self.rng = random.Random()
        self.effects = Effects(self.stack_config, self.store, metric=self._count, log=logger)
        self._run_once = idempotent_function(
            data_keyword_argument="run", persistence_store=self.store, config=self.idempotency_config
        )(_execute)

    def _count(self, name: str, value: float) -> None:
        self._metric(name, MetricUnit.Count, value)

    def _metric(self, name: str, unit: MetricUnit, value: float) -> None:
        # Powertools keeps adding (and prints at 100 values) even when POWERTOOLS_METRICS_DISABLED is
        # set, so honour both before adding.
        if not self.emit_metrics:
            return
        # a value of a metric added since the last flush (metrics were on, and its name, unit and
        # resolution checked, then: in this invocation, which flushes at its end) is appended as
        # Powertools appends it, without its checks, its debug line and the environment read again;
        # the 100th goes through Powertools, which flushes at 100 (its MAX_METRICS)
        added = metrics.metric_set.get(name) or {}
        known = (added.get("Unit"), added.get("StorageResolution")) == (unit.value, 60)
        if known and len(added["Value"]) < 99:
            added["Value"].append(float(value))
        elif not metrics_disabled():
            metrics.add_metric(name=name, unit=unit, value=value)

    def _metrics_on(self) -> bool:
        return self.emit_metrics and not metrics_disabled()

    def spec_for(self, event: dict[str, Any]) -> JobSpec:
        """The job this invocation serves: the worker's job (CDK sets `LAMBDAJOBS_JOB` on each
        function), else the job whose queue the records come from."""
        name = self._job
        if not name:
            records = event.get("Records") or [{}]
            name = job_for_queue(self.stack_config.stack, str(records[0].get("eventSourceARN", "")))
        if not name:
            raise ConfigurationError(
                "this worker does not know which job it serves: set LAMBDAJOBS_JOB on the function "
                "(the lambdajobs CDK constructs do), or pass Worker(job=...)."
            )
        return self._lookup(name)

    def _lookup(self, name: str) -> JobSpec:
        if self.init_error is not None:  # nothing declares the job here: a stand-in that never runs
            if name != self._job:
                raise UnknownJobError(f"job '{name}' is not this function's ('{self._job}').")
            return unloaded_spec(name)
        if name not in active_registry():  # not imported by this function: its jobs package, explicitly
            ensure_loaded(self.stack_config.jobs)
        return get_spec(name)

    def dlq_url(self, spec: JobSpec, level: str | None = None) -> str:
        """The DLQ of a job's queue (of a priority level's, with `level`)."""
        return self.stack_config.dlq_url(spec.name, level)

    def _level_of(self, spec: JobSpec, record: SQSRecord) -> str | None:
        """The priority level whose queue a record came from (None: the job's own queue)."""
        found = queue_of(self.stack_config.stack, record.event_source_arn or "")
        level = found[1] if found else None
        return level if level in spec.priorities[:-1] else None

    def delivery(self, spec: JobSpec, record: SQSRecord) -> Delivery:
        """A record of `spec`'s queue, decoded (`lambdajobs.runtime.delivery.read`)."""
        return deliveries.read(spec, record, source_level=self._level_of(spec, record), lookup=self._lookup)

    def job_id_of(self, spec: JobSpec, record: SQSRecord) -> str | None:
        """The job id a message stands for, as the worker derives it (None if it cannot be read): the
        envelope's id, else the job's idempotency key of the payload, else the message id."""
        return _rare().job_id_of(self, spec, record)

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda handler body: a partial batch response `{"batchItemFailures": [...]}`.

        While it runs, `current()` is this worker's configuration: a job's own `enqueue`,
        `get_status` or `count_finished` reach the same stack.
        """
        with configuration.using(self.stack_config):
            return self._handle(event, context)

    def _handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        spec = self.spec_for(event)  # a misconfigured function fails the whole batch: nothing is deleted
        self.idempotency_config.register_lambda_context(context)
        invocation = _Invocation(context)
        if self._metrics_on():
            # cleared by every flush; the stack keeps staging and prod apart in one account's namespace
            metrics.add_dimension(name="job", value=spec.name)
            metrics.add_dimension(name="stack", value=self.stack_config.stack)
        # raise_on_entire_batch_failure=False: report every failed record by id even when all fail,
        # instead of failing the invocation (same retries, clearer errors).
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        record_handler: Callable[[SQSRecord], Any] = lambda record: self._process(spec, record, invocation)  # noqa: E731
        if spec.tracing or self.stack_config.tracing:  # opt-in: then, and only then, imported
            from lambdajobs.runtime import tracing

            record_handler = tracing.job_handler(spec, record_handler)
        try:
            response: dict[str, Any] = process_partial_response(  # type: ignore[assignment]
                event=event,
                record_handler=record_handler,
                processor=processor,
                context=context,
            )
            return response
        finally:
            if self._metrics_on():
                if metrics.metric_set:
                    metrics.flush_metrics(raise_on_empty_metrics=False)
                else:  # nothing to publish: no empty-flush warning, and no dimensions left over
                    metrics.clear_metrics()

    # -- one record ---------------------------------------------------------------------------------

    def _process(self, spec: JobSpec, record: SQSRecord, invocation: _Invocation) -> Any:
        d = self.delivery(spec, record)
        if d.carried is not None and d.carried.discarded:  # forged, damaged: never trusted, never a crash
            logger.warning(
                "ignoring an outcome on a handed-back message", extra={"reason": d.carried.discarded}
            )
        # the record's keys go on its written lines (per thread: the local stack runs batches at once)
        keys = (
            {"correlation_id": d.job_id, "job": spec.name, "attempt": d.attempt}
            if d.payload is not None
            else {}
        )
        # a success drops its INFO lines (and writes none); a warning writes them
        with pii.bound(spec.pii_fields, d.raw_payload), logbuffer.held(logger, keys, keep=spec.buffer_logs):
            return self._process_held(d, invocation)

    def _process_held(self, d: Delivery, invocation: _Invocation) -> Any:
        decision = self._decide(d, invocation)
        if not isinstance(decision, Run):
            return self.effects.apply(d, decision)
        slot, busy = self._key_slot(d, invocation)  # before the wait: its write is not
        if busy is not None:  # between the rate-limit slot and the start
            return self.effects.apply(d, busy)
        _wait_for(decision, self._count)  # a rate-limit slot less than a second away
        invocation.started += 1
        started = time.perf_counter()
        try:
            if d.spec.record_mode == "light":  # no lock, the record written once: light jobs only
                return self._run_light(d, decision, invocation.context)
            return self._run(d, decision, invocation.context, fresh=invocation.started == 1)
        finally:
            invocation.longest_ms = max(invocation.longest_ms, (time.perf_counter() - started) * 1000)
            if slot is not None:
                self._release(slot)

    def _debounce(self, d: Delivery) -> Decision | None:
        """A debounced enqueue runs only if no later enqueue of its key came
        (`lambdajobs.runtime.debounce.claim`), on any delivery (a first attempt whose invocation
        crashed comes back as the second); a retry of a run that started goes on; a continuation or
        a copy carrying an outcome has claimed already."""
        if d.envelope is None or d.envelope.debounce is None or d.job_id is None:
            return None
        return _rare().debounced(self, d)

    def _started_before(self, job_id: str) -> bool:
        """Whether the job has a run's record (a retry of a debounced job superseded since it ran)."""
        return _rare().started_before(self, job_id)

    def _key_slot(self, d: Delivery, invocation: _Invocation) -> tuple[Any, Decision | None]:
        """A slot of the job's concurrency key (`lambdajobs.runtime.keyslots`), or the decision when
        none is free (handed back, using no attempt) or it cannot be taken (as a lock not taken)."""
        if d.spec.concurrency_key is None or d.payload is None or d.job_id is None:
            return None, None
        return _rare().key_slot(self, d, invocation)

    def _release(self, held: tuple[Any, Any]) -> None:
        return _rare().release(self, held)

    def _decide(self, d: Delivery, invocation: _Invocation) -> Decision:
        """The gates, in order: the first decision taken, else `Run`."""
        spec = d.spec
        for gate in (
            gates.carried_outcome,
            lambda d: gates.deadline(d, lambda: invocation.too_late(spec)),
            lambda d: gates.init_failed(d, self.init_error),
            gates.unrunnable,
            lambda d: gates.routing(
                d, lambda level: self.stack_config.queue_url(spec.name, level), _unroutable
            ),
            gates.validation,
            self._debounce,
        ):
            decision = gate(d)
            if decision is not None:
                return decision
        record = self.store.reader(d.job_id)
        if d.attempt > spec.max_attempts or d.resume_wake is not None:  # a late copy, a continuation
            return _rare().read_first(self, d, record, invocation)
        return self._rate_limit(d, record, invocation) or Run()

    def _rate_limit(
        self, d: Delivery, record: Callable[[], JobRecord | None], invocation: _Invocation
    ) -> Decision | None:
        if d.spec.rate_limit is None:
            return None
        return _rare().rate_limit(self, d, record, invocation)

    # -- the run ------------------------------------------------------------------------------------

    def _run_light(self, d: Delivery, go: Run, context: Any) -> Any:
        from lambdajobs.runtime import light  # light jobs only: not at a cold start

        return light.run(self, d, go, context)

    def _run(self, d: Delivery, go: Run, context: Any, *, fresh: bool = True) -> Any:
        spec, job_id = d.spec, d.job_id
        assert job_id is not None and d.payload is not None
        # Powertools deep-copies the run on every call: RunData's copy is itself (nobody changes it)
        run: dict[str, Any] = RunData(
            job_id=job_id, job=spec.name, attempt=d.attempt, max_attempts=spec.max_attempts
        )
        # a copy from the DLQ (it carries the reason given there) may run a dead job again; any other
        # copy runs only an attempt that has not run yet (the record's fence)
        run["redriven"] = d.redriven
        if d.resume_wake is not None:  # a parked durable job continues: its progress stays
            run["resumed"] = True
        if d.member is not None:  # its outcome is counted in the workflow's item
            run["workflow"] = {"id": d.member.id, "stage": d.member.stage}
        # kept on the record by the writes that happen anyway: the acquire, a failure's
        run["about"] = about(d)
        run["payload"] = Uncopied(d.raw_payload)
        ctx = self._context(d, job_id, context, fresh)
        started = time.perf_counter()
        outcome = _Outcome(start_by_us=go.start_by_us)
        token = _outcome.set(outcome)
        try:
            result = self._run_once(run=run, spec=spec, payload=d.payload, ctx=ctx)
            after: Decision = self._returned(outcome, result)
        except (LockLost, Suspend, JobCancelled) as stopped:  # not Exceptions: the run stops here
            after = self._stopped(d, stopped)
        except IdempotencyAlreadyInProgressError:
            after = self._lock_held()
        except Exception as exc:
            after = self._raised(d, run, outcome, exc)
        finally:
            _outcome.reset(token)
            if outcome.started:
                self._metric("JobDuration", MetricUnit.Milliseconds, (time.perf_counter() - started) * 1000)
        if outcome.started and d.attempt == 1 and d.spec.searchable and not d.redriven:
            self._search_entries(d, run["about"])
        return self.effects.apply(d, after)

    def _search_entries(self, d: Delivery, about: dict[str, Any]) -> None:
        """The job's search entries (`lambdajobs.runtime.search`), at its first attempt, in one
        BatchWriteItem. A failure never fails the job: it is logged and counted."""
        return _rare().search_entries(self, d, about)

    def _context(self, d: Delivery, job_id: str, context: Any, fresh: bool) -> JobContext:
        """The run's `ctx`; its durable state is built when a step, a sleep or a wait first needs it
        (`JobContext.durable_factory`: most runs take none)."""
        ctx: JobContext = self.job_context(
            d,
            job_id,
            context,
            self.store.set_progress,
            durable_factory=lambda acquired: _rare().durable_state(self, d, job_id, ctx, fresh, acquired),
            acquired_reader=self.store.acquired,
        )
        return ctx

    def job_context(
        self,
        d: Delivery,
        job_id: str,
        context: Any,
        progress_sink: Callable[[str, float, str | None], None],
        **durable: Any,
    ) -> JobContext:
        """A run's `ctx` (both record modes'): `progress_sink` takes its progress reports; `durable`,
        JobContext's `durable_factory` and `acquired_reader` (the full mode's)."""
        return JobContext(
            job_id=job_id,
            job=d.spec.name,
            attempt=d.attempt,
            max_attempts=d.spec.max_attempts,
            logger=logger,
            lambda_context=context,
            progress_sink=progress_sink,
            scheduled_at=d.envelope.scheduled_at if d.envelope else None,
            config=self.stack_config,
            workflow=d.member,
            cancel_check=lambda: self.store.cancel_requested(job_id),
            **durable,
        )

    def _stopped(self, d: Delivery, stopped: BaseException) -> Decision:
        """A run that stopped without an outcome: its lock was taken over (the taker records the
        outcome), it parked (a sleep, a signal wait, a continuation), or it was cancelled at a check."""
        return _rare().stopped(self, d, stopped)

    def _returned(self, outcome: _Outcome, result: Any) -> Decision:
        if outcome.started:
            if logbuffer.writing():  # lines of this record were written (a warning, buffer_logs=False):
                logger.info("job succeeded")  # they end with the outcome; else a success writes none
            return Done("succeeded", metric="JobSucceeded", notify=True, result=result)
        return gates.duplicate(self.store.held())  # Powertools answered from the record: nothing ran

    def _lock_held(self) -> Decision:
        return gates.lock_held(self.store.held())

    def _raised(self, d: Delivery, run: dict[str, Any], outcome: _Outcome, exc: Exception) -> Decision:
        return _rare().raised(self, d, run, outcome, exc)


def _wait_for(go: Run, count: Callable[[str, float], None]) -> None:
    """Sleep until the run's start (a rate-limit slot less than a second away), if it is ahead."""
    if go.start_at_us is None:
        return
    wait_seconds = (go.start_at_us - time.time() * 1_000_000) / 1_000_000
    if wait_seconds > 0:
        count("JobRateLimited", 1)
        time.sleep(wait_seconds)


def _unroutable(d: Delivery, exc: BaseException) -> None:
    priority = d.envelope.priority if d.envelope is not None else None
    logger.warning(
        "cannot reach the queue of the message's priority; running it here",
        extra={"priority": priority, "error": error_fields(exc)},
    )


def _execute(run: dict[str, Any], spec: JobSpec, payload: BaseModel, ctx: JobContext) -> Any:
    """The job function, called by Powertools under the job's lock. A rate-limited run that would
    start after its slot's allowance gives the lock back instead (`lifecycle.RunNotStarted`)."""
    outcome = _outcome.get()
    if outcome.start_by_us is not None and time.time() * 1_000_000 > outcome.start_by_us:
        outcome.error = lifecycle.RunNotStarted("past its rate-limit slot's allowance")
        raise outcome.error
    outcome.started = True
    ctx.capture()  # the record and lock this run took, read on its own thread (for its durable state)
    try:
        result = spec.func(payload, ctx) if spec.takes_context else spec.func(payload)
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        # The result is stored as JSON. Make it JSON now (datetimes, decimals, sets become strings):
        # failing to store it after the job ran would run the job again.
        result = json.loads(json.dumps(result, default=str))
    except Exception as exc:
        outcome.error = exc
        raise
    outcome.returned, outcome.result = True, result
    return result


def _rare() -> Any:
    """`lambdajobs.runtime.worker_rare`, the paths a plain record's success never takes (a debounce
    claim, a key's slot, search entries, a run that raised or stopped): imported on first use, so a
    cold start whose record succeeds does not compile it."""
    from lambdajobs.runtime import worker_rare

    return worker_rare
