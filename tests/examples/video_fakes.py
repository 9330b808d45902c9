"""An encoder for transcode_video on a TestStack's clock: each encode "takes" its simulated time by
moving the clock, so a long video's formats fill invocations without the test waiting; it records
every call, and can crash an invocation (`Crash`) or fail (`EncoderDown`) on a format once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from handlers.video import SimulatedEncoder


class Crash(BaseException):
    """The invocation dies mid-encode (`crashing` turns it into what Lambda sees): nothing after it
    runs, not even the worker's error handling."""


class EncoderDown(Exception):
    """The encoding service failed (retryable): the attempt fails like any error."""


@dataclass
class ClockedEncoder:
    """Moves the clock by `seconds_per_minute` per minute of video times the format's cost (720p 1,
    1080p 2, 4k 4): an hour of video takes 1, 2 and 4 minutes."""

    clock: Any
    seconds_per_minute: float = 1.0
    #: Every call (format), the ones that crashed or failed included.
    calls: list[str] = field(default_factory=list)
    #: Formats encoded to the end.
    encoded: list[str] = field(default_factory=list)
    #: Format -> what happens once, on its next call ("crash" or "fail").
    once: dict[str, str] = field(default_factory=dict)

    def encode(self, source_uri: str, fmt: str, duration_seconds: float, budget_seconds: float) -> str:
        self.calls.append(fmt)
        seconds = duration_seconds / 60.0 * SimulatedEncoder.COST[fmt] * self.seconds_per_minute
        assert seconds <= budget_seconds, f"{fmt}: {seconds} s over its budget of {budget_seconds} s"
        self.clock.advance(seconds / 2)
        fault = self.once.pop(fmt, None)
        if fault == "crash":
            raise Crash(f"the invocation died encoding {fmt}")
        if fault == "fail":
            raise EncoderDown(f"the encoding service failed on {fmt}")
        self.clock.advance(seconds / 2)
        self.encoded.append(fmt)
        return f"{source_uri.rsplit('.', 1)[0]}-{fmt}.mp4"

    def counts(self) -> tuple[Counter[str], Counter[str]]:
        """(calls, encodes done) by format."""
        return Counter(self.calls), Counter(self.encoded)


def crashing(handle: Callable[..., Any]) -> Callable[..., Any]:
    """The worker's handler, with a `Crash` turned into what Lambda sees: the invocation failed."""

    def handler(event: dict[str, Any], context: Any) -> Any:
        try:
            return handle(event, context)
        except Crash as crash:
            raise RuntimeError(f"the invocation crashed: {crash}") from None

    return handler


def run_transcode(stack: Any, job_id: str, *, runner: Any = None, rounds: int = 30) -> int:
    """Deliver transcode_video on `stack` (clock=True) until `job_id` is done or waits for a signal,
    moving the clock past each continuation, retry and crash; returns the deliveries that ran it."""
    runner = runner or stack.runner("transcode_video")
    invocations = 0
    for _ in range(rounds):
        if runner.attempt() is not None:
            invocations += 1
        status = stack.status(job_id)
        if status.done or status.state == "waiting_signal":
            return invocations
        if status.state == "sleeping":  # a continuation: its copy is due a second later
            stack.clock.advance_past_wake()
        elif status.state == "retrying":
            stack.clock.advance_past_backoff()
        else:  # a crash: its message comes back after the visibility timeout
            stack.clock.advance(runner.spec.visibility_timeout_seconds + 1)
    raise AssertionError(f"{job_id} still {stack.status(job_id).state} after {rounds} rounds")
