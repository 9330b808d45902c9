"""Flow control under the template's policies: tenants, debounce, concurrency per key and cancel.

- A producer (the producer policy) enqueues for a tenant (SendMessage, SendMessageBatch and a
  one-time schedule, each with its `MessageGroupId`) and debounced (GetItem and UpdateItem of the
  key's item, `lambdajobs#debounce#<job>#<hash>`).
- Each job's worker (its function's role) claims a debounced enqueue (GetItem, then a conditional
  UpdateItem marking its key's item claimed) and records the enqueues it superseded (UpdateItem of their
  records); takes and releases a slot of its concurrency key (GetItem and UpdateItem of
  `lambdajobs#keyslots#<job>#<hash>`), handing a run whose key is full back to its queue with its
  tenant; drops a cancelled job's message, and stops a running job that reads `ctx.cancelled`,
  settling its record (UpdateItem; a workflow member's with its workflow item, in a transaction).
- The operator (the operator policy, what `lambdajobs cancel` runs) and the producer cancel a job
  with no record yet, a `run_at` job (DeleteSchedule of its one-time schedule) and a parked durable
  job (DeleteSchedule of its wake-up); the operator cancels a workflow (GetItem of its item,
  UpdateItem of its members' records).

Any job may be enqueued for a tenant, debounced or cancelled, and any job may declare a concurrency
key: whether one is shows in no grant of its role. So the worker scenarios run under the role of
every job of the template, each job's declaration with `flow_body` in place of its function (as
tests/iam/test_durable.py does). They are the scenarios of `EVERY_JOB` in test_example_paths.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs import ConcurrencyKey, Debounce, JobContext, cancel, cancel_workflow
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.runtime import debounce, keyslots
from lambdajobs.runtime.durable import wake_schedule_name
from lambdajobs.runtime.producer import enqueue, enqueue_many, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import active_registry, ensure_loaded, get_spec
from lambdajobs.runtime.workflow import chord, get_workflow, sig
from lambdajobs.testing import isolated_registry
from tests.iam.deployment import REGION

JOBS = "handlers"


class Flow(BaseModel):
    """What `flow_body` does: run for `customer` (the concurrency key's field), sleep first (a parked
    durable job), or be cancelled by the operator while it runs and stop at `ctx.cancelled`."""

    customer: str = "c0"
    sleep_seconds: float = 0
    cancelled_while_running: bool = False


#: Runs of `flow_body` by job id.
RAN: Counter[str] = Counter()
#: How a running job gets cancelled (set by the test that enqueues one): job id -> cancel's outcome.
CANCEL_WHILE_RUNNING: list[Callable[[str], str]] = []
#: What the running job saw: (job id, ctx.cancelled before the cancel, after).
SEEN: list[tuple[str, bool, bool]] = []


def flow_body(payload: Flow, ctx: JobContext) -> dict[str, Any]:
    RAN[ctx.job_id] += 1
    if payload.sleep_seconds:
        ctx.sleep(payload.sleep_seconds)
    if payload.cancelled_while_running:
        before = ctx.cancelled  # one read of the record (GetItem of cancel_requested)
        assert CANCEL_WHILE_RUNNING[0](ctx.job_id) == "requested"
        ctx._cancel_read_at = 0.0  # (the once-a-second read, due now: the clock is stopped)
        SEEN.append((ctx.job_id, before, ctx.cancelled))
        ctx.raise_if_cancelled()
    return {"customer": payload.customer}


@contextmanager
def flow_in_place_of(*jobs: str, **changes: Any) -> Iterator[None]:
    """`jobs` keep their declaration (queues, levels, rate limit, timeout) with `flow_body` as their
    function and `changes` to their spec (a concurrency key), in this block only."""
    ensure_loaded(JOBS)
    with isolated_registry(keep=True) as registry:
        for job in jobs:
            registry._specs[job] = dataclasses.replace(
                get_spec(job), func=flow_body, payload_model=Flow, takes_context=True, **changes
            )
        assert active_registry() is registry
        yield


@pytest.fixture(autouse=True)
def _forget_runs() -> Iterator[None]:
    RAN.clear()
    SEEN.clear()
    CANCEL_WHILE_RUNNING.clear()
    yield
    RAN.clear()
    SEEN.clear()
    CANCEL_WHILE_RUNNING.clear()


def deliver(deployment: Any, clock: Any, job: str) -> None:
    """The job's queue to its function until nothing is visible, a second apart (send_email's rate
    limit hands a second job in the same second back to its queue)."""
    runner = deployment.runner(job)
    runner.drain()
    clock.shift(1)
    runner.drain()


def queued_groups(deployment: Any, job: str) -> list[str]:
    """The `MessageGroupId` of each message in the job's queue, visible or delayed, read from moto's
    backend: a receive would count toward the message's attempts."""
    from moto.sqs.models import sqs_backends

    name = deployment.stack.provisioned.queues[job].queue_url.rsplit("/", 1)[-1]
    queue = sqs_backends[deployment.account][REGION].queues[name]
    return sorted(str(m.group_id) for m in queue._messages)


