"""`@job(record_mode=...)` at declaration: "full" by default; "light" refuses what needs the job's
record while it runs (a durable job's `max_duration_seconds`) with a one-line error naming the option
and the fix, and accepts every option that works without it (each checked in
tests/functional/test_light_mode.py where it runs)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lambdajobs.runtime.errors import DeclarationError
from lambdajobs.runtime.keyslots import ConcurrencyKey
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry


class Mail(BaseModel):
    to: str
    customer: str = "acme"


def send(payload: Mail) -> None:
    """The job function of every declaration here."""


def declared(**options: object) -> object:
    with isolated_registry():
        return job(**options)(send).spec


def test_the_default_record_mode_is_full():
    assert declared().record_mode == "full"


def test_an_unknown_record_mode_names_the_choices():
    with pytest.raises(DeclarationError) as raised:
        declared(record_mode="lite")
    message = str(raised.value)
    assert "job 'send'" in message and "record_mode='lite'" in message
    assert "'full'" in message and "'light'" in message


def test_light_mode_refuses_a_durable_jobs_max_duration_in_one_line_that_names_the_fix():
    # GIVEN a light job that asks for a durable job's duration (steps, sleeps across invocations)
    with pytest.raises(DeclarationError) as raised:
        declared(record_mode="light", max_duration_seconds=3600)
    # THEN the error names the job, the option and what to do, in one line
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("job 'send': max_duration_seconds=3600")
    assert "record_mode='light'" in message and "remove max_duration_seconds" in message
    assert "record_mode='full'" in message


def test_the_full_mode_keeps_max_duration():
    assert declared(max_duration_seconds=3600).max_duration_seconds == 3600


@pytest.mark.parametrize(
    "options",
    [
        {"max_duration_seconds": 30},  # no longer than one invocation: not durable
        {"rate_limit": "10/second"},
        {"concurrency_key": ConcurrencyKey("customer", 2)},
        {"searchable": ("customer",)},
        {"priorities": ("high", "normal")},
        {"pii_fields": ("to",), "max_attempts": 5, "timeout_seconds": 30},  # the bench's plain job
    ],
    ids=[
        "max_duration_of_one_invocation",
        "rate_limit",
        "concurrency_key",
        "searchable",
        "priorities",
        "plain",
    ],
)
def test_light_mode_accepts_the_options_that_need_no_record_while_the_job_runs(options):
    assert declared(record_mode="light", **options).record_mode == "light"


def test_light_mode_works_for_a_scheduled_job():
    from lambdajobs.runtime.spec import cron

    with isolated_registry():
        spec = cron("rate(1 hour)", payload={"to": "ops"}, record_mode="light")(send).spec
    assert spec.record_mode == "light"
