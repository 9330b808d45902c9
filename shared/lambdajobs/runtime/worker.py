"""The worker pipeline: one Lambda entry point that runs any job from its SQS queue.

Per record: decode the envelope, validate the payload, acquire the job record (idempotency lock,
keyed on the job id), run the job, complete the record. Powertools' BatchProcessor reports failed
records as batch item failures, so only they come back.

A record that can never succeed (undecodable envelope, unknown job, invalid payload, `PermanentError`)
and a failure on the last attempt go to the dead-letter queue at once, with the reason in message
attributes; if that move fails, the record is reported failed and SQS redrive still catches it.
"""

from __future__ import annotations

import base64
import json
import math
import random
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled as metrics_disabled
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyAlreadyInProgressError,
    IdempotencyPersistenceLayerError,
)
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectTimeoutError,
    HTTPClientError,
    ReadTimeoutError,
)
from pydantic import BaseModel

from lambdajobs.runtime import config as configuration
from lambdajobs.runtime import lifecycle, pii
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.context import JobContext
from lambdajobs.runtime.envelope import Envelope, WorkflowField, decode, parse_body
from lambdajobs.runtime.errors import (
    ConfigurationError,
    EnvelopeError,
    LastAttemptLostError,
    NotStartedError,
    PayloadValidationError,
    RateLimitBusyError,
    UnknownJobError,
    UnknownPriorityError,
)
from lambdajobs.runtime.records import JobRecordStore, error_fields
from lambdajobs.runtime.settings import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_TYPE,
    ATTR_FAILED_AT,
    ATTR_PRIOR_ATTEMPTS,
    ATTR_RATE_SLOT,
    ATTR_REASON,
    ATTR_SETTLE,
    DLQ_ATTRIBUTES,
    HANDBACK_ATTRIBUTES,
    METRICS_NAMESPACE,
    SERVICE_NAME,
    job_for_queue,
    queue_key,
    queue_of,
)
from lambdajobs.runtime.spec import JobSpec, get_spec

logger = Logger(service=SERVICE_NAME)
pii.install(logger)  # every line is checked for the current record's personal data
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)

MAX_SQS_ATTRIBUTES = 10  # SQS: at most 10 message attributes per message
MAX_DELAY_SECONDS = 900  # SQS: DelaySeconds at most 15 minutes
#: A bookkeeping call that failed (after the SDK's own retries) is tried this many times in all, with
#: jittered pauses from this base, before the worker falls back to handing the message back.
WRITE_TRIES = 3
WRITE_PAUSE_SECONDS = 0.05


def deadline_margin_ms(spec: JobSpec) -> float:
    """Time kept free at the end of an invocation: 10% of the timeout, between 0.5 s and 5 s.

    A Lambda timeout mid-batch redelivers the whole batch, so after the first record the worker does
    not start another unless the margin plus the longest run of this invocation still fits.
    """
    return max(500.0, min(5000.0, spec.timeout_seconds * 100.0))


class _ThreadLocalConfig(IdempotencyConfig):
    """IdempotencyConfig whose registered Lambda context is per thread: the local stack runs several
    invocations of one worker at once, and each lock must expire with its own invocation."""

    def __init__(self, **options: Any) -> None:
        self._local = threading.local()
        super().__init__(**options)

    @property
    def lambda_context(self) -> Any:
        return getattr(self._local, "context", None)

    @lambda_context.setter
    def lambda_context(self, value: Any) -> None:
        self._local.context = value


