"""Tracing (opt-in, `lambdajobs.runtime.tracing`) on in-process moto, with OpenTelemetry's SDK and an
in-memory span exporter: the producer's context goes in the message (`traceparent`), the worker's span
for each record links to it, and so on through the jobs a job enqueues, a workflow's notice, the
continuer and a chord's callback. Off, no attribute is sent and no span made; a malformed
`traceparent` never fails a job; without opentelemetry-api a traced job runs untraced."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import BaseModel

from lambdajobs.runtime import tracing
from lambdajobs.runtime.context import JobContext
from lambdajobs.runtime.continuer import Continuer
from lambdajobs.runtime.errors import PermanentError
from lambdajobs.runtime.producer import enqueue, enqueue_many
from lambdajobs.runtime.settings import ATTR_TRACEPARENT
from lambdajobs.runtime.worker import Worker
from lambdajobs.runtime.workflow import chord, group, member_job_id, sig

ROOT = Path(__file__).resolve().parents[2]
#: A valid W3C traceparent of another process (a producer in another language).
FOREIGN = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Fan(BaseModel):
    members: int


class Part(BaseModel):
    i: int


class Note(BaseModel):
    label: str


def returns_i(payload: Part) -> int:
    """A job declared per test under various names: it succeeds."""
    return payload.i


# -- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exporter() -> InMemorySpanExporter:
    """The process's tracer provider (the SDK's: set here unless a test set one before) sends every
    span to this exporter, synchronously."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        trace.set_tracer_provider(TracerProvider())
        provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), "another tracer provider was set in this process"
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return memory


