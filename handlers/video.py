"""Video jobs: `transcode_video` encodes one source into several formats, each format a durable step
(`ctx.step`) checkpointed on the job's record: a retry or a continuation replays the formats done and
never encodes one again. Progress is reported after each format.

A format's time budget grows with the video's length, up to a whole invocation (`format_budget`). A
format starts only if its budget fits in the time left in the invocation; otherwise the job continues
in a fresh invocation first, using no attempt. So a short video is encoded in one invocation, and a
long one (50 minutes and more) in one invocation per format: the job may take an hour and more in
all, while each invocation stays within the function's 5-minute timeout.

With `review_timeout_seconds`, the transcode then waits for a reviewer's decision, signal `approval`
(`review_video`, or `lambdajobs.signal(job_id, "approval", {"approved": true, "reviewer": ...})`),
parked with no compute meanwhile, and publishes only an approved video. A rejection, or no decision
within the timeout, leaves it unpublished, and the chain tells the uploader why.

`publish_video` runs it as the first step of a chain: `transcode_video`, then `make_thumbnails` (from
the transcode's outputs), then `notify_uploader`. Each step is sent once the one before succeeded; a
step that dies stops the chain, and the uploader is told a video is published only if it was.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError

from lambdajobs import Alarms, JobContext, PermanentError, StackConfig, chain, job, sig, signal
from lambdajobs.errors import SignalTimeoutError

Format = Literal["720p", "1080p", "4k"]
ALL_FORMATS: tuple[Format, ...] = ("720p", "1080p", "4k")

#: transcode_video's function timeout: one invocation.
TIMEOUT_SECONDS = 300
#: The most a format may take: a whole invocation, the timeout less the time the worker keeps free at
#: its end (10% of the timeout, at most 5 s). A format with this budget starts only in an invocation in
#: which nothing else ran.
INVOCATION_SECONDS = TIMEOUT_SECONDS - 5.0
#: How long the encoder may take per minute of video, by format: a format's budget is this times the
#: video's length, up to `INVOCATION_SECONDS` (from about 25 minutes of video for 4k, 50 for 1080p).
ENCODE_SECONDS_PER_MINUTE: dict[str, float] = {"720p": 3.0, "1080p": 6.0, "4k": 12.0}
#: The longest publishing may take (without it, the guess would be the format before's duration).
PUBLISH_BUDGET_SECONDS = 30.0
#: A review's timeout, by default and at most: past it the video is not published.
REVIEW_TIMEOUT_SECONDS = 2 * 86_400
MAX_REVIEW_TIMEOUT_SECONDS = 6 * 86_400
#: The signal a review sends (`review_video`).
APPROVAL = "approval"


def format_budget(fmt: str, duration_seconds: float) -> float:
    """The longest encoding `fmt` of a video of `duration_seconds` may take (s): its estimate, at most
    a whole invocation."""
    return min(INVOCATION_SECONDS, duration_seconds / 60.0 * ENCODE_SECONDS_PER_MINUTE[fmt])


class TranscodeVideo(BaseModel):
    video_id: str = Field(min_length=1, max_length=200)
    source_uri: str = Field(min_length=1)
    formats: list[Format] = Field(default_factory=lambda: list(ALL_FORMATS), min_length=1)
    duration_seconds: float = Field(default=60.0, gt=0, le=4 * 3600)
    review_timeout_seconds: int | None = Field(
        default=None,
        ge=60,
        le=MAX_REVIEW_TIMEOUT_SECONDS,
        description="wait at most this long for signal `approval` before publishing; None: publish at once",
    )


class Review(BaseModel):
    """A reviewer's decision: the data of signal `approval`."""

    approved: bool
    reviewer: str = Field(min_length=1, max_length=200)
    note: str | None = Field(default=None, max_length=1000)


class StageBudgetError(PermanentError):
    """A format cannot be encoded within its budget (a whole invocation at most): no retry can help;
    split the video, or encode it elsewhere."""


class Encoder(Protocol):
    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        """Encode one format; return the output's URI. Raise StageBudgetError past the budget."""
        ...


class SimulatedEncoder:
    """No real encoding: sleeps in proportion to the video's length and the format's cost (by default
    0.01 s per minute of video for 720p: 0.6 s, 1.2 s and 2.4 s for an hour of video in 720p, 1080p
    and 4k)."""

    COST = {"720p": 1.0, "1080p": 2.0, "4k": 4.0}

    def __init__(self, seconds_per_minute: float = 0.01) -> None:
        self.seconds_per_minute = seconds_per_minute

    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        needed = duration_seconds / 60.0 * self.COST[fmt] * self.seconds_per_minute
        if needed > budget_seconds:
            raise StageBudgetError(
                f"format {fmt} needs {needed:.1f} s, over its budget of {budget_seconds:.0f} s"
            )
        time.sleep(needed)
        return f"{source_uri.rsplit('.', 1)[0]}-{fmt}.mp4"


