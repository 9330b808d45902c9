"""Workflows (chain, group, chord) on in-process moto: the real worker, the real continuer, SQS and
DynamoDB as moto keeps them, each request atomic (`lambdajobs.local.atomic`), so the concurrency tests
cannot pass by luck.

The mechanism under test (lambdajobs.runtime.workflow): a member's outcome is counted in the workflow's
item in the same transaction as its record write; then the member checks the counters and, when its
stage is complete, sends a notice; the continuer claims the stage and sends the next one with
deterministic job ids."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs.local.emulator import BatchOutcome, EventSourceMapping
from lambdajobs.ops import redrive
from lambdajobs.runtime import producer, table
from lambdajobs.runtime.continuer import CLAIM_SECONDS, Continuer
from lambdajobs.runtime.envelope import decode
from lambdajobs.runtime.errors import PayloadValidationError, UnknownJobError
from lambdajobs.runtime.records import JobRecordStore, get_statuses
from lambdajobs.runtime.workflow import (
    WorkflowError,
    chain,
    chord,
    group,
    later_key,
    member_job_id,
    notify,
    sig,
    workflow_key,
)
from lambdajobs.runtime.workflow_item import LaterItem, OutlineStage, WorkflowItem, WorkflowState
from tests.faults import Faults
from tests.jobs import flows

#: Members of the counter test: 300 in `make test`; `make chaos` runs it with 10,000.
COUNTER_MEMBERS = int(os.environ.get("LAMBDAJOBS_COUNTER_MEMBERS", "300"))
#: Members of the big chord (one in 50 dead, its last ten delivered twice and all at once): 200 in
#: `make test`, 1,000 with LAMBDAJOBS_CHORD_MEMBERS=1000. At least 60: the last ten are all good mails.
CHORD_MEMBERS = int(os.environ.get("LAMBDAJOBS_CHORD_MEMBERS", "200"))


class Crash(BaseException):
    """The invocation dies (killed, out of memory, timed out): nothing in it catches this."""


def mail(i: int, *, bad: bool = False) -> Any:
    return sig(
        "deliver",
        {"to": "not-an-address" if bad else f"user{i}@example.com", "subject": "News", "body": "Hi"},
    )


@pytest.fixture(autouse=True)
def _runs() -> Any:
    flows.RUNS.clear()
    yield
    flows.RUNS.clear()


@pytest.fixture
def ddb_faults(stack: Any) -> Any:
    faults = Faults(stack.client("dynamodb"))
    yield faults
    faults.remove()


@pytest.fixture
def sqs_faults(stack: Any) -> Any:
    faults = Faults(stack.client("sqs"))
    yield faults
    faults.remove()


def runs_of(workflow_id: str) -> list[dict[str, Any]]:
    return [r for r in flows.RUNS if r["job_id"].startswith(workflow_id + ".")]


def settle(stack: Any, *jobs: str, rounds: int = 4) -> None:
    """Run the jobs' queues and the workflow queue until nothing moves."""
    for _ in range(rounds):
        for job in jobs:
            stack.runner(job).drain()
        stack.continuer().drain()


def depth(stack: Any, url: str) -> int:
    attrs = stack.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
    return sum(
        int(attrs[name])
        for name in (
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        )
    )


def receive_every(stack: Any, url: str, count: int) -> list[dict[str, Any]]:
    """Receive `count` messages (left in flight), as an event source would."""
    got: list[dict[str, Any]] = []
    sqs = stack.client("sqs")
    for _ in range(count * 3):
        if len(got) >= count:
            break
        got += sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
        ).get("Messages", [])
    assert len(got) == count, (len(got), count)
    return got


def invoker(stack: Any, runner: Any) -> EventSourceMapping:
    """An event source for a job's queue whose `invoke(messages)` runs one batch of received messages."""
    return EventSourceMapping(
        queue_url=runner.queues.queue_url,
        queue_arn=runner.queues.queue_arn,
        handler=runner.handler,
        function_name=f"test-{runner.spec.name}",
        timeout_seconds=runner.spec.timeout_seconds,
        config=stack.config,
    )