@dataclass
class _Invocation:
    context: Any
    started: int = 0
    longest_ms: float = 0.0


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
    ) -> None:
        self._job = job
        self.stack_config = configuration.resolve(config)
        self.store = store or JobRecordStore(self.stack_config)
        self.emit_metrics = emit_metrics
        self.config = _ThreadLocalConfig(expires_after_seconds=self.stack_config.record_ttl_seconds)
        self.rng = random.Random()
        self._queue_urls: dict[str, str] = {}
        self._run_once = idempotent_function(
            data_keyword_argument="run", persistence_store=self.store, config=self.config
        )(self._execute)

    def _metric(self, name: str, unit: MetricUnit, value: float) -> None:
        # Powertools keeps adding (and prints at 100 values) even when POWERTOOLS_METRICS_DISABLED is
        # set, so honour both before adding.
        if self._metrics_on():
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
        return get_spec(name, jobs=self.stack_config.jobs)

    def dlq_url(self, spec: JobSpec, level: str | None = None) -> str:
        """The DLQ of a job's queue (of a priority level's, with `level`)."""
        return self.stack_config.dlq_url(spec.name, level)

    def _level_of(self, spec: JobSpec, record: SQSRecord) -> str | None:
        """The priority level whose queue a record came from (None: the job's own queue)."""
        found = queue_of(self.stack_config.stack, record.event_source_arn or "")
        level = found[1] if found else None
        return level if level in spec.priorities[:-1] else None

    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """The Lambda handler body: a partial batch response `{"batchItemFailures": [...]}`.

        While it runs, `current()` is this worker's configuration: a job's own `enqueue`,
        `get_status` or `count_finished` reach the same stack.
        """
        with configuration.using(self.stack_config):
            return self._handle(event, context)

    def _handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        spec = self.spec_for(event)  # a misconfigured function fails the whole batch: nothing is deleted
        self.config.register_lambda_context(context)
        invocation = _Invocation(context)
        if self._metrics_on():
            # cleared by every flush; the stack keeps staging and prod apart in one account's namespace
            metrics.add_dimension(name="job", value=spec.name)
            metrics.add_dimension(name="stack", value=self.stack_config.stack)
        # raise_on_entire_batch_failure=False: report every failed record by id even when all fail,
        # instead of failing the invocation (same retries, clearer errors).
        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        try:
            response: dict[str, Any] = process_partial_response(  # type: ignore[assignment]
                event=event,
                record_handler=lambda record: self._process(spec, record, invocation),
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

    def _too_late(self, spec: JobSpec, invocation: _Invocation) -> str | None:
        """Why this record should not start now, or None. The first record of an invocation always
        starts; a later one only if the margin plus the longest run so far still fits. A record not
        started is handed back without costing an attempt, on its last attempt too."""
        if invocation.context is None or invocation.started == 0:
            return None
        remaining_ms = invocation.context.get_remaining_time_in_millis()
        needed_ms = deadline_margin_ms(spec) + invocation.longest_ms
        if remaining_ms >= needed_ms:
            return None
        return f"not started: {remaining_ms} ms left, {needed_ms:.0f} ms needed"

    def _process(self, spec: JobSpec, record: SQSRecord, invocation: _Invocation) -> Any:
        attempt = attempt_of(record)
        settle = _attribute(record, ATTR_SETTLE)
        if settle is not None:
            return self._settle(spec, record, settle, attempt)
        reason = self._too_late(spec, invocation)
        if reason:
            self._metric("JobDeferred", MetricUnit.Count, 1)
            return self._hand_back(spec, record, attempt, 0, why=reason)
        try:
            envelope = decode(record.body)
            target = get_spec(envelope.job, jobs=self.stack_config.jobs)
            if target.name != spec.name:
                raise UnknownJobError(
                    f"job '{envelope.job}' was sent to the queue of job '{spec.name}'; "
                    f"send it to the queue of '{envelope.job}'."
                )
            level = spec.level_for(envelope.priority) if envelope.priority is not None else None
        except (EnvelopeError, UnknownJobError, UnknownPriorityError) as exc:
            if not isinstance(exc, EnvelopeError) and envelope.workflow is not None and envelope.id:
                # a workflow's member that cannot run here (its job or level is gone since it was
                # enqueued): counted dead, so its stage does not wait for it for ever
                tally = self.store.tally(envelope.workflow)
                failed = self._write(
                    self.store.reject, envelope.id, envelope.job, error_fields(exc), False, tally
                )
                mark = "reject" if failed is not None and transient(failed) else None
                return self._dead_letter(spec, record, exc, attempt, job_id=envelope.id, mark=mark)
            return self._dead_letter(spec, record, exc, attempt, job_id=None)
        if envelope.priority is not None and level != self._level_of(spec, record):
            # sent to another level's queue (a producer that knows only the job's queue): move it
            try:
                where = self.stack_config.queue_url(spec.name, level)
            except Exception as exc:  # that level's queue is unknown here: run it where it is
                logger.warning(
                    "cannot reach the queue of the message's priority; running it here",
                    extra={"priority": envelope.priority, "error": error_fields(exc)},
                )
            else:
                return self._hand_back(
                    spec, record, attempt, 0, why=f"priority {envelope.priority}", to=where
                )

        with pii.bound(spec.pii_fields, envelope.payload):
            try:
                payload = spec.validate(envelope.payload)  # the producer's rule, the same code
            except PayloadValidationError as error:
                job_id = envelope.id or spec.derive_job_id(envelope.payload) or record.message_id
                tally = self.store.tally(envelope.workflow)
                failed = self._write(self.store.reject, job_id, spec.name, error_fields(error), False, tally)
                mark = "reject" if failed is not None and transient(failed) else None
                return self._dead_letter(spec, record, error, attempt, job_id=job_id, mark=mark)
            # Derived from the validated payload, as the Python producer derives it: defaults applied.
            job_id = envelope.id or spec.job_id(payload.model_dump(mode="json")) or record.message_id
            keys = {"correlation_id": job_id, "job": spec.name, "attempt": attempt}
            logger.thread_safe_append_keys(**keys)  # per thread: the local stack runs batches at once
            try:
                if attempt > spec.max_attempts:
                    return self._after_last_attempt(spec, record, job_id, attempt)
                if spec.rate_limit is not None and self._rate_limited(
                    spec, record, payload, job_id, attempt, invocation
                ):
                    return None  # handed back, due at its slot
                invocation.started += 1
                started = time.perf_counter()
                try:
                    return self._run(spec, envelope, payload, job_id, attempt, record, invocation.context)
                finally:
                    invocation.longest_ms = max(invocation.longest_ms, (time.perf_counter() - started) * 1000)
            finally:
                logger.thread_safe_remove_keys(list(keys))

    def _run(
        self,
        spec: JobSpec,
        envelope: Envelope,
        payload: BaseModel,
        job_id: str,
        attempt: int,
        record: SQSRecord,
        context: Any,
    ) -> Any:
        run: dict[str, Any] = {
            "job_id": job_id,
            "job": spec.name,
            "attempt": attempt,
            "max_attempts": spec.max_attempts,
        }
        if envelope.workflow is not None:  # its outcome is counted in the workflow's item
            run["workflow"] = {"id": envelope.workflow.id, "stage": envelope.workflow.stage}
            # a copy from the DLQ (it carries the reason given there) may run a dead member again
            run["redriven"] = _redriven(record)
        ctx = JobContext(
            job_id=job_id,
            job=spec.name,
            attempt=attempt,
            max_attempts=spec.max_attempts,
            logger=logger,
            lambda_context=context,
            progress_sink=self.store.set_progress,
            scheduled_at=envelope.scheduled_at,
            config=self.stack_config,
            workflow=envelope.workflow,
        )
        started = time.perf_counter()
        outcome = _Outcome()
        token = _outcome.set(outcome)
        try:
            result = self._run_once(run=run, spec=spec, payload=payload, ctx=ctx)
        except IdempotencyAlreadyInProgressError:
            return self._lock_held(spec, record, attempt)
        except Exception as exc:
            lock = self.store.lock_token()
            if outcome.returned:
                # The job returned; writing its success failed. Never a job failure: write again,
                # else hand the outcome back with the message, so it is recorded and not run again.
                return self._complete_late(spec, record, run, outcome.result, attempt, exc, lock, envelope)
            if outcome.error is None:
                return self._not_acquired(spec, record, attempt, exc)
            return self._failed(spec, record, run, outcome.error, exc, attempt, job_id, lock)
        finally:
            _outcome.reset(token)
            if outcome.started:
                self._metric("JobDuration", MetricUnit.Milliseconds, (time.perf_counter() - started) * 1000)
        if not outcome.started:
            # The job id already succeeded (or, a workflow member, died): Powertools answered from the
            # record, nothing ran.
            self._metric("JobDuplicate", MetricUnit.Count, 1)
            if self.store.held_state() == lifecycle.JobState.DEAD:
                logger.info("duplicate delivery of a workflow member that died; not run again (redrive it)")
            else:
                logger.info("duplicate delivery of a job that already succeeded; not run again")
        else:
            self._metric("JobSucceeded", MetricUnit.Count, 1)
            logger.info("job succeeded")
        if envelope.workflow is not None and not self._notify(spec, record, envelope.workflow, attempt):
            return None  # handed back: its next delivery checks the workflow again
        return result

    def _notify(self, spec: JobSpec, record: SQSRecord, member: WorkflowField, attempt: int) -> bool:
        """A workflow member's outcome is counted: if that completed its stage, tell the continuer
        (`workflow.notify`). Every delivery of a finished member checks again, a duplicate too, so a
        crash after the count and before the notice is repaired by the message coming back. If the
        check or the notice fails, the message is handed back for that (False)."""
        from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

        failed = self._write(workflow.notify, self.stack_config, member.id, member.stage)
        if failed is None:
            return True
        logger.warning(
            "could not check the workflow; handing the message back", extra={"workflow": member.id}
        )
        self._hand_back(spec, record, attempt, 1, why="workflow notice")
        return False

    def _rate_limited(
        self,
        spec: JobSpec,
        record: SQSRecord,
        payload: BaseModel,
        job_id: str,
        attempt: int,
        invocation: _Invocation,
    ) -> bool:
        """Take this attempt's slot of the job's rate limit, or use the one its copy carries. False: go
        now. True: the job was handed back, due at its slot and carrying it: waiting costs no attempt
        and never comes back before its time; its record reads `waiting` meanwhile.

        A carried slot is used only by the attempt that took it and only up to a second late (SQS
        delays are whole seconds); a later copy takes a fresh slot, so late copies never start in a
        burst. A slot at most a second away is waited for here (a sleep), not handed back; a copy is
        sent back due up to a second early for the same reason (SQS delays are whole seconds). A job
        that already succeeded, or that a live run holds, takes no slot: the usual path answers it (a
        duplicate) or hands it back (lock held)."""
        from lambdajobs.runtime import ratelimit  # rate-limited jobs only: not at a cold start

        limit = spec.rate_limit
        assert limit is not None
        now_us = int(time.time() * 1_000_000)
        ahead = self._level_of(spec, record) is not None  # a level above the job's lowest
        value = ratelimit.key_value(limit, payload.model_dump(mode="json"))
        salt = self.stack_config.stack
        slot: int | None = None
        held = (_attribute(record, ATTR_RATE_SLOT) or "").split(":")
        held_ahead = held[2:] == ["ahead"]
        if held[0] == str(attempt) and len(held) > 1 and held[1].isdigit():
            held_slot = int(held[1])
            if ratelimit.usable(held_slot, now_us):
                try:
                    bumped = not held_ahead and ratelimit.taken_ahead(
                        self.store.client, self.store.table, limit, value, held_slot, salt=salt
                    )
                except Exception as exc:  # the limiter could not be read: not an attempt
                    if not transient(exc):
                        raise
                    logger.warning("could not read the rate limiter", extra={"error": error_fields(exc)})
                    self._hand_back(spec, record, attempt, 1, why="rate limiter")
                    return True
                if not bumped:
                    return self._wait_for_slot(spec, record, attempt, held_slot, held_ahead, invocation)
                logger.info("a higher-priority job took this rate-limit slot; taking another")
            elif held_slot > now_us:
                slot = held_slot  # not yet: wait on (a wait beyond 15 minutes hops)
        if slot is None:
            read, item = self._read_record(job_id)
            if read and (_settled_or_held(item) or _counted_dead(item, record)):
                return False  # the usual path answers it (a duplicate) or hands it back (lock held)
            try:
                slot, held_ahead = ratelimit.take_slot(
                    self.store.client, self.store.table, limit, value, salt=salt, now_us=now_us, ahead=ahead
                )
            except Exception as exc:  # the limiter could not be read or written: not an attempt
                if not transient(exc) and not isinstance(exc, RateLimitBusyError):
                    raise
                logger.warning("could not take a rate-limit slot", extra={"error": error_fields(exc)})
                self._hand_back(spec, record, attempt, 1, why="rate limiter")
                return True
            if slot - now_us <= ratelimit.INLINE_WAIT_US:
                return self._wait_for_slot(spec, record, attempt, slot, held_ahead, invocation)
            self._metric("JobRateLimited", MetricUnit.Count, 1)
            until = datetime.fromtimestamp(slot / 1_000_000, UTC).isoformat(timespec="milliseconds")
            self._write(self.store.wait, job_id, spec.name, until.replace("+00:00", "Z"))
        delay = ratelimit.hand_back_delay(slot, now_us)
        logger.info("rate limited; handing the message back", extra={"retry_in_seconds": delay})
        self._hand_back(
            spec, record, attempt, delay, why="rate limited", extra=_carrying(attempt, slot, held_ahead)
        )
        return True

    def _wait_for_slot(
        self,
        spec: JobSpec,
        record: SQSRecord,
        attempt: int,
        slot: int,
        ahead: bool,
        invocation: _Invocation,
    ) -> bool:
        """Start at `slot` (now or less than a second away): wait for it here, unless the invocation
        has no time left for the wait and the job, then hand the copy back due at its slot."""
        wait_ms = max(0.0, (slot - time.time() * 1_000_000) / 1000)
        if wait_ms <= 0:
            return False
        context = invocation.context
        needed_ms = wait_ms + deadline_margin_ms(spec) + invocation.longest_ms
        if context is not None and context.get_remaining_time_in_millis() < needed_ms:
            extra = _carrying(attempt, slot, ahead)
            self._hand_back(spec, record, attempt, 1, why="rate limited, no time to wait", extra=extra)
            return True
        self._metric("JobRateLimited", MetricUnit.Count, 1)
        time.sleep(wait_ms / 1000)
        return False

    def _not_acquired(self, spec: JobSpec, record: SQSRecord, attempt: int, exc: Exception) -> Any:
        """The job never started: taking its lock failed. A throttle or a service error is not an
        attempt: the message is handed back for later. Anything else (access denied, a missing table,
        a record the worker cannot read) would fail every time: that receive counts, so the message
        reaches the DLQ after `max_attempts` instead of coming back for ever."""
        delay = spec.backoff.delay(attempt, self.rng)
        if transient(exc):
            logger.warning(
                "could not take the job's lock; handing the message back", extra={"error": error_fields(exc)}
            )
            return self._hand_back(spec, record, attempt, delay, why="acquire")
        logger.error("could not take the job's lock; will retry", extra={"error": error_fields(exc)})
        self._metric("JobFailed", MetricUnit.Count, 1)
        self._retry_after(spec, record, delay)
        raise exc

    def _failed(
        self,
        spec: JobSpec,
        record: SQSRecord,
        run: dict[str, Any],
        error: BaseException,
        raised: BaseException,
        attempt: int,
        job_id: str,
        lock: int | None,
    ) -> Any:
        """The job raised `error`. `raised` is what reached us: the job's error itself, or Powertools'
        persistence error when releasing the lock failed; then the release is written again here, and
        the decision is always taken on the job's own error (a `PermanentError` stays permanent)."""
        unreleased = raised is not error and self._write(self.store.delete_record, run, error) is not None
        self._metric("JobFailed", MetricUnit.Count, 1)
        if lifecycle.after_failure(error, attempt, spec.max_attempts) is lifecycle.JobState.DEAD:
            logger.warning("job failed for good", extra={"error": error_fields(error)})
            if unreleased:  # the record would read `running`: the copy marks it dead, then moves it
                return self._dead_letter(
                    spec, record, error, attempt, job_id=job_id, mark="release", lock=lock
                )
            return self._dead_letter(spec, record, error, attempt, job_id=job_id)
        if unreleased:
            logger.warning(
                "could not record the job's failure; its lock holds until that invocation's deadline",
                extra={"error": error_fields(raised)},
            )
        delay = spec.backoff.delay(attempt, self.rng)
        self._metric("JobRetried", MetricUnit.Count, 1)
        logger.warning(
            "job failed; will retry", extra={"error": error_fields(error), "retry_in_seconds": delay}
        )
        self._retry_after(spec, record, delay)
        raise error

    def _complete_late(
        self,
        spec: JobSpec,
        record: SQSRecord,
        run: dict[str, Any],
        result: Any,
        attempt: int,
        exc: BaseException,
        lock: int | None,
        envelope: Envelope,
    ) -> Any:
        result_json = lifecycle.stored_result(json.dumps(result, sort_keys=True))
        tally = self.store.tally(envelope.workflow)
        if self._write(self.store.complete, run["job_id"], run["job"], result_json, lock, tally) is None:
            self._metric("JobSucceeded", MetricUnit.Count, 1)
            logger.info("job succeeded (its completion write needed another try)")
            if envelope.workflow is not None and not self._notify(spec, record, envelope.workflow, attempt):
                return None
            return result
        logger.warning(
            "job succeeded but its record could not be written; handing the outcome back with the message",
            extra={"error": error_fields(exc)},
        )
        settle = {"action": "complete", "job_id": run["job_id"], "result": result_json, "lock": lock}
        return self._hand_back(spec, record, attempt, 1, why="complete", settle=settle)

    def _lock_held(self, spec: JobSpec, record: SQSRecord, attempt: int) -> Any:
        """Another delivery holds the job's lock: a concurrent copy, or this worker's own earlier
        invocation whose outcome write failed. Neither costs an attempt: the message comes back when
        the lock expires (at the holder's invocation deadline)."""
        expiry_ms = self.store.held_lock_expiry_ms()
        if expiry_ms is None:  # a lock without a deadline (no Lambda context registered)
            logger.info("job already running elsewhere; will retry")
            raise IdempotencyAlreadyInProgressError("the job's lock is held")
        wait = _seconds_until(expiry_ms)
        logger.info(
            "job already running elsewhere; handing the message back", extra={"retry_in_seconds": wait}
        )
        return self._hand_back(spec, record, attempt, wait, why="lock held")

    def _after_last_attempt(self, spec: JobSpec, record: SQSRecord, job_id: str, attempt: int) -> Any:
        """A message received after its last attempt (the queue keeps one spare receive, see
        `JobSpec.max_receive_count`): that attempt's invocation crashed or timed out, before or while
        running the job. Unless the job succeeded after all, or another delivery holds its lock now,
        the message goes to the DLQ with that reason, and a record with no live run becomes dead."""
        read, found = self._read_record(job_id)
        if not read:
            return self._hand_back(spec, record, attempt, spec.backoff.delay(1, self.rng), why="read")
        item = found or {}
        state = item.get("state", {}).get("S")
        member = _member(record)
        if state == lifecycle.JobState.SUCCEEDED:
            self._metric("JobDuplicate", MetricUnit.Count, 1)
            if member is not None:
                self._notify(spec, record, member, attempt)
            return None
        expiry = item.get("in_progress_expiration", {}).get("N")
        if state == lifecycle.JobState.RUNNING and expiry and int(expiry) > time.time() * 1000:
            return self._hand_back(spec, record, attempt, _seconds_until(int(expiry)), why="lock held")
        error = LastAttemptLostError(lifecycle.REDRIVEN_ERROR["message"])
        failed = self._write(
            self.store.reject, job_id, spec.name, error_fields(error), True, self.store.tally(member)
        )
        mark = "bury" if failed is not None and transient(failed) else None
        return self._dead_letter(spec, record, error, attempt - 1, job_id=job_id, mark=mark)

    @staticmethod
    def _execute(run: dict[str, Any], spec: JobSpec, payload: BaseModel, ctx: JobContext) -> Any:
        outcome = _outcome.get()
        outcome.started = True
        try:
            result = spec.func(payload, ctx) if spec.takes_context else spec.func(payload)
            if isinstance(result, BaseModel):
                result = result.model_dump(mode="json")
            # The result is stored as JSON. Make it JSON now (datetimes, decimals, sets become
            # strings): failing to store it after the job ran would run the job again.
            result = json.loads(json.dumps(result, default=str))
        except Exception as exc:
            outcome.error = exc
            raise
        outcome.returned, outcome.result = True, result
        return result

    # -- bookkeeping --------------------------------------------------------------------------------

    def _write(self, write: Callable[..., Any], *args: Any) -> Exception | None:
        """Run a bookkeeping call (a record write, an SQS send), trying again on failure with a short
        jittered pause. None when it went through, else the last error. The SDK already retried each
        call; an error that will not pass by waiting (access denied, a missing queue, a failed
        condition) is not tried again."""
        for n in range(WRITE_TRIES):
            try:
                write(*args)
                return None
            except Exception as exc:
                if n == WRITE_TRIES - 1 or not transient(exc):
                    logger.warning("bookkeeping call failed", extra={"error": error_fields(exc)})
                    return exc
                time.sleep((0.5 + 0.5 * self.rng.random()) * WRITE_PAUSE_SECONDS * 2**n)
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_record(self, job_id: str) -> tuple[bool, dict[str, Any] | None]:
        """(True, the job's record or None) when it could be read, tried as `_write` tries."""
        found: list[dict[str, Any] | None] = []
        return self._write(lambda: found.append(self.store.get_item(job_id))) is None, (found or [None])[-1]

    def _hand_back(
        self,
        spec: JobSpec,
        record: SQSRecord,
        attempt: int,
        delay: int,
        *,
        why: str,
        settle: dict[str, Any] | None = None,
        extra: dict[str, Any] | None = None,
        to: str | None = None,
    ) -> Any:
        """Send a copy of the message back to its queue (or to queue URL `to`: another priority
        level's) after `delay` seconds and delete the original: a receive that did not run the job
        costs no attempt, and the copy is never at its queue's last receive. The copy carries the
        attempts used so far (its first receive is attempt `attempt` again) and, with `settle`, the
        outcome left to record.

        The original is deleted at once, not only by the batch response: were the invocation to die
        after the copy was sent, the original would come back beside it. If the copy cannot be sent,
        the record is reported failed and returns after `delay` (that receive then counts)."""
        attributes = _copied_attributes(record, drop=HANDBACK_ATTRIBUTES, room=MAX_SQS_ATTRIBUTES - 3)
        held_slot = _attribute(record, ATTR_RATE_SLOT)
        if held_slot and settle is None:  # a rate-limit slot taken for this attempt goes along
            attributes[ATTR_RATE_SLOT] = {"DataType": "String", "StringValue": held_slot}
        attributes.update(extra or {})
        attributes[ATTR_PRIOR_ATTEMPTS] = {"DataType": "Number", "StringValue": str(max(0, attempt - 1))}
        if settle is not None:
            attributes[ATTR_SETTLE] = {"DataType": "String", "StringValue": json.dumps(settle, default=str)}
        sqs = self.stack_config.client("sqs")
        queue_url = to or self._queue_url(spec, record)
        failed = self._write(
            lambda: sqs.send_message(
                QueueUrl=queue_url,
                MessageBody=_body_keeping_job_id(spec, record),
                MessageAttributes=attributes,
                DelaySeconds=min(MAX_DELAY_SECONDS, max(0, delay)),
            )
        )
        if failed is not None:
            self._retry_after(spec, record, delay)
            raise NotStartedError(f"{why}: could not hand the message back; it returns in {delay} s")
        self._delete_original(spec, record)
        self._metric("JobHandedBack", MetricUnit.Count, 1)
        logger.info("handed the message back", extra={"reason": why, "retry_in_seconds": delay})
        return None

    def _delete_original(self, spec: JobSpec, record: SQSRecord) -> None:
        """Delete a record's message now that a copy of it is elsewhere (back in its queue, or in the
        DLQ): were the invocation to die before the batch response, the original would come back and
        be handled twice. Best effort: the batch response still reports the record done."""
        sqs = self.stack_config.client("sqs")
        queue_url = self._queue_url(spec, record)
        self._write(lambda: sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=record.receipt_handle))

    def _settle(self, spec: JobSpec, record: SQSRecord, text: str, attempt: int) -> Any:
        """A copy whose job already ran: only its outcome is left to record (the success write, or the
        record's mark and the move to the DLQ). The job is not run again. An outcome that does not
        belong to this message's job id (or cannot be read) is dropped: the message runs as usual."""
        try:
            settle = parse_body(text)
            action = settle.get("action")
            job_id = str(settle["job_id"]) if settle.get("job_id") is not None else None
            lock = int(settle["lock"]) if settle.get("lock") is not None else None
            attempts = int(settle.get("attempts") or attempt)
            if action not in ("complete", "dead_letter") or job_id != self.job_id_of(spec, record):
                raise ValueError("not this message's outcome")
        except Exception as exc:  # a forged, damaged or newer outcome: never trusted, never a crash
            logger.warning("ignoring an outcome on a handed-back message", extra={"error": error_fields(exc)})
            return self._hand_back(spec, record, attempt, 0, why="unknown outcome")
        assert job_id is not None
        member = _member(record)
        tally = self.store.tally(member)
        if action == "complete":
            result = str(settle.get("result") or "null")
            failed = self._write(self.store.complete, job_id, spec.name, result, lock, tally)
            if failed is None:
                self._metric("JobSucceeded", MetricUnit.Count, 1)
                logger.info("recorded the success of a job that ran earlier", extra={"job_id": job_id})
                if member is not None:
                    self._notify(spec, record, member, attempt)
                return None
            if not transient(failed):  # the record cannot be written: this receive counts
                raise failed
            return self._hand_back(spec, record, attempt, 1, why="complete", settle=settle)
        error = {"type": str(settle.get("type")), "message": str(settle.get("message"))}
        mark = settle.get("mark")
        if mark == "release":
            failed = self._write(self.store.bury, job_id, spec.name, error, lock, tally)
        elif mark in ("reject", "bury"):
            failed = self._write(self.store.reject, job_id, spec.name, error, mark == "bury", tally)
        else:
            failed = None
        if failed is not None and transient(failed):  # else the record cannot be written: move anyway
            return self._hand_back(spec, record, attempt, 1, why="dead-letter", settle=settle)
        return self._move_to_dlq(spec, record, error, attempts, job_id, {**settle, "mark": None})

    def job_id_of(self, spec: JobSpec, record: SQSRecord) -> str | None:
        """The job id a message stands for, as the worker derives it (None if it cannot be read): the
        envelope's id, else the job's idempotency key of the payload, else the message id."""
        try:
            envelope = decode(record.body)
            if envelope.id:
                return envelope.id
            payload = spec.validate(envelope.payload)
        except Exception:
            return None
        return spec.job_id(payload.model_dump(mode="json")) or record.message_id

    # -- retries ------------------------------------------------------------------------------------

    def _retry_after(self, spec: JobSpec, record: SQSRecord, seconds: int) -> None:
        """Make a failed record visible again after `seconds` (its backoff delay). Best effort: if this
        fails, the record is still reported failed and returns after the queue's visibility timeout."""
        try:
            self.stack_config.client("sqs").change_message_visibility(
                QueueUrl=self._queue_url(spec, record),
                ReceiptHandle=record.receipt_handle,
                VisibilityTimeout=seconds,
            )
        except Exception as exc:
            logger.warning(
                "could not set the retry delay; the message returns after the queue's visibility timeout",
                extra={"error": error_fields(exc)},
            )

    def _queue_url(self, spec: JobSpec, record: SQSRecord) -> str:
        """The URL of the queue a record came from (its priority level's)."""
        known = self.stack_config.queues.get(queue_key(spec.name, self._level_of(spec, record)))
        url = (known.url if known else "") or self._queue_urls.get(record.event_source_arn)
        if not url:  # arn:aws:sqs:<region>:<account>:<name>
            *_, account, name = record.event_source_arn.split(":")
            sqs = self.stack_config.client("sqs")
            url = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
            self._queue_urls[record.event_source_arn] = url
        return url

    # -- dead letters -------------------------------------------------------------------------------

    def _dead_letter(
        self,
        spec: JobSpec,
        record: SQSRecord,
        exc: BaseException,
        attempt: int,
        job_id: str | None,
        *,
        mark: str | None = None,
        lock: int | None = None,
    ) -> Any:
        """Move a record to the DLQ now, with its reason. `mark` says that the job's record could not
        be marked dead ("release": the run's lock; "reject": a message that never ran): then the
        message goes back as a copy that makes that write first, and then the move."""
        err = error_fields(exc)
        if mark is not None and job_id is not None:
            settle = {"action": "dead_letter", "job_id": job_id, "attempts": attempt, **err}
            settle |= {"mark": mark, "lock": lock}
            return self._hand_back(spec, record, attempt, 1, why="dead-letter", settle=settle)
        return self._move_to_dlq(spec, record, err, attempt, job_id, None)

    def _move_to_dlq(
        self,
        spec: JobSpec,
        record: SQSRecord,
        err: dict[str, str],
        attempt: int,
        job_id: str | None,
        settle: dict[str, Any] | None,
    ) -> Any:
        """Send the message to the DLQ with its reason in message attributes. If that keeps failing,
        hand the message back carrying the move still to make (so the job is not run again, and the
        message never reaches SQS redrive without its reason); if even that fails, the record is
        reported failed and SQS redrive still catches it: never lost.

        A workflow member's dead outcome is counted before this: its stage may be complete, so the
        workflow is checked (and the continuer told) before the message leaves for the DLQ; if that
        fails, the message is handed back with the move still to make, and the check is made again."""
        from lambdajobs.runtime import workflow  # workflow members only: not at a cold start

        member = _member(record) if job_id is not None else None
        if member is not None and self._write(workflow.notify, self.stack_config, member.id, member.stage):
            settle = settle or {"action": "dead_letter", "job_id": job_id, "attempts": attempt, **err}
            return self._hand_back(spec, record, attempt, 1, why="workflow notice", settle=settle)
        ours = {
            ATTR_ERROR_TYPE: err["type"],
            ATTR_REASON: err["message"] or err["type"],
            ATTR_ATTEMPTS: str(attempt),
            ATTR_FAILED_AT: datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        # A redriven message starts again: the hand-back attributes are not carried to the DLQ.
        drop = DLQ_ATTRIBUTES + HANDBACK_ATTRIBUTES
        attributes = _copied_attributes(record, drop=drop, room=MAX_SQS_ATTRIBUTES - len(ours))
        for name, text in ours.items():
            attributes[name] = {"DataType": "String", "StringValue": text}
        failed = self._write(
            lambda: self.stack_config.client("sqs").send_message(
                QueueUrl=self.dlq_url(spec, self._level_of(spec, record)),
                MessageBody=record.body,
                MessageAttributes=attributes,
            )
        )
        if failed is not None:
            settle = settle or {"action": "dead_letter", "job_id": job_id, "attempts": attempt, **err}
            return self._hand_back(spec, record, attempt, 1, why="dead-letter", settle=settle)
        self._delete_original(spec, record)
        self._metric("JobDeadLettered", MetricUnit.Count, 1)
        logger.warning(
            "moved to the dead-letter queue",
            extra={"message_id": record.message_id, "job_id": job_id, "error": err},
        )
        return None


@dataclass
class _Outcome:
    """What the job function did in this run, whatever Powertools raised around it."""

    started: bool = False
    returned: bool = False
    result: Any = None
    error: BaseException | None = None


_outcome: ContextVar[_Outcome] = ContextVar("lambdajobs_outcome")


def _carrying(attempt: int, slot: int, ahead: bool) -> dict[str, Any]:
    """The attribute a copy carries its rate-limit slot in: `<attempt>:<slot µs>[:ahead]`."""
    text = f"{attempt}:{slot}" + (":ahead" if ahead else "")
    return {ATTR_RATE_SLOT: {"DataType": "String", "StringValue": text}}


def _member(record: SQSRecord) -> WorkflowField | None:
    """The workflow a record's job is a member of (its envelope's `workflow`), or None."""
    try:
        return decode(record.body).workflow
    except EnvelopeError:
        return None


def _attribute(record: SQSRecord, name: str) -> str | None:
    value = (record.raw_event.get("messageAttributes") or {}).get(name) or {}
    text = value.get("stringValue")
    return str(text) if text is not None else None


def attempt_of(record: SQSRecord) -> int:
    """The attempt a record is: the attempts earlier copies of its message used, plus its receive count."""
    receives = int(record.attributes.approximate_receive_count or 1)
    try:
        prior = int(_attribute(record, ATTR_PRIOR_ATTEMPTS) or 0)
    except ValueError:
        prior = 0
    return max(0, prior) + receives


def _settled_or_held(item: dict[str, Any] | None) -> bool:
    """Whether a job record is finished successfully, or held by a live run."""
    state = (item or {}).get("state", {}).get("S")
    if state == lifecycle.JobState.SUCCEEDED:
        return True
    expiry = (item or {}).get("in_progress_expiration", {}).get("N")
    return state == lifecycle.JobState.RUNNING and bool(expiry) and int(expiry) > time.time() * 1000


def _counted_dead(item: dict[str, Any] | None, record: SQSRecord) -> bool:
    """Whether a job record is a workflow member counted dead and the record's message is not a DLQ
    redrive: then no copy may run it again (see `lifecycle.acquire`), nor take a rate-limit slot."""
    state = (item or {}).get("state", {}).get("S")
    return state == lifecycle.JobState.DEAD and "wf_counted" in (item or {}) and not _redriven(record)


def _redriven(record: SQSRecord) -> bool:
    """A message redriven from the DLQ carries the reason the worker gave it there."""
    return _attribute(record, ATTR_FAILED_AT) is not None


def _seconds_until(epoch_ms: int) -> int:
    """Whole seconds from now until `epoch_ms`, at least 1 (an SQS delay)."""
    return max(1, math.ceil((epoch_ms - time.time() * 1000) / 1000))


#: Error codes that pass by waiting: throttles and service-side failures.
TRANSIENT_CODES = frozenset(
    {
        "ThrottlingException",
        "Throttling",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "LimitExceededException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalFailure",
        "InternalError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "KMSThrottlingException",
        "TransactionConflictException",
    }
)
#: Why a transaction was cancelled, when waiting helps: another transaction held an item, a throttle.
TRANSIENT_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})


