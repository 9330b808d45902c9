"""Flow control on the harness: cancel (before a run, while retrying, while running, parked, a
workflow), concurrency per key, debounce, and the tenant (fair queue group) carried by every copy."""

from __future__ import annotations

import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from lambdajobs import (
    Backoff,
    ConcurrencyKey,
    Debounce,
    JobContext,
    PermanentError,
    cancel,
    cancel_workflow,
    chord,
    sig,
)
from lambdajobs.errors import CancelError, DeclarationError, EnqueueError
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.ops import redrive
from lambdajobs.runtime.aws import TRIES
from lambdajobs.runtime.envelope import encode
from tests.faults import Faults


class Item(BaseModel):
    n: int = 0
    customer: str = "c0"


RAN: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    RAN.clear()


def counted(payload: Item, ctx: JobContext) -> dict[str, int]:
    RAN[ctx.job_id] += 1
    return {"n": payload.n}


# -- cancel ----------------------------------------------------------------------------------------


def test_a_job_cancelled_before_it_runs_never_runs_and_its_id_stays_cancelled(stack, declare):
    # GIVEN a job enqueued and not run yet (no record: nothing is written at enqueue)
    runner = declare(counted, name="plain", max_attempts=3)
    job_id = stack.enqueue("plain", {"n": 1}, job_id="order-1")
    assert stack.status(job_id).has_record is False
    # WHEN it is cancelled, then its message arrives
    result = cancel(job_id, config=stack.config)
    assert (result.outcome, result.state, result.changed) == ("cancelled", "pending", True)
    delivered = runner.attempt()
    # THEN it never ran, its record reads cancelled, and its message is gone
    assert delivered is not None and RAN[job_id] == 0
    assert stack.status(job_id).state == "cancelled"
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0
    # AND the same id enqueued again stays cancelled; a new id runs
    stack.enqueue("plain", {"n": 2}, job_id="order-1")
    runner.drain()
    assert RAN[job_id] == 0 and stack.status(job_id).state == "cancelled"
    other = stack.enqueue("plain", {"n": 2}, job_id="order-1-again")
    runner.drain()
    assert RAN[other] == 1


def test_cancelling_a_finished_job_says_so_and_changes_nothing(stack, declare):
    runner = declare(counted, name="plain", max_attempts=3)
    job_id = stack.enqueue("plain", {"n": 1})
    runner.drain()
    before = stack.status(job_id)
    result = cancel(job_id, config=stack.config)
    assert (result.outcome, result.state, result.changed) == ("finished", "succeeded", False)
    assert "already finished" in result.message
    after = stack.status(job_id)
    assert after.state == "succeeded" and after.updated_at == before.updated_at


def test_a_retrying_job_cancelled_is_not_retried(stack, declare):
    def fails(payload: Item, ctx: JobContext) -> None:
        RAN[ctx.job_id] += 1
        raise RuntimeError("flaky")

    runner = declare(fails, name="flaky", max_attempts=3, backoff=Backoff.fixed(1))
    job_id = stack.enqueue("flaky", {})
    runner.attempt()
    assert stack.status(job_id).state == "retrying"
    assert cancel(job_id, config=stack.config).outcome == "cancelled"
    time.sleep(1.1)  # its retry delay
    assert runner.attempt() is not None  # the retry arrives...
    # ...and is dropped: the job never ran again, its message is gone
    assert RAN[job_id] == 1
    assert stack.status(job_id).state == "cancelled"
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_running_job_stops_at_its_next_progress_report(stack, declare):
    reached: list[int] = []

    def long(payload: Item, ctx: JobContext) -> dict:
        for n in range(10):
            if n == 3:  # an operator cancels it while it runs
                assert cancel(ctx.job_id, config=ctx.config).outcome == "requested"
            ctx.progress(n * 10, f"part {n}")
            reached.append(n)
        return {"done": True}

    runner = declare(long, name="long", max_attempts=3)
    job_id = stack.enqueue("long", {})
    runner.drain()
    # it stopped at the report after the cancel: parts 0 to 2 done, never 3
    assert reached == [0, 1, 2]
    status = stack.status(job_id)
    assert status.state == "cancelled", status
    assert status.progress == 20.0
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_ctx_cancelled_reads_the_cancel_in_a_loop_without_progress(stack, declare):
    seen: list[bool] = []

    def loop(payload: Item, ctx: JobContext) -> dict:
        seen.append(ctx.cancelled)
        cancel(ctx.job_id, config=ctx.config)
        ctx._cancel_read_at = 0.0  # (the once-a-second read, due now)
        seen.append(ctx.cancelled)
        ctx.raise_if_cancelled()
        return {"finished": True}

    runner = declare(loop, name="loop", max_attempts=3)
    job_id = stack.enqueue("loop", {})
    runner.drain()
    assert seen == [False, True]
    assert stack.status(job_id).state == "cancelled"