def at_once(calls: list[Any]) -> list[Any]:
    """Run every call on its own thread, all released together."""
    start = threading.Barrier(len(calls), timeout=60)

    def run(call: Any) -> Any:
        start.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return [f.result() for f in [pool.submit(run, c) for c in calls]]


# -- exactly one callback ------------------------------------------------------------------------------


@pytest.mark.parametrize("members", [CHORD_MEMBERS])
def test_a_big_chord_with_concurrent_and_duplicate_deliveries_sends_its_callback_once(stack, sink, members):
    # GIVEN a chord of `members` mails (one in 50 to an invalid address, which dies) and a callback
    n, bad = members, {i for i in range(members) if i % 50 == 7}
    ok = n - len(bad)
    assert n >= 60 and not bad & set(range(n - 10, n))
    wid = chord(
        group(mail(i, bad=i in bad) for i in range(n)), sig("summarize", {"label": "campaign"})
    ).enqueue(workflow_id="big")
    deliver = stack.runner("deliver")
    mapping = invoker(stack, deliver)
    messages = receive_every(stack, deliver.queues.queue_url, n)
    last_ids = {member_job_id(wid, 0, i) for i in range(n - 10, n)}
    last = [m for m in messages if decode(m["Body"]).id in last_ids]
    # AND a second copy of each of the last ten members' messages (SQS delivers at least once)
    for message in last:
        stack.client("sqs").send_message(QueueUrl=deliver.queues.queue_url, MessageBody=message["Body"])
    copies = receive_every(stack, deliver.queues.queue_url, 10)
    first = [m for m in messages if m not in last]
    # WHEN the others run, ten at a time on 8 concurrent invocations
    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(mapping.invoke, [first[i : i + 10] for i in range(0, n - 10, 10)]))
    assert all(o.error is None for o in outcomes)
    # THEN the stage is not complete: no notice yet
    assert stack.workflow(wid).stages[0].succeeded + stack.workflow(wid).stages[0].dead == n - 10
    assert depth(stack, stack.provisioned.workflow_queue_url) == 0
    # WHEN the last ten members and their copies (20 deliveries) finish all at once
    at_once([lambda m=m: mapping.invoke([m]) for m in last + copies])
    # THEN the stage is complete, counted once per member, and at least one notice was sent
    notices = depth(stack, stack.provisioned.workflow_queue_url)
    assert notices >= 1
    # WHEN every notice is delivered to its own continuer invocation, all at once
    continuer = Continuer(config=stack.config)
    notice_messages = receive_every(stack, stack.provisioned.workflow_queue_url, notices)
    source = stack.continuer()
    at_once(
        [
            lambda m=m: _invoke(source, continuer, m)  # type: ignore[misc]
            for m in notice_messages
        ]
    )
    # THEN the callback was sent exactly once, and runs once, seeing the good ones sent and the bad dead
    summarize = stack.runner("summarize")
    assert summarize.depth() == 1
    settle(stack, "summarize", "deliver")
    [run] = runs_of(wid)
    assert run["parents"] == {"total": n, "succeeded": ok, "dead": len(bad)}
    assert run["results"] == ok  # ctx.parent_results: what each member returned
    # AND every member ran once (a mail per good address, no address twice) and its record is final
    assert len(sink.sent) == ok and len(set(sink.sent)) == ok
    states = get_statuses([member_job_id(wid, 0, i) for i in range(n)], config=stack.config)
    assert sorted(s.state for s in states.values()).count("succeeded") == ok
    assert [s.state for s in states.values()].count("dead") == len(bad)
    status = stack.workflow(wid)
    assert (status.state, status.progress, status.callback_job_id) == ("succeeded", 100.0, "big.1.0")
    assert (status.stages[0].succeeded, status.stages[0].dead, status.stages[0].pending) == (ok, len(bad), 0)