def one_time_scheduler(deployment: Any) -> LocalScheduler:
    """EventBridge Scheduler firing the one-time group, delivering as the role each schedule names."""
    return LocalScheduler(
        [],
        queue_urls={},
        one_time_group=deployment.stack.provisioned.one_time_group,
        config=deployment.scheduler_as_service(deployment.one_time_schedules),
    )


def one_time_schedules(deployment: Any) -> list[str]:
    listed = deployment.harness.client("scheduler").list_schedules(
        GroupName=deployment.stack.provisioned.one_time_group
    )
    return sorted(s["Name"] for s in listed["Schedules"])


# -- tenants ----------------------------------------------------------------------------------------


def test_a_producer_enqueues_for_a_tenant_now_in_a_batch_and_later(deployment, clock):
    """`tenant=`: the message's MessageGroupId (SendMessage, SendMessageBatch), and a run_at job's
    one-time schedule sends with it (its Target's SqsParameters, as the one-time schedule role)."""
    producer = deployment.producer_config()
    job = "transcode_video"
    with flow_in_place_of(job):
        # GIVEN a producer that enqueues for tenants: one now, two in a batch, one two hours ahead
        now = enqueue(job, Flow(), job_id="acme-now", tenant="acme", config=producer)
        batch = enqueue_many(job, [Flow(), Flow()], tenant="globex", config=producer)
        assert batch.ok, batch.failed
        later = enqueue(
            job,
            Flow(),
            job_id="acme-later",
            tenant="acme",
            run_at=datetime.now(UTC) + timedelta(hours=2),
            config=producer,
        )
        # THEN each message carries its tenant, and the schedule sends with it
        assert queued_groups(deployment, job) == ["acme", "globex", "globex"]
        schedule = deployment.harness.client("scheduler").get_schedule(
            Name=one_time_schedule_name(job, later), GroupName=deployment.stack.provisioned.one_time_group
        )
        assert schedule["Target"]["SqsParameters"] == {"MessageGroupId": "acme"}
        clock.shift(2 * 3600 + 60)
        assert one_time_scheduler(deployment).run_due() == [later]
        assert queued_groups(deployment, job) == ["acme", "acme", "globex", "globex"]
        # AND the job's function runs them all
        deployment.runner(job).drain()
    for job_id in (now, *batch.job_ids, later):
        assert get_status(job_id).state == "succeeded", job_id
    assert {"sqs:SendMessage", "scheduler:CreateSchedule"} <= deployment.allowed(deployment.producer)


# -- debounce ---------------------------------------------------------------------------------------


