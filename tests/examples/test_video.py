"""The example `transcode_video` job: a stage starts only if its budget fits in the time left. The
video chain (`publish_video`): transcode, thumbnails from its outputs, then the uploader told, in that
order; a transcode that dies stops the chain."""

from __future__ import annotations

from itertools import pairwise

from handlers import video
from handlers.video import TranscodeVideo
from lambdajobs import enqueue, get_status, get_workflow
from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from tests.example_fakes import BrokenEncoder

CHAIN = ("transcode_video", "make_thumbnails", "notify_uploader")


def batch(runner) -> dict:
    """Lambda's SQS event for the messages waiting on the runner's queue."""
    got = aws.client("sqs").receive_message(
        QueueUrl=runner.queues.queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        MessageAttributeNames=["All"],
    )
    return sqs_event(got.get("Messages", []), queue_arn=runner.queues.queue_arn, region="us-east-1")


def test_transcode_stage_that_does_not_fit_is_retried_later(stack, clock):
    # GIVEN a transcode delivered with only 100 s left: the 4k stage needs up to 120 s
    previous = video.set_encoder(video.SimulatedEncoder(seconds_per_minute=0))
    try:
        runner = stack.runner("transcode_video")
        job_id = enqueue(
            "transcode_video", TranscodeVideo(video_id="v2", source_uri="s3://in/v2.mov", formats=["4k"])
        )
        response = runner.handler(batch(runner), LambdaContext("test", 100))
    finally:
        video.set_encoder(previous)
    # THEN the job is retried, with the reason recorded
    assert len(response["batchItemFailures"]) == 1
    status = get_status(job_id)
    assert status.state == "retrying" and status.error["type"] == "StageBudgetError"


def test_publish_video_runs_transcode_then_thumbnails_then_notify(stack, instant_encoder):
    transcode, thumbnails, notify = (stack.runner(j) for j in CHAIN)
    continuer = stack.continuer()
    # GIVEN a video published: a chain of three steps
    workflow_id = video.publish_video("v1", "s3://in/v1.mov", uploader_id="user-42", formats=["720p", "4k"])
    ids = [f"{workflow_id}.{step}.0" for step in range(3)]
    # WHEN the transcode runs, only the transcode was sent
    assert (thumbnails.depth(), notify.depth()) == (0, 0)
    transcode.drain()
    assert get_status(ids[0]).state == "succeeded" and thumbnails.depth() == 0
    # THEN the continuer sends the thumbnails, which see the transcode's outputs
    continuer.drain()
    assert notify.depth() == 0
    thumbnails.drain()
    made = get_status(ids[1]).result
    assert made["formats"] == ["4k", "720p"]
    assert made["thumbnails"]["4k"][0] == "s3://in/v1-4k-thumb1.jpg"
    # AND only then the uploader is notified
    assert get_status(ids[2]).state == "pending"
    continuer.drain()
    notify.drain()
    continuer.drain()
    told = get_status(ids[2]).result
    assert told["uploader_id"] == "user-42" and "published in 4k, 720p" in told["message"]
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
