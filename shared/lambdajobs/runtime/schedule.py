"""Schedules: AWS `cron(...)` and `rate(...)` expressions in an IANA time zone, and their fire times.

Validation uses maintained parsers: `aws-cron-expression-validator` (EventBridge's cron dialect: six
fields, `?` in day-of-month or day-of-week, L, W, #) and `pyawscron` to iterate fire times. Both work
on wall-clock times; the time zone rules are applied here the way EventBridge Scheduler applies them:
at spring-forward a local time that does not exist is skipped, at fall-back a repeated time runs once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lambdajobs.runtime.errors import ScheduleError

_CRON = re.compile(r"^cron\((?P<fields>[^()]+)\)$")
_RATE = re.compile(r"^rate\((?P<value>\d+) (?P<unit>minutes?|hours?|days?)\)$")
_UNIT_SECONDS = {"minute": 60, "hour": 3600, "day": 86400}
MAX_FLEXIBLE_WINDOW_MINUTES = 1440  # EventBridge Scheduler: 1 to 1,440 minutes


@dataclass(frozen=True)
class Schedule:
    """A recurring schedule: an EventBridge Scheduler expression and the time zone it runs in."""

    expression: str
    timezone: str = "UTC"
    #: Let Scheduler fire up to this many minutes late (spreads load); None fires on time.
    flexible_window_minutes: int | None = None

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def is_rate(self) -> bool:
        return self.expression.startswith("rate(")

    def rate_seconds(self) -> int:
        match = _RATE.match(self.expression)
        assert match, self.expression
        return int(match["value"]) * _UNIT_SECONDS[match["unit"].rstrip("s")]

    def next_fire_times(self, count: int, after: datetime | None = None) -> list[datetime]:
        """The next `count` fire times strictly after `after` (default: now), aware, in the schedule's
        time zone. A rate schedule counts from `after` (Scheduler counts from the schedule's start)."""
        start = (after or datetime.now(UTC)).astimezone(self.zone)
        if self.is_rate:
            step = timedelta(seconds=self.rate_seconds())
            return [(start + step * (i + 1)).astimezone(self.zone) for i in range(count)]
        return _cron_times(self.expression, self.zone, start, count)


def _cron_fields(expression: str) -> str:
    match = _CRON.match(expression.strip())
    if not match:
        raise ScheduleError(
            f"schedule {expression!r} is not an EventBridge expression; use "
            f"'cron(min hour day month weekday year)' such as 'cron(0 9 * * ? *)', or 'rate(5 minutes)'."
        )
    return match["fields"].strip()


def _exists(wall: datetime, zone: ZoneInfo) -> bool:
    """Whether a wall-clock time exists in `zone` (it does not inside a spring-forward gap)."""
    aware = wall.replace(tzinfo=zone)
    return aware.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall


def _cron_times(expression: str, zone: ZoneInfo, start: datetime, count: int) -> list[datetime]:
    from pyawscron import AWSCron

    fields = _cron_fields(expression)
    # pyawscron iterates in "UTC"; we feed it wall-clock times, so its answers are wall-clock times.
    cron = AWSCron(fields)
    cursor = start.replace(tzinfo=UTC, fold=0)
    found: list[datetime] = []
    for _ in range(count * 50 + 1000):  # bounded: a few skipped gap times never stall the loop
        nxt = cron.occurrence(cursor).next()
        if nxt is None:
            break
        cursor = nxt
        wall = nxt.replace(tzinfo=None)
        if not _exists(wall, zone):
            continue  # spring-forward: this local time does not exist that day; Scheduler skips it
        aware = wall.replace(tzinfo=zone, fold=0)  # fall-back: the first of the two, once
        if aware > start:
            found.append(aware)
            if len(found) == count:
                break
    return found


def parse_schedule(
    expression: str,
    timezone: str = "UTC",
    flexible_window_minutes: int | None = None,
    *,
    check_cron: bool = True,
) -> Schedule:
    """Validate an expression and time zone; raises ScheduleError with what to fix.

    `check_cron=False` skips checking a cron expression's fields (aws-cron-expression-validator
    compiles its patterns: about 40 ms), for a deployed function whose declarations synthesis already
    checked; the form `cron(...)`, rates, the time zone and the window are still checked."""
    if not isinstance(expression, str):
        raise ScheduleError(f"schedule expression must be a string, got {expression!r}")
    expression = expression.strip()
    _check_timezone(timezone)
    if expression.startswith("rate("):
        _check_rate(expression)
    else:
        _check_cron(expression, check_fields=check_cron)
    _check_flexible_window(flexible_window_minutes)
    return Schedule(expression, timezone, flexible_window_minutes)


def _check_timezone(timezone: str) -> None:
    try:
        ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ScheduleError(
            f"time zone {timezone!r} is unknown; use an IANA name such as 'America/New_York' or 'UTC'."
        ) from None


def _check_rate(expression: str) -> None:
    match = _RATE.match(expression)
    if not match or int(match["value"]) < 1:
        raise ScheduleError(
            f"schedule {expression!r} is not a valid rate; use 'rate(<n> minutes|hours|days)', n >= 1."
        )
    if (int(match["value"]) == 1) != (not match["unit"].endswith("s")):
        raise ScheduleError(
            f"schedule {expression!r}: AWS wants the singular unit for 1 and the plural otherwise "
            f"('rate(1 hour)', 'rate(2 hours)')."
        )


def _check_cron(expression: str, *, check_fields: bool) -> None:
    """The form `cron(...)` always; its fields too unless `check_fields` is False (see parse_schedule)."""
    fields = _cron_fields(expression)
    if not check_fields:
        return
    from aws_cron_expression_validator.validator import AWSCronExpressionValidator

    try:
        AWSCronExpressionValidator.validate(fields)
    except ValueError as exc:
        raise ScheduleError(f"schedule {expression!r} is not a valid AWS cron expression: {exc}") from None


def _check_flexible_window(minutes: int | None) -> None:
    if minutes is not None and not (isinstance(minutes, int) and 1 <= minutes <= MAX_FLEXIBLE_WINDOW_MINUTES):
        raise ScheduleError(
            f"flexible_window_minutes={minutes!r}; use 1 to {MAX_FLEXIBLE_WINDOW_MINUTES}, or None."
        )
