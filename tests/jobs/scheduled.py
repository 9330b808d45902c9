"""`digest`: a cron job, 09:00 New York time, that enqueues one `deliver` per recipient."""

from __future__ import annotations

from pydantic import BaseModel, Field

from lambdajobs import JobContext, cron, enqueue_many
from tests.jobs.messages import Message


class Digest(BaseModel):
    recipients: list[str] = Field(min_length=1)


@cron(
    "cron(0 9 * * ? *)",
    timezone="America/New_York",
    payload={"recipients": ["ops@example.com"]},
    enqueues=("deliver",),
    max_attempts=3,
)
def digest(payload: Digest, ctx: JobContext) -> dict[str, int]:
    messages = [Message(to=r, subject="digest", body="nothing new") for r in payload.recipients]
    results = enqueue_many("deliver", messages)
    if results.failed:
        raise RuntimeError(f"{len(results.failed)} messages were not enqueued; retrying")
    return {"messages": len(messages)}