def test_every_job_runs_the_last_debounced_enqueue_and_supersedes_the_others(deployment, clock):
    """A producer's three debounced enqueues of one key, a second apart: the producer reads and writes
    the key's item; the worker of each job supersedes the first two (UpdateItem of their records),
    claims the third (GetItem, and UpdateItem: the key's item `claimed`) and runs it."""
    jobs = deployment.every_job()
    producer = deployment.producer_config()
    table, dynamodb = deployment.stack.provisioned.table, deployment.harness.client("dynamodb")
    with flow_in_place_of(*jobs):
        # GIVEN, for each job, three enqueues of key "doc-42" within its 5-second window
        ids: dict[str, list[str]] = {job: [] for job in jobs}
        for n in range(3):
            for job in jobs:
                window = Debounce("doc-42", seconds=5, max_wait_seconds=60)
                ids[job].append(
                    enqueue(
                        job, Flow(customer=f"c{n}"), job_id=f"{job}-{n}", debounce=window, config=producer
                    )
                )
            clock.shift(1)
        # WHEN the window has passed and each job's function takes its messages with its role
        clock.shift(5)
        for job in jobs:
            deliver(deployment, clock, job)
    # THEN only the last ran, the others read superseded, and the key's item says it was claimed
    for job in jobs:
        states = [get_status(job_id).state for job_id in ids[job]]
        assert states == ["superseded", "superseded", "succeeded"], job
        assert [RAN[job_id] for job_id in ids[job]] == [0, 0, 1], job
        item = dynamodb.get_item(TableName=table, Key={"id": {"S": debounce.item_id(job, "doc-42")}})
        assert (item["Item"]["latest"], item["Item"]["claimed"]) == ({"S": ids[job][-1]}, {"BOOL": True}), job
        assert {"dynamodb:GetItem", "dynamodb:UpdateItem"} <= deployment.allowed(deployment.worker(job)), job
    assert {"dynamodb:GetItem", "dynamodb:UpdateItem", "sqs:SendMessage"} <= deployment.allowed(
        deployment.producer
    )


# -- concurrency per key ----------------------------------------------------------------------------


def test_every_job_waits_for_its_keys_slot_then_takes_and_releases_it(deployment, clock):
    """A job with ConcurrencyKey("customer", 1) whose key's one slot is held by a run whose invocation
    is still live: the run is handed back to its queue with its tenant (no attempt used); once that
    invocation is over, the worker clears its entry (GetItem, conditional UpdateItem), takes the slot
    (UpdateItem), runs the job and releases it (UpdateItem)."""
    jobs = deployment.every_job()
    producer = deployment.producer_config()
    table, harness = deployment.stack.provisioned.table, deployment.harness.client("dynamodb")
    held_until_ms = int((datetime.now(UTC) + timedelta(seconds=30)).timestamp() * 1000)
    slots = keyslots.KeySlots(harness, table, salt=deployment.stack.stack)
    with flow_in_place_of(*jobs, concurrency_key=ConcurrencyKey("customer", 1)):
        # GIVEN, for each job, customer acme's only slot held by another run for 30 more seconds
        for job in jobs:
            assert slots.take(job, "acme", 1, f"{job}-elsewhere", held_until_ms) is not None
        ids = {
            job: enqueue(job, Flow(customer="acme"), job_id=f"{job}-acme", tenant="acme", config=producer)
            for job in jobs
        }
        # WHEN each job's function takes its message: it is handed back, its tenant kept
        for job in jobs:
            deployment.runner(job).drain()
            assert RAN[ids[job]] == 0, job
        clock.shift(60)  # the other run's invocation is over (and the hand-back's delay has passed)
        for job in jobs:
            assert queued_groups(deployment, job) == ["acme"], job
            # AND when it comes again, the worker clears the dead run's entry and runs it
            deliver(deployment, clock, job)
    # THEN each ran once, on its first attempt, and gave its slot back
    for job in jobs:
        status = get_status(ids[job])
        assert (status.state, status.attempts, RAN[ids[job]]) == ("succeeded", 1, 1), (job, status.error)
        item = harness.get_item(
            TableName=table, Key={"id": {"S": keyslots.item_id(job, "acme", deployment.stack.stack)}}
        )
        assert item["Item"]["runs"] == {"M": {}}, job
        assert {"dynamodb:GetItem", "dynamodb:UpdateItem", "sqs:SendMessage"} <= deployment.allowed(
            deployment.worker(job)
        ), job


