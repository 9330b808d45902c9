"""The approval example: a video published with a review (`publish_video(...,
review_timeout_seconds=...)`) is transcoded, then its transcode waits for signal `approval`, parked
with no compute, and publishes only an approved video. A rejection or no decision within the timeout
leaves it unpublished; either way the chain goes on and the uploader is told which."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest

from handlers import video
from handlers.video import ALL_FORMATS, APPROVAL, REVIEW_TIMEOUT_SECONDS
from lambdajobs import signal
from lambdajobs.errors import SignalRefusedError
from tests.examples.video_fakes import run_transcode


def publish(stack, video_id: str = "talk") -> str:
    """A one-minute video published with a review; returns its transcode's job id."""
    video.publish_video(
        video_id,
        f"s3://in/{video_id}.mov",
        uploader_id="user-9",
        review_timeout_seconds=REVIEW_TIMEOUT_SECONDS,
        config=stack.config,
    )
    return video.transcode_job_id(video_id)


def rest_of_chain(stack, video_id: str = "talk") -> str:
    """Run thumbnails and notify after the transcode; what the uploader is told."""
    continuer = stack.continuer()
    for job in ("make_thumbnails", "notify_uploader"):
        continuer.drain()
        stack.runner(job).drain()
    continuer.drain()
    wid = video.publication_workflow_id(video_id)
    assert stack.status(f"{wid}.2.0").state == "succeeded"
    return stack.status(f"{wid}.2.0").result["message"]


def test_a_reviewed_video_waits_for_approval_then_publishes(clocked, clocked_encoder):
    runner = clocked.runner("transcode_video")
    # GIVEN a video published with a review of at most 2 days
    job_id = publish(clocked)
    # WHEN its transcode has encoded every format
    run_transcode(clocked, job_id, runner=runner)
    # THEN it waits for the reviewer's decision: parked, nothing published yet
    status = clocked.status(job_id)
    assert (status.state, status.waiting_for) == ("waiting_signal", APPROVAL)
    assert status.described_state == "waiting for signal approval"
    assert status.wake_at == (clocked.clock.now() + timedelta(days=2)).isoformat(
        timespec="milliseconds"
    ).replace("+00:00", "Z")
    assert [s.name for s in status.steps] == ["encode-720p", "encode-1080p", "encode-4k"]
    assert runner.depth() == 0  # no message waits in SQS: a one-time schedule holds the timeout
    # AND a reviewer's approval wakes it, and it publishes without encoding anything again
    assert video.review_video(job_id, approved=True, reviewer="editor-7", config=clocked.config) is True
    runner.attempt()
    status = clocked.status(job_id)
    assert status.state == "succeeded", status
    assert status.result["published"] is True and status.result["review"]["reviewer"] == "editor-7"
    assert [s.name for s in status.steps][-1] == "publish"
    assert clocked_encoder.counts() == (Counter(ALL_FORMATS), Counter(ALL_FORMATS))
    assert (status.attempts, status.suspensions) == (1, 1)
    assert rest_of_chain(clocked) == "Your video talk is published in 1080p, 4k, 720p."


def test_no_review_within_the_timeout_leaves_the_video_unpublished(clocked, clocked_encoder):
    runner = clocked.runner("transcode_video")
    job_id = publish(clocked)
    run_transcode(clocked, job_id, runner=runner)
    # WHEN nobody reviews it: 2 days later its one-time schedule wakes it
    clocked.clock.advance(REVIEW_TIMEOUT_SECONDS - 60)
    assert clocked.run_schedules() == []
    clocked.clock.advance_past_wake()
    assert clocked.run_schedules() == [job_id]
    runner.attempt()
    # THEN the transcode caught the timeout: it succeeded, unpublished, saying why
    status = clocked.status(job_id)
    assert status.state == "succeeded", status
    assert status.result["published"] is False
    assert status.result["reason"] == "no review within 48 h"
    assert "publish" not in [s.name for s in status.steps]
    # AND the uploader is told; a decision that comes too late is refused
    assert rest_of_chain(clocked) == "Your video talk was not published: no review within 48 h."
    with pytest.raises(SignalRefusedError, match="succeeded"):
        video.review_video(job_id, approved=True, reviewer="late-editor", config=clocked.config)


def test_a_rejected_video_is_not_published_and_the_uploader_is_told_why(clocked, clocked_encoder):
    runner = clocked.runner("transcode_video")
    job_id = publish(clocked)
    run_transcode(clocked, job_id, runner=runner)
    video.review_video(
        job_id, approved=False, reviewer="editor-7", note="audio out of sync", config=clocked.config
    )
    runner.attempt()
    status = clocked.status(job_id)
    assert (status.state, status.result["published"]) == ("succeeded", False)
    assert "publish" not in [s.name for s in status.steps]
    assert rest_of_chain(clocked) == "Your video talk was not published: audio out of sync."


def test_a_decision_sent_before_the_transcode_waits_is_taken_when_it_does(clocked, clocked_encoder):
    # GIVEN an approval sent before the transcode even started (nothing to wake yet)
    job_id = publish(clocked)
    assert video.review_video(job_id, approved=True, reviewer="editor-7", config=clocked.config) is False
    # WHEN the transcode runs THEN it publishes without parking
    run_transcode(clocked, job_id)
    status = clocked.status(job_id)
    assert (status.state, status.result["published"], status.suspensions) == ("succeeded", True, 0)


def test_a_signal_that_is_no_review_fails_the_transcode_for_good(clocked, clocked_encoder):
    runner = clocked.runner("transcode_video")
    job_id = publish(clocked)
    run_transcode(clocked, job_id, runner=runner)
    signal(job_id, APPROVAL, {"ok": "sure"}, config=clocked.config)
    runner.attempt()
    status = clocked.status(job_id)
    assert (status.state, status.attempts) == ("dead", 1)
    assert status.error["type"] == "PermanentError" and "is not a review" in status.error["message"]
