"""The light record mode (`@job(record_mode="light")`) on in-process moto: one write unit per success,
the record read as a full-mode run leaves it, no run after the record is written, concurrent copies
that may both run with one record written, failures retried and dead-lettered as in full mode, a
success whose write fails not lost, and what light mode refuses or does instead at run time."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import boto3
from pydantic import BaseModel

from bench.common import WriteUnits
from lambdajobs import JobContext, PermanentError
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.runtime import aws
from lambdajobs.runtime.cancellation import cancel
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from tests.concurrent_deliveries import Deliveries
from tests.faults import Faults

WRITES = {"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"}


class Mail(BaseModel):
    to: str
    subject: str = "Hi"


def mail(to: str = "ada@example.com") -> dict[str, str]:
    return {"to": to, "subject": "Hi"}


class Runs:
    """A job body that counts its runs per job id and fails while `failures` says so."""

    def __init__(self, failures: int = 0, error: type[Exception] = RuntimeError) -> None:
        self.count: Counter[str] = Counter()
        self.failures, self.error = failures, error

    def job(self, payload: Mail, ctx: JobContext) -> dict[str, Any]:
        self.count[ctx.job_id] += 1
        if self.failures > 0:
            self.failures -= 1
            raise self.error(f"could not send to {payload.to}")
        return {"sent": payload.to, "attempt": ctx.attempt}


def writes(stack: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every write call the stack's DynamoDB client makes from now on (name, parameters)."""
    calls: list[tuple[str, dict[str, Any]]] = []

    def seen(model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in WRITES:
            calls.append((model.name, params))

    stack.client("dynamodb").meta.events.register("before-parameter-build.dynamodb", seen)
    return calls


def meter(stack: Any) -> WriteUnits:
    """Write units as DynamoDB bills them (`bench.common.WriteUnits`), read with a client of its own."""
    client = stack.client("dynamodb")
    reader = boto3.client(
        "dynamodb",
        endpoint_url=client.meta.endpoint_url,
        region_name=client.meta.region_name,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    return WriteUnits(client, reader)


# -- cost and record ----------------------------------------------------------------------------------


def test_a_light_success_costs_one_write_unit_and_reads_like_a_full_mode_record(stack, declare, clock):
    # GIVEN the same job declared in both modes (PII field, 5 attempts: the bench's plain job)
    light_runs, full_runs = Runs(), Runs()
    options = {"timeout_seconds": 30, "max_attempts": 5, "pii_fields": ("to",)}
    light = declare(light_runs.job, name="light_mail", record_mode="light", **options)
    full = declare(full_runs.job, name="full_mail", **options)
    light_id = enqueue("light_mail", mail(), job_id="same-l")
    full_id = enqueue("full_mail", mail(), job_id="same-f")
    units = meter(stack)
    calls = writes(stack)
    # WHEN the light job runs to success
    assert light.poll().failed_ids == []
    # THEN it cost one write, a PutItem, of one write unit (its record is under 1 KB)
    assert [name for name, _ in calls] == ["PutItem"]
    assert units.units == 1
    # ... after one eventually consistent GetItem (half a read unit) that found no record
    assert (units.read_calls, units.read_units) == ({"GetItem": 1}, 0.5)
    units.close()
    # ... and its record reads as the full mode's does, but for the id, the job's name and the times
    assert full.poll().failed_ids == []
    light_status, full_status = get_status(light_id), get_status(full_id)
    assert light_status.state == "succeeded"
    assert light_status.result == {"sent": "ada@example.com", "attempt": 1}
    same = ("state", "attempts", "result", "error", "progress", "progress_message", "history")
    assert {f: getattr(light_status, f) for f in same} == {f: getattr(full_status, f) for f in same}
    for status in (light_status, full_status):
        assert status.created_at and status.started_at and status.finished_at and status.updated_at
    light_item = stack.client("dynamodb").get_item(
        TableName=stack.config.table_name(), Key={"id": {"S": light_id}}
    )
    full_item = stack.client("dynamodb").get_item(
        TableName=stack.config.table_name(), Key={"id": {"S": full_id}}
    )
    assert set(light_item["Item"]) == set(full_item["Item"])  # the same attributes: one record format


def test_a_redelivery_after_the_success_does_not_run_the_job_again(stack, declare, clock):
    # GIVEN a light job that succeeded
    runs = Runs()
    runner = declare(runs.job, name="light_mail", record_mode="light")
    enqueue("light_mail", mail(), job_id="once")
    assert runner.poll().failed_ids == []
    calls = writes(stack)
    # WHEN the same job id is delivered again (a producer's re-send, SQS's at-least-once)
    enqueue("light_mail", mail(), job_id="once")
    outcome = runner.poll()
    # THEN it is not run again, nothing is written, and the message is done
    assert outcome.failed_ids == []
    assert runs.count == {"once": 1}
    assert calls == []
    assert runner.depth() == 0
    assert get_status("once").attempts == 1


def test_no_record_exists_while_a_light_job_runs(stack, declare, clock):
    # GIVEN a light job that reads its own status while it runs, and reports progress
    seen: list[str] = []

    def looks(payload: Mail, ctx: JobContext) -> str:
        ctx.progress(50, "half way")
        seen.append(get_status(ctx.job_id).state.value)
        ctx.progress(90, "nearly")
        return "ok"

    runner = declare(looks, name="light_look", record_mode="light")
    job_id = enqueue("light_look", mail())
    calls = writes(stack)
    # WHEN it runs
    assert runner.poll().failed_ids == []
    # THEN while it ran its status read pending (no record), and its last progress is written with its
    # success, in the one write
    assert seen == ["pending"]
    assert [name for name, _ in calls] == ["PutItem"]
    status = get_status(job_id)
    assert (status.state.value, status.progress, status.progress_message) == ("succeeded", 90.0, "nearly")


# -- concurrent copies --------------------------------------------------------------------------------


def test_concurrent_copies_may_all_run_but_one_success_is_written(stack, declare):
    # GIVEN a light job that counts its runs per job id, and a count of the success writes that landed
    deliveries = Deliveries(ids=10, copies=3, job_seconds=0.05)
    runner = declare(deliveries.job(), name="light_counted", timeout_seconds=30, record_mode="light")
    mapping = EventSourceMapping(
        queue_url=runner.queues.queue_url,
        queue_arn=runner.queues.queue_arn,
        handler=runner.handler,
        function_name="test-light_counted",
        timeout_seconds=30,
        config=stack.config,
    )
    landed: Counter[str] = Counter()
    refused: Counter[str] = Counter()
    lock = threading.Lock()

    def after(model: Any, params: dict[str, Any], parsed: dict[str, Any], **_: Any) -> None:
        if model.name == "PutItem" and params["Item"].get("state", {}).get("S") == "succeeded":
            with lock:
                (refused if "Error" in parsed else landed)[params["Item"]["id"]["S"]] += 1

    def remember(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["light_params"] = params

    client = stack.client("dynamodb")
    client.meta.events.register("before-parameter-build.dynamodb.PutItem", remember)
    client.meta.events.register(
        "after-call.dynamodb.PutItem",
        lambda model, parsed, context, **kw: after(model, context.get("light_params", {}), parsed),
    )
    # WHEN 3 copies of each of 10 job ids are delivered at the same time
    deliveries.deliver(mapping, "light_counted", wave=5)
    # THEN copies ran side by side (no lock: the weaker guarantee), yet each id has one success written,
    # the others refused by its condition; each record reads succeeded at its first attempt, and every
    # copy's message is done
    assert sum(deliveries.runs.values()) > len(deliveries.job_ids)
    assert landed == {jid: 1 for jid in deliveries.job_ids}
    assert sum(refused.values()) == sum(deliveries.runs.values()) - len(deliveries.job_ids)
    for jid in deliveries.job_ids:
        status = get_status(jid, config=stack.config)
        assert (status.state.value, status.attempts) == ("succeeded", 1), jid
    assert all(not o.failed_ids for outcomes in deliveries.outcomes.values() for o in outcomes)


# -- failures -----------------------------------------------------------------------------------------


def test_a_failing_light_job_retries_and_dead_letters_as_in_full_mode(stack, declare, clock):
    # GIVEN a light job that fails every time, with 3 attempts
    runs = Runs(failures=99)
    runner = declare(runs.job, name="light_failing", record_mode="light", max_attempts=3)
    job_id = enqueue("light_failing", mail())
    # WHEN its first attempt fails
    first = runner.poll()
    # THEN the message comes back after its backoff and the record tells the attempt and the error
    assert first.failed_ids == first.message_ids
    retrying = get_status(job_id)
    assert (retrying.state.value, retrying.attempts) == ("retrying", 1)
    assert retrying.error == {"type": "RuntimeError", "message": "could not send to ada@example.com"}
    # WHEN its next attempts fail too (each after its backoff)
    for attempt in (2, 3):
        clock.shift(runner.spec.backoff.ceiling(attempt - 1) + 1)
        runner.poll()
    # THEN it ran 3 times, is dead with each attempt in its history, and its message is in the DLQ
    # with the reason, as a full-mode job's
    assert runs.count == {job_id: 3}
    dead = get_status(job_id)
    assert (dead.state.value, dead.attempts) == ("dead", 3)
    assert [a.attempt for a in dead.history] == [1, 2, 3]
    assert dead.payload is not None and dead.traceback
    assert runner.depth() == 0
    [letter] = runner.dlq_messages()
    assert letter["MessageAttributes"]["lambdajobs.error_type"]["StringValue"] == "RuntimeError"


def test_a_light_job_that_fails_then_succeeds_keeps_its_history(stack, declare, clock):
    # GIVEN a light job whose first attempt fails
    runs = Runs(failures=1)
    runner = declare(runs.job, name="light_flaky", record_mode="light")
    job_id = enqueue("light_flaky", mail())
    runner.poll()
    # WHEN its retry succeeds
    clock.shift(runner.spec.backoff.ceiling(1) + 1)
    assert runner.poll().failed_ids == []
    # THEN the record reads succeeded at attempt 2, with the first attempt's failure in its history
    status = get_status(job_id)
    assert (status.state.value, status.attempts) == ("succeeded", 2)
    assert [(a.attempt, a.outcome) for a in status.history] == [(1, "retrying")]
    assert status.result == {"sent": "ada@example.com", "attempt": 2}


def test_a_permanent_error_is_dead_at_once(stack, declare, clock):
    runs = Runs(failures=1, error=PermanentError)
    runner = declare(runs.job, name="light_permanent", record_mode="light")
    job_id = enqueue("light_permanent", mail())
    runner.poll()
    assert (get_status(job_id).state.value, get_status(job_id).attempts) == ("dead", 1)
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1


def test_when_the_success_write_fails_nothing_is_lost(stack, declare, clock):
    # GIVEN a light job whose success write fails (DynamoDB throttles it past every try)
    runs = Runs()
    runner = declare(runs.job, name="light_mail", record_mode="light")
    job_id = enqueue("light_mail", mail())
    faults = Faults(stack.client("dynamodb"))
    rule = faults.fail(
        "PutItem", when=lambda p: p.get("Item", {}).get("state", {}).get("S") == "succeeded", times=3
    )
    # WHEN it runs
    first = runner.poll()
    # THEN the message is not deleted (it comes back after the backoff) and no record claims anything
    assert rule.hits == 3
    assert first.failed_ids == first.message_ids
    assert get_status(job_id).state.value == "pending"
    # WHEN it comes back, DynamoDB answering again
    clock.shift(runner.spec.backoff.ceiling(1) + 1)
    assert runner.poll().failed_ids == []
    # THEN it ran again (light mode's at-least-once) and the record tells the truth: succeeded, 2 runs
    assert runs.count == {job_id: 2}
    status = get_status(job_id)
    assert (status.state.value, status.attempts) == ("succeeded", 2)
    assert runner.depth() == 0


def test_when_the_failure_write_of_a_last_attempt_fails_the_job_is_still_dead_lettered_and_marked(
    stack, declare, clock
):
    # GIVEN a light job with one attempt that fails, and its failure's write throttled past every try
    runner = declare(Runs(failures=1).job, name="light_last", record_mode="light", max_attempts=1)
    job_id = enqueue("light_last", mail())
    faults = Faults(stack.client("dynamodb"))
    rule = faults.fail(
        "PutItem", when=lambda p: p.get("Item", {}).get("state", {}).get("S") == "dead", times=3
    )
    # WHEN it runs
    assert runner.poll().failed_ids == []
    # THEN its message is in the DLQ with the reason, and its record reads dead with the error all the
    # same (marked with the move, as a message past its last attempt is)
    assert rule.hits == 3
    assert runner.depth() == 0 and runner.depth(dlq=True) == 1
    status = get_status(job_id)
    assert status.state.value == "dead"
    assert status.error == {"type": "RuntimeError", "message": "could not send to ada@example.com"}


# -- what light mode does instead ---------------------------------------------------------------------


def test_a_durable_step_in_a_light_job_is_dead_at_once_with_the_reason(stack, declare, clock):
    # GIVEN a light job that uses a durable step
    def stepped(payload: Mail, ctx: JobContext) -> Any:
        return ctx.step("send", lambda: "sent")

    runner = declare(stepped, name="light_step", record_mode="light")
    job_id = enqueue("light_step", mail())
    # WHEN it runs
    runner.poll()
    # THEN it is dead at once (every attempt would fail alike), the reason naming the fix
    status = get_status(job_id)
    assert (status.state.value, status.attempts) == ("dead", 1)
    assert status.error["type"] == "PermanentError"
    assert "record_mode='full'" in status.error["message"] and "ctx.step" in status.error["message"]
    assert runner.depth(dlq=True) == 1


def test_a_light_job_cancelled_while_it_runs_stops_at_its_check(stack, declare, clock):
    # GIVEN a light job that is cancelled while it runs, then checks
    def cancelled(payload: Mail, ctx: JobContext) -> str:
        assert cancel(ctx.job_id, config=stack.config).outcome == "cancelled"  # no record: at once
        ctx.raise_if_cancelled()
        return "not reached"

    runner = declare(cancelled, name="light_cancel", record_mode="light")
    job_id = enqueue("light_cancel", mail())
    # WHEN it runs
    outcome = runner.poll()
    # THEN it stopped at the check, its record reads cancelled, and its message is done
    assert outcome.failed_ids == []
    assert get_status(job_id).state.value == "cancelled"
    assert runner.depth() == 0


def test_a_light_job_cancelled_while_it_runs_without_a_check_records_no_success(stack, declare, clock):
    def finishes(payload: Mail, ctx: JobContext) -> str:
        cancel(ctx.job_id, config=stack.config)
        return "done anyway"

    # GIVEN a light job cancelled while it runs, that never checks
    runner = declare(finishes, name="light_cancel2", record_mode="light")
    counted: list[str] = []
    runner.worker.effects.metric = lambda name, value: counted.append(name)
    job_id = enqueue("light_cancel2", mail())
    # WHEN it returns
    assert runner.poll().failed_ids == []
    # THEN its success is refused by the cancel: the record reads cancelled, and it counts as cancelled
    status = get_status(job_id)
    assert status.state.value == "cancelled" and status.result is None
    assert "JobCancelled" in counted and "JobDuplicate" not in counted and "JobSucceeded" not in counted


def test_light_workflow_members_are_counted_and_the_callback_runs(stack, declare, clock):
    # GIVEN a chord of light jobs (one of which dies) whose callback is a light job too
    from lambdajobs import chord, group, sig

    got: list[Any] = []

    def member(payload: Mail, ctx: JobContext) -> str:
        if payload.to == "bad":
            raise PermanentError("no such address")
        return payload.to

    def callback(payload: Mail, ctx: JobContext) -> None:
        got.extend(ctx.parent_results)

    members = declare(member, name="light_member", record_mode="light")
    done = declare(callback, name="light_callback", record_mode="light")
    recipients = ["m0", "bad", "m2"]
    workflow = chord(group(sig("light_member", mail(to)) for to in recipients), sig("light_callback", mail()))
    wid = workflow.enqueue(workflow_id="wf-light", config=stack.config)
    # WHEN the members run, the continuer sends the callback, and it runs
    for _ in range(3):
        members.drain()
        stack.continuer().drain()
        done.drain()
    # THEN each member's outcome was counted once (2 succeeded, 1 dead), the callback saw their
    # results, and the workflow finished
    status = stack.workflow(wid)
    assert (status.stages[0].succeeded, status.stages[0].dead) == (2, 1)
    assert got == ["m0", None, "m2"]
    assert status.state == "succeeded"


def test_a_rate_limited_light_job_waits_for_its_slot_and_runs_once(stack, declare, clock):
    # GIVEN a light job allowed one start a second, and two jobs of it
    runs = Runs()
    runner = declare(runs.job, name="light_limited", record_mode="light", rate_limit="1/second")
    ids = [enqueue("light_limited", mail(f"r{i}")) for i in range(2)]
    # WHEN they are delivered on a stopped clock: one runs, the other waits for its slot (handed back)
    runner.drain()
    assert sorted(get_status(i).state.value for i in ids) == ["succeeded", "waiting"]
    # AND the clock moves past the slot
    clock.shift(2)
    runner.drain()
    # THEN each ran once, at its first attempt, and both read succeeded
    assert runs.count == dict.fromkeys(ids, 1)
    assert [(get_status(i).state.value, get_status(i).attempts) for i in ids] == [("succeeded", 1)] * 2


def test_the_plain_bench_job_declares_in_light_mode(stack):
    # the bench's `dynamodb_wru_per_job_light` declares its plain job this way
    from bench import plain_job
    from lambdajobs.testing import isolated_registry

    with isolated_registry():
        spec = plain_job.light()
    assert spec is not None and spec.record_mode == "light" and spec.pii_fields == ("to",)
    assert spec.max_attempts == 5


def test_the_worker_imports_light_mode_only_for_light_jobs(deliver_runner, sink, clock):
    import sys

    sys.modules.pop("lambdajobs.runtime.light", None)
    enqueue("deliver", {"to": "a@example.com", "subject": "s", "body": "b"})
    assert deliver_runner.poll().failed_ids == []
    assert "lambdajobs.runtime.light" not in sys.modules
    assert aws  # (the shared client module, used by the fixtures)
