"""Video jobs: `transcode_video` encodes one source into several formats, one stage per format,
reporting progress after each stage and keeping each stage within its time budget.

`publish_video` runs it as the first step of a chain: `transcode_video`, then `make_thumbnails` (from
the transcode's outputs), then `notify_uploader`. Each step is sent once the one before succeeded; a
step that dies stops the chain, so an uploader is never told about a video that was not published.
"""

from __future__ import annotations

import time
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from lambdajobs import Alarms, JobContext, PermanentError, StackConfig, chain, job, sig

Format = Literal["720p", "1080p", "4k"]
ALL_FORMATS: tuple[Format, ...] = ("720p", "1080p", "4k")

#: Longest a stage may take, in seconds. A stage does not start unless its budget fits in the time
#: left in the invocation; the sum (210 s) fits in the job's 300 s timeout with room to spare.
STAGE_BUDGET_SECONDS: dict[str, float] = {"720p": 30.0, "1080p": 60.0, "4k": 120.0}


class TranscodeVideo(BaseModel):
    video_id: str = Field(min_length=1, max_length=200)
    source_uri: str = Field(min_length=1)
    formats: list[Format] = Field(default_factory=lambda: list(ALL_FORMATS), min_length=1)
    duration_seconds: float = Field(default=60.0, gt=0, le=4 * 3600)


class StageBudgetError(Exception):
    """A stage could not run within its budget (retryable: the next attempt gets a fresh invocation)."""


class Encoder(Protocol):
    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        """Encode one format; return the output's URI. Raise StageBudgetError past the budget."""
        ...


class SimulatedEncoder:
    """No real encoding: sleeps in proportion to the video's length and the format's cost."""

    COST = {"720p": 1.0, "1080p": 2.0, "4k": 4.0}

    def __init__(self, seconds_per_minute: float = 0.01) -> None:
        self.seconds_per_minute = seconds_per_minute

    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        needed = duration_seconds / 60.0 * self.COST[fmt] * self.seconds_per_minute
        if needed > budget_seconds:
            raise StageBudgetError(
                f"stage {fmt} needs {needed:.1f} s, over its budget of {budget_seconds:.0f} s"
            )
        time.sleep(needed)
        return f"{source_uri.rsplit('.', 1)[0]}-{fmt}.mp4"


_encoder: Encoder = SimulatedEncoder()


def set_encoder(encoder: Encoder) -> Encoder:
    """Plug in a real encoder; returns the previous one."""
    global _encoder
    previous, _encoder = _encoder, encoder
    return previous


@job(
    timeout_seconds=300,
    max_attempts=3,
    max_concurrency=5,
    memory_mb=1024,
    idempotency_key=("video_id", "formats"),
    # encodes take minutes: a backlog of 100 is already hours of work
    alarms=Alarms(queue_depth_above=100, oldest_message_age_seconds_above=3600),
)
def transcode_video(payload: TranscodeVideo, ctx: JobContext) -> dict[str, object]:
    outputs: dict[str, str] = {}
    for done, fmt in enumerate(payload.formats):
        budget = STAGE_BUDGET_SECONDS[fmt]
        left = ctx.remaining_seconds()
        if left < budget:
            raise StageBudgetError(f"stage {fmt} needs up to {budget:.0f} s, {left:.0f} s are left; retrying")
        ctx.logger.info("stage started", extra={"stage": fmt})
        outputs[fmt] = _encoder.encode(payload.source_uri, fmt, payload.duration_seconds, budget)
        ctx.progress(100.0 * (done + 1) / len(payload.formats), f"{fmt} done")
    return {"video_id": payload.video_id, "outputs": outputs}


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
    """Simulated: names `per_format` thumbnails for each output of the transcode before it."""
    outputs = _previous_result(ctx, "make_thumbnails").get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise PermanentError("the transcode before this step returned no outputs")
    thumbnails = {
        fmt: [f"{str(uri).rsplit('.', 1)[0]}-thumb{i}.jpg" for i in range(1, payload.per_format + 1)]
        for fmt, uri in sorted(outputs.items())
    }
    ctx.logger.info("thumbnails made", extra={"video_id": payload.video_id, "formats": sorted(thumbnails)})
    return {"video_id": payload.video_id, "formats": sorted(outputs), "thumbnails": thumbnails}


class NotifyUploader(BaseModel):
    video_id: str = Field(min_length=1, max_length=200)
    uploader_id: str = Field(min_length=1, max_length=200, description="the uploader's user id")


@job(timeout_seconds=30, max_attempts=5)
def notify_uploader(payload: NotifyUploader, ctx: JobContext) -> dict[str, object]:
    """Simulated: logs the notification it would send and returns it."""
    made = _previous_result(ctx, "notify_uploader")
    formats = made.get("formats") or []
    message = f"Your video {payload.video_id} is published in {', '.join(map(str, formats))}."
    ctx.logger.info("uploader notified (simulated)", extra={"video_id": payload.video_id})
    return {"uploader_id": payload.uploader_id, "video_id": payload.video_id, "message": message}


def publication_workflow_id(video_id: str) -> str:
    return f"video-{video_id}"


def publish_video(
    video_id: str,
    source_uri: str,
    *,
    uploader_id: str,
    formats: list[Format] | None = None,
    duration_seconds: float = 60.0,
    config: StackConfig | None = None,
) -> str:
    """Transcode, then make thumbnails, then notify the uploader, each once the step before succeeded;
    return the workflow id (`video-<video_id>`; follow it with `get_workflow`). The steps' job ids are
    `video-<video_id>.0.0`, `.1.0` and `.2.0`. Publishing the same video again sends nothing twice.

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
    )
    return chain(
        sig("transcode_video", transcode),
        sig("make_thumbnails", MakeThumbnails(video_id=video_id)),
        sig("notify_uploader", NotifyUploader(video_id=video_id, uploader_id=uploader_id)),
    ).enqueue(workflow_id=publication_workflow_id(video_id), config=config)