def _invoke(source: Any, continuer: Continuer, message: dict[str, Any]) -> BatchOutcome:
    mapping = EventSourceMapping(
        queue_url=source.stack.provisioned.workflow_queue_url,
        queue_arn=source.stack.provisioned.workflow_queue_arn,
        handler=continuer.handle,
        function_name="test-workflows",
        timeout_seconds=120,
        config=source.stack.config,
    )
    return mapping.invoke([message])


@pytest.mark.parametrize("members", [COUNTER_MEMBERS])
def test_the_completion_counter_alone_counts_every_member_once_and_sends_the_callback_once(
    stack, monkeypatch, members
):
    # GIVEN a chord of `members` members whose sends are stubbed: only the counter is under test
    sent: list[tuple[str, list[str]]] = []
    lock = threading.Lock()

    def stub(cfg: Any, url: str, prepared: Any, **_: Any) -> producer.EnqueueResults:
        with lock:
            sent.append((url, [job_id for job_id, _ in prepared]))
        return producer.EnqueueResults(
            producer.EnqueueResult(job_id, message_id="stub") for job_id, _ in prepared
        )

    monkeypatch.setattr(producer, "send_bodies", stub)
    wid = chord(group(mail(i) for i in range(members)), sig("summarize", {"label": "x"})).enqueue(
        workflow_id="counter"
    )
    assert sum(len(ids) for _, ids in sent) == members
    store = JobRecordStore(stack.config)
    # WHEN every member's success is written, with its count, from 8 threads, and one in ten members
    # twice (a duplicate delivery's write), each followed by the member's check of its stage
    ids = [member_job_id(wid, 0, i) for i in range(members)] + [
        member_job_id(wid, 0, i) for i in range(0, members, 10)
    ]

    def finish(job_id: str) -> bool:
        store.complete(job_id, "deliver", "{}", None, store.tally({"id": wid, "stage": 0}))
        return notify(stack.config, wid, 0)

    with ThreadPoolExecutor(max_workers=8) as pool:
        noticed = sum(pool.map(finish, ids))
    # THEN each member is counted once, and the stage is complete
    item = store.client.get_item(TableName=store.table, Key=table.key(workflow_key(wid)))["Item"]
    counts = WorkflowItem.from_item(item).stage(0)
    assert (counts.ok, counts.done, counts.dead) == (members, members, 0)
    assert noticed >= 1
    # WHEN every notice goes to its own continuer, all at once
    notices = receive_every(stack, stack.provisioned.workflow_queue_url, noticed)
    continuer = Continuer(config=stack.config)
    source = stack.continuer()
    sent.clear()
    at_once([lambda m=m: _invoke(source, continuer, m) for m in notices])  # type: ignore[misc]
    # THEN the callback was sent exactly once
    assert sent == [(stack.config.queue_url("summarize"), [member_job_id(wid, 1, 0)])]


def test_a_chord_whose_rule_is_stop_sends_no_callback_when_a_member_died(stack):
    # GIVEN a chord with on_dead="stop" and one bad address among three
    wid = chord(
        group([mail(0), mail(1, bad=True), mail(2)]), sig("summarize", {"label": "s"}), on_dead="stop"
    ).enqueue()
    # WHEN its members run
    settle(stack, "deliver", "summarize")
    # THEN the callback never ran, and the workflow says why
    assert runs_of(wid) == [] and stack.runner("summarize").depth() == 0
    status = stack.workflow(wid)
    assert status.state == "dead" and status.callback_job_id is None
    assert status.reason == "stage 0 (deliver x3): 1 of 3 dead; the workflow stopped before stage 1"


# -- chains ----------------------------------------------------------------------------------------


def test_a_chain_runs_its_steps_in_order_each_seeing_what_the_step_before_returned(stack):
    wid = chain(sig("step", {"name": "a"}), sig("step", {"name": "b"}), sig("step", {"name": "c"})).enqueue()
    # WHEN only the first step has run THEN only it ran, and the second is sent
    stack.runner("step").poll()
    assert [s.state for s in get_statuses([f"{wid}.0.0", f"{wid}.1.0"]).values()] == ["succeeded", "pending"]
    settle(stack, "step")
    results = [get_statuses([member_job_id(wid, n, 0)])[member_job_id(wid, n, 0)].result for n in range(3)]
    assert results == [
        {"name": "a", "after": []},
        {"name": "b", "after": ["a"]},
        {"name": "c", "after": ["b"]},
    ]
    assert stack.workflow(wid).state == "succeeded"
    assert stack.workflow(wid).state is WorkflowState.SUCCEEDED