# -- cancel: the worker -----------------------------------------------------------------------------


def test_every_job_drops_a_cancelled_jobs_message(deployment, clock):
    """A job cancelled before its message arrives (a record written by the cancel, none before): the
    worker's acquire is refused, the message dropped (deleted, never run nor dead-lettered)."""
    jobs = deployment.every_job()
    producer, operator = deployment.producer_config(), deployment.operator_config()
    with flow_in_place_of(*jobs):
        # GIVEN, for each job, a job enqueued, then cancelled by the operator before it ran
        for job in jobs:
            enqueue(job, Flow(), job_id=f"{job}-cancelled", config=producer)
            assert cancel(f"{job}-cancelled", config=operator).outcome == "cancelled"
        # WHEN each job's function takes its message
        for job in jobs:
            deliver(deployment, clock, job)
    # THEN it never ran, reads cancelled, and its message is gone
    for job in jobs:
        assert RAN[f"{job}-cancelled"] == 0, job
        assert get_status(f"{job}-cancelled").state == "cancelled", job
        runner = deployment.runner(job)
        assert (runner.depth(), runner.depth(dlq=True)) == (0, 0), job


def test_every_job_stops_at_ctx_cancelled_once_the_operator_cancels_it(deployment, clock):
    """A running job cancelled by the operator (cancel_requested on its record: UpdateItem) reads
    `ctx.cancelled` (GetItem of the record, under its role), stops, and the worker settles its record
    `cancelled` under the run's lock (UpdateItem)."""
    jobs = deployment.every_job()
    operator = deployment.operator_config()
    CANCEL_WHILE_RUNNING.append(lambda job_id: cancel(job_id, config=operator).outcome)
    with flow_in_place_of(*jobs):
        # GIVEN, for each job, a job the operator cancels while it runs
        ids = {
            job: deployment.stack.enqueue(job, Flow(cancelled_while_running=True), job_id=f"{job}-running")
            for job in jobs
        }
        # WHEN each job's function runs it with its role
        for job in jobs:
            deliver(deployment, clock, job)
    # THEN each saw the cancel at its check, stopped, and reads cancelled; nothing is left to retry
    assert sorted(SEEN) == sorted((ids[job], False, True) for job in jobs)
    for job in jobs:
        status = get_status(ids[job])
        assert (status.state, RAN[ids[job]]) == ("cancelled", 1), (job, status.error)
        runner = deployment.runner(job)
        assert (runner.depth(), runner.depth(dlq=True)) == (0, 0), job
        gets = [c for c in deployment.calls_by(deployment.worker(job)) if c.action == "dynamodb:GetItem"]
        assert gets and all(c.allowed for c in gets), job


# -- cancel: the operator and the producer ------------------------------------------------------------


@pytest.mark.parametrize("who", ["operator", "producer"])
def test_cancelling_a_job_with_no_record_and_a_run_at_job_deletes_its_schedule(deployment, clock, who):
    """cancel(job_id, job=...): the record written (UpdateItem, created for an id with none); for a
    job not started yet, its run_at schedule deleted from the one-time group (DeleteSchedule), and a
    schedule that is not there is no error."""
    config = deployment.operator_config() if who == "operator" else deployment.producer_config()
    job = "transcode_video"
    with flow_in_place_of(job):
        # GIVEN a job id that was never enqueued, and a job the producer scheduled two hours ahead
        later = enqueue(
            job,
            Flow(),
            job_id="later",
            run_at=datetime.now(UTC) + timedelta(hours=2),
            config=deployment.producer_config(),
        )
        assert one_time_schedules(deployment) == [one_time_schedule_name(job, later)]
        # WHEN the operator (or a producer) cancels both
        nothing = cancel("never-sent", job=job, config=config)
        scheduled = cancel(later, job=job, config=config)
        # THEN both are cancelled, and the scheduled one's schedule is gone
        assert (nothing.outcome, nothing.state, nothing.schedule_deleted) == ("cancelled", "pending", None)
        assert (scheduled.outcome, scheduled.schedule_deleted) == (
            "cancelled",
            one_time_schedule_name(job, later),
        )
        assert one_time_schedules(deployment) == []
        assert get_status("never-sent").state == get_status(later).state == "cancelled"
    principal = deployment.operator if who == "operator" else deployment.producer
    deletes = [c for c in deployment.calls_by(principal) if c.action == "scheduler:DeleteSchedule"]
    assert len(deletes) == 2 and all(c.allowed for c in deletes)
    assert {"dynamodb:UpdateItem"} <= deployment.allowed(principal)