_encoder: Encoder = SimulatedEncoder()


def set_encoder(encoder: Encoder) -> Encoder:
    """Plug in a real encoder; returns the previous one."""
    global _encoder
    previous, _encoder = _encoder, encoder
    return previous


def _encode(ctx: JobContext, payload: TranscodeVideo, fmt: str, budget: float, percent: float) -> str:
    """One format: a step's body, so it runs once per job (a crash before its checkpoint runs it again:
    `ctx.step_key` is the key that makes a real encoder's call idempotent). Each step's body logs one
    line with its `step_key` when it starts: `make demo` counts them to show no step ran twice."""
    ctx.logger.info("format encoding", extra={"format": fmt, "step_key": ctx.step_key, "budget_s": budget})
    output = _encoder.encode(payload.source_uri, fmt, payload.duration_seconds, budget)
    ctx.progress(percent, f"{fmt} done")
    return output


def _publish(ctx: JobContext, video_id: str, outputs: dict[str, str], reviewer: str | None) -> dict[str, Any]:
    """Simulated: the outputs made public (a real one would copy them to the CDN's origin, keyed by
    `ctx.step_key`)."""
    ctx.logger.info("video publishing", extra={"step_key": ctx.step_key, "approved_by": reviewer})
    return {
        "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "formats": sorted(outputs),
        "approved_by": reviewer,
    }


def _review(ctx: JobContext, timeout_seconds: int) -> Review:
    """Wait for the reviewer's decision; no decision in time is a rejection."""
    try:
        data = ctx.wait_for_signal(APPROVAL, timeout_seconds=timeout_seconds)
    except SignalTimeoutError:
        within = (
            f"{timeout_seconds / 3600:g} h" if timeout_seconds >= 3600 else f"{timeout_seconds / 60:g} min"
        )
        return Review(approved=False, reviewer="(nobody)", note=f"no review within {within}")
    try:
        return Review.model_validate(data)
    except ValidationError as exc:  # the signal cannot be sent again with other data: no retry helps
        why = f"signal {APPROVAL!r} is not a review ({exc.error_count()} errors): {data!r}"
        raise PermanentError(why) from exc


@job(
    timeout_seconds=TIMEOUT_SECONDS,
    max_attempts=3,
    max_concurrency=5,
    memory_mb=1024,
    # encoding takes up to an hour (a format per 5-minute invocation at most, with retries); a review
    # waits up to 6 days more
    max_duration_seconds=7 * 86_400,
    idempotency_key=("video_id", "formats"),
    # encodes take minutes: a backlog of 100 is already hours of work
    alarms=Alarms(queue_depth_above=100, oldest_message_age_seconds_above=3600),
    # each step's start line is its audit (`make demo` counts them): written, not only when it fails
    buffer_logs=False,
)
def transcode_video(payload: TranscodeVideo, ctx: JobContext) -> dict[str, object]:
    outputs: dict[str, str] = {}
    for done, fmt in enumerate(payload.formats, start=1):
        budget = format_budget(fmt, payload.duration_seconds)
        percent = 100.0 * done / len(payload.formats)
        outputs[fmt] = ctx.step(
            f"encode-{fmt}", _encode, ctx, payload, fmt, budget, percent, budget_seconds=budget
        )
    result: dict[str, object] = {"video_id": payload.video_id, "outputs": outputs}
    review = None
    if payload.review_timeout_seconds is not None:
        review = _review(ctx, payload.review_timeout_seconds)
        result["review"] = review.model_dump()
        if not review.approved:
            ctx.logger.info("video not published", extra={"note": review.note})
            return {**result, "published": False, "reason": review.note or f"rejected by {review.reviewer}"}
    reviewer = review.reviewer if review else None
    published = ctx.step(
        "publish", _publish, ctx, payload.video_id, outputs, reviewer, budget_seconds=PUBLISH_BUDGET_SECONDS
    )
    return {**result, "published": True, "published_at": published["published_at"]}


def review_video(
    job_id: str,
    *,
    approved: bool,
    reviewer: str,
    note: str | None = None,
    config: StackConfig | None = None,
) -> bool:
    """Send a reviewer's decision to the transcode `job_id` (in a chain: `video-<video_id>.0.0`);
    True when it woke the job, False when the job will find it when it waits.

    Raises:
        SignalRefusedError: the transcode has finished, or was sent another decision.
    """
    decision = Review(approved=approved, reviewer=reviewer, note=note)
    return signal(job_id, APPROVAL, decision.model_dump(), config=config).woke


