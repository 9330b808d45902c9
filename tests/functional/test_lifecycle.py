"""Job lifecycle on moto with a controlled clock: backoff, deadlines, progress, waiting."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from handlers import video
from handlers.emails import SendEmail
from handlers.video import TranscodeVideo
from lambdajobs.local.lambda_events import sqs_event
from lambdajobs.runtime import Backoff, aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import WaitTimeoutError, get_status, wait_for


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


def slow_sender(sender, context: SteppedContext, elapsed_ms: int):
    """Make every send take `elapsed_ms` of the context's time; returns the original send."""
    real_send = sender.send

    def slow_send(to, subject, body):
        context.elapsed_ms += elapsed_ms
        return real_send(to, subject, body)

    sender.send = slow_send
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


def test_records_are_not_started_near_the_deadline(emails_runner, sender, clock):
    # GIVEN three emails and an invocation where the first send takes 29 of the 30 seconds
    for i in range(3):
        enqueue("send_email", SendEmail(to=f"u{i}@example.com", subject="s", body="b"))
    context = SteppedContext(timeout_ms=30_000)
    slow_sender(sender, context, 29_000)
    emails_runner.worker.rng = MaxRandom()  # a backoff would keep them away for its full 10 s
    messages = receive(emails_runner)
    event = sqs_event(messages, queue_arn=emails_runner.queues.queue_arn, region="us-east-1")
    # WHEN the worker runs the batch
    response = emails_runner.handler(event, context)
    # THEN one record ran; the two it had no time for are reported failed, not run
    assert len(sender.sent) == 1
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {m["MessageId"] for m in messages[1:]}
    # AND they are visible again at once (not after a backoff), with no record written for them
    clock.shift(1)  # moto shows a message whose visibility ends "now" only once the clock moves
    again = receive(emails_runner)
    assert {m["MessageId"] for m in again} == failed
    for m in messages[1:]:
        assert get_status(m["MessageId"]).state == "pending"


def test_progress_is_readable_while_the_job_runs(stack, clock):
    # GIVEN a transcode of three formats, and an encoder that reads the job's status between stages
    seen: list[tuple[str, float | None, str | None]] = []
    real = video.SimulatedEncoder(seconds_per_minute=0)

    class Watching:
        def encode(self, source_uri, fmt, duration_seconds, budget_seconds):
            status = get_status(job_id)
            seen.append((status.state, status.progress, status.progress_message))
            return real.encode(source_uri, fmt, duration_seconds, budget_seconds)

    previous = video.set_encoder(Watching())
    try:
        from tests.functional.conftest import Runner

        runner = Runner(stack, "transcode_video")
        job_id = enqueue("transcode_video", TranscodeVideo(video_id="v1", source_uri="s3://in/v1.mov"))
        assert runner.poll().failed_ids == []
    finally:
        video.set_encoder(previous)
    # THEN each stage saw the progress of the stages before it, while the job was running
    assert [s[0] for s in seen] == ["running"] * 3
    assert [s[1] for s in seen] == [None, pytest.approx(100 / 3), pytest.approx(200 / 3)]
    assert [s[2] for s in seen] == [None, "720p done", "1080p done"]
    status = get_status(job_id)
    assert (status.state, status.progress) == ("succeeded", 100.0)
    assert status.result["outputs"] == {f: f"s3://in/v1-{f}.mp4" for f in ("720p", "1080p", "4k")}


def test_transcode_stage_that_does_not_fit_is_retried_later(stack, clock):
    # GIVEN a transcode delivered with only 100 s left: the 4k stage needs up to 120 s
    from tests.functional.conftest import Runner

    previous = video.set_encoder(video.SimulatedEncoder(seconds_per_minute=0))
    try:
        runner = Runner(stack, "transcode_video")
        job_id = enqueue(
            "transcode_video", TranscodeVideo(video_id="v2", source_uri="s3://in/v2.mov", formats=["4k"])
        )
        event = batch(runner)
        response = runner.handler(event, SteppedContext(timeout_ms=100_000))
    finally:
        video.set_encoder(previous)
    # THEN the job is retried, with the reason recorded
    assert len(response["batchItemFailures"]) == 1
    status = get_status(job_id)
    assert status.state == "retrying" and status.error["type"] == "StageBudgetError"


def test_transcode_job_id_is_derived_from_video_and_formats(stack):
    a = enqueue("transcode_video", TranscodeVideo(video_id="v9", source_uri="s3://in/a.mov"))
    b = enqueue("transcode_video", TranscodeVideo(video_id="v9", source_uri="s3://in/b.mov"))
    c = enqueue("transcode_video", TranscodeVideo(video_id="v9", source_uri="s3://in/a.mov", formats=["4k"]))
    assert a == b != c


def test_wait_for_returns_the_final_status_or_times_out(emails_runner, sender):
    job_id = enqueue("send_email", SendEmail(to="a@example.com", subject="s", body="b"))
    with pytest.raises(WaitTimeoutError, match="pending") as excinfo:
        wait_for(job_id, timeout_seconds=0.05, poll_seconds=0.01)
    assert excinfo.value.status.state == "pending"
    emails_runner.poll()
    assert wait_for(job_id, timeout_seconds=1).state == "succeeded"


def test_progress_outside_0_to_100_is_refused():
    from lambdajobs.runtime.context import JobContext

    ctx = JobContext(job_id="j", job="x", attempt=1, max_attempts=5, logger=None)
    for bad in (-1, 101, True, "50"):
        with pytest.raises(ValueError, match="0 to 100"):
            ctx.progress(bad)


