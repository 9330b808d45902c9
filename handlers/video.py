"""Video jobs: `transcode_video` encodes one source into several formats, one stage per format,
reporting progress after each stage and keeping each stage within its time budget."""

from __future__ import annotations

import time
from typing import Literal, Protocol

from pydantic import BaseModel, Field

from lambdajobs import Alarms, JobContext, job

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