# -- debounce --------------------------------------------------------------------------------------


def test_twenty_enqueues_of_one_key_inside_the_window_run_once_with_the_last_payload(stack, declare):
    runner = declare(counted, name="reindex", max_attempts=3)
    ids = [
        stack.enqueue("reindex", {"n": n}, debounce=Debounce("doc-42", seconds=1, max_wait_seconds=600))
        for n in range(20)
    ]
    time.sleep(1.2)
    runner.drain()
    assert sum(RAN.values()) == 1 and RAN[ids[-1]] == 1
    assert stack.status(ids[-1]).result == {"n": 19}
    states = Counter(stack.status(i).state.value for i in ids)
    assert states == {"succeeded": 1, "superseded": 19}
    # a later enqueue of the key starts a new window, and runs
    later = stack.enqueue("reindex", {"n": 99}, debounce=Debounce("doc-42", seconds=1))
    time.sleep(1.2)
    runner.drain()
    assert RAN[later] == 1


def test_an_older_enqueue_arriving_after_the_latest_ran_is_still_superseded(stack, declare):
    runner = declare(counted, name="reindex", max_attempts=3)
    older = stack.enqueue("reindex", {"n": 1}, debounce=Debounce("doc-7", seconds=1))
    latest = stack.enqueue("reindex", {"n": 2}, debounce=Debounce("doc-7", seconds=1))
    time.sleep(1.2)
    runner.drain()
    assert {latest: 1} == RAN
    # a late copy of the older enqueue (SQS at-least-once, a backlog) arrives after the latest ran
    at = stack.status(latest).started_at
    late_at = int(datetime.fromisoformat(at).timestamp() * 1000) - 60_000
    body = encode("reindex", {"n": 1, "customer": "c0"}, older, debounce={"key": "doc-7", "at": late_at})
    stack.client("sqs").send_message(QueueUrl=runner.queues.queue_url, MessageBody=body)
    runner.drain()
    assert {latest: 1} == RAN and stack.status(older).state == "superseded"


def test_a_debounced_job_id_sent_twice_runs_once_with_the_later_payload(stack, declare):
    runner = declare(counted, name="reindex", max_attempts=3)
    for n in (1, 2):
        stack.enqueue("reindex", {"n": n}, job_id="doc-8-v", debounce=Debounce("doc-8", seconds=1))
    time.sleep(1.2)
    runner.drain()
    assert RAN == {"doc-8-v": 1} and stack.status("doc-8-v").result == {"n": 2}


