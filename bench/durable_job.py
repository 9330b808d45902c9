"""The durable job the write-unit bench runs (`bench.phases.durable`): a video encoded in 5 formats,
each format a checkpointed step (`ctx.step`) returning a small summary (its format, its object key, its
size), as the seed's `transcode_video` does. `one_per_invocation` makes every step declare a budget as
long as an invocation can hold, so the job continues in a fresh invocation before each step but its
first (4 continuations for 5 steps); without it, the 5 steps run in one invocation. Its declaration is
made on demand, inside the caller's `isolated_registry`."""

from __future__ import annotations

from typing import Any

DURABLE_JOB = "encode_formats"
FORMATS = ("360p", "480p", "720p", "1080p", "4k")
TIMEOUT_SECONDS = 10


def encode(video_id: str, fmt: str) -> dict[str, Any]:
    """A step's work (none: the bench counts writes) and its result, about 80 bytes as JSON."""
    return {"format": fmt, "key": f"videos/{video_id}/{fmt}.mp4", "bytes": 104_857_600}


def declare() -> Any:
    """Declare the durable job; returns its JobSpec."""
    from pydantic import BaseModel

    from lambdajobs import JobContext, job
    from lambdajobs.runtime.worker import deadline_margin_ms

    class Video(BaseModel):
        video_id: str
        one_per_invocation: bool = False

    def encode_formats(payload: Video, ctx: JobContext) -> dict[str, Any]:
        budget = usable if payload.one_per_invocation else None
        done = [
            ctx.step(f"encode-{fmt}", encode, payload.video_id, fmt, budget_seconds=budget) for fmt in FORMATS
        ]
        return {"video_id": payload.video_id, "keys": [d["key"] for d in done]}

    encode_formats.__annotations__ = {"payload": Video, "ctx": JobContext, "return": dict}
    # one job per invocation: a step that fits no invocation but a fresh one waits for one (a job later
    # in a batch would park before its first step)
    spec = job(name=DURABLE_JOB, timeout_seconds=TIMEOUT_SECONDS, max_attempts=3, batch_size=1)(
        encode_formats
    ).spec
    usable = (TIMEOUT_SECONDS * 1000 - deadline_margin_ms(spec)) / 1000
    return spec
