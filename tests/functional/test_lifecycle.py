"""Job lifecycle on moto with a controlled clock: backoff, deadlines, progress, waiting."""

from __future__ import annotations

import pytest
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from pydantic import BaseModel

from lambdajobs.local.lambda_events import sqs_event
from lambdajobs.runtime import Backoff, aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import WaitTimeoutError, get_status, wait_for
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE
from lambdajobs.runtime.worker import attempt_of
from tests.jobs.media import STAGE_BUDGET_SECONDS, Clip, rename_encoder
from tests.jobs.messages import Message


class Tick(BaseModel):
    n: int


class Failures:
    def __init__(self, times: int) -> None:
        self.left, self.calls = times, 0

    def __call__(self, payload: Tick) -> dict:
        self.calls += 1
        if self.left > 0:
            self.left -= 1
            raise RuntimeError("downstream unavailable")
        return {"n": payload.n}


def receive(runner, max_messages: int = 10) -> list[dict]:
    got = aws.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=max_messages,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return list(got.get("Messages", []))


def delete(runner, messages: list[dict]) -> None:
    for m in messages:
        aws.client("sqs").delete_message(QueueUrl=runner.queues.queue_url, ReceiptHandle=m["ReceiptHandle"])


def slow_sink(sink, context: SteppedContext, elapsed_ms: int):
    """Make every send take `elapsed_ms` of the context's time; returns the original send."""
    real_send = sink.send

    def slow_send(to, subject, body):
        context.elapsed_ms += elapsed_ms
        return real_send(to, subject, body)

    sink.send = slow_send
    return real_send


def batch(runner) -> dict:
    """Lambda's SQS event for the messages waiting on the runner's queue."""
    return sqs_event(receive(runner), queue_arn=runner.queues.queue_arn, region="us-east-1")


class MaxRandom:
    def random(self) -> float:
        return 0.999


