"""`encode`: one stage per format, progress after each, and a stage starts only if its time budget
fits in what is left of the invocation (else the job is retried in a fresh one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, Field

from lambdajobs import JobContext, job

Format = Literal["small", "medium", "large"]
ALL_FORMATS: tuple[Format, ...] = ("small", "medium", "large")

#: Longest a stage may take, in seconds; together (90 s) they fit in the job's 120 s timeout.
STAGE_BUDGET_SECONDS: dict[str, float] = {"small": 10.0, "medium": 20.0, "large": 60.0}


class Clip(BaseModel):
    video_id: str = Field(min_length=1)
    source_uri: str = Field(min_length=1)
    formats: list[Format] = Field(default_factory=lambda: list(ALL_FORMATS), min_length=1)


class OverBudgetError(Exception):
    """A stage does not fit in the time left (retryable: the next attempt gets a fresh invocation)."""


#: Encodes one format of a source and returns the output's URI.
Encoder = Callable[[str, str], str]


def rename_encoder(source_uri: str, fmt: str) -> str:
    """The default encoder: no work, just the output's name."""
    return f"{source_uri.rsplit('.', 1)[0]}-{fmt}.mp4"


_encoder: Encoder = rename_encoder


def set_encoder(encoder: Encoder) -> Encoder:
    """Plug in an encoder; returns the previous one."""
    global _encoder
    previous, _encoder = _encoder, encoder
    return previous


@job(timeout_seconds=120, max_attempts=3, idempotency_key=("video_id", "formats"))
def encode(payload: Clip, ctx: JobContext) -> dict[str, object]:
    outputs: dict[str, str] = {}
    for done, fmt in enumerate(payload.formats):
        budget, left = STAGE_BUDGET_SECONDS[fmt], ctx.remaining_seconds()
        if left < budget:
            raise OverBudgetError(f"stage {fmt} needs up to {budget:.0f} s, {left:.0f} s are left")
        outputs[fmt] = _encoder(payload.source_uri, fmt)
        ctx.progress(100.0 * (done + 1) / len(payload.formats), f"{fmt} done")
    return {"video_id": payload.video_id, "outputs": outputs}