@pytest.mark.parametrize(
    "debounce, message",
    [
        (Debounce("k", seconds=0), "out of range: 1 to 900"),
        (Debounce("k", seconds=901), "out of range: 1 to 900"),
        (Debounce("k", seconds=30, max_wait_seconds=10), "max_wait_seconds=10 is out of range"),
        (Debounce("k", seconds=30, max_wait_seconds=86_401), "max_wait_seconds=86401 is out of range"),
        (Debounce("", seconds=30), "debounce key must be text"),
    ],
)
def test_a_debounce_out_of_bounds_is_refused_and_nothing_is_sent(stack, declare, debounce, message):
    runner = declare(counted, name="reindex", max_attempts=3)
    with pytest.raises(EnqueueError, match=message):
        stack.enqueue("reindex", {}, debounce=debounce)
    assert runner.depth() == 0


# -- concurrency per key ---------------------------------------------------------------------------


def test_fifty_jobs_over_five_keys_never_run_more_than_two_at_once_per_key(stack, declare):
    # GIVEN a job capped at 2 runs at once per customer, on an event source of concurrency 5, batch 1
    lock = threading.Lock()
    running: Counter[str] = Counter()
    peak: Counter[str] = Counter()
    windows: list[tuple[str, float, float]] = []

    def export(payload: Item, ctx: JobContext) -> dict:
        with lock:
            running[payload.customer] += 1
            peak[payload.customer] = max(peak[payload.customer], running[payload.customer])
        start = time.monotonic()
        time.sleep(0.05)
        with lock:
            running[payload.customer] -= 1
            windows.append((payload.customer, start, time.monotonic()))
        return {"customer": payload.customer}

    runner = declare(
        export, name="export", max_attempts=3, concurrency_key=ConcurrencyKey("customer", 2), batch_size=1
    )
    # each key's ten jobs side by side in the queue: without the cap, 5 of a key would run at once
    ids = [stack.enqueue("export", {"n": n, "customer": f"c{n // 10}"}) for n in range(50)]
    mapping = EventSourceMapping(
        queue_url=runner.queues.queue_url,
        queue_arn=runner.queues.queue_arn,
        handler=runner.handler,
        function_name="test-export",
        timeout_seconds=30,
        batch_size=1,
        max_concurrency=5,
        wait_seconds=0,
        config=stack.config,
    )
    mapping.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(windows) < 50:
            time.sleep(0.05)
    finally:
        mapping.stop()
    assert len(windows) == 50
    assert max(peak.values()) == 2  # the cap reached, never passed
    statuses = [stack.status(i) for i in ids]
    assert all(s.state == "succeeded" for s in statuses)
    assert all(s.attempts == 1 for s in statuses)  # waiting used no attempt
    # and from the records' start and end times: never more than 2 of a key in progress at once
    for key in {f"c{n // 10}" for n in range(50)}:
        spans = [
            (datetime.fromisoformat(s.started_at), datetime.fromisoformat(s.finished_at))
            for s in statuses
            if s.result == {"customer": key} and s.started_at and s.finished_at
        ]
        assert len(spans) == 10
        assert max(sum(1 for a, b in spans if a <= start < b) for start, _ in spans) <= 2, key


class Maybe(BaseModel):
    customer: str | None = None


def test_a_job_whose_key_is_null_takes_no_slot(stack, declare):
    def tagged(payload: Maybe, ctx: JobContext) -> None:
        RAN[ctx.job_id] += 1

    runner = declare(tagged, name="tagged", max_attempts=3, concurrency_key=ConcurrencyKey("customer", 1))
    faults = Faults(runner.worker.store.client)
    takes = faults.fail("UpdateItem", when=lambda p: "keyslots" in p["Key"]["id"]["S"], times=99)
    free = stack.enqueue("tagged", {})
    keyed = stack.enqueue("tagged", {"customer": "c1"})
    runner.drain()
    faults.remove()
    # the job without a customer ran without touching a slot; the keyed one could not take its slot
    assert RAN[free] == 1 and RAN[keyed] == 0 and takes.hits >= 1


def test_a_concurrency_key_must_name_a_payload_field(declare):
    with pytest.raises(DeclarationError, match="not a field of the payload"):
        declare(counted, name="bad", concurrency_key=ConcurrencyKey("nope", 2))
    with pytest.raises(DeclarationError, match="from 1 to 1000"):
        declare(counted, name="bad2", concurrency_key=ConcurrencyKey("customer", 0))