class SteppedContext:
    """A Lambda context on a virtual clock: the job under test advances `elapsed_ms`."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms, self.elapsed_ms = timeout_ms, 0
        self.function_name, self.aws_request_id = "test", "req-1"
        self.memory_limit_in_mb, self.invoked_function_arn = 256, "arn:aws:lambda:us-east-1:1:function:test"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self.timeout_ms - self.elapsed_ms)


def test_a_failed_message_is_not_received_again_before_its_backoff_delay(declare, clock):
    # GIVEN a job with a fixed exponential backoff (no jitter): 60 s, then 120 s
    failing = Failures(times=2)

    def ticking(payload: Tick) -> dict:
        return failing(payload)

    runner = declare(
        ticking, name="ticking", backoff=Backoff(base_seconds=60, max_seconds=600, jitter="none")
    )
    job_id = enqueue("ticking", Tick(n=1))
    # WHEN attempt 1 fails
    assert runner.poll().failed_ids
    # THEN it stays invisible for 60 s, not for the queue's 180 s visibility timeout
    clock.shift(59)
    assert runner.poll() is None
    clock.shift(2)
    assert runner.poll().failed_ids  # attempt 2 fails too
    # AND the next delay doubles
    clock.shift(119)
    assert runner.poll() is None
    clock.shift(2)
    assert runner.poll().failed_ids == []
    status = get_status(job_id)
    assert (status.state, status.attempts, failing.calls) == ("succeeded", 3, 3)


def test_a_failed_visibility_change_still_reports_the_record_failed(declare, clock):
    # GIVEN a failing job and an SQS client whose ChangeMessageVisibility fails
    failing = Failures(times=1)

    def vis_fail(payload: Tick) -> dict:
        return failing(payload)

    runner = declare(vis_fail, name="vis_fail")
    real = aws.client("sqs")

    class NoVisibility:
        def __getattr__(self, name):
            return getattr(real, name)

        def change_message_visibility(self, **_):
            raise RuntimeError("throttled")

    aws.set_client("sqs", NoVisibility())
    enqueue("vis_fail", Tick(n=1))
    # WHEN the job fails
    outcome = runner.poll()
    # THEN it is still reported failed, and returns after the queue's visibility timeout: not lost
    assert outcome.failed_ids == outcome.message_ids
    clock.shift(runner.spec.visibility_timeout_seconds - 1)
    assert runner.poll() is None
    clock.shift(2)
    assert runner.poll().failed_ids == []


def test_records_are_not_started_near_the_deadline(deliver_runner, sink, clock):
    # GIVEN three messages and an invocation where the first send takes 29 of the 30 seconds
    for i in range(3):
        enqueue("deliver", Message(to=f"u{i}@example.com", subject="s", body="b"))
    context = SteppedContext(timeout_ms=30_000)
    slow_sink(sink, context, 29_000)
    deliver_runner.worker.rng = MaxRandom()  # a backoff would keep them away for its full 10 s
    messages = receive(deliver_runner)
    event = sqs_event(messages, queue_arn=deliver_runner.queues.queue_arn, region="us-east-1")
    # WHEN the worker runs the batch
    response = deliver_runner.handler(event, context)
    # THEN one record ran; the two it had no time for are handed back as copies, not run, and the
    # originals are done (a receive that did not run the job costs no attempt)
    assert len(sink.sent) == 1
    assert response == {"batchItemFailures": []}
    # AND the copies are visible again at once (not after a backoff), still at attempt 1, with no
    # record written for them
    clock.shift(1)  # moto shows a message whose visibility ends "now" only once the clock moves
    again = receive(deliver_runner)
    assert sorted(m["Body"] for m in again) == sorted(m["Body"] for m in messages[1:])
    assert {m["MessageId"] for m in again}.isdisjoint(m["MessageId"] for m in messages)
    for m in again:
        record = sqs_event([m], queue_arn=deliver_runner.queues.queue_arn, region="us-east-1")["Records"][0]
        assert attempt_of(SQSRecord(record)) == 1
    for m in messages[1:]:
        assert get_status(m["MessageId"]).state == "pending"


def test_progress_is_readable_while_the_job_runs(stack, use_encoder, clock):
    # GIVEN an encode of three formats, and an encoder that reads the job's status between stages
    seen: list[tuple[str, float | None, str | None]] = []

    def watching(source_uri, fmt):
        status = get_status(job_id)
        seen.append((status.state, status.progress, status.progress_message))
        return rename_encoder(source_uri, fmt)

    use_encoder(watching)
    runner = stack.runner("encode")
    job_id = enqueue("encode", Clip(video_id="v1", source_uri="s3://in/v1.mov"))
    assert runner.poll().failed_ids == []
    # THEN each stage saw the progress of the stages before it, while the job was running
    assert [s[0] for s in seen] == ["running"] * 3
    assert [s[1] for s in seen] == [None, pytest.approx(100 / 3), pytest.approx(200 / 3)]
    assert [s[2] for s in seen] == [None, "small done", "medium done"]
    status = get_status(job_id)
    assert (status.state, status.progress) == ("succeeded", 100.0)
    assert status.result["outputs"] == {f: f"s3://in/v1-{f}.mp4" for f in ("small", "medium", "large")}


def test_a_stage_that_does_not_fit_in_the_time_left_is_retried_later(stack, use_encoder, clock):
    # GIVEN an encode delivered with less time left than its one stage's budget (but within the
    # job's timeout: the job must read the time left from the invocation, not from its declaration)
    budget = STAGE_BUDGET_SECONDS["large"]
    runner = stack.runner("encode")
    assert budget < runner.spec.timeout_seconds
    encoded: list[str] = []
    use_encoder(lambda source_uri, fmt: encoded.append(fmt) or f"{source_uri}-{fmt}")
    job_id = enqueue("encode", Clip(video_id="v2", source_uri="s3://in/v2.mov", formats=["large"]))
    # WHEN it runs
    response = runner.handler(batch(runner), SteppedContext(timeout_ms=int(budget * 1000) - 10_000))
    # THEN the stage did not start, and the job is retried, with the reason recorded
    assert len(response["batchItemFailures"]) == 1 and encoded == []
    status = get_status(job_id)
    assert status.state == "retrying" and status.error["type"] == "OverBudgetError"


def test_job_id_is_derived_from_the_idempotency_key_fields(stack):
    # encode's idempotency_key is (video_id, formats): source_uri does not count, formats (defaulted) does
    a = enqueue("encode", Clip(video_id="v9", source_uri="s3://in/a.mov"))
    b = enqueue("encode", Clip(video_id="v9", source_uri="s3://in/b.mov"))
    c = enqueue("encode", Clip(video_id="v9", source_uri="s3://in/a.mov", formats=["large"]))
    assert a == b != c


def test_wait_for_returns_the_final_status_or_times_out(deliver_runner, sink):
    job_id = enqueue("deliver", Message(to="a@example.com", subject="s", body="b"))
    with pytest.raises(WaitTimeoutError, match="pending") as excinfo:
        wait_for(job_id, timeout_seconds=0.05, poll_seconds=0.01)
    assert excinfo.value.status.state == "pending"
    deliver_runner.poll()
    assert wait_for(job_id, timeout_seconds=1).state == "succeeded"


def test_progress_outside_0_to_100_is_refused():
    from lambdajobs.runtime.context import JobContext

    ctx = JobContext(job_id="j", job="x", attempt=1, max_attempts=5, logger=None)
    for bad in (-1, 101, True, "50"):
        with pytest.raises(ValueError, match="0 to 100"):
            ctx.progress(bad)


def test_a_retry_starts_with_fresh_progress(stack, use_encoder, clock):
    # GIVEN an encode whose medium stage fails once, after small reported 50%
    seen: list[float | None] = []
    fail = {"medium": 1}

    def failing_once(source_uri, fmt):
        seen.append(get_status(job_id).progress)
        if fail.get(fmt):
            fail[fmt] -= 1
            raise RuntimeError("encoder crashed")
        return f"{source_uri}-{fmt}"

    use_encoder(failing_once)
    runner = stack.runner("encode")
    job_id = enqueue("encode", Clip(video_id="v3", source_uri="s", formats=["small", "medium"]))
    assert runner.poll().failed_ids
    clock.shift(runner.spec.backoff.ceiling(1) + 1)
    assert runner.poll().failed_ids == []
    # THEN the second attempt did not show the first attempt's progress when it started
    assert seen == [None, 50.0, None, 50.0]


def test_a_slow_run_does_not_stop_later_invocations_from_starting(deliver_runner, sink, clock):
    # GIVEN a warm worker whose last invocation had one record that took 29 of its 30 seconds
    context = SteppedContext(timeout_ms=30_000)
    real_send = slow_sink(sink, context, 29_000)
    enqueue("deliver", Message(to="slow@example.com", subject="s", body="b"))
    deliver_runner.handler(
        batch(deliver_runner),
        context,
    )
    sink.send = real_send
    # WHEN a new invocation starts with its full time
    enqueue("deliver", Message(to="next@example.com", subject="s", body="b"))
    response = deliver_runner.handler(
        batch(deliver_runner),
        SteppedContext(timeout_ms=30_000),
    )
    # THEN its record runs: the slow run of another invocation does not count against it
    assert response == {"batchItemFailures": []}
    assert sink.sent == ["slow@example.com", "next@example.com"]


def test_records_on_their_last_attempt_cannot_make_an_invocation_overrun(declare, clock):
    # GIVEN a batch of three records all on their last (and only) attempt, and a first record that
    # uses 29 of the invocation's 30 seconds
    context = SteppedContext(timeout_ms=30_000)
    ran: list[int] = []

    def lastly(payload: Tick) -> dict:
        ran.append(payload.n)
        context.elapsed_ms += 29_000
        return {}

    runner = declare(lastly, name="lastly", max_attempts=1)
    for n in (1, 2, 3):
        enqueue("lastly", Tick(n=n))
    messages = receive(runner)
    assert len(messages) == 3
    # WHEN the worker runs the batch
    response = runner.handler(
        sqs_event(messages, queue_arn=runner.queues.queue_arn, region="us-east-1"), context
    )
    # THEN only the first ran: the others are handed back without running (starting them would
    # overrun the invocation and fail the whole batch), and none is dead-lettered
    assert len(ran) == 1 and response == {"batchItemFailures": []}
    assert runner.depth(dlq=True) == 0
    delete(runner, messages)  # what the event source does with records not reported failed
    # AND the copies still have their attempt: the next invocation runs them to success
    clock.shift(1)
    assert runner.poll().failed_ids == []
    assert sorted(ran) == [1, 2, 3]
    assert runner.depth() == 0 and runner.depth(dlq=True) == 0


def test_a_result_that_is_not_json_is_stored_as_text_and_the_job_runs_once(declare, clock):
    from datetime import UTC, datetime

    calls: list[int] = []

    def stamped(payload: Tick) -> dict:
        calls.append(payload.n)
        return {"at": datetime(2026, 11, 29, tzinfo=UTC), "tags": {"a"}}

    runner = declare(stamped, name="stamped", max_attempts=3)
    job_id = enqueue("stamped", Tick(n=1))
    assert runner.poll().failed_ids == []
    status = get_status(job_id)
    assert status.state == "succeeded" and calls == [1]
    assert status.result == {"at": "2026-11-29 00:00:00+00:00", "tags": "{'a'}"}


def test_an_invalid_resend_does_not_overwrite_a_succeeded_record(deliver_runner, sink, clock):
    enqueue("deliver", Message(to="a@example.com", subject="s", body="b"), job_id="once-1")
    deliver_runner.poll()
    aws.client("sqs").send_message(
        QueueUrl=deliver_runner.queues.queue_url,
        MessageBody='{"v": 1, "job": "deliver", "id": "once-1", "payload": {"to": 5}}',
    )
    deliver_runner.poll()
    assert get_status("once-1").state == "succeeded"
    assert deliver_runner.depth(dlq=True) == 1  # the bad message itself is dead-lettered


def test_the_first_record_of_an_invocation_always_starts(deliver_runner, sink, clock):
    # GIVEN an invocation that starts with less time than the safety margin (3 s for deliver)
    enqueue("deliver", Message(to="first@example.com", subject="s", body="b"))
    enqueue("deliver", Message(to="second@example.com", subject="s", body="b"))
    context = SteppedContext(timeout_ms=30_000)
    context.elapsed_ms = 29_000
    event = batch(deliver_runner)
    second = event["Records"][1]["body"]
    # WHEN the worker runs the batch
    response = deliver_runner.handler(event, context)
    # THEN the first record ran (refusing it would make no progress at all), the second did not: it
    # was handed back to the queue for the next invocation
    assert sink.sent == ["first@example.com"]
    assert response == {"batchItemFailures": []}
    clock.shift(1)
    assert [m["Body"] for m in receive(deliver_runner)] == [second]


class Crash(BaseException):
    """The invocation dies (killed, out of memory, timed out): nothing in it catches this."""


def test_a_crash_on_the_last_attempt_reads_dead_once_its_invocation_is_over(declare, clock):
    # GIVEN a job whose single attempt's invocation dies while it runs
    def dies(payload: Tick) -> dict:
        raise Crash()

    runner = declare(dies, name="dies", max_attempts=1, timeout_seconds=30)
    job_id = enqueue("dies", Tick(n=1), job_id="dies-1")
    with pytest.raises(Crash):
        runner.poll()
    # WHEN it is read while the invocation could still be running THEN it is running
    assert get_status(job_id).state == "running"
    # WHEN its invocation is over (its lock expired) THEN it reads dead, with why, though nothing wrote it
    clock.shift(31)
    status = get_status(job_id)
    assert (status.state, status.attempts) == ("dead", 1)
    assert status.error is not None and status.error["type"] == "MaxReceiveCountExceeded"
    assert status.done and "crashed or timed out" in (status.note or "")
    # AND on its next receive (the queue keeps one spare) the worker moves it to the DLQ, unrun, with
    # the reason, and writes the record dead
    clock.shift(6 * 30)
    assert runner.poll().failed_ids == []
    [dead] = runner.dlq_messages()
    assert dead["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "LastAttemptLostError"
    status = get_status(job_id)
    assert (status.state, status.error["type"], status.note) == ("dead", "LastAttemptLostError", None)


def test_a_crash_before_the_last_attempt_starts_is_dead_with_the_reason(declare, clock):
    # GIVEN a job that failed its first attempt (retrying), whose second and last receive's invocation
    # dies before the record starts
    ran: list[int] = []

    def fails(payload: Tick) -> dict:
        ran.append(payload.n)
        raise RuntimeError("downstream unavailable")

    runner = declare(fails, name="fails", max_attempts=2, backoff=Backoff.fixed(5))
    job_id = enqueue("fails", Tick(n=1))
    runner.poll()
    assert get_status(job_id).state == "retrying"
    clock.shift(6)
    assert aws.client("sqs").receive_message(QueueUrl=runner.queues.queue_url, VisibilityTimeout=1)[
        "Messages"
    ]
    # WHEN the message comes back once more
    clock.shift(2)
    assert runner.poll().failed_ids == []
    # THEN it is not run a third time: it is in the DLQ with the reason, and its record reads dead
    assert ran == [1]
    [dead] = runner.dlq_messages()
    assert dead["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "LastAttemptLostError"
    assert get_status(job_id).state == "dead"


def test_an_id_with_no_record_says_it_may_be_pending_or_unknown(stack):
    status = get_status("never-sent-anywhere")
    assert status.state == "pending" and status.note is not None
    assert "not started yet, or an unknown id" in status.note


def test_a_run_that_gives_its_lock_back_uses_no_attempt(stack, clock):
    from lambdajobs.runtime import lifecycle
    from lambdajobs.runtime.job_record import JobState
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(stack.config)
    run = {"job_id": "unstart-1", "job": "j", "attempt": 2, "max_attempts": 3, "redriven": False}
    # GIVEN a job whose first attempt failed
    store.save_inprogress({**run, "attempt": 1}, remaining_time_in_millis=30_000)
    store.delete_record({**run, "attempt": 1}, RuntimeError("downstream unavailable"))
    assert get_status("unstart-1").state == "retrying"
    # WHEN its second attempt takes the lock and gives it back before the job is called
    store.save_inprogress(run, remaining_time_in_millis=30_000)
    store.delete_record(run, lifecycle.RunNotStarted("no time left for it"))
    # THEN the record waits without a lock, with only the first attempt used
    record = store.read("unstart-1")
    assert record is not None
    assert (record.state, record.attempts, record.in_progress_expiration) == (JobState.WAITING, 1, None)
    assert (get_status("unstart-1").state, get_status("unstart-1").attempts) == ("waiting", 1)
    # AND the next copy of that same attempt starts it (the fence counts only attempts that ran)
    store.save_inprogress(dict(run), remaining_time_in_millis=30_000)
    assert (store.read("unstart-1").state, store.read("unstart-1").attempts) == (JobState.RUNNING, 2)


def test_unstart_gives_back_only_its_own_lock(stack, clock):
    from lambdajobs.runtime import lifecycle
    from lambdajobs.runtime.records import JobRecordStore

    client, table = stack.client("dynamodb"), stack.config.table_name()
    store = JobRecordStore(stack.config)
    lifecycle.acquire(
        client, table, "unstart-2", "j", expiration=2_000_000_000, in_progress_expiration=111, attempt=1
    )
    # WHEN a run that does not hold the record's lock gives it back THEN nothing changes
    assert not lifecycle.unstart(client, table, "unstart-2", lock=222, attempt=1)
    assert store.read("unstart-2").state == "running"
    # WHEN the first attempt's own run gives it back THEN no attempt is left recorded
    assert lifecycle.unstart(client, table, "unstart-2", lock=111, attempt=1, index="all")
    record = store.read("unstart-2")
    assert (record.state, record.attempts, record.in_progress_expiration, record.ix) == (
        "waiting",
        0,
        None,
        None,
    )
    assert "attempts" not in store.get_item("unstart-2")
    # AND a second give-back (the record moved on) changes nothing
    assert not lifecycle.unstart(client, table, "unstart-2", lock=111, attempt=1)
