"""Opt-in OpenTelemetry tracing, from a producer to the jobs it sends and on through what they send.

On for every job of a stack (`StackConfig.tracing`, `LAMBDAJOBS_TRACING=1`, the CDK constructs'
`tracing` option) or for one job (`@job(tracing=True)`). Off, this module is never imported: the
producer and the worker test one flag each and nothing else (a cold start pays nothing).

- **Sending**: the current trace context goes in the message as the W3C `traceparent` (and
  `tracestate`) SQS message attributes (`message_attributes`), from `enqueue`, `enqueue_many`, a
  workflow's first stage, a worker's notice to the continuer and the continuer's next stage. Any
  producer's OpenTelemetry SDK can set them: they are the W3C header names, with String values.
- **Receiving**: the worker makes one span per record, `lambdajobs.run <job>` (kind CONSUMER), linked
  to the context the message carries (as AWS links SQS-to-Lambda traces rather than continuing one
  trace), and current while the record is processed: the jobs it enqueues, a workflow's notice and
  the continuer's stage sends carry that span's context. The continuer's span is
  `lambdajobs.continue`. A missing or malformed `traceparent` makes a span without a link; nothing
  here ever fails a job.

The spans go to the global tracer provider (`opentelemetry.trace.set_tracer_provider`, or AWS's
distribution of OpenTelemetry, whose Lambda layer sets one up). Without the `opentelemetry-api`
package a stack or job that asked for tracing runs untraced, with one warning per cold start.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.settings import ATTR_TRACEPARENT, ATTR_TRACESTATE, SERVICE_NAME

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

    from lambdajobs.runtime.spec import JobSpec

logger = logging.getLogger(__name__)

#: The instrumentation scope of lambdajobs' spans.
TRACER_NAME = SERVICE_NAME
#: The span of a job's record, and of a workflow notice the continuer handles.
RUN_SPAN = "lambdajobs.run"
CONTINUE_SPAN = "lambdajobs.continue"


@dataclass(frozen=True)
class _Api:
    """The parts of opentelemetry-api used here, loaded once."""

    trace: Any
    propagator: Any
    consumer: Any  # SpanKind.CONSUMER
    error: Any  # StatusCode.ERROR
    status: Any  # Status


@dataclass
class _Traced:
    """The span of the record being processed, and the error recorded on it (once)."""

    span: Any
    error: BaseException | None = None


_api: _Api | None = None
_missing = False
#: The record being processed here under a span (None: no traced record runs in this context).
_record_span: ContextVar[_Traced | None] = ContextVar("lambdajobs_record_span", default=None)


def _otel() -> _Api | None:
    """opentelemetry-api, or None when it is not installed (said once per process: a cold start)."""
    global _api, _missing
    if _api is None and not _missing:
        try:
            from opentelemetry import trace
            from opentelemetry.trace import SpanKind, Status, StatusCode
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError as exc:
            _missing = True
            logger.warning(
                "tracing is on, but opentelemetry-api is not installed here (%s): jobs run untraced. "
                "Ship it with your jobs ([tool.lambdajobs] dependencies = ['opentelemetry-api', ...]) "
                "or use AWS's OpenTelemetry Lambda layer; see docs/how-to/tracing.md.",
                exc,
            )
            return None
        _api = _Api(trace, TraceContextTextMapPropagator(), SpanKind.CONSUMER, StatusCode.ERROR, Status)
    return _api


def available() -> bool:
    """Whether opentelemetry-api can be imported here (a warning, once, when it cannot)."""
    return _otel() is not None


# -- sending -----------------------------------------------------------------------------------------


def in_traced_record() -> bool:
    """Whether a traced record (a job's or a workflow notice's) is being processed in this context."""
    return _record_span.get() is not None


def message_attributes(*, on: bool = False) -> dict[str, dict[str, str]]:
    """The current trace context as SQS message attributes (`traceparent`, `tracestate`: String),
    when tracing is `on` for what is sent or a traced record is being processed here; {} otherwise,
    or when there is no current span to send (or no opentelemetry-api)."""
    if not (on or in_traced_record()):
        return {}
    api = _otel()
    if api is None:
        return {}
    carrier: dict[str, str] = {}
    try:
        api.propagator.inject(carrier)
    except Exception as exc:  # never fail a send for its trace context
        logger.warning("could not add the trace context to a message: %s", exc)
        return {}
    return {
        name: {"DataType": "String", "StringValue": carrier[name]}
        for name in (ATTR_TRACEPARENT, ATTR_TRACESTATE)
        if carrier.get(name)
    }


def send_options(*, on: bool = False) -> dict[str, Any]:
    """`message_attributes` as SendMessage's keyword: `{"MessageAttributes": ...}`, or {}."""
    attributes = message_attributes(on=on)
    return {"MessageAttributes": attributes} if attributes else {}