def test_a_chain_stops_at_a_dead_step_and_its_status_says_so(stack):
    wid = chain(
        sig("step", {"name": "a"}), sig("step", {"name": "b", "fail": True}), sig("step", {"name": "c"})
    ).enqueue()
    settle(stack, "step")
    states = get_statuses([member_job_id(wid, n, 0) for n in range(3)])
    assert [s.state for s in states.values()] == ["succeeded", "dead", "pending"]
    assert stack.runner("step").depth() == 0  # step c was never sent
    status = stack.workflow(wid)
    assert status.state == "dead"
    assert status.reason == "stage 1 (step x1): 1 of 1 dead; the workflow stopped before stage 2"
    assert [st.sent for st in status.stages] == [True, True, False]
    assert status.progress == pytest.approx(66.7)


# -- crashes and faults: nothing lost, nothing twice -------------------------------------------------


def is_stage_check(params: dict[str, Any]) -> bool:
    return "done_0" in str(params.get("ProjectionExpression", ""))


def test_a_crash_between_a_members_counted_success_and_its_notice_is_recovered_by_its_redelivery(
    stack, ddb_faults, clock
):
    # GIVEN a chord of two members, the second's invocation dying right after its success and count
    # were written (one transaction), before it could check the stage and send the notice
    wid = chord(group([mail(2), mail(3)]), sig("summarize", {"label": "crash"})).enqueue()
    deliver = stack.runner("deliver")
    first, second = receive_every(stack, deliver.queues.queue_url, 2)
    mapping = invoker(stack, deliver)
    assert mapping.invoke([first]).failed_ids == []
    ddb_faults.fail("GetItem", when=is_stage_check, times=1, error=lambda _: Crash())
    with pytest.raises(Crash):
        mapping.invoke([second])
    # THEN its outcome is recorded and counted, but no notice went out: the stage waits
    status = stack.workflow(wid)
    assert (status.stages[0].succeeded, status.stages[0].pending) == (2, 0)
    assert depth(stack, stack.provisioned.workflow_queue_url) == 0
    # WHEN its message comes back (its visibility timeout passed: the crash deleted nothing)
    clock.shift(deliver.spec.visibility_timeout_seconds + 1)
    settle(stack, "deliver", "summarize")
    # THEN the redelivery runs no job again (a duplicate) but checks the stage and sends the notice:
    # the callback runs exactly once
    assert len(runs_of(wid)) == 1 and runs_of(wid)[0]["parents"]["succeeded"] == 2
    assert stack.workflow(wid).state == "succeeded"


def is_advance(params: dict[str, Any]) -> bool:
    return "advanced_0 = :now" in str(params.get("UpdateExpression", ""))


def test_a_continuer_that_dies_after_sending_the_next_stage_sends_it_again_and_it_runs_once(
    stack, ddb_faults, clock
):
    # GIVEN a chord whose members have finished, and a continuer that dies after it sent the callback,
    # before it marked the stage advanced
    wid = chord(group([mail(0), mail(1)]), sig("summarize", {"label": "twice"})).enqueue()
    stack.runner("deliver").drain()
    ddb_faults.fail("UpdateItem", when=is_advance, times=1, error=lambda _: Crash())
    with pytest.raises(Crash):
        stack.continuer().poll()
    assert stack.runner("summarize").depth() == 1
    # WHEN the notice comes back (the claim is the notice's own: it goes on at once after a crash)
    clock.shift(6 * 120 + 1)
    stack.continuer().drain()
    # THEN the callback was sent again, with the same job id, and still runs once
    assert stack.runner("summarize").depth() == 2
    settle(stack, "summarize")
    assert len(runs_of(wid)) == 1
    assert stack.workflow(wid).state == "succeeded"