def test_the_operator_cancels_a_parked_job_and_its_wake_up_is_deleted(deployment, clock):
    """A durable job asleep for two hours: its wake-up is a one-time schedule of its own; the
    operator's cancel ends it `cancelled` (UpdateItem) and deletes the wake-up (DeleteSchedule)."""
    job = "transcode_video"
    with flow_in_place_of(job):
        # GIVEN a job that sleeps two hours (parked, its wake-up a one-time schedule)
        job_id = deployment.stack.enqueue(job, Flow(sleep_seconds=7200), job_id="asleep")
        deployment.runner(job).drain()
        status = get_status(job_id)
        assert status.state == "sleeping", status.error
        wake = int(datetime.fromisoformat(status.wake_at.replace("Z", "+00:00")).timestamp() * 1000)
        name = wake_schedule_name(job, job_id, wake)
        assert one_time_schedules(deployment) == [name]
        # WHEN the operator cancels it (by id alone: its name comes from its record)
        result = cancel(job_id, config=deployment.operator_config())
        # THEN it is cancelled, its wake-up is gone, and it never runs again
        assert (result.outcome, result.state, result.schedule_deleted) == ("cancelled", "sleeping", name)
        assert one_time_schedules(deployment) == []
        clock.shift(3 * 3600)
        assert one_time_scheduler(deployment).run_due() == []
        deployment.runner(job).drain()
    assert get_status(job_id).state == "cancelled" and RAN[job_id] == 1
    assert "scheduler:DeleteSchedule" in deployment.allowed(deployment.operator)


def test_the_operator_cancels_a_workflow_and_its_members_are_dropped_and_counted(deployment, clock):
    """cancel_workflow: the workflow item read (GetItem), each member's record cancelled (UpdateItem),
    the callback's before it is sent. The members' worker drops them and counts them dead in the
    workflow (a transaction: UpdateItem of the record and of the workflow item) and sends its
    notice; the continuer sends the callback, which is dropped too."""
    job = "transcode_video"
    producer = deployment.producer_config()
    with flow_in_place_of(job):
        # GIVEN a chord of two members and a callback, enqueued by a producer, not run yet
        members = [sig(job, Flow(customer=f"c{i}")) for i in range(2)]
        wid = chord(members, sig(job, Flow())).enqueue(workflow_id="wf-cancel", config=producer)
        # WHEN the operator cancels the workflow
        result = cancel_workflow(wid, config=deployment.operator_config())
        assert (result.cancelled, result.requested, result.finished) == (3, 0, 0)
        # AND the job's function takes the members, the continuer the notices, and the job the callback
        runner, continuer = deployment.runner(job), deployment.continuer_runner()
        runner.drain()
        continuer.drain()
        runner.drain()
        continuer.drain()
    # THEN no member ran, each reads cancelled, and the workflow has ended
    assert sum(RAN.values()) == 0
    for member in (f"{wid}.0.0", f"{wid}.0.1", f"{wid}.1.0"):
        assert get_status(member).state == "cancelled", member
    flow = get_workflow(wid, config=producer)
    assert flow.done, flow
    assert (runner.depth(), runner.depth(dlq=True)) == (0, 0)
    assert {"dynamodb:GetItem", "dynamodb:UpdateItem"} <= deployment.allowed(deployment.operator)
    transactions = [
        c for c in deployment.calls_by(deployment.worker(job)) if c.action == "dynamodb:TransactWriteItems"
    ]
    assert transactions and all(c.allowed for c in transactions)