def test_a_retry_starts_with_fresh_progress(stack, clock):
    # GIVEN a transcode whose 1080p stage fails once, after 720p reported 50%
    from tests.functional.conftest import Runner

    seen: list[float | None] = []
    fail = {"1080p": 1}

    class FailingOnce:
        def encode(self, source_uri, fmt, duration_seconds, budget_seconds):
            seen.append(get_status(job_id).progress)
            if fail.get(fmt):
                fail[fmt] -= 1
                raise RuntimeError("encoder crashed")
            return f"{source_uri}-{fmt}"

    previous = video.set_encoder(FailingOnce())
    try:
        runner = Runner(stack, "transcode_video")
        job_id = enqueue(
            "transcode_video", TranscodeVideo(video_id="v3", source_uri="s", formats=["720p", "1080p"])
        )
        assert runner.poll().failed_ids
        clock.shift(runner.spec.backoff.ceiling(1) + 1)
        assert runner.poll().failed_ids == []
    finally:
        video.set_encoder(previous)
    # THEN the second attempt did not show the first attempt's progress when it started
    assert seen == [None, 50.0, None, 50.0]


def test_a_slow_run_does_not_stop_later_invocations_from_starting(emails_runner, sender, clock):
    # GIVEN a warm worker whose last invocation had one record that took 29 of its 30 seconds
    context = SteppedContext(timeout_ms=30_000)
    real_send = slow_sender(sender, context, 29_000)
    enqueue("send_email", SendEmail(to="slow@example.com", subject="s", body="b"))
    emails_runner.handler(
        batch(emails_runner),
        context,
    )
    sender.send = real_send
    # WHEN a new invocation starts with its full time
    enqueue("send_email", SendEmail(to="next@example.com", subject="s", body="b"))
    response = emails_runner.handler(
        batch(emails_runner),
        SteppedContext(timeout_ms=30_000),
    )
    # THEN its record runs: the slow run of another invocation does not count against it
    assert response == {"batchItemFailures": []}
    assert sender.sent == ["slow@example.com", "next@example.com"]


def test_a_record_on_its_last_attempt_is_run_even_near_the_deadline(declare, clock):
    # GIVEN a batch whose second record is on its last attempt, after a first record used the time
    context = SteppedContext(timeout_ms=30_000)
    ran: list[int] = []

    def lastly(payload: Tick) -> dict:
        ran.append(payload.n)
        context.elapsed_ms += 29_000
        return {}

    runner = declare(lastly, name="lastly", max_attempts=1)
    enqueue("lastly", Tick(n=1))
    enqueue("lastly", Tick(n=2))
    messages = receive(runner)
    # WHEN the worker runs the batch
    response = runner.handler(
        sqs_event(messages, queue_arn=runner.queues.queue_arn, region="us-east-1"), context
    )
    # THEN both ran: skipping the second would send it to the DLQ without running it
    assert sorted(ran) == [1, 2] and response == {"batchItemFailures": []}


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


def test_an_invalid_resend_does_not_overwrite_a_succeeded_record(emails_runner, sender, clock):
    enqueue("send_email", SendEmail(to="a@example.com", subject="s", body="b"), job_id="once-1")
    emails_runner.poll()
    aws.client("sqs").send_message(
        QueueUrl=emails_runner.queues.queue_url,
        MessageBody='{"v": 1, "job": "send_email", "id": "once-1", "payload": {"to": 5}}',
    )
    emails_runner.poll()
    assert get_status("once-1").state == "succeeded"
    assert emails_runner.depth(dlq=True) == 1  # the bad message itself is dead-lettered


def test_the_worker_derives_the_same_job_id_as_the_python_producer(stack, clock):
    # GIVEN a producer in another language that omits a field with a default (formats)
    from tests.functional.conftest import Runner

    previous = video.set_encoder(video.SimulatedEncoder(seconds_per_minute=0))
    try:
        python_id = enqueue("transcode_video", TranscodeVideo(video_id="v7", source_uri="s3://in/v7.mov"))
        runner = Runner(stack, "transcode_video")
        runner.drain()
        raw = '{"v": 1, "job": "transcode_video", "payload": {"video_id": "v7", "source_uri": "s3://in/v7.mov"}}'
        aws.client("sqs").send_message(QueueUrl=runner.queues.queue_url, MessageBody=raw)
        runner.drain()
    finally:
        video.set_encoder(previous)
    # THEN both deliveries are the same job: one run
    status = get_status(python_id)
    assert (status.state, status.attempts) == ("succeeded", 1)


def test_the_first_record_of_an_invocation_always_starts(emails_runner, sender, clock):
    # GIVEN an invocation that starts with less time than the safety margin (3 s for send_email)
    enqueue("send_email", SendEmail(to="first@example.com", subject="s", body="b"))
    enqueue("send_email", SendEmail(to="second@example.com", subject="s", body="b"))
    context = SteppedContext(timeout_ms=30_000)
    context.elapsed_ms = 29_000
    # WHEN the worker runs the batch
    response = emails_runner.handler(batch(emails_runner), context)
    # THEN the first record ran (refusing it would make no progress at all), the second did not
    assert sender.sent == ["first@example.com"]
    assert len(response["batchItemFailures"]) == 1