def test_another_notice_does_not_take_over_a_live_claim_but_does_after_it_lapsed(stack, clock):
    from lambdajobs.runtime.continuer import advance

    wid = chord(group([mail(0)]), sig("summarize", {"label": "claim"})).enqueue()
    stack.runner("deliver").drain()
    store = JobRecordStore(stack.config)
    store.client.update_item(  # a continuer claimed the stage and died before sending
        **table.update(
            store.table,
            workflow_key(wid),
            sets=["claim_0 = :t", "claim_until_0 = :u"],
            values={":t": "gone", ":u": int(time.time()) + CLAIM_SECONDS},
        )
    )
    assert advance(stack.config, wid, 0, token="other") == "claimed elsewhere"
    clock.shift(CLAIM_SECONDS + 1)
    assert advance(stack.config, wid, 0, token="other") == "sent"
    assert stack.runner("summarize").depth() == 1


def test_a_transaction_conflict_on_a_members_count_is_retried_and_counted_once(stack, ddb_faults):
    def conflict(operation: str) -> BaseException:
        client = stack.client("dynamodb")
        reasons = [{"Code": "None"}, {"Code": "TransactionConflict", "Message": "in progress"}]
        return client.exceptions.TransactionCanceledException(
            {
                "Error": {"Code": "TransactionCanceledException", "Message": "conflict"},
                "CancellationReasons": reasons,
            },
            operation,
        )

    wid = chord(group([mail(0)]), sig("summarize", {"label": "conflict"})).enqueue()
    fault = ddb_faults.fail("TransactWriteItems", times=2, error=conflict)
    settle(stack, "deliver", "summarize")
    assert fault.hits == 2
    status = stack.workflow(wid)
    assert (status.state, status.stages[0].succeeded) == ("succeeded", 1)
    assert len(runs_of(wid)) == 1


def test_a_notice_that_cannot_be_sent_hands_the_member_back_and_its_next_delivery_sends_it(
    stack, sqs_faults, clock
):
    wid = chord(group([mail(0)]), sig("summarize", {"label": "notice"})).enqueue()
    to_workflows = lambda p: p.get("QueueUrl") == stack.provisioned.workflow_queue_url  # noqa: E731
    fault = sqs_faults.fail("SendMessage", when=to_workflows, times=3)  # every try of one delivery
    stack.runner("deliver").drain()
    assert fault.hits == 3 and depth(stack, stack.provisioned.workflow_queue_url) == 0
    assert stack.runner("deliver").depth() == 1  # handed back
    clock.shift(2)
    settle(stack, "deliver", "summarize")
    assert len(runs_of(wid)) == 1 and stack.workflow(wid).state == "succeeded"


def test_a_dead_member_whose_stage_check_fails_is_handed_back_then_dead_lettered_and_noticed(
    stack, ddb_faults, clock
):
    wid = chord(group([mail(0, bad=True)]), sig("summarize", {"label": "dead"})).enqueue()
    fault = ddb_faults.fail("GetItem", when=is_stage_check, times=3)
    deliver = stack.runner("deliver")
    deliver.drain()
    assert fault.hits == 3 and deliver.depth(dlq=True) == 0 and deliver.depth() == 1
    clock.shift(2)
    settle(stack, "deliver", "summarize")
    assert deliver.depth(dlq=True) == 1
    [run] = runs_of(wid)
    assert run["parents"] == {"total": 1, "succeeded": 0, "dead": 1}


def test_a_next_stage_that_cannot_be_sent_comes_back_with_its_notice(stack, sqs_faults, clock):
    wid = chord(group([mail(0)]), sig("summarize", {"label": "batch"})).enqueue()
    stack.runner("deliver").drain()
    fault = sqs_faults.fail("SendMessageBatch", times=4)  # every try of send_bodies
    outcome = stack.continuer().poll()
    assert fault.hits == 4 and outcome is not None and outcome.failed_ids
    clock.shift(6 * 120 + 1)
    settle(stack, "summarize")
    assert len(runs_of(wid)) == 1