# -- tenants -----------------------------------------------------------------------------------------


def test_a_tenant_is_the_message_group_of_the_job_and_of_its_hand_back_copies(stack, declare):
    runner = declare(counted, name="plain", max_attempts=3)
    stack.enqueue("plain", {"n": 1}, tenant="acme")
    sqs = stack.client("sqs")
    got = sqs.receive_message(
        QueueUrl=runner.queues.queue_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"][0]
    assert got["Attributes"]["MessageGroupId"] == "acme"
    with pytest.raises(EnqueueError, match="not a valid SQS message group id"):
        stack.enqueue("plain", {"n": 1}, tenant="has space")


def test_a_tenant_is_kept_by_the_copy_that_goes_to_the_dlq(stack, declare):
    def refuses(payload: Item, ctx: JobContext) -> None:
        raise PermanentError("bad input")

    runner = declare(refuses, name="refuses", max_attempts=3)
    stack.enqueue("refuses", {"n": 1}, tenant="acme")
    runner.drain()
    got = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.dlq_url, MessageSystemAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"][0]
    assert got["Attributes"]["MessageGroupId"] == "acme"
    # and a redrive sends it back to its queue with its tenant
    report = redrive(runner.queues.dlq_url, runner.queues.queue_url, config=stack.config)
    assert report.moved == 1
    back = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, MessageSystemAttributeNames=["All"]
    )["Messages"][0]
    assert back["Attributes"]["MessageGroupId"] == "acme"


def test_a_hand_back_copy_keeps_its_tenant(stack, declare):
    # GIVEN a key capped at one run, held by a run in progress
    gate, started = threading.Event(), threading.Event()

    def held(payload: Item, ctx: JobContext) -> None:
        started.set()
        gate.wait(10)

    runner = declare(held, name="held", max_attempts=3, concurrency_key=ConcurrencyKey("customer", 1))
    stack.enqueue("held", {"customer": "c1"}, tenant="acme")
    first = threading.Thread(target=runner.poll)
    first.start()
    try:
        assert started.wait(10)  # the first run holds the key's one slot
        # WHEN a second job of that key arrives: handed back, carrying its tenant
        stack.enqueue("held", {"customer": "c1"}, tenant="acme")
        runner.poll()
    finally:
        gate.set()
        first.join()
    got = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, MessageSystemAttributeNames=["All"], WaitTimeSeconds=6
    )["Messages"][0]
    assert got["Attributes"]["MessageGroupId"] == "acme"
    assert got["Attributes"]["ApproximateReceiveCount"] == "1"  # a copy: no receive spent


# -- workflows and run_at ------------------------------------------------------------------------


def test_cancelling_a_workflow_cancels_its_members_and_its_callback(stack, declare):
    declare(counted, name="member", max_attempts=3)
    declare(counted, name="callback", max_attempts=3)
    wid = chord([sig("member", {"n": n}) for n in range(3)], sig("callback", {"n": 9})).enqueue(
        workflow_id="wf-cancelled", config=stack.config
    )
    result = cancel_workflow(wid, config=stack.config)
    assert (result.cancelled, result.requested, result.finished) == (4, 0, 0)
    for _ in range(3):
        stack.runner("member").drain()
        stack.continuer().drain()
        stack.runner("callback").drain()
    assert sum(RAN.values()) == 0
    assert {stack.status(f"{wid}.0.{i}").state for i in range(3)} == {"cancelled"}
    assert stack.status(f"{wid}.1.0").state == "cancelled"
    with pytest.raises(CancelError, match="no workflow"):
        cancel_workflow("wf-unknown", config=stack.config)


