"""What a handed-back copy carries, end to end through the real worker on moto: an outcome from a newer
worker is kept, not run and not dropped; a DLQ redrive of a message SQS moved runs the job again; a
run that gives back its lock (it would start after its rate-limit slot's allowance) gives it back even
when that write fails once."""

from __future__ import annotations

import json
import time

from lambdajobs.ops import redrive
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE, ATTR_SETTLE
from tests.faults import Faults, is_release
from tests.functional.test_faults import Tick, recorder, send_copy


def received(stack, runner) -> dict:
    [message] = stack.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url, MessageAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    return message


def test_an_outcome_from_a_newer_worker_is_kept_then_dead_lettered_when_none_comes(stack, declare, clock):
    # GIVEN a copy whose outcome a newer worker wrote (protocol version 2), for this message's job id
    ran: list[int] = []
    runner = declare(recorder(ran), name="newer", max_attempts=3)
    settle = json.dumps({"v": 2, "action": "complete-v2", "job_id": "mine", "at": int(time.time())})
    send_copy(
        stack, runner, '{"v": 1, "job": "newer", "id": "mine", "payload": {"n": 1}}', **{ATTR_SETTLE: settle}
    )
    # WHEN this worker handles it
    runner.poll()
    # THEN it is not run, and the copy handed back still carries that outcome as it was written
    assert ran == [] and get_status("mine").state == "pending"
    clock.shift(11)
    copy = received(stack, runner)
    assert copy["MessageAttributes"][ATTR_SETTLE]["StringValue"] == settle
    # AND when no newer worker took it within the hour, it goes to the DLQ with that reason, not run
    clock.shift(3600)
    for _ in range(3):
        runner.poll()
        clock.shift(11)
    assert ran == [] and runner.depth() == 0 and runner.depth(dlq=True) == 1
    [dead] = runner.dlq_messages()
    assert dead["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "UnknownOutcomeVersion"


def test_a_redrive_of_a_message_sqs_moved_runs_the_job_again(stack, declare, clock):
    # GIVEN a job whose first attempt failed (retrying), whose message SQS then moved to the DLQ
    # itself (its receives crashed), without the worker's reason
    ran: list[int] = []
    down = [True]

    def flaky(payload: Tick) -> dict:
        ran.append(payload.n)
        if down[0]:
            raise RuntimeError("downstream unavailable")
        return {}

    runner = declare(flaky, name="moved", max_attempts=3)
    job_id = enqueue("moved", Tick(n=1))
    runner.poll()
    assert get_status(job_id).state == "retrying" and ran == [1]
    clock.shift(3600)
    message = received(stack, runner)
    sqs = stack.client("sqs")
    sqs.delete_message(QueueUrl=runner.queues.queue_url, ReceiptHandle=message["ReceiptHandle"])
    sqs.send_message(QueueUrl=runner.queues.dlq_url, MessageBody=message["Body"])
    # WHEN the operator redrives it, the downstream back
    down[0] = False
    clock.shift(1)
    assert redrive(runner.queues.dlq_url, runner.queues.queue_url, config=stack.config).moved == 1
    clock.shift(1)
    runner.drain()
    # THEN it runs again and succeeds: a redrive is not taken for a copy of the attempt that ran
    assert ran == [1, 1]
    assert get_status(job_id).state == "succeeded"


def test_a_lock_given_back_is_given_back_even_when_that_write_fails_once(stack, declare, clock):
    # GIVEN a job waiting for its slot a minute away, whose copy comes back 0.95 s after the slot and
    # whose lock's write then takes 0.6 s (its function would start 1.55 s after the slot: beyond the
    # allowance)
    from lambdajobs.runtime import ratelimit
    from tests.faults import is_acquire
    from tests.functional.test_rate_limits import Starts, datetime_of, take_current_slot

    starts = Starts()
    runner = declare(starts.job(), name="giveback", rate_limit="1/minute", max_attempts=1)
    slot_us = take_current_slot(stack, "giveback") + 60_000_000
    job = enqueue("giveback", {"n": 1})
    runner.drain()
    clock.move_to(datetime_of(slot_us + 950_000))
    ddb = stack.client("dynamodb")

    def slow_acquire(params, **_: object) -> None:
        if is_acquire(params):
            clock.shift(0.6)

    ddb.meta.events.register("before-parameter-build.dynamodb.UpdateItem", slow_acquire)
    # AND the first write that gives the lock back fails (a throttle that outlasted the SDK's retries)
    faults = Faults(ddb)
    fault = faults.fail("UpdateItem", when=is_release, times=1)
    try:
        runner.drain()
    finally:
        ddb.meta.events.unregister("before-parameter-build.dynamodb.UpdateItem", slow_acquire)
        faults.remove()
    # THEN the job did not start beyond the allowance; the lock was given back all the same: the record
    # waits, no attempt used
    assert ratelimit.START_ALLOWANCE_US < 1_550_000
    assert fault.hits == 1 and starts.at == []
    status = get_status(job)
    assert (status.state, status.attempts) == ("waiting", 0)
    # AND it runs once on a fresh slot
    for _ in range(70):
        runner.drain()
        clock.shift(1)
    assert len(starts.at) == 1 and get_status(job).state == "succeeded"