def test_a_callback_that_died_is_not_run_again_when_a_crashed_continuer_sends_it_again(
    stack, ddb_faults, clock
):
    # GIVEN a chord whose callback dies, and a continuer that dies after sending it, before marking
    wid = chord(group([mail(0)]), sig("step", {"name": "cb", "fail": True})).enqueue()
    stack.runner("deliver").drain()
    ddb_faults.fail("UpdateItem", when=is_advance, times=1, error=lambda _: Crash())
    with pytest.raises(Crash):
        stack.continuer().poll()
    step = stack.runner("step")
    step.drain()  # the callback runs and dies
    assert stack.status(member_job_id(wid, 1, 0)).state == "dead" and step.depth(dlq=True) == 1
    # WHEN the continuer's notice comes back THEN it does not send the callback again: it has a record
    clock.shift(6 * 120 + 1)
    stack.continuer().drain()
    assert step.depth() == 0
    settle(stack, "step")
    # THEN the dead callback did not run again: one attempt, one dead letter, the workflow dead
    status = stack.status(member_job_id(wid, 1, 0))
    assert (status.state, status.attempts) == ("dead", 1)
    assert step.depth(dlq=True) == 1 and step.depth() == 0
    assert stack.workflow(wid).state == "dead"


class Toggle(BaseModel):
    n: int


def test_a_member_redriven_after_dying_moves_from_dead_to_succeeded_in_the_counts(stack, declare):
    broken = {1}

    def toggles(payload: Toggle) -> dict[str, int]:
        if payload.n in broken:
            raise RuntimeError("broken for now")
        return {"n": payload.n}

    runner = declare(toggles, name="toggle", max_attempts=1)
    wid = chord(
        group([sig("toggle", {"n": 0}), sig("toggle", {"n": 1})]), sig("summarize", {"label": "r"})
    ).enqueue()
    settle(stack, "toggle", "summarize")
    assert runs_of(wid)[0]["parents"] == {"total": 2, "succeeded": 1, "dead": 1}
    # WHEN a duplicate of the dead member's message arrives (not from the DLQ) THEN it does not run
    [dead] = runner.dlq_messages()
    broken.clear()
    stack.client("sqs").send_message(QueueUrl=runner.queues.queue_url, MessageBody=dead["Body"])
    settle(stack, "toggle", "summarize")
    assert stack.workflow(wid).stages[0].dead == 1 and stack.status(member_job_id(wid, 0, 1)).state == "dead"
    # WHEN the dead member is redriven from the DLQ (as `lambdajobs dlq redrive` does) and succeeds
    assert redrive(runner.queues.dlq_url, runner.queues.queue_url, config=stack.config).moved == 1
    settle(stack, "toggle", "summarize")
    # THEN it counts as succeeded, not dead, and not twice; the callback does not run again
    status = stack.workflow(wid)
    assert (status.stages[0].succeeded, status.stages[0].dead) == (2, 0)
    assert len(runs_of(wid)) == 1


# -- enqueueing ------------------------------------------------------------------------------------


def test_every_step_is_validated_before_anything_is_written_or_sent(stack):
    with pytest.raises(PayloadValidationError):
        chain(sig("step", {"name": "a"}), sig("step", {"nam": "b"})).enqueue(workflow_id="bad")
    with pytest.raises(UnknownJobError):
        chord(group([mail(0)]), sig("no_such_job", {})).enqueue(workflow_id="bad")
    with pytest.raises(WorkflowError, match="empty stage"):
        chord(group([]), sig("summarize", {"label": "x"})).enqueue()
    assert stack.workflow("bad").state == "unknown"
    assert stack.runner("step").depth() == 0 and stack.runner("deliver").depth() == 0


