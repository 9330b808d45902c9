"""Schedules: validation at declaration, fire times in a time zone, daylight saving."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import DeclarationError, cron
from lambdajobs.runtime.schedule import ScheduleError, parse_schedule
from lambdajobs.testing import isolated_registry

NY = ZoneInfo("America/New_York")


class Empty(BaseModel):
    pass


def local(times):
    return [t.astimezone(NY).strftime("%Y-%m-%d %H:%M") for t in times]


def test_daily_at_nine_new_york_follows_the_utc_offset():
    schedule = parse_schedule("cron(0 9 * * ? *)", "America/New_York")
    winter = schedule.next_fire_times(1, datetime(2026, 12, 1, 12, tzinfo=UTC))
    summer = schedule.next_fire_times(1, datetime(2027, 7, 1, 12, tzinfo=UTC))
    assert [t.astimezone(UTC).hour for t in winter + summer] == [14, 13]
    assert local(winter + summer) == ["2026-12-01 09:00", "2027-07-01 09:00"]


def test_spring_forward_skips_the_missing_local_time_that_day():
    # GIVEN 02:30 every day; on 2027-03-14 New York jumps from 02:00 to 03:00
    schedule = parse_schedule("cron(30 2 * * ? *)", "America/New_York")
    # WHEN the fire times around that night are listed
    times = schedule.next_fire_times(3, datetime(2027, 3, 13, 12, tzinfo=UTC))
    # THEN the 14th has no run
    assert local(times) == ["2027-03-15 02:30", "2027-03-16 02:30", "2027-03-17 02:30"]


def test_fall_back_runs_a_repeated_time_once():
    # GIVEN 01:30 every day; on 2026-11-01 New York repeats 01:00 to 02:00
    schedule = parse_schedule("cron(30 1 * * ? *)", "America/New_York")
    times = schedule.next_fire_times(3, datetime(2026, 10, 31, 12, tzinfo=UTC))
    # THEN 01:30 runs once on the 1st (at its first occurrence, EDT), not twice
    assert local(times) == ["2026-11-01 01:30", "2026-11-02 01:30", "2026-11-03 01:30"]
    assert times[0].astimezone(UTC) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_every_half_hour_runs_each_local_slot_once_through_fall_back():
    schedule = parse_schedule("cron(0/30 * * * ? *)", "America/New_York")
    times = schedule.next_fire_times(4, datetime(2026, 11, 1, 4, 45, tzinfo=UTC))
    assert local(times) == ["2026-11-01 01:00", "2026-11-01 01:30", "2026-11-01 02:00", "2026-11-01 02:30"]


def test_rate_counts_from_the_given_time():
    schedule = parse_schedule("rate(15 minutes)")
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert [t.astimezone(UTC).strftime("%H:%M") for t in schedule.next_fire_times(3, start)] == [
        "12:15",
        "12:30",
        "12:45",
    ]


@pytest.mark.parametrize(
    "expression",
    [
        "cron(0 9 * * * *)",  # AWS needs ? in day-of-month or day-of-week
        "cron(61 * * * ? *)",
        "cron(0 9 * * ?)",  # five fields
        "0 9 * * ? *",  # not wrapped in cron(...)
        "rate(0 minutes)",
        "rate(1 minutes)",  # AWS wants the singular for 1
        "rate(5 weeks)",
        "daily",
    ],
)
def test_invalid_expressions_fail_at_declaration(expression):
    with isolated_registry(), pytest.raises(DeclarationError, match="job 'report'"):

        @cron(expression)
        def report(payload: Empty) -> None: ...


def test_unknown_time_zone_fails_at_declaration():
    with isolated_registry(), pytest.raises(DeclarationError, match="IANA"):

        @cron("cron(0 9 * * ? *)", timezone="Eastern")
        def report(payload: Empty) -> None: ...


class Needs(BaseModel):
    recipients: list[str]


def test_schedule_payload_is_validated_at_declaration():
    with isolated_registry(), pytest.raises(DeclarationError, match="recipients"):

        @cron("cron(0 9 * * ? *)")
        def report(payload: Needs) -> None: ...


def test_flexible_window_bounds():
    assert parse_schedule("rate(1 hour)", flexible_window_minutes=15).flexible_window_minutes == 15
    for bad in (0, 1441, 2.5):
        with pytest.raises(ScheduleError, match="flexible_window_minutes"):
            parse_schedule("rate(1 hour)", flexible_window_minutes=bad)


def test_cron_declaration_records_schedule_and_envelope():
    with isolated_registry():

        @cron("cron(0 9 * * ? *)", timezone="America/New_York", max_attempts=3)
        def report(payload: Empty) -> None: ...

        spec = report.spec
    assert (spec.schedule.expression, spec.schedule.timezone, spec.max_attempts) == (
        "cron(0 9 * * ? *)",
        "America/New_York",
        3,
    )
    envelope = spec.scheduled_envelope("2026-11-30T14:00:00Z")
    assert (
        envelope["id"] == "report@2026-11-30T14:00:00Z" and envelope["scheduled_at"] == "2026-11-30T14:00:00Z"
    )
