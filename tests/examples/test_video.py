"""The example `transcode_video` job: a stage starts only if its budget fits in the time left."""

from __future__ import annotations

from handlers import video
from handlers.video import TranscodeVideo
from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status


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