class MakeThumbnails(BaseModel):
    video_id: str = Field(min_length=1, max_length=200)
    per_format: int = Field(default=3, ge=1, le=20, description="thumbnails taken from each output")


def _previous_result(ctx: JobContext, job_name: str) -> dict[str, Any]:
    """What the chain's step before this one returned; PermanentError when there is none (this job
    was sent on its own, or the step before died), since no retry would make one appear."""
    results = ctx.parent_results
    if not results or not isinstance(results[0], dict):
        raise PermanentError(f"{job_name} runs in a chain after the step it needs: use publish_video()")
    return results[0]


@job(timeout_seconds=60, max_attempts=3)
def make_thumbnails(payload: MakeThumbnails, ctx: JobContext) -> dict[str, object]:
    """Simulated: names `per_format` thumbnails for each output of the transcode before it (published
    or not: the uploader sees them either way), and passes on whether it was published."""
    transcoded = _previous_result(ctx, "make_thumbnails")
    outputs = transcoded.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise PermanentError("the transcode before this step returned no outputs")
    thumbnails = {
        fmt: [f"{str(uri).rsplit('.', 1)[0]}-thumb{i}.jpg" for i in range(1, payload.per_format + 1)]
        for fmt, uri in sorted(outputs.items())
    }
    ctx.logger.info("thumbnails made", extra={"video_id": payload.video_id, "formats": sorted(thumbnails)})
    return {
        "video_id": payload.video_id,
        "formats": sorted(outputs),
        "thumbnails": thumbnails,
        "published": transcoded.get("published", True),
        "reason": transcoded.get("reason"),
    }


class NotifyUploader(BaseModel):
    video_id: str = Field(min_length=1, max_length=200)
    uploader_id: str = Field(min_length=1, max_length=200, description="the uploader's user id")


@job(timeout_seconds=30, max_attempts=5)
def notify_uploader(payload: NotifyUploader, ctx: JobContext) -> dict[str, object]:
    """Simulated: logs the notification it would send and returns it."""
    made = _previous_result(ctx, "notify_uploader")
    formats = made.get("formats") or []
    if made.get("published", True):
        message = f"Your video {payload.video_id} is published in {', '.join(map(str, formats))}."
    else:
        message = f"Your video {payload.video_id} was not published: {made.get('reason') or 'not approved'}."
    ctx.logger.info("uploader notified (simulated)", extra={"video_id": payload.video_id})
    return {"uploader_id": payload.uploader_id, "video_id": payload.video_id, "message": message}


def publication_workflow_id(video_id: str) -> str:
    return f"video-{video_id}"


def transcode_job_id(video_id: str) -> str:
    """The job id of a published video's transcode (the chain's first step): where its review goes."""
    return f"{publication_workflow_id(video_id)}.0.0"


def publish_video(
    video_id: str,
    source_uri: str,
    *,
    uploader_id: str,
    formats: list[Format] | None = None,
    duration_seconds: float = 60.0,
    review_timeout_seconds: int | None = None,
    config: StackConfig | None = None,
) -> str:
    """Transcode, then make thumbnails, then notify the uploader, each once the step before succeeded;
    return the workflow id (`video-<video_id>`; follow it with `get_workflow`). The steps' job ids are
    `video-<video_id>.0.0`, `.1.0` and `.2.0`. Publishing the same video again sends nothing twice.

    With `review_timeout_seconds`, the transcode waits that long at most for a reviewer's decision
    (`review_video(transcode_job_id(video_id), approved=..., reviewer=...)`) before it publishes.

    Raises:
        PayloadValidationError: a step's payload does not fit its job, before anything is sent.
        WorkflowError: the video was published before with other parameters.

    Example:
        >>> publish_video("v1", "s3://in/v1.mov", uploader_id="user-42")
        'video-v1'
    """
    transcode = TranscodeVideo(
        video_id=video_id,
        source_uri=source_uri,
        formats=list(formats or ALL_FORMATS),
        duration_seconds=duration_seconds,
        review_timeout_seconds=review_timeout_seconds,
    )
    return chain(
        sig("transcode_video", transcode),
        sig("make_thumbnails", MakeThumbnails(video_id=video_id)),
        sig("notify_uploader", NotifyUploader(video_id=video_id, uploader_id=uploader_id)),
    ).enqueue(workflow_id=publication_workflow_id(video_id), config=config)