def test_a_run_at_job_cancelled_loses_its_schedule(stack, declare):
    runner = declare(counted, name="later", max_attempts=3)
    at = datetime.now(UTC) + timedelta(hours=2)
    job_id = stack.enqueue("later", {"n": 1}, run_at=at)
    group = stack.provisioned.one_time_group
    scheduler = stack.client("scheduler")
    assert len(scheduler.list_schedules(GroupName=group)["Schedules"]) == 1
    # (a run_at job's schedule carries its tenant: the message it sends keeps it)
    tenant_id = stack.enqueue("later", {"n": 2}, run_at=at, tenant="acme")
    fire = LocalScheduler([], queue_urls={}, one_time_group=group, config=stack.config)
    result = cancel(job_id, job="later", config=stack.config)
    assert result.outcome == "cancelled" and result.schedule_deleted
    assert len(scheduler.list_schedules(GroupName=group)["Schedules"]) == 1  # the tenant's only
    assert stack.status(job_id).state == "cancelled"
    assert fire.run_due(at + timedelta(seconds=1)) == [tenant_id]
    sent = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, MessageSystemAttributeNames=["All"]
    )["Messages"]
    assert [m["Attributes"].get("MessageGroupId") for m in sent] == ["acme"]


# -- faults ------------------------------------------------------------------------------------------


def test_a_debounce_read_that_fails_hands_the_message_back_without_an_attempt(stack, declare):
    runner = declare(counted, name="reindex", max_attempts=3, backoff=Backoff.fixed(1))
    job_id = stack.enqueue("reindex", {"n": 1}, debounce=Debounce("doc-1", seconds=1))
    time.sleep(1.1)
    faults = Faults(runner.worker.store.client)
    reads = faults.fail("GetItem", when=lambda p: "debounce" in p["Key"]["id"]["S"])
    runner.poll()  # the claim cannot read the key: handed back (after its backoff), not run
    faults.remove()
    assert reads.hits == 1 and RAN[job_id] == 0
    time.sleep(1.1)
    runner.drain()
    status = stack.status(job_id)
    assert RAN[job_id] == 1 and status.state == "succeeded" and status.attempts == 1


def test_a_debounce_key_that_cannot_be_recorded_still_runs_its_job(stack, declare):
    runner = declare(counted, name="reindex", max_attempts=3)
    faults = Faults(stack.client("dynamodb"))
    writes = faults.fail("UpdateItem", when=lambda p: "debounce" in p["Key"]["id"]["S"], times=TRIES)
    job_id = stack.enqueue("reindex", {"n": 1}, debounce=Debounce("doc-1", seconds=1))
    faults.remove()
    assert writes.hits == TRIES
    time.sleep(1.1)
    runner.drain()
    assert RAN[job_id] == 1


def test_a_slot_whose_release_failed_expires_with_its_invocation(stack, declare):
    # GIVEN a key capped at one run, and a first run whose slot release fails every time
    runner = declare(
        counted,
        name="capped",
        timeout_seconds=2,
        max_attempts=3,
        concurrency_key=ConcurrencyKey("customer", 1),
    )
    faults = Faults(runner.worker.store.client)
    releases = faults.fail(
        "UpdateItem", when=lambda p: "REMOVE #runs.#me" in p["UpdateExpression"], times=TRIES
    )
    first = stack.enqueue("capped", {"customer": "c1"})
    runner.poll()
    faults.remove()
    assert releases.hits == TRIES and RAN[first] == 1
    # WHEN a second job of the key comes, within the first invocation's deadline and after it
    second = stack.enqueue("capped", {"customer": "c1"})
    runner.poll()
    assert RAN[second] == 0  # the key is full: handed back, no attempt used
    deadline = time.monotonic() + 20
    while RAN[second] == 0 and time.monotonic() < deadline:
        runner.poll()
        time.sleep(0.2)
    # THEN it ran once the dead entry expired, on its first attempt
    assert RAN[second] == 1 and stack.status(second).attempts == 1
