"""The producer API: enqueue, enqueue_many; later work with delay_seconds or run_at.

Payloads are validated against the job's model (`JobSpec.validate`, the same rule the worker applies)
and size-checked before anything is sent: an invalid payload raises and sends nothing. Queues are
found through the stack configuration (`config=`, default `lambdajobs.runtime.config.current()`):
URLs CDK put in a function's environment, else the stack's manifest in SSM Parameter Store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.envelope import MAX_MESSAGE_BYTES, encode
from lambdajobs.runtime.errors import EnqueueError, ScheduleConflictError
from lambdajobs.runtime.spec import Job, JobRef, JobSpec, ensure_loaded, get_spec

if TYPE_CHECKING:
    from lambdajobs.runtime.debounce import Debounce

logger = logging.getLogger(__name__)

#: An SQS message group id (a fair queue's tenant): 1 to 128 of letters, digits and punctuation.
_TENANT = re.compile(r"""^[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}$""")


def check_tenant(tenant: str | None) -> str | None:
    """`tenant` as SQS takes it for `MessageGroupId`, or raise EnqueueError saying what is allowed."""
    if tenant is None:
        return None
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise EnqueueError(
            f"tenant={tenant!r} is not a valid SQS message group id: use 1 to 128 letters, digits or "
            "punctuation (no spaces); a customer or account id works."
        )
    return tenant


def _group(tenant: str | None) -> dict[str, str]:
    return {"MessageGroupId": tenant} if tenant is not None else {}


_TRACING = "lambdajobs.runtime.tracing"


def trace_options(cfg: StackConfig, traced: bool = False) -> dict[str, Any]:
    """SendMessage's `MessageAttributes` keyword with the current trace context (W3C `traceparent`,
    `tracestate`), when tracing is on for the stack (`cfg.tracing`), for the job sent (`traced`:
    `@job(tracing=True)`) or for the record being processed here; {} otherwise. Off, this tests two
    flags: `lambdajobs.runtime.tracing` (and OpenTelemetry) is imported only when tracing is on."""
    on = cfg.tracing or traced
    if not (on or _TRACING in sys.modules):
        return {}
    from lambdajobs.runtime import tracing

    return tracing.send_options(on=on)


MAX_DELAY_SECONDS = 900  # SQS DelaySeconds maximum
BATCH_MAX_ENTRIES = 10  # SendMessageBatch: at most 10 entries...
BATCH_MAX_BYTES = MAX_MESSAGE_BYTES  # ...and 1 MiB in total


def _check_delay(delay_seconds: int, limit: int | None = MAX_DELAY_SECONDS) -> None:
    if isinstance(delay_seconds, bool) or not isinstance(delay_seconds, int):
        raise EnqueueError(f"delay_seconds must be an integer, got {delay_seconds!r}")
    if delay_seconds < 0:
        raise EnqueueError(f"delay_seconds={delay_seconds} is negative: pass 0 or more seconds.")
    if limit is not None and delay_seconds > limit:
        raise EnqueueError(
            f"delay_seconds={delay_seconds} is out of range: 0 to {limit} s here; "
            f"for later, use enqueue(..., run_at=...) per job."
        )


def _when(delay_seconds: int, run_at: datetime | None) -> tuple[int, datetime | None]:
    """(SQS delay in seconds, or the time for a one-time schedule when more than 15 minutes away)."""
    _check_delay(delay_seconds, limit=None)
    now = datetime.now(UTC)
    if run_at is not None:
        if delay_seconds:
            raise EnqueueError("give run_at or delay_seconds, not both.")
        if not isinstance(run_at, datetime) or run_at.tzinfo is None or run_at.utcoffset() is None:
            raise EnqueueError(
                f"run_at={run_at!r} has no time zone, so the moment is ambiguous; pass an aware datetime, "
                f"e.g. datetime(2026, 12, 1, 9, 0, tzinfo=ZoneInfo('America/New_York'))."
            )
        seconds = (run_at - now).total_seconds()
    else:
        seconds = float(delay_seconds)
    if seconds <= MAX_DELAY_SECONDS:  # a time in the past runs now
        return max(0, math.ceil(seconds)), None
    return 0, now + timedelta(seconds=seconds)


def _spec_of(job: JobRef, cfg: StackConfig) -> JobSpec:
    """The spec of the job to send. A name is looked up once the stack's jobs package is loaded
    (`cfg.jobs`, once per registry); a `Job` or `JobSpec` carries its spec, so nothing is loaded."""
    if not isinstance(job, Job | JobSpec):
        ensure_loaded(cfg.jobs)
    return get_spec(job)


def _prepare(
    spec: JobSpec,
    payload: Any,
    job_id: str | None,
    priority: str | None = None,
    debounce: dict[str, Any] | None = None,
) -> tuple[str, str]:
    data = spec.payload_data(payload)
    jid = spec.job_id(data, job_id) or uuid.uuid4().hex
    return jid, encode(spec.name, data, jid, priority=priority, debounce=debounce)


def enqueue(
    job: JobRef,
    payload: Any,
    *,
    job_id: str | None = None,
    delay_seconds: int = 0,
    run_at: datetime | None = None,
    priority: str | None = None,
    tenant: str | None = None,
    debounce: Debounce | None = None,
    config: StackConfig | None = None,
) -> str:
    """Send one job; return its job id (yours, derived from the job's `idempotency_key`, or a new uuid).

    Later work: `delay_seconds` or `run_at` (an aware datetime). Up to 15 minutes away the message
    waits in SQS (`DelaySeconds`); further away a one-time EventBridge Scheduler schedule sends it at
    that time and deletes itself. A time in the past runs now. Sending the same job id twice runs the
    job once. `priority` names one of the job's `priorities` (default: its lowest); each level has its
    own queue.

    `tenant` (a customer or account id) sets the message's `MessageGroupId`: the queue is an SQS fair
    queue, and a tenant with a large backlog does not delay the others' jobs (docs/how-to/fairness.md).
    `debounce` (`Debounce(key, seconds, max_wait_seconds)`): of the enqueues of one key within the
    window only the last runs, with its payload; the others read `superseded`
    (docs/how-to/debounce.md).

    Raises:
        UnknownJobError: no job of that name in the configured jobs module.
        PayloadValidationError: the payload does not fit the job's model (nothing is sent).
        PayloadTooLargeError: the message would exceed 1 MiB.
        EnqueueError: a bad job id, delay or run_at (ScheduleConflictError: the job id is already
            scheduled for another time or payload; UnknownPriorityError: the job has no such priority).
        QueueNotFoundError: the stack has no queue for the job (not deployed, or another stack).

    Example:
        >>> from lambdajobs import enqueue, get_status
        >>> job_id = enqueue("send_email", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"})
        >>> get_status(job_id).state
        'pending'
    """
    cfg = resolve(config)
    spec = _spec_of(job, cfg)
    level = spec.level_for(priority)
    check_tenant(tenant)
    if debounce is not None:
        if delay_seconds or run_at is not None:
            raise EnqueueError(
                "debounce sets the delay itself: give debounce, or delay_seconds/run_at, not both."
            )
        return _debounced(cfg, spec, payload, job_id, priority, tenant, debounce.checked(), level)
    delay, at = _when(delay_seconds, run_at)
    jid, body = _prepare(spec, payload, job_id, priority)
    if at is None:
        cfg.client("sqs").send_message(
            QueueUrl=cfg.queue_url(spec.name, level),
            MessageBody=body,
            DelaySeconds=delay,
            **_group(tenant),
            **trace_options(cfg, spec.tracing),
        )
    else:  # (EventBridge Scheduler sets no message attributes: a job sent this way starts no link)
        _schedule_once(cfg, spec.name, jid, body, at, level, tenant)
    return jid


def _debounced(
    cfg: StackConfig,
    spec: JobSpec,
    payload: Any,
    job_id: str | None,
    priority: str | None,
    tenant: str | None,
    debounce: Debounce,
    level: str | None,
) -> str:
    """A debounced enqueue (`lambdajobs.runtime.debounce`): read the key's item for its delay, send,
    then record this enqueue as the key's latest (a failed write leaves a job that still runs)."""
    from lambdajobs.runtime import debounce as debouncing
    from lambdajobs.runtime.aws import retrying

    client, table = cfg.client("dynamodb"), cfg.table_name()
    at_ms = debouncing.now_ms()
    state = debouncing.read(client, table, spec.name, debounce.key)
    delay = debouncing.delay_seconds(debounce, state, at_ms)
    jid, body = _prepare(spec, payload, job_id, priority, debounce={"key": debounce.key, "at": at_ms})
    cfg.client("sqs").send_message(
        QueueUrl=cfg.queue_url(spec.name, level),
        MessageBody=body,
        DelaySeconds=delay,
        **_group(tenant),
        **trace_options(cfg, spec.tracing),
    )
    restart = state is None or state.claimed  # a new burst
    first_ms = at_ms if restart or state is None else state.first_at
    failed = retrying(debouncing.record, client, table, spec.name, debounce, jid, at_ms, first_ms, restart)
    if failed is not None:
        logger.warning(
            "job %s id %s: sent, but its debounce key could not be recorded (%s); it runs, and an earlier "
            "enqueue of its key may run too",
            spec.name,
            jid,
            failed,
        )
    return jid


def one_time_schedule_name(job: str, job_id: str) -> str:
    """Scheduler names: at most 64 of [0-9a-zA-Z-_.]. One name per job id, so a re-send is a no-op."""
    return f"{job[:40]}-{hashlib.sha256(job_id.encode()).hexdigest()[:23]}"


def _schedule_once(
    config: StackConfig,
    job: str,
    job_id: str,
    body: str,
    at: datetime,
    level: str | None,
    tenant: str | None = None,
) -> None:
    role_arn, group, dlq_arn = config.scheduler_settings()
    queue_arn = config.queue_arn(job, level)
    scheduler = config.client("scheduler")
    expression = f"at({at.astimezone(UTC):%Y-%m-%dT%H:%M:%S})"
    try:
        scheduler.create_schedule(
            Name=one_time_schedule_name(job, job_id),
            GroupName=group,
            ScheduleExpression=expression,
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",  # a one-time schedule removes itself after it fires
            Description=f"lambdajobs: job {job} id {job_id}"[:512],
            Target={
                "Arn": queue_arn,
                "RoleArn": role_arn,
                "Input": body,
                "RetryPolicy": {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400},
                "DeadLetterConfig": {"Arn": dlq_arn},
                **({"SqsParameters": {"MessageGroupId": tenant}} if tenant is not None else {}),
            },
        )
    except scheduler.exceptions.ConflictException:
        # The same job id scheduled again: fine if it is the same job at the same time (a producer's
        # retry); anything else would be silently ignored, so say so.
        existing = scheduler.get_schedule(Name=one_time_schedule_name(job, job_id), GroupName=group)
        same_time = existing["ScheduleExpression"] == expression
        same_payload = json.loads(existing["Target"]["Input"]).get("payload") == json.loads(body)["payload"]
        if not (same_time and same_payload):
            raise ScheduleConflictError(
                f"job '{job}' id '{job_id}' is already scheduled ({existing['ScheduleExpression']}) with "
                f"{'another payload' if not same_payload else 'another time'}; use a new job id, or delete "
                f"schedule {one_time_schedule_name(job, job_id)} in group {group} first."
            ) from None
        logger.info("job %s id %s is already scheduled; not scheduling it twice", job, job_id)


@dataclass(frozen=True)
class EnqueueResult:
    """The outcome for one item of `enqueue_many`: a message id, or the error that stopped it."""

    job_id: str
    message_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class EnqueueResults(list[EnqueueResult]):
    """Per-item results, in input order. Check `.failed`: nothing is dropped silently."""

    @property
    def failed(self) -> list[EnqueueResult]:
        return [r for r in self if not r.ok]

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def job_ids(self) -> list[str]:
        return [r.job_id for r in self]


def chunk_by_size(bodies: Sequence[tuple[int, str]], *, overhead: int = 0) -> Iterable[list[tuple[int, str]]]:
    """Group (index, text) pairs for SendMessageBatch: at most 10 entries and 1 MiB of text each
    (`overhead`: bytes each entry adds to its text, its message attributes)."""
    chunk: list[tuple[int, str]] = []
    size = 0
    for index, body in bodies:
        n = len(body.encode()) + overhead
        if chunk and (len(chunk) == BATCH_MAX_ENTRIES or size + n > BATCH_MAX_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append((index, body))
        size += n
    if chunk:
        yield chunk


def enqueue_many(
    job: JobRef,
    payloads: Iterable[Any],
    *,
    job_ids: Sequence[str] | None = None,
    delay_seconds: int = 0,
    priority: str | None = None,
    tenant: str | None = None,
    max_retries: int = 3,
    config: StackConfig | None = None,
) -> EnqueueResults:
    """Send many jobs in SendMessageBatch calls (at most 10 entries and 1 MiB each).

    Every payload is validated first: one invalid payload raises and nothing is sent. Entries SQS
    reports in `Failed` (it answers HTTP 200 for partial failures) are retried up to `max_retries`
    times with a short backoff; what still fails is in the result's `.failed`, with its error.
    `priority` (one of the job's `priorities`) and `tenant` (the fair queue's message group, as
    `enqueue`'s) apply to every job of the call.

    Raises:
        UnknownJobError, PayloadValidationError, PayloadTooLargeError: as `enqueue`, before sending.
        EnqueueError: a bad job id, delay or priority, or `job_ids` of another length than `payloads`.

    Example:
        >>> emails = [{"to": a, "subject": "Hi", "body": "Hello"} for a in addresses]
        >>> results = enqueue_many("send_email", emails)
        >>> results.ok, len(results.failed)
        (True, 0)
    """
    cfg = resolve(config)
    spec = _spec_of(job, cfg)
    level = spec.level_for(priority)
    _check_delay(delay_seconds)
    check_tenant(tenant)
    items = list(payloads)
    if job_ids is not None and len(job_ids) != len(items):
        raise EnqueueError(
            f"job_ids has {len(job_ids)} ids for {len(items)} payloads; give one id per payload."
        )
    prepared = [_prepare(spec, p, job_ids[i] if job_ids else None, priority) for i, p in enumerate(items)]
    results = send_bodies(
        cfg,
        cfg.queue_url(spec.name, level),
        prepared,
        delay_seconds=delay_seconds,
        max_retries=max_retries,
        tenant=tenant,
        traced=spec.tracing,
    )
    if results.failed:
        logger.warning(
            "enqueue_many(%s): %d of %d jobs were not sent; see .failed",
            spec.name,
            len(results.failed),
            len(results),
        )
    return results


def send_bodies(
    cfg: StackConfig,
    url: str,
    prepared: Sequence[tuple[str, str]],
    *,
    delay_seconds: int = 0,
    max_retries: int = 3,
    tenant: str | None = None,
    traced: bool = False,
) -> EnqueueResults:
    """Send (job id, message body) pairs to one queue in SendMessageBatch calls (at most 10 entries
    and 1 MiB each). Entries SQS reports in `Failed` and calls that fail as a whole are retried up to
    `max_retries` times with a short backoff; the result has one item per pair, in order. Each
    carries the trace context when tracing is on (`trace_options`; `traced`: for these jobs)."""
    sqs = cfg.client("sqs")
    options = {**_group(tenant), **trace_options(cfg, traced)}
    attributes = options.get("MessageAttributes")
    overhead = len(json.dumps(attributes)) if attributes else 0
    job_ids = [job_id for job_id, _ in prepared]
    outcome: dict[int, EnqueueResult] = {}

    pending = list(enumerate(body for _, body in prepared))
    for attempt in range(max_retries + 1):
        if not pending:
            break
        if attempt:
            time.sleep(min(0.1 * 2**attempt, 2.0))
        retry: list[tuple[int, str]] = []
        for chunk in chunk_by_size(pending, overhead=overhead):
            results, again = _send_chunk(sqs, url, chunk, job_ids, delay_seconds, options)
            outcome.update(results)
            retry.extend(again)
        pending = retry

    missing = "SQS answered neither Successful nor Failed for this entry"
    return EnqueueResults(
        outcome.get(i, EnqueueResult(job_ids[i], error=missing)) for i in range(len(prepared))
    )


def _send_chunk(
    sqs: Any,
    url: str,
    chunk: list[tuple[int, str]],
    job_ids: Sequence[str],
    delay_seconds: int,
    options: dict[str, Any],
) -> tuple[dict[int, EnqueueResult], list[tuple[int, str]]]:
    """One SendMessageBatch call: the result of each (index, body) of `chunk`, and those to retry.

    A call that fails as a whole (network, throttling) is retried whole; of the entries SQS reports in
    `Failed`, those that are not the sender's fault (a sender fault would fail again: it is reported).
    `options`: the entries' `MessageGroupId` and `MessageAttributes`, if any.
    """
    entries = [
        {"Id": str(i), "MessageBody": body, "DelaySeconds": delay_seconds, **options} for i, body in chunk
    ]
    try:
        response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
    except Exception as exc:  # the whole call failed (network, throttling): retry the chunk
        error = f"{type(exc).__name__}: {exc}"
        return {i: EnqueueResult(job_ids[i], error=error) for i, _body in chunk}, list(chunk)
    results: dict[int, EnqueueResult] = {}
    for ok in response.get("Successful", []):
        i = int(ok["Id"])
        results[i] = EnqueueResult(job_ids[i], message_id=ok["MessageId"])
    bodies = dict(chunk)
    retry: list[tuple[int, str]] = []
    for failed in response.get("Failed", []):
        i = int(failed["Id"])
        results[i] = EnqueueResult(
            job_ids[i], error=f"{failed.get('Code')}: {failed.get('Message', '')}".strip()
        )
        if not failed.get("SenderFault"):  # a sender fault will fail again: report it
            retry.append((i, bodies[i]))
    return results, retry
