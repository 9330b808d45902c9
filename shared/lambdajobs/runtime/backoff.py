"""Retry delays: exponential backoff with jitter, applied through the message's visibility timeout.

SQS and Lambda retry a failed message only after its visibility timeout (a fixed delay, 6 x the
function timeout here). The worker instead sets the failed message's visibility timeout to the delay
chosen for its attempt, so retries start soon and spread out as failures repeat.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

#: SQS maximum visibility timeout: no delay can be longer.
MAX_DELAY_SECONDS = 12 * 3600

Jitter = Literal["full", "equal", "none"]


@dataclass(frozen=True)
class Backoff:
    """Delay before attempt n+1 after attempt n failed: `min(max_seconds, base_seconds * 2**(n-1))`,
    then jittered. `full` (default) picks uniformly in [0, delay] (AWS's "full jitter": spreads a burst
    of failures best); `equal` in [delay/2, delay]; `none` uses the delay itself.

    Defaults suit a third-party API: 10 s, 20 s, 40 s, ... up to 10 minutes.
    """

    base_seconds: float = 10.0
    max_seconds: float = 600.0
    jitter: Jitter = "full"

    @classmethod
    def fixed(cls, seconds: float) -> Backoff:
        """The same delay before every retry."""
        return cls(base_seconds=seconds, max_seconds=seconds, jitter="none")

    def ceiling(self, attempt: int) -> float:
        """The delay before jitter for a failure on `attempt` (1-based)."""
        exponent = min(max(attempt, 1) - 1, 62)  # 2**62 s is far beyond any cap; avoids huge ints
        return float(min(self.max_seconds, self.base_seconds * 2**exponent, MAX_DELAY_SECONDS))

    def delay(self, attempt: int, rng: random.Random | None = None) -> int:
        """Whole seconds to wait after a failure on `attempt` (SQS visibility timeouts are integers)."""
        top = self.ceiling(attempt)
        if self.jitter == "none":
            return round(top)
        draw = (rng or random).random()
        low = top / 2 if self.jitter == "equal" else 0.0
        return round(low + (top - low) * draw)

    def check(self, job: str) -> str | None:
        """A problem with this backoff for `job`, or None."""
        if not 0 <= self.base_seconds <= self.max_seconds <= MAX_DELAY_SECONDS:
            return (
                f"job '{job}': backoff needs 0 <= base_seconds ({self.base_seconds}) <= max_seconds "
                f"({self.max_seconds}) <= {MAX_DELAY_SECONDS} (the SQS visibility timeout maximum)."
            )
        if self.jitter not in ("full", "equal", "none"):
            return f"job '{job}': backoff jitter={self.jitter!r}; use 'full', 'equal' or 'none'."
        return None