def test_enqueuing_the_same_workflow_again_sends_nothing_and_another_under_its_id_is_refused(stack):
    def campaign() -> Any:
        return chord(group([mail(0), mail(1)]), sig("summarize", {"label": "same"}))

    assert campaign().enqueue(workflow_id="same") == "same"
    assert campaign().enqueue(workflow_id="same") == "same"
    assert stack.runner("deliver").depth() == 2
    with pytest.raises(WorkflowError, match="taken by another workflow"):
        chord(group([mail(5)]), sig("summarize", {"label": "same"})).enqueue(workflow_id="same")


def test_later_stages_too_large_to_record_are_refused_before_anything_is_sent(stack):
    big = "x" * 100_000
    steps = [sig("step", {"name": big}) for _ in range(4)]
    with pytest.raises(WorkflowError, match="later stages take"):
        chain(sig("step", {"name": "a"}), group(steps)).enqueue()
    assert stack.runner("step").depth() == 0


def test_get_workflow_counts_running_members_and_reads_unknown_ids_as_unknown(stack):
    wid = chord(group([mail(i) for i in range(3)]), sig("summarize", {"label": "st"})).enqueue()
    store = JobRecordStore(stack.config)
    store.client.update_item(  # one member running now
        **table.update(
            store.table,
            member_job_id(wid, 0, 1),
            sets=["#s = :r"],
            values={":r": "running"},
            names={"#s": "state"},
        )
    )
    stage = stack.workflow(wid).stages[0]
    assert (stage.pending, stage.running, stage.succeeded, stage.dead, stage.sent) == (2, 1, 0, 0, True)
    assert stack.workflow("nope").state == "unknown" and stack.workflow("nope").state is WorkflowState.UNKNOWN
    found = store.client.get_item(TableName=store.table, Key=table.key(workflow_key(wid)))["Item"]
    item = WorkflowItem.from_item(found)
    assert item.expiration is not None and item.expiration > 0
    assert item.outline_stages[1] == OutlineStage(jobs={"summarize": 1}, total=1, on_dead="stop")
    later = LaterItem.from_item(
        store.client.get_item(TableName=store.table, Key=table.key(later_key(wid)))["Item"]
    )
    assert later.members(1)[0].job == "summarize"
    assert later.expiration == item.expiration


def test_a_throttled_continuer_tries_again_in_place_and_the_notice_uses_no_receive(stack, ddb_faults):
    # GIVEN a chord whose members finished, and the continuer's first read and claim throttled
    wid = chord(group([mail(0)]), sig("summarize", {"label": "throttled"})).enqueue()
    stack.runner("deliver").drain()
    is_item_read = lambda p: p.get("Key") == table.key(workflow_key(wid))  # noqa: E731
    read = ddb_faults.fail("GetItem", when=lambda p: is_item_read(p) and "ProjectionExpression" not in p)
    claim = ddb_faults.fail("UpdateItem", when=lambda p: "claims_0" in p.get("UpdateExpression", ""))
    # WHEN the notice is delivered
    outcome = stack.continuer().poll()
    # THEN the continuer tried again at once: the callback is sent, the notice did not fail
    assert (read.hits, claim.hits) == (1, 1)
    assert outcome is not None and outcome.failed_ids == []
    assert stack.runner("summarize").depth() == 1


def test_a_dead_rate_limited_member_is_not_run_again_by_a_copy_that_is_not_a_redrive(stack, declare):
    from lambdajobs import RateLimit

    ran: list[int] = []

    def dies(payload: Toggle) -> dict[str, int]:
        ran.append(payload.n)
        raise RuntimeError("broken")

    runner = declare(
        dies, name="limited_dies", max_attempts=1, rate_limit=RateLimit("limited", 1, per="minute")
    )
    wid = chord(group([sig("limited_dies", {"n": 0})]), sig("summarize", {"label": "rl"})).enqueue()
    settle(stack, "limited_dies", "summarize")
    assert ran == [0] and stack.workflow(wid).stages[0].dead == 1
    # WHEN a copy of its message arrives that is not a redrive (a duplicate, a re-sent stage)
    [dead] = runner.dlq_messages()
    stack.client("sqs").send_message(QueueUrl=runner.queues.queue_url, MessageBody=dead["Body"])
    settle(stack, "limited_dies", "summarize")
    # THEN it takes no rate-limit slot and does not run: the record and the counts stay dead
    assert ran == [0]
    assert stack.status(member_job_id(wid, 0, 0)).state == "dead"
    assert stack.workflow(wid).stages[0].dead == 1 and runner.depth() == 0


