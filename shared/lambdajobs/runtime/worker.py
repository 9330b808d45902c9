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
import random
import threading
import time
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
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError
from pydantic import BaseModel

from lambdajobs.runtime import config as configuration
from lambdajobs.runtime import lifecycle, pii
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.context import JobContext
from lambdajobs.runtime.envelope import Envelope, decode
from lambdajobs.runtime.errors import (
    ConfigurationError,
    EnvelopeError,
    NotStartedError,
    PayloadValidationError,
    UnknownJobError,
)
from lambdajobs.runtime.records import JobRecordStore, error_fields
from lambdajobs.runtime.settings import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_TYPE,
    ATTR_FAILED_AT,
    ATTR_REASON,
    DLQ_ATTRIBUTES,
    METRICS_NAMESPACE,
    SERVICE_NAME,
    job_for_queue,
)
from lambdajobs.runtime.spec import JobSpec, get_spec

logger = Logger(service=SERVICE_NAME)
pii.install(logger)  # every line is checked for the current record's personal data
metrics = Metrics(namespace=METRICS_NAMESPACE, service=SERVICE_NAME)

MAX_SQS_ATTRIBUTES = 10  # SQS: at most 10 message attributes per message


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


_ran: ContextVar[bool] = ContextVar("lambdajobs_job_ran", default=False)


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

    def dlq_url(self, spec: JobSpec) -> str:
        return self.stack_config.dlq_url(spec.name)

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
            if self._metrics_on() and metrics.metric_set:  # nothing to publish: no empty-flush warning
                metrics.flush_metrics(raise_on_empty_metrics=False)

    # -- one record ---------------------------------------------------------------------------------

    def _too_late(self, spec: JobSpec, invocation: _Invocation, attempt: int) -> str | None:
        """Why this record should not start now, or None. The first record of an invocation always
        starts, and so does a record on its last attempt (skipping it would use up its last receive
        and send it to the DLQ unrun)."""
        if invocation.context is None or invocation.started == 0 or attempt >= spec.max_attempts:
            return None
        remaining_ms = invocation.context.get_remaining_time_in_millis()
        needed_ms = deadline_margin_ms(spec) + invocation.longest_ms
        if remaining_ms >= needed_ms:
            return None
        return f"not started: {remaining_ms} ms left, {needed_ms:.0f} ms needed"

    def _process(self, spec: JobSpec, record: SQSRecord, invocation: _Invocation) -> Any:
        attempt = int(record.attributes.approximate_receive_count or 1)
        reason = self._too_late(spec, invocation, attempt)
        if reason:
            # Report it failed without running it, visible again at once for the next invocation.
            self._retry_after(spec, record, 0)
            self._metric("JobDeferred", MetricUnit.Count, 1)
            raise NotStartedError(reason)
        try:
            envelope = decode(record.body)
            target = get_spec(envelope.job, jobs=self.stack_config.jobs)
            if target.name != spec.name:
                raise UnknownJobError(
                    f"job '{envelope.job}' was sent to the queue of job '{spec.name}'; "
                    f"send it to the queue of '{envelope.job}'."
                )
        except (EnvelopeError, UnknownJobError) as exc:
            return self._dead_letter(spec, record, exc, attempt, job_id=None)

        with pii.bound(spec.pii_fields, envelope.payload):
            try:
                payload = spec.validate(envelope.payload)  # the producer's rule, the same code
            except PayloadValidationError as error:
                job_id = envelope.id or spec.derive_job_id(envelope.payload) or record.message_id
                self.store.reject(job_id, spec.name, error)
                return self._dead_letter(spec, record, error, attempt, job_id=job_id)
            # Derived from the validated payload, as the Python producer derives it: defaults applied.
            job_id = envelope.id or spec.job_id(payload.model_dump(mode="json")) or record.message_id
            keys = {"correlation_id": job_id, "job": spec.name, "attempt": attempt}
            logger.thread_safe_append_keys(**keys)  # per thread: the local stack runs batches at once
            invocation.started += 1
            started = time.perf_counter()
            try:
                return self._run(spec, envelope, payload, job_id, attempt, record, invocation.context)
            finally:
                invocation.longest_ms = max(invocation.longest_ms, (time.perf_counter() - started) * 1000)
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
        run = {"job_id": job_id, "job": spec.name, "attempt": attempt, "max_attempts": spec.max_attempts}
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
        )
        started = time.perf_counter()
        ran = _ran.set(False)
        try:
            result = self._run_once(run=run, spec=spec, payload=payload, ctx=ctx)
        except IdempotencyAlreadyInProgressError:
            # A duplicate delivery while another invocation runs this job: come back later.
            logger.info("job already running elsewhere; will retry")
            raise
        except Exception as exc:
            self._metric("JobFailed", MetricUnit.Count, 1)
            if lifecycle.after_failure(exc, attempt, spec.max_attempts) is lifecycle.JobState.DEAD:
                logger.warning("job failed for good", extra={"error": error_fields(exc)})
                return self._dead_letter(spec, record, exc, attempt, job_id=job_id)
            delay = spec.backoff.delay(attempt, self.rng)
            self._metric("JobRetried", MetricUnit.Count, 1)
            logger.warning(
                "job failed; will retry", extra={"error": error_fields(exc), "retry_in_seconds": delay}
            )
            self._retry_after(spec, record, delay)
            raise
        finally:
            did_run = _ran.get()
            _ran.reset(ran)
            if did_run:
                self._metric("JobDuration", MetricUnit.Milliseconds, (time.perf_counter() - started) * 1000)
        if not did_run:
            # The job id already succeeded: Powertools answered from the record, nothing ran.
            self._metric("JobDuplicate", MetricUnit.Count, 1)
            logger.info("duplicate delivery of a job that already succeeded; not run again")
            return result
        self._metric("JobSucceeded", MetricUnit.Count, 1)
        logger.info("job succeeded")
        return result

    @staticmethod
    def _execute(run: dict[str, Any], spec: JobSpec, payload: BaseModel, ctx: JobContext) -> Any:
        _ran.set(True)
        result = spec.func(payload, ctx) if spec.takes_context else spec.func(payload)
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        # The result is stored as JSON. Make it JSON now (datetimes, decimals, sets become strings):
        # failing to store it after the job ran would run the job again.
        return json.loads(json.dumps(result, default=str))

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
        known = self.stack_config.queues.get(spec.name)
        url = (known.url if known else "") or self._queue_urls.get(record.event_source_arn)
        if not url:  # arn:aws:sqs:<region>:<account>:<name>
            *_, account, name = record.event_source_arn.split(":")
            sqs = self.stack_config.client("sqs")
            url = sqs.get_queue_url(QueueName=name, QueueOwnerAWSAccountId=account)["QueueUrl"]
            self._queue_urls[record.event_source_arn] = url
        return url

    # -- dead letters -------------------------------------------------------------------------------

    def _dead_letter(
        self, spec: JobSpec, record: SQSRecord, exc: BaseException, attempt: int, job_id: str | None
    ) -> None:
        """Move a record to the DLQ now, with its reason. Raising here reports the record failed,
        so the message stays in the queue and SQS redrive still catches it: never lost."""
        err = error_fields(exc)
        ours = {
            ATTR_ERROR_TYPE: err["type"],
            ATTR_REASON: err["message"] or err["type"],
            ATTR_ATTEMPTS: str(attempt),
            ATTR_FAILED_AT: datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        }
        attributes: dict[str, Any] = {}
        for name, value in (record.raw_event.get("messageAttributes") or {}).items():
            if name in DLQ_ATTRIBUTES or len(attributes) >= MAX_SQS_ATTRIBUTES - len(ours):
                continue
            converted = {"DataType": value.get("dataType", "String")}
            if value.get("stringValue") is not None:
                converted["StringValue"] = value["stringValue"]
            if value.get("binaryValue") is not None:
                # Lambda's event holds it base64-encoded; SendMessage wants the bytes.
                converted["BinaryValue"] = base64.b64decode(value["binaryValue"])
            attributes[name] = converted
        for name, text in ours.items():
            attributes[name] = {"DataType": "String", "StringValue": text}
        self.stack_config.client("sqs").send_message(
            QueueUrl=self.dlq_url(spec), MessageBody=record.body, MessageAttributes=attributes
        )
        self._metric("JobDeadLettered", MetricUnit.Count, 1)
        logger.warning(
            "moved to the dead-letter queue",
            extra={"message_id": record.message_id, "job_id": job_id, "error": err},
        )