@pytest.fixture
def spans(exporter: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    exporter.clear()
    yield exporter
    exporter.clear()


@pytest.fixture
def sent(stack: Any) -> Iterator[list[dict[str, Any]]]:
    """Every SendMessage / SendMessageBatch entry the stack's SQS client sends (its parameters)."""
    client = stack.client("sqs")
    seen: list[dict[str, Any]] = []

    def one(params: dict[str, Any], **_: Any) -> None:
        seen.append(params)

    def batch(params: dict[str, Any], **_: Any) -> None:
        seen.extend(params["Entries"])

    events = client.meta.events
    events.register("provide-client-params.sqs.SendMessage", one)
    events.register("provide-client-params.sqs.SendMessageBatch", batch)
    yield seen
    events.unregister("provide-client-params.sqs.SendMessage", one)
    events.unregister("provide-client-params.sqs.SendMessageBatch", batch)


def producer_span() -> Any:
    return trace.get_tracer("tests.producer").start_as_current_span("checkout", kind=SpanKind.PRODUCER)


def ours(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("lambdajobs.")]


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def linked_to(span: ReadableSpan) -> list[tuple[int, int]]:
    """The (trace id, span id) of each span `span` links to."""
    return [(link.context.trace_id, link.context.span_id) for link in span.links]


def ids(span: ReadableSpan) -> tuple[int, int]:
    assert span.context is not None
    return span.context.trace_id, span.context.span_id


def traceparent_of(message: dict[str, Any]) -> str | None:
    value = (message.get("MessageAttributes") or {}).get(ATTR_TRACEPARENT)
    return value["StringValue"] if value else None


# -- the chain of links --------------------------------------------------------------------------------


def test_a_producers_span_links_through_the_job_its_chord_members_and_the_chords_callback(
    stack, declare, spans
):
    # GIVEN traced jobs: one that enqueues a chord of two members and a callback
    def trace_fan(payload: Fan, ctx: JobContext) -> str:
        members = group(sig("trace_part", {"i": i}) for i in range(payload.members))
        return chord(members, sig("trace_note", {"label": "done"})).enqueue(workflow_id=f"wf-{ctx.job_id}")

    def trace_part(payload: Part) -> int:
        return payload.i

    def trace_note(payload: Note) -> str:
        return payload.label

    part = declare(trace_part, tracing=True)
    note = declare(trace_note, tracing=True)
    fan = declare(trace_fan, tracing=True)  # last: its worker knows the others' queues
    # WHEN a producer enqueues the first job inside its own span
    with producer_span() as checkout:
        job_id = enqueue("trace_fan", {"members": 2}, job_id="fan-1")
    # and every function runs its queue (the workers, the continuer, the callback's worker)
    fan.drain()
    part.drain()
    stack.continuer().drain()
    note.drain()
    assert stack.status(member_job_id(f"wf-{job_id}", 1, 0)).state == "succeeded"
    # THEN the first job's span is a CONSUMER span linked to the producer's span (a new trace, as AWS
    # links SQS to Lambda), with the job's attributes
    [run] = named(spans, "lambdajobs.run trace_fan")
    assert run.kind is SpanKind.CONSUMER and run.parent is None
    assert linked_to(run) == [ids(checkout)]
    assert run.attributes is not None
    assert run.attributes["lambdajobs.job"] == "trace_fan" and run.attributes["lambdajobs.job_id"] == "fan-1"
    assert run.attributes["lambdajobs.attempt"] == 1 and run.attributes["messaging.system"] == "aws_sqs"
    assert run.attributes["messaging.message.id"]
    # and each chord member's span links to the first job's span (the job that enqueued the chord)
    members = named(spans, "lambdajobs.run trace_part")
    assert len(members) == 2
    assert all(linked_to(member) == [ids(run)] for member in members)
    # and the continuer's span links to the member whose notice completed the stage
    [advance] = named(spans, "lambdajobs.continue")
    assert advance.attributes is not None and advance.attributes["lambdajobs.stage"] == 0
    assert linked_to(advance)[0] in [ids(member) for member in members]
    # and the callback's span links to the continuer's, which sent it
    [callback] = named(spans, "lambdajobs.run trace_note")
    assert linked_to(callback) == [ids(advance)]
    # so the chain goes producer -> job -> member -> continuer -> callback, by span and trace ids
    chain = (checkout, run, *members, advance, callback)
    assert len({ids(s)[0] for s in chain}) == len(chain)  # each a trace of its own, joined by links
    assert all(s.status.status_code is StatusCode.UNSET for s in ours(spans))


def test_a_stack_with_tracing_on_traces_jobs_that_do_not_ask_and_what_they_enqueue(stack, declare, spans):
    # GIVEN jobs without tracing=True, on a stack whose tracing is on (LAMBDAJOBS_TRACING=1 on its
    # functions: StackConfig.tracing)

    def untagged_parent(payload: Part) -> None:
        enqueue_many("untagged_child", [{"i": payload.i}, {"i": payload.i + 1}])

    def untagged_child(payload: Part) -> int:
        return payload.i

    declare(untagged_child)
    declare(untagged_parent)
    config = stack.config.with_resources(tracing=True)  # (with the queues of the jobs just declared)
    parent = stack.runner("untagged_parent", worker=Worker("untagged_parent", config=config))
    child = stack.runner("untagged_child", worker=Worker("untagged_child", config=config))
    # WHEN a producer of that stack enqueues in its span, and the jobs run
    with producer_span() as checkout:
        enqueue("untagged_parent", {"i": 1}, config=config)
    parent.drain()
    child.drain()
    # THEN the parent links to the producer and both children (enqueue_many) link to the parent
    [run] = named(spans, "lambdajobs.run untagged_parent")
    assert linked_to(run) == [ids(checkout)]
    children = named(spans, "lambdajobs.run untagged_child")
    assert len(children) == 2 and all(linked_to(c) == [ids(run)] for c in children)


def test_the_continuer_of_a_stack_with_tracing_on_traces_every_notice(stack, spans):
    # GIVEN a stack whose tracing is on, and a chord of untraced jobs enqueued outside any span
    config = stack.config.with_resources(tracing=True)
    wid = chord(group([sig("step", {"name": "a"})]), sig("summarize", {"label": "s"})).enqueue(config=config)
    stack.runner("step", worker=Worker("step", config=config)).drain()
    continuer = stack.continuer()
    continuer.continuer = Continuer(config=config)
    continuer.drain()
    # THEN the member and the continuer made spans, the continuer's linked to the member's
    [member] = named(spans, "lambdajobs.run step")
    [advance] = named(spans, "lambdajobs.continue")
    assert not member.links  # enqueued outside any span: nothing to link to
    assert linked_to(advance) == [ids(member)]
    assert advance.attributes is not None and advance.attributes["lambdajobs.workflow"] == wid


def test_a_failed_run_is_recorded_on_its_span_with_an_error_status(stack, declare, spans):
    # GIVEN a traced job that fails (and will be retried)
    def trace_flaky(payload: Part) -> None:
        raise RuntimeError(f"provider down for {payload.i}")

    runner = declare(trace_flaky, tracing=True, max_attempts=3)
    enqueue("trace_flaky", {"i": 7})
    # WHEN it runs once
    delivery = runner.attempt()
    assert delivery is not None and delivery.jobs[0].state == "retrying"
    # THEN its span has the error's event and an ERROR status
    [run] = named(spans, "lambdajobs.run trace_flaky")
    assert run.status.status_code is StatusCode.ERROR
    assert "RuntimeError" in (run.status.description or "")
    [event] = [e for e in run.events if e.name == "exception"]
    assert event.attributes is not None and event.attributes["exception.message"] == "provider down for 7"


def test_a_job_that_fails_for_good_has_an_error_span(stack, declare, spans):
    # GIVEN a traced job that fails for good (dead-lettered: the record handler returns normally)
    def trace_doomed(payload: Part) -> None:
        raise PermanentError(f"no such customer {payload.i}")

    runner = declare(trace_doomed, tracing=True)
    job_id = enqueue("trace_doomed", {"i": 1})
    # WHEN it runs
    runner.drain()
    assert stack.status(job_id).state == "dead"
    # THEN its span still records the error, once, with an ERROR status
    [run] = named(spans, "lambdajobs.run trace_doomed")
    assert run.status.status_code is StatusCode.ERROR
    assert [e.name for e in run.events] == ["exception"]


def test_a_failure_noted_during_the_run_is_recorded_once_even_when_it_is_raised_after(spans):
    # GIVEN a record's span (as the worker makes it), and a job error the worker notes while deciding
    # (tracing.failed: a dead-lettered job is not raised out of the record's handler)
    record = SQSRecord({"messageId": "m-1", "body": "{}", "messageAttributes": {}})
    error = ValueError("card declined")
    with pytest.raises(ValueError), tracing.record_span(record, "lambdajobs.run probe", {}):
        tracing.failed(error)
        raise error  # (a retry's error is raised too)
    # THEN the span holds it once, status ERROR; outside a traced record, failed() does nothing
    [run] = named(spans, "lambdajobs.run probe")
    assert [e.name for e in run.events] == ["exception"]
    assert run.status.status_code is StatusCode.ERROR
    tracing.failed(error)


# -- off, malformed, missing -----------------------------------------------------------------------------


def test_with_tracing_off_nothing_is_sent_and_no_span_is_made(stack, declare, spans, sent):
    # GIVEN a job without tracing, on a stack without it (its default)
    assert stack.config.tracing is False

    def plain_parent(payload: Part) -> None:
        enqueue("plain_child", {"i": payload.i})

    def plain_child(payload: Part) -> int:
        return payload.i

    child = declare(plain_child)
    parent = declare(plain_parent)
    # WHEN a producer enqueues it, one at a time and in a batch, inside a span of its own, and it runs
    with producer_span():
        enqueue("plain_parent", {"i": 1})
        assert enqueue_many("plain_parent", [{"i": 2}]).ok
    parent.drain()
    child.drain()
    # THEN no message carried a trace context, and lambdajobs made no span
    assert len(sent) == 4
    assert [traceparent_of(m) for m in sent] == [None] * 4
    assert ours(spans) == []


def test_a_traced_job_sends_its_trace_context_as_the_traceparent_attribute(stack, declare, spans, sent):
    # GIVEN a traced job WHEN it is enqueued inside a span
    declare(returns_i, name="tagged", tracing=True)
    with producer_span() as checkout:
        enqueue("tagged", {"i": 1})
        enqueue_many("tagged", [{"i": 2}, {"i": 3}])
    # THEN every message carries the span's W3C traceparent (String)
    context = checkout.get_span_context()
    expected = f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"
    assert [traceparent_of(m) for m in sent] == [expected] * 3
    assert sent[0]["MessageAttributes"][ATTR_TRACEPARENT]["DataType"] == "String"
    # and outside any span nothing is sent (there is no context to carry)
    sent.clear()
    enqueue("tagged", {"i": 4})
    assert traceparent_of(sent[0]) is None


@pytest.mark.parametrize(
    "attributes",
    [
        {ATTR_TRACEPARENT: "not a traceparent"},
        {ATTR_TRACEPARENT: "00-00000000000000000000000000000000-0000000000000000-01"},
        {ATTR_TRACEPARENT: "00-xyz-123-01", "tracestate": ",,=;;"},
        {ATTR_TRACEPARENT: FOREIGN, "tracestate": "=bad=,,"},
    ],
    ids=["garbage", "zero-ids", "bad-both", "bad-tracestate"],
)
def test_a_malformed_traceparent_never_fails_a_job(stack, declare, spans, attributes):
    # GIVEN a traced job sent by another producer with a damaged trace context
    runner = declare(returns_i, name="trace_sturdy", tracing=True)
    body = json.dumps({"v": 1, "job": "trace_sturdy", "id": "sturdy-1", "payload": {"i": 1}})
    stack.client("sqs").send_message(
        QueueUrl=runner.queues.queue_url,
        MessageBody=body,
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attributes.items()},
    )
    # WHEN it runs THEN it succeeds, with a span that links to nothing (or to the valid parent only)
    runner.drain()
    assert stack.status("sturdy-1").state == "succeeded"
    [run] = named(spans, "lambdajobs.run trace_sturdy")
    if attributes[ATTR_TRACEPARENT] == FOREIGN:
        assert linked_to(run) == [(int(FOREIGN[3:35], 16), int(FOREIGN[36:52], 16))]
    else:
        assert not run.links
    assert run.status.status_code is StatusCode.UNSET