def transient(exc: BaseException) -> bool:
    """Whether an error (or the error it wraps: Powertools wraps the SDK's) is a throttle, a
    service-side failure or a connection problem, which may pass on its own."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ClientError):
            error = current.response.get("Error", {})
            status = int(current.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
            if error.get("Code") == "TransactionCanceledException":  # a workflow member's counted write
                reasons = current.response.get("CancellationReasons") or []
                return any(r.get("Code") in TRANSIENT_REASONS for r in reasons)
            return error.get("Code") in TRANSIENT_CODES or status >= 500
        if isinstance(current, BotoCoreError) and isinstance(
            current, ConnectionError | HTTPClientError | ConnectTimeoutError | ReadTimeoutError
        ):
            return True
        if isinstance(current, IdempotencyPersistenceLayerError) and len(current.args) > 1:
            inner = current.args[1]
            if isinstance(inner, BaseException) and id(inner) not in seen:
                current = inner
                continue
        current = current.__cause__ or current.__context__
    return False


def _body_keeping_job_id(spec: JobSpec, record: SQSRecord) -> str:
    """The body for a hand-back copy. An envelope without `id`, of a job without `idempotency_key`,
    takes its job id from the message id; the copy has a new message id, so it gets the original's as
    its `id` (the envelope's own field), or it would be another job. Anything else is copied as is."""
    if spec.idempotency_key:
        return record.body
    try:
        envelope = parse_body(record.body)  # the one body parser: never raises but EnvelopeError
    except EnvelopeError:
        return record.body
    if envelope.get("id"):
        return record.body
    return json.dumps({**envelope, "id": record.message_id}, separators=(",", ":"), ensure_ascii=False)


def _copied_attributes(record: SQSRecord, *, drop: tuple[str, ...], room: int) -> dict[str, Any]:
    """The record's message attributes as SendMessage takes them, without `drop`, at most `room`."""
    attributes: dict[str, Any] = {}
    for name, value in (record.raw_event.get("messageAttributes") or {}).items():
        if name in drop or len(attributes) >= room:
            continue
        converted = {"DataType": value.get("dataType", "String")}
        if value.get("stringValue") is not None:
            converted["StringValue"] = value["stringValue"]
        if value.get("binaryValue") is not None:
            # Lambda's event holds it base64-encoded; SendMessage wants the bytes.
            converted["BinaryValue"] = base64.b64decode(value["binaryValue"])
        attributes[name] = converted
    return attributes
