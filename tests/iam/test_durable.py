"""Durable jobs (issue 28) under the template's policies: a job's steps, sleeps and signal waits under
its worker's role, its wake-ups delivered as the one-time schedule role, and `lambdajobs.signal()`
under the operator policy, the producer policy and the role of a job that enqueues the job it wakes.

Any job may be durable: whether its code calls `ctx.step`, `ctx.sleep` or `ctx.wait_for_signal` shows
in no declaration, so every worker role has what they call (its own record, its own queues, and a
one-time schedule for its own wake-ups: `LambdaJobs._wire`). These scenarios therefore run under the
role of every job of the template: each job's declaration (queues, priority levels, rate limit) with a
durable body in place of its function (`durable_in_place_of`), the same for every job. They are the
IAM scenarios of those features for any job of the example app that uses them
(`test_example_paths.EVERY_JOB`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from pydantic import BaseModel

from handlers.video import TranscodeVideo
from lambdajobs import JobContext
from lambdajobs.errors import SignalTimeoutError
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.runtime import durable
from lambdajobs.runtime.durable import signal, wake_schedule_name, wake_schedule_prefix
from lambdajobs.runtime.producer import enqueue, one_time_schedule_name
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import active_registry, ensure_loaded, get_spec
from lambdajobs.testing import isolated_registry

JOBS = "handlers"


class Plan(BaseModel):
    """What the durable body does between its two steps: sleep, wait for a signal, or neither."""

    sleep_seconds: float = 0
    signal: str | None = None
    wait_seconds: float = 3600


#: (job id, step) for every step that ran (not replayed from its checkpoint).
RAN: list[tuple[str, str]] = []


def _note(job_id: str, step: str) -> str:
    RAN.append((job_id, step))
    return f"{step} done"


def durable_body(payload: Plan, ctx: JobContext) -> dict[str, Any]:
    """Two steps (each a checkpoint on the job's record), a sleep or a signal wait between them."""
    first = ctx.step("first", _note, ctx.job_id, "first")
    if payload.sleep_seconds:
        ctx.sleep(payload.sleep_seconds)
    data: Any = None
    if payload.signal:
        try:
            data = ctx.wait_for_signal(payload.signal, payload.wait_seconds)
        except SignalTimeoutError:
            data = "timed out"
    second = ctx.step("second", _note, ctx.job_id, "second")
    return {"first": first, "second": second, "signal": data}


@contextmanager
def durable_in_place_of(*jobs: str) -> Iterator[None]:
    """`jobs` keep their declaration (name, queues, levels, rate limit, timeout) with `durable_body`
    as their function, in this block only (the worker finds a job's spec in the active registry)."""
    ensure_loaded(JOBS)
    with isolated_registry(keep=True) as registry:
        for job in jobs:
            registry._specs[job] = dataclasses.replace(
                get_spec(job), func=durable_body, payload_model=Plan, takes_context=True
            )
        assert active_registry() is registry
        yield


@pytest.fixture(autouse=True)
def _forget_steps() -> Iterator[None]:
    RAN.clear()
    yield
    RAN.clear()


def ran(job_id: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for j, step in RAN:
        if j == job_id:
            found[step] = found.get(step, 0) + 1
    return found


def deliver(deployment: Any, clock: Any, job: str) -> None:
    """The job's queue to its function until nothing is visible, a second apart: a job with a rate
    limit (send_email's provider quota) hands a second job in the same second back to its queue."""
    runner = deployment.runner(job)
    runner.drain()
    clock.shift(1)
    runner.drain()


def one_time_scheduler(deployment: Any) -> LocalScheduler:
    """EventBridge Scheduler firing the one-time group, delivering as the role each schedule names."""
    return LocalScheduler(
        [],
        queue_urls={},
        one_time_group=deployment.stack.provisioned.one_time_group,
        config=deployment.scheduler_as_service(deployment.one_time_schedules),
    )


# -- steps and short sleeps: the record and the job's own queue ------------------------------------


def test_every_job_steps_and_naps_on_its_own_queue_under_its_role(deployment, clock):
    """ctx.step: a checkpoint is an UpdateItem of the job's own record, under the run's lock.
    ctx.sleep up to 15 minutes: a copy of the message to the job's own queue with DelaySeconds, then
    its record parked (UpdateItem); when it comes, the job replays its first step and runs the second."""
    jobs = deployment.every_job()
    with durable_in_place_of(*jobs):
        # GIVEN a durable job of each job's declaration that naps a minute between two steps
        ids = {
            job: deployment.stack.enqueue(job, Plan(sleep_seconds=60), job_id=f"{job}-nap") for job in jobs
        }
        runners = {job: deployment.runner(job) for job in jobs}
        # WHEN each job's function runs it with its role, and again once the minute has passed
        for job in jobs:
            runners[job].drain()
            status = get_status(ids[job])
            assert (status.state, [s.name for s in status.steps]) == ("sleeping", ["first"]), job
            assert runners[job].depth() == 1, job  # its copy, delayed in its own queue
        clock.shift(61)
        for job in jobs:
            runners[job].drain()
    # THEN every job succeeded, each step ran once, the first replayed from its checkpoint
    for job in jobs:
        status = get_status(ids[job])
        assert status.state == "succeeded", (job, status.error)
        assert status.result == {"first": "first done", "second": "second done", "signal": None}
        assert ran(ids[job]) == {"first": 1, "second": 1}, job
        assert status.attempts == 1, job  # a nap costs no attempt
        # AND its function's role made the calls: checkpoints and parking (UpdateItem), the delayed
        # copy to its own queue (SendMessage), each allowed (a denial fails the test: conftest.py)
        worker = deployment.worker(job)
        assert {"dynamodb:UpdateItem", "sqs:SendMessage"} <= deployment.allowed(worker), job
        own_queue = deployment.stack.provisioned.queues[job].queue_arn
        sends = [c for c in deployment.calls_by(worker) if c.action == "sqs:SendMessage"]
        assert any(own_queue in c.resources for c in sends), job


# -- long sleeps: a one-time schedule of the job's own --------------------------------------------


def test_every_job_sleeps_two_hours_through_a_one_time_schedule_of_its_own(deployment, clock):
    """ctx.sleep beyond 15 minutes: the worker creates a one-time schedule in the stack's one-time
    group (scheduler:CreateSchedule on its own `<job>-w*` names, iam:PassRole of the one-time schedule
    role to Scheduler), and Scheduler delivers the copy to the job's queue as that role."""
    jobs = deployment.every_job()
    group = deployment.stack.provisioned.one_time_group
    scheduler = deployment.harness.client("scheduler")
    with durable_in_place_of(*jobs):
        # GIVEN a durable job of each job's declaration that sleeps two hours between two steps
        ids = {
            job: deployment.stack.enqueue(job, Plan(sleep_seconds=7200), job_id=f"{job}-sleeps")
            for job in jobs
        }
        # WHEN each job's function runs it with its role
        for job in jobs:
            deployment.runner(job).drain()
        # THEN each sleeps with no message in SQS: a one-time schedule of its own holds its wake-up
        wake_ups: dict[str, datetime] = {}
        for job in jobs:
            status = get_status(ids[job])
            assert status.state == "sleeping", (job, status.error)
            assert deployment.runner(job).depth() == 0, job
            wake = datetime.fromisoformat(status.wake_at.replace("Z", "+00:00"))
            wake_ups[job] = wake
            name = wake_schedule_name(job, ids[job], int(wake.timestamp() * 1000))
            schedule = scheduler.get_schedule(Name=name, GroupName=group)
            target = schedule["Target"]
            assert target["Arn"] == deployment.stack.provisioned.queues[job].queue_arn, job
            assert target["RoleArn"] == deployment.role_arn(deployment.one_time_schedules), job
            assert target["DeadLetterConfig"]["Arn"] == deployment.stack.provisioned.scheduler_dlq_arn
            assert json.loads(target["Input"])["id"] == ids[job]
            # created by the job's own role (and PassRole of the schedule's role, checked with it)
            creates = [
                c
                for c in deployment.calls_by(deployment.worker(job))
                if c.action == "scheduler:CreateSchedule"
            ]
            assert [c.resources for c in creates] == [(schedule["Arn"],)], job
            assert name.startswith(wake_schedule_prefix(job))
        # AND when the wake-ups come, Scheduler sends each copy to its job's queue as its role, and
        # each job's function continues its job
        clock.move_to(max(wake_ups.values()) + timedelta(minutes=1))
        assert sorted(one_time_scheduler(deployment).run_due()) == sorted(ids.values())
        for job in jobs:
            deployment.runner(job).drain()
    for job in jobs:
        status = get_status(ids[job])
        assert status.state == "succeeded", (job, status.error)
        assert ran(ids[job]) == {"first": 1, "second": 1}, job
        assert status.attempts == 1, job
    assert {c.action for c in deployment.calls_by(deployment.one_time_schedules)} == {"sqs:SendMessage"}


def test_a_worker_may_schedule_no_other_jobs_wake_up_nor_a_run_at_of_a_job_it_does_not_enqueue(
    deployment, clock
):
    """Least privilege: transcode_video (it enqueues nothing) creates its own wake-ups only."""
    config = deployment.worker_config("transcode_video")
    wake = int((datetime.now(UTC) + timedelta(hours=2)).timestamp() * 1000)
    body = json.dumps({"v": 1, "job": "send_email", "id": "not-mine", "payload": {}})
    group = deployment.stack.provisioned.one_time_group
    assert not get_spec("transcode_video").enqueues
    # WHEN its role creates send_email's wake-up, or schedules itself for later as a producer would
    with pytest.raises(ClientError, match="AccessDenied"):
        durable.schedule_wake(config, "send_email", "not-mine", body, wake, None)
    video = TranscodeVideo(video_id="v1", source_uri="s3://in/v1.mov", formats=["720p"])
    with pytest.raises(ClientError, match="AccessDenied"):
        enqueue(
            "transcode_video",
            video,
            job_id="later",
            run_at=datetime.now(UTC) + timedelta(hours=2),
            config=config,
        )
    # THEN both are denied CreateSchedule, on those names
    denied = deployment.recorder.take_denials()
    assert [(d.action, d.resources[0].rsplit("/", 2)[-2:]) for d in denied] == [
        ("scheduler:CreateSchedule", [group, wake_schedule_name("send_email", "not-mine", wake)]),
        ("scheduler:CreateSchedule", [group, one_time_schedule_name("transcode_video", "later")]),
    ]
    # AND its own wake-up is allowed
    durable.schedule_wake(config, "transcode_video", "mine", body, wake, None)


# -- signals ----------------------------------------------------------------------------------------


def test_every_job_waits_for_a_signal_the_operator_or_a_producer_sends(deployment, clock):
    """ctx.wait_for_signal: the job parks with its wake-up at the wait's timeout (an hour: a one-time
    schedule) and its message kept on its record. `signal()` under the operator policy (what
    `lambdajobs signal` runs) and under the producer policy: UpdateItem of the job's record (the
    signal, then its wake-up) and SendMessage of the kept message to the job's queue. A signal sent
    before the job started is kept on a record it creates, and the job finds it when it waits."""
    jobs = deployment.every_job()
    senders = {"operator": deployment.operator_config(), "producer": deployment.producer_config()}
    approval = Plan(signal="approval", wait_seconds=3600)
    with durable_in_place_of(*jobs):
        # GIVEN a durable job of each job's declaration waiting for signal "approval", per sender,
        # and one more per job that the producer signals before it starts
        for job in jobs:
            for who in senders:
                deployment.stack.enqueue(job, approval, job_id=f"{job}-{who}")
            deliver(deployment, clock, job)
            for who in senders:
                status = get_status(f"{job}-{who}")
                assert (status.state, status.waiting_for) == ("waiting_signal", "approval"), (
                    job,
                    status.error,
                )
            early = signal(f"{job}-early", "approval", {"by": "producer"}, config=senders["producer"])
            assert not early.woke
        # WHEN the operator and the producer each signal theirs, and each job's function runs again
        for job in jobs:
            for who, config in senders.items():
                assert signal(f"{job}-{who}", "approval", {"by": who}, config=config).woke, (job, who)
            deployment.stack.enqueue(job, approval, job_id=f"{job}-early")
            deliver(deployment, clock, job)
    # THEN every job continued with its signal's data, each step once, the early one with no wait
    for job in jobs:
        for who in (*senders, "early"):
            status = get_status(f"{job}-{who}")
            assert status.state == "succeeded", (job, who, status.error)
            by = "producer" if who == "early" else who
            assert status.result["signal"] == {"by": by}, (job, who)
            assert ran(f"{job}-{who}") == {"first": 1, "second": 1}, (job, who)
        # AND the job's role created its wake-up at the wait's timeout (one per waiting job)
        assert "scheduler:CreateSchedule" in deployment.allowed(deployment.worker(job)), job
    # AND the operator and the producer wrote the records and sent the wake-ups, each allowed
    for principal in (deployment.operator, deployment.producer):
        assert {"dynamodb:UpdateItem", "sqs:SendMessage", "ssm:GetParameter"} <= deployment.allowed(principal)


def test_signals_reach_job_records_only(deployment):
    """The signal statement's condition: no item of lambdajobs' own (a rate limiter's, a workflow's)."""
    table = deployment.stack.provisioned.table
    for principal in (deployment.operator, deployment.producer):
        dynamodb = deployment.config_for(principal, deployment.harness).client("dynamodb")
        # WHEN the principal writes a signal onto a rate limiter's item
        with pytest.raises(ClientError, match="AccessDenied"):
            dynamodb.update_item(
                TableName=table,
                Key={"id": {"S": "lambdajobs#ratelimit#mail_provider"}},
                UpdateExpression="SET #s = :d",
                ExpressionAttributeNames={"#s": "signal:approval"},
                ExpressionAttributeValues={":d": {"S": "{}"}},
            )
        # THEN it is denied, by the condition on the partition key
        [denied] = deployment.recorder.take_denials()
        assert denied.action == "dynamodb:UpdateItem" and "LeadingKeys" in denied.error


def test_a_job_signals_the_jobs_it_enqueues_under_its_role(deployment, clock):
    """`signal()` from a job: UpdateItem of the record (every worker may write job records) and
    SendMessage to the signalled job's queue, which a worker may do for the jobs it declares in
    `enqueues` only. So a job signals the jobs it enqueues: every such pair of the template, here."""
    pairs = [
        (job, target)
        for job, worker in sorted(deployment.constructs.workers.items())
        for target in worker.spec.enqueues
    ]
    assert pairs, "no job of the template enqueues another"
    targets = sorted({target for _, target in pairs})
    with durable_in_place_of(*targets):
        # GIVEN, for each job that enqueues a target, a durable job of that target waiting for a signal
        for job, target in pairs:
            deployment.stack.enqueue(target, Plan(signal="go", wait_seconds=600), job_id=f"{job}-{target}")
        for target in targets:
            deliver(deployment, clock, target)
        # WHEN the job's function signals it, with its role, and the target's function runs it again
        for job, target in pairs:
            assert signal(f"{job}-{target}", "go", {"from": job}, config=deployment.worker_config(job)).woke
        for target in targets:
            deliver(deployment, clock, target)
    # THEN each continued with the data, woken by the job's role
    for job, target in pairs:
        status = get_status(f"{job}-{target}")
        assert status.state == "succeeded", (job, target, status.error)
        assert status.result["signal"] == {"from": job}
        target_queue = deployment.stack.provisioned.queues[target].queue_arn
        sends = [c for c in deployment.calls_by(deployment.worker(job)) if c.action == "sqs:SendMessage"]
        assert any(target_queue in c.resources and c.allowed for c in sends), (job, target)


def test_a_job_cannot_wake_a_job_it_does_not_enqueue(deployment, clock):
    """The other side of the choice above: transcode_video enqueues nothing, so its role cannot send
    send_email's wake-up (the signal is kept on the record: the waiting job finds it at its timeout)."""
    with durable_in_place_of("send_email"):
        deployment.stack.enqueue("send_email", Plan(signal="go", wait_seconds=600), job_id="waits")
        runner = deployment.runner("send_email")
        runner.drain()
        # WHEN transcode_video's role signals it
        sent = signal(
            "waits", "go", {"from": "transcode_video"}, config=deployment.worker_config("transcode_video")
        )
        assert not sent.woke  # kept, not woken: the wake-up could not be sent
        # THEN its wake-up to send_email's queue was denied
        [denied] = deployment.recorder.take_denials()
        assert denied.action == "sqs:SendMessage"
        assert denied.resources == (deployment.stack.provisioned.queues["send_email"].queue_arn,)
        # AND at the wait's timeout the job continues with the signal it kept
        clock.shift(601)
        runner.drain()
    status = get_status("waits")
    assert status.state == "succeeded", status.error
    assert status.result["signal"] == {"from": "transcode_video"}