def test_a_foreign_producers_traceparent_is_linked(stack, declare, spans):
    # GIVEN a message another language's producer sent, with its W3C traceparent attribute
    runner = declare(returns_i, name="trace_foreign", tracing=True)
    body = json.dumps({"v": 1, "job": "trace_foreign", "payload": {"i": 1}})
    stack.client("sqs").send_message(
        QueueUrl=runner.queues.queue_url,
        MessageBody=body,
        MessageAttributes={ATTR_TRACEPARENT: {"DataType": "String", "StringValue": FOREIGN}},
    )
    runner.drain()
    # THEN the worker's span links to that producer's span
    [run] = named(spans, "lambdajobs.run trace_foreign")
    assert linked_to(run) == [(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331)]


def test_without_opentelemetry_a_traced_job_runs_untraced_with_one_warning(
    stack, declare, spans, monkeypatch, caplog
):
    # GIVEN a traced job, in a process where opentelemetry-api cannot be imported (a fresh cold start)
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setattr(tracing, "_api", None)
    monkeypatch.setattr(tracing, "_missing", False)
    runner = declare(returns_i, name="trace_bare", tracing=True)
    # WHEN it is enqueued and runs, twice (two invocations)
    with caplog.at_level(logging.WARNING, logger="lambdajobs.runtime.tracing"):
        first = enqueue("trace_bare", {"i": 1})
        runner.drain()
        second = enqueue("trace_bare", {"i": 2})
        runner.drain()
    # THEN both succeed, no span is made, and one warning says why and what to do
    assert stack.status(first).state == stack.status(second).state == "succeeded"
    assert ours(spans) == []
    warnings = [r for r in caplog.records if r.name == "lambdajobs.runtime.tracing"]
    assert len(warnings) == 1 and "opentelemetry-api is not installed" in warnings[0].getMessage()


