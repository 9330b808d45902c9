"""How the board writes numbers, times and the activity chart (Jinja2 filters and globals)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lambdajobs.ops import age_text, duration_text, until_text

#: What a cell shows for nothing (an en dash).
NOTHING = "\u2013"
#: The activity chart: one bar per minute, this many pixels wide (1 px gap), this tall.
BAR_WIDTH = 2
CHART_HEIGHT = 32


def age(seconds: float | None) -> str:
    """90 -> '90s', 5400 -> '90m', 36000 -> '10.0h', as `lambdajobs queues` writes ages."""
    return age_text(seconds, NOTHING)


def since(moment: datetime | None) -> str:
    """How long ago `moment` was."""
    if moment is None:
        return NOTHING
    return age((datetime.now(UTC) - moment).total_seconds())


def when(moment: datetime | str | None) -> str:
    """A time in UTC, to the second: '2026-11-29 14:03:07Z'."""
    if moment is None or moment == "":
        return NOTHING
    if isinstance(moment, str):
        try:
            parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return moment
        moment = parsed
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z"


def duration(ms: float | None) -> str:
    """How long a durable job's step ran: '350 ms', '12.3 s', '4m 00s' (as `lambdajobs status`)."""
    return duration_text(ms, NOTHING)


def until(moment: str | None) -> str:
    """How far a time (RFC 3339 text: a parked job's wake-up) is from now: 'in 59m', or 'due'."""
    return until_text(moment, nothing=NOTHING)


def local_time(moment: datetime) -> str:
    """A fire time in its own time zone, and in UTC: '2026-11-30 09:00 EST (14:00Z)'."""
    return f"{moment:%Y-%m-%d %H:%M %Z} ({moment.astimezone(UTC):%H:%M}Z)"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class Bar:
    x: int
    ok_y: int
    ok_height: int
    failed_y: int
    failed_height: int
    title: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    succeeded: int
    failed: int
    peak: int
    bar_width: int = BAR_WIDTH


def chart(minutes: list[Any] | None) -> Chart | None:
    """Bars of succeeded (above) and failed (below, at the foot) per minute, scaled to the busiest
    minute; None when there is nothing to draw."""
    if not minutes:
        return None
    peak = max((m.succeeded + m.failed for m in minutes), default=0)
    scale = (CHART_HEIGHT - 2) / peak if peak else 0.0
    bars = []
    for i, m in enumerate(minutes):
        failed_h = round(m.failed * scale) if m.failed else 0
        ok_h = round(m.succeeded * scale) if m.succeeded else 0
        # a minute with any work shows at least one pixel of it
        failed_h = max(failed_h, 1 if m.failed else 0)
        ok_h = max(ok_h, 1 if m.succeeded else 0)
        bars.append(
            Bar(
                x=i * (BAR_WIDTH + 1),
                ok_y=CHART_HEIGHT - failed_h - ok_h,
                ok_height=ok_h,
                failed_y=CHART_HEIGHT - failed_h,
                failed_height=failed_h,
                title=f"{m.at.astimezone(UTC):%H:%M}Z: {m.succeeded} succeeded, {m.failed} failed",
            )
        )
    return Chart(
        width=len(minutes) * (BAR_WIDTH + 1),
        height=CHART_HEIGHT,
        bars=bars,
        succeeded=sum(m.succeeded for m in minutes),
        failed=sum(m.failed for m in minutes),
        peak=peak,
    )
