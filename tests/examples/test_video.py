"""The example `transcode_video` job: each format a durable step, budgeted by the video's length up to
a whole invocation, so a longer video crosses more invocations; a retry, a crash or a continuation
never encodes a format that is done. The video chain (`publish_video`): transcode, thumbnails from its
outputs, then the uploader told, in that order; a transcode that dies stops the chain."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest

from handlers import video
from handlers.video import ALL_FORMATS, INVOCATION_SECONDS, TranscodeVideo, format_budget
from lambdajobs import enqueue, get_status, get_workflow
from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from lambdajobs.runtime.spec import get_spec
from lambdajobs.runtime.worker import deadline_margin_ms
from tests.example_fakes import BrokenEncoder
from tests.examples.video_fakes import crashing, run_transcode

CHAIN = ("transcode_video", "make_thumbnails", "notify_uploader")
STEPS = ["encode-720p", "encode-1080p", "encode-4k", "publish"]


def batch(runner) -> dict:
    """Lambda's SQS event for the messages waiting on the runner's queue."""
    got = aws.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return sqs_event(got.get("Messages", []), queue_arn=runner.queues.queue_arn, region="us-east-1")


def transcode(stack, minutes: float, video_id: str = "v1") -> str:
    return stack.enqueue(
        "transcode_video",
        TranscodeVideo(
            video_id=video_id, source_uri=f"s3://in/{video_id}.mov", duration_seconds=minutes * 60
        ),
    )


def test_a_format_budget_is_at_most_what_an_invocation_holds():
    # a whole invocation: the function's timeout less the worker's margin (a budget above it would
    # fail the job: no invocation could hold it)
    spec = get_spec("transcode_video")
    assert spec.timeout_seconds * 1000 - deadline_margin_ms(spec) == INVOCATION_SECONDS * 1000
    assert spec.timeout_seconds < 900 and spec.max_duration_seconds >= 3600
    assert format_budget("4k", 60) == 12.0
    assert format_budget("4k", 4 * 3600) == format_budget("1080p", 3600) == INVOCATION_SECONDS


@pytest.mark.parametrize(("minutes", "invocations"), [(1, 1), (30, 2), (60, 3)])
def test_a_longer_video_crosses_more_invocations_and_encodes_each_format_once(
    clocked, clocked_encoder, minutes, invocations
):
    # GIVEN a video whose encodes take 1, 2 and 4 s per minute of it (on the stack's clock)
    job_id = transcode(clocked, minutes)
    # WHEN it is delivered until done, the clock moved past each continuation
    assert run_transcode(clocked, job_id) == invocations
    # THEN every format was encoded once: the ones done before a continuation were replayed
    status = clocked.status(job_id)
    assert status.state == "succeeded", status
    assert clocked_encoder.counts() == (Counter(ALL_FORMATS), Counter(ALL_FORMATS))
    assert [s.name for s in status.steps] == STEPS
    assert status.steps[2].duration_ms == minutes * 4 * 1000  # the encode's time on the clock
    # AND the continuations used no attempt; progress reached 100 with the last format
    assert (status.suspensions, status.attempts) == (invocations - 1, 1)
    assert (status.progress, status.progress_message) == (100.0, "4k done")
    assert status.result["outputs"]["4k"] == "s3://in/v1-4k.mp4"
    assert status.result["published"] is True


@pytest.mark.parametrize(
    ("fmt", "fault"),
    [
        ("1080p", "crash"),  # the invocation dies mid-encode: its message comes back after the timeout
        ("4k", "fail"),  # the encoder raises: the attempt fails and is retried after its backoff
    ],
)
def test_a_crash_or_a_failure_encodes_again_only_the_format_it_interrupted(
    clocked, clocked_encoder, fmt, fault
):
    runner = clocked.runner("transcode_video")
    runner.worker.handle = crashing(runner.worker.handle)  # type: ignore[method-assign]
    # GIVEN an hour-long video (a format per invocation), whose `fmt` is interrupted once
    clocked_encoder.once[fmt] = fault
    job_id = transcode(clocked, 60)
    # WHEN it is delivered until done
    run_transcode(clocked, job_id, runner=runner)
    # THEN it succeeded on its second attempt; only the interrupted format was encoded again
    status = clocked.status(job_id)
    assert status.state == "succeeded", status
    calls, encoded = clocked_encoder.counts()
    assert calls == Counter({**dict.fromkeys(ALL_FORMATS, 1), fmt: 2})
    assert encoded == Counter(ALL_FORMATS)  # no format that was done was encoded again
    assert [s.name for s in status.steps] == STEPS
    assert status.attempts == 2


def test_a_format_that_does_not_fit_the_time_left_continues_in_a_fresh_invocation(
    stack, clock, instant_encoder
):
    # GIVEN a short video's transcode delivered with only 10 s left: the 4k format's budget is 12 s
    runner = stack.runner("transcode_video")
    job_id = enqueue(
        "transcode_video", TranscodeVideo(video_id="v2", source_uri="s3://in/v2.mov", formats=["720p", "4k"])
    )
    response = runner.handler(batch(runner), LambdaContext("test", 10))
    # THEN 720p is done and the job continues in a fresh invocation, using no attempt
    assert response["batchItemFailures"] == []
    status = get_status(job_id)
    assert status.state == "sleeping" and [s.name for s in status.steps] == ["encode-720p"]
    assert status.progress == 50.0
    # AND there, 4k is encoded
    clock.shift(2)
    runner.drain()
    status = get_status(job_id)
    assert status.state == "succeeded", status
    assert (status.attempts, status.suspensions) == (1, 1)
    assert sorted(status.result["outputs"]) == ["4k", "720p"]


def test_a_format_its_encoder_cannot_finish_within_its_budget_is_dead_at_once(stack):
    # GIVEN an encoder 100 times too slow for the budget of a minute of video
    previous = video.set_encoder(video.SimulatedEncoder(seconds_per_minute=300))
    try:
        job_id = enqueue("transcode_video", TranscodeVideo(video_id="v4", source_uri="s3://in/v4.mov"))
        stack.runner("transcode_video").drain()
    finally:
        video.set_encoder(previous)
    # THEN no retry can help: dead, with the reason
    status = get_status(job_id)
    assert (status.state, status.attempts) == ("dead", 1)
    assert status.error["type"] == "StageBudgetError" and "over its budget" in status.error["message"]


def test_publish_video_runs_transcode_then_thumbnails_then_notify(stack, instant_encoder):
    transcode, thumbnails, notify = (stack.runner(j) for j in CHAIN)
    continuer = stack.continuer()
    # GIVEN a video published: a chain of three steps
    workflow_id = video.publish_video("v1", "s3://in/v1.mov", uploader_id="user-42", formats=["720p", "4k"])
    ids = [f"{workflow_id}.{step}.0" for step in range(3)]
    assert ids[0] == video.transcode_job_id("v1")
    # WHEN the transcode runs, only the transcode was sent
    assert (thumbnails.depth(), notify.depth()) == (0, 0)
    transcode.drain()
    assert get_status(ids[0]).state == "succeeded" and thumbnails.depth() == 0
    # THEN the continuer sends the thumbnails, which see the transcode's outputs
    continuer.drain()
    assert notify.depth() == 0
    thumbnails.drain()
    made = get_status(ids[1]).result
    assert made["formats"] == ["4k", "720p"] and made["published"] is True
    assert made["thumbnails"]["4k"][0] == "s3://in/v1-4k-thumb1.jpg"
    # AND only then the uploader is notified
    assert get_status(ids[2]).state == "pending"
    continuer.drain()
    notify.drain()
    continuer.drain()
    told = get_status(ids[2]).result
    assert told["uploader_id"] == "user-42" and "is published in 4k, 720p" in told["message"]
    flow = get_workflow(workflow_id)
    assert (flow.state, flow.progress) == ("succeeded", 100.0)
    steps = [get_status(i) for i in ids]
    assert all(a.finished_at <= b.started_at for a, b in pairwise(steps))


def test_a_transcode_that_dies_stops_the_chain(stack):
    broken = BrokenEncoder()
    previous = video.set_encoder(broken)
    try:
        # GIVEN a video whose source can never be encoded
        workflow_id = video.publish_video("v3", "s3://in/v3.mov", uploader_id="user-7")
        # WHEN its transcode runs: a permanent failure, dead at once
        for runner in [stack.runner(j) for j in CHAIN]:
            runner.drain()
            stack.continuer().drain()
    finally:
        video.set_encoder(previous)
    assert broken.calls == 1
    assert get_status(f"{workflow_id}.0.0").state == "dead"
    # THEN the chain stopped: thumbnails and notify were never sent, never ran
    assert [get_status(f"{workflow_id}.{step}.0").state for step in (1, 2)] == ["pending", "pending"]
    assert [stack.runner(j).depth() for j in CHAIN[1:]] == [0, 0]
    # AND the workflow says why
    flow = get_workflow(workflow_id)
    assert flow.state == "dead"
    assert flow.reason == "stage 0 (transcode_video x1): 1 of 1 dead; the workflow stopped before stage 1"
    assert [s.sent for s in flow.stages] == [True, False, False]