def test_a_chain_keeps_the_rules_of_the_chains_and_chords_inside_it():
    inner = chain(chord(group([mail(0)]), sig("summarize", {"label": "in"})), on_dead="continue")
    rules = [rule for _, rule in chain(inner, sig("step", {"name": "after"})).stages()]
    # the chord's group -> callback: continue (its own); the callback -> next: the outer chain's stop
    assert rules == ["continue", "stop", "stop"]


def test_a_workflow_outlives_the_record_ttl_while_it_advances(stack, clock):
    wid = chain(sig("step", {"name": "a"}), sig("step", {"name": "b"}), sig("step", {"name": "c"})).enqueue()
    store = JobRecordStore(stack.config)

    def expiry(key: str) -> int:
        return int(
            table.decode(store.client.get_item(TableName=store.table, Key=table.key(key))["Item"])[
                "expiration"
            ]
        )

    created = expiry(workflow_key(wid)), expiry(later_key(wid))
    # WHEN its first step runs, and its notice reaches the continuer three days later (SQS keeps
    # messages four days), which sends the next step, which runs
    stack.runner("step").drain()
    clock.shift(3 * 86_400)
    settle(stack, "step", rounds=2)
    # THEN both of its items expire a full TTL after that, not after enqueue
    assert stack.status(member_job_id(wid, 1, 0)).state == "succeeded"
    assert expiry(workflow_key(wid)) == created[0] + 3 * 86_400
    assert expiry(later_key(wid)) == created[1] + 3 * 86_400


def test_a_member_that_cannot_run_here_any_more_is_counted_dead_and_its_stage_goes_on(stack):
    from lambdajobs.runtime.envelope import encode

    # GIVEN a chord whose member's message names a priority level the job no longer has (a redeploy
    # between the enqueue and its run)
    wid = chord(group([mail(0)]), sig("summarize", {"label": "gone"})).enqueue()
    deliver = stack.runner("deliver")
    [original] = receive_every(stack, deliver.queues.queue_url, 1)
    stack.client("sqs").delete_message(
        QueueUrl=deliver.queues.queue_url, ReceiptHandle=original["ReceiptHandle"]
    )
    member = decode(original["Body"])
    body = encode(
        "deliver", member.payload, member.id or "", priority="gone", workflow=member.workflow.model_dump()
    )
    stack.client("sqs").send_message(QueueUrl=deliver.queues.queue_url, MessageBody=body)
    # WHEN it is delivered
    settle(stack, "deliver", "summarize")
    # THEN it is dead-lettered with the reason, its record reads dead, and the callback still ran
    assert deliver.depth(dlq=True) == 1
    assert stack.status(member_job_id(wid, 0, 0)).state == "dead"
    [run] = runs_of(wid)
    assert run["parents"] == {"total": 1, "succeeded": 0, "dead": 1}


def test_statuses_left_unprocessed_are_read_again_after_a_pause(stack, monkeypatch):
    store = JobRecordStore(stack.config)
    real = store.client.batch_get_item
    calls: list[int] = []

    def partial(**request: Any) -> Any:  # the first answer leaves every key unprocessed (throttled)
        calls.append(1)
        if len(calls) == 1:
            return {"Responses": {}, "UnprocessedKeys": request["RequestItems"]}
        return real(**request)

    monkeypatch.setattr(store.client, "batch_get_item", partial)
    job_id = stack.enqueue("deliver", {"to": "a@x.io", "subject": "s", "body": "b"})
    stack.runner("deliver").drain()
    assert get_statuses([job_id], store=store)[job_id].state == "succeeded" and len(calls) == 2