# -- a cold start without tracing pays nothing for it ------------------------------------------------------

PROBE = """
import json, sys
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.worker import Worker
from lambdajobs.testing import TestStack
with TestStack("tests.jobs") as stack:
    config = stack.config.with_resources(tracing=TRACED)
    job_id = enqueue("step", {"name": "a"}, config=config)
    stack.runner("step", worker=Worker("step", config=config)).drain()
    state = stack.status(job_id).state
print(json.dumps({"state": state, "loaded": sorted(
    m for m in sys.modules if m == "lambdajobs.runtime.tracing" or m.split(".")[0] == "opentelemetry")}))
"""

COLD_START = """
import json, sys
import lambdajobs.runtime.entry
print(json.dumps({"loaded": sorted(
    m for m in sys.modules if m == "lambdajobs.runtime.tracing" or m.split(".")[0] == "opentelemetry")}))
"""


def probe(code: str, **env: str) -> dict[str, Any]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("LAMBDAJOBS_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**full, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_a_worker_without_tracing_imports_neither_the_tracing_module_nor_opentelemetry():
    # GIVEN a worker function's cold start (the environment CDK gives it), tracing off
    cold = probe(
        COLD_START,
        LAMBDAJOBS_JOB="step",
        LAMBDAJOBS_JOBS="tests.jobs",
        LAMBDAJOBS_MODULES="tests.jobs.flows",
        AWS_DEFAULT_REGION="us-east-1",
    )
    # THEN it imported neither lambdajobs.runtime.tracing nor opentelemetry (installed here)
    assert cold["loaded"] == []
    # and neither did a job's enqueue and run on a stack without tracing
    ran = probe(PROBE.replace("TRACED", "False"))
    assert ran == {"state": "succeeded", "loaded": []}
    # (while the same run on a stack with tracing on loads both: the probe can see them)
    on = probe(PROBE.replace("TRACED", "True"))
    assert on["state"] == "succeeded"
    assert "lambdajobs.runtime.tracing" in on["loaded"] and "opentelemetry.trace" in on["loaded"]


def untraced_parent(payload: Part) -> None:
    enqueue_many("untraced_child", [{"i": payload.i}])


def untraced_child(payload: Part) -> int:
    return payload.i


def test_a_test_stack_with_tracing_on_traces_its_jobs_as_the_deployed_stack_would(spans):
    from lambdajobs.runtime.spec import job
    from lambdajobs.testing import TestStack, isolated_registry

    # GIVEN jobs that do not ask for tracing, on a TestStack traced as a stack deployed with tracing=True
    with isolated_registry():
        specs = [job()(untraced_child).spec, job()(untraced_parent).spec]
        with TestStack(specs=specs, stack="traced", tracing=True) as traced:
            # WHEN the test enqueues in its span, and the jobs run
            with producer_span() as checkout:
                traced.enqueue("untraced_parent", {"i": 1})
            traced.runner("untraced_parent").drain()
            traced.runner("untraced_child").drain()
    # THEN the parent's run links to the test's span, and the child's to the parent's
    [run] = named(spans, "lambdajobs.run untraced_parent")
    assert linked_to(run) == [ids(checkout)]
    [child] = named(spans, "lambdajobs.run untraced_child")
    assert linked_to(child) == [ids(run)]