# -- receiving ---------------------------------------------------------------------------------------


def linked_context(record: SQSRecord) -> Any:
    """The span context a record's message carries (`traceparent`/`tracestate`), or None: none, or
    malformed (never raises)."""
    api = _otel()
    attributes = record.raw_event.get("messageAttributes") or {}
    if api is None or not attributes.get(ATTR_TRACEPARENT):
        return None
    carrier = {
        name: str((attributes.get(name) or {}).get("stringValue") or "")
        for name in (ATTR_TRACEPARENT, ATTR_TRACESTATE)
    }
    try:
        found = api.trace.get_current_span(api.propagator.extract(carrier)).get_span_context()
    except Exception:
        return None
    return found if found.is_valid else None


def _queue_name(record: SQSRecord) -> str:
    return str(record.raw_event.get("eventSourceARN") or "").rpartition(":")[2]


def _job_attributes(spec: JobSpec, record: SQSRecord) -> dict[str, Any]:
    from lambdajobs.runtime.delivery import attempt_of

    job_id = record.message_id
    try:  # the envelope's job id (a producer without one: the worker uses the message id)
        body = json.loads(record.body)
        if isinstance(body, dict) and isinstance(body.get("id"), str):
            job_id = body["id"]
    except (TypeError, ValueError):
        pass
    return {
        "lambdajobs.job": spec.name,
        "lambdajobs.job_id": str(job_id),
        "lambdajobs.attempt": attempt_of(record),
    }


def _notice_attributes(record: SQSRecord) -> dict[str, Any]:
    try:
        notice = json.loads(record.body)
        return {"lambdajobs.workflow": str(notice["workflow"]), "lambdajobs.stage": int(notice["stage"])}
    except (TypeError, ValueError, KeyError):
        return {}


@contextmanager
def record_span(record: SQSRecord, name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """A CONSUMER span for one record, linked to the context its message carries, current while the
    block runs (what the block sends carries it). An exception out of the block is recorded on the
    span, whose status is then ERROR, and goes on. Without opentelemetry-api: no span (None)."""
    api = _otel()
    if api is None:
        yield None
        return
    link = linked_context(record)
    tracer = api.trace.get_tracer(TRACER_NAME)
    with tracer.start_as_current_span(
        name,
        kind=api.consumer,
        links=[api.trace.Link(link)] if link is not None else None,
        attributes={
            "messaging.system": "aws_sqs",
            "messaging.operation.type": "process",
            "messaging.message.id": record.message_id,
            "messaging.destination.name": _queue_name(record),
            **attributes,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        traced = _Traced(span)
        token = _record_span.set(traced)
        try:
            yield span
        except BaseException as exc:
            _failed(api, traced, exc)
            raise
        finally:
            _record_span.reset(token)


def _failed(api: _Api, traced: _Traced, error: BaseException) -> None:
    if traced.error is error:  # recorded already (`failed`, then raised)
        return
    traced.error = error
    traced.span.record_exception(error)
    traced.span.set_status(api.status(api.error, f"{type(error).__name__}: {error}"[:300]))


def failed(error: BaseException) -> None:
    """The job of the record being traced here failed with `error` (also when it is dead-lettered,
    which the record's handler does not raise): record it on the record's span, status ERROR. No
    traced record here: nothing."""
    traced = _record_span.get()
    if traced is not None and _api is not None:
        _failed(_api, traced, error)


def job_handler(spec: JobSpec, handler: Callable[[SQSRecord], Any]) -> Callable[[SQSRecord], Any]:
    """`handler` (the worker's per-record function) run under a `lambdajobs.run <job>` span per record;
    `handler` itself when opentelemetry-api is missing (warned once)."""
    if _otel() is None:
        return handler
    name = f"{RUN_SPAN} {spec.name}"

    def traced(record: SQSRecord) -> Any:
        with record_span(record, name, _job_attributes(spec, record)):
            return handler(record)

    return traced


def notice_handler(handler: Callable[[SQSRecord], Any], *, on: bool) -> Callable[[SQSRecord], Any]:
    """The continuer's per-record function under a `lambdajobs.continue` span, for a notice that
    carries a trace context (its member was traced) or every notice when the stack's tracing is `on`."""

    def traced(record: SQSRecord) -> Any:
        carried = (record.raw_event.get("messageAttributes") or {}).get(ATTR_TRACEPARENT)
        if not (on or carried) or _otel() is None:
            return handler(record)
        with record_span(record, CONTINUE_SPAN, _notice_attributes(record)):
            return handler(record)

    return traced
