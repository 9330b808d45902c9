"""Pause and resume a job's queue on the local stack: the same Lambda API calls as on AWS
(`lambdajobs.queue_control`), honoured by the emulated event source mappings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.queue_control import (
    Mapping,
    NoMappingError,
    mappings,
    pause,
    resume,
    retention_warning,
    warning_for,
)
from lambdajobs.runtime.config import using
from lambdajobs.runtime.errors import UnknownPriorityError
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import wait_for
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry


class Note(BaseModel):
    n: int


def noted(payload: Note) -> int:
    return payload.n


@pytest.fixture
def local(tmp_path):
    with isolated_registry():
        plain = job(name="plain", max_attempts=3)(noted).spec
        ranked = job(name="ranked", priorities=("high", "low"))(noted).spec
        with LocalStack(specs=[plain, ranked], stack="qc", port=0, log_file=tmp_path / "worker.log") as stack:
            stack.start_workers(scheduler=False)
            with using(stack.config):
                yield stack


def spec_of(local: LocalStack, name: str):
    return next(s for s in local.specs if s.name == name)


def test_each_queue_of_a_job_has_one_enabled_mapping_listed_by_the_lambda_api(local):
    found = mappings(spec_of(local, "ranked"), config=local.config)
    assert [(m.queue_key, m.enabled, m.state) for m in found] == [
        ("ranked@high", True, "Enabled"),
        ("ranked", True, "Enabled"),
    ]
    assert all(m.uuid == local.mapping_uuids[m.queue_key] for m in found)
    assert all(m.since is not None and m.since.tzinfo is not None for m in found)


def test_a_paused_queue_keeps_its_messages_and_resume_delivers_them(local):
    spec = spec_of(local, "plain")
    [paused] = pause(spec, config=local.config)
    assert (paused.enabled, paused.state) == (False, "Disabled")
    # its poller holds off once the receive it had under way (a long poll) is over, as Lambda's does
    assert local.mappings["plain"].holding.wait(5)
    ids = [enqueue("plain", Note(n=i)) for i in range(3)]
    # nothing receives them: they stay in the queue, unreceived
    assert not wait_until(lambda: local.mappings["plain"].stats.records > 0, 3)
    health = local.health("plain")
    assert (health.depth, health.in_flight) == (3, 0)
    [resumed] = resume(spec, config=local.config)
    assert (resumed.enabled, resumed.state) == (True, "Enabled")
    for job_id in ids:
        assert wait_for(job_id, timeout_seconds=20, poll_seconds=0.1).state == "succeeded"
    assert local.health("plain").depth == 0


def test_pausing_one_priority_leaves_the_other_levels_polling(local):
    spec = spec_of(local, "ranked")
    [paused] = pause(spec, "high", config=local.config)
    assert paused.queue_key == "ranked@high"
    states = {m.queue_key: m.enabled for m in mappings(spec, config=local.config)}
    assert states == {"ranked@high": False, "ranked": True}
    assert local.mappings["ranked@high"].holding.wait(5)
    job_id = enqueue("ranked", Note(n=1), priority="low")
    assert wait_for(job_id, timeout_seconds=20, poll_seconds=0.1).state == "succeeded"
    enqueue("ranked", Note(n=2), priority="high")
    assert not wait_until(lambda: local.mappings["ranked@high"].stats.records > 0, 2)
    with pytest.raises(UnknownPriorityError):
        pause(spec, "urgent", config=local.config)


def test_a_second_pause_changes_nothing_and_keeps_when_it_started(local):
    spec = spec_of(local, "plain")
    [first] = pause(spec, config=local.config)
    [again] = pause(spec, config=local.config)
    assert again.since == first.since and not again.enabled


def test_a_job_without_started_workers_has_no_mapping_to_pause(tmp_path):
    with isolated_registry():
        plain = job(name="plain")(noted).spec
        with LocalStack(specs=[plain], stack="qc2", port=0) as stack:
            assert mappings(plain, config=stack.config) == []
            with pytest.raises(NoMappingError, match="no event source mapping"):
                pause(plain, config=stack.config)


def test_a_paused_queue_with_messages_warns_before_its_retention(local):
    spec = spec_of(local, "plain")
    pause(spec, config=local.config)
    assert local.mappings["plain"].holding.wait(5)
    assert retention_warning(spec, config=local.config) is None  # empty: nothing to lose
    enqueue("plain", Note(n=1))
    assert retention_warning(spec, config=local.config) is None  # 4 days left
    later = datetime.now(UTC) + timedelta(days=3, hours=12)
    warning = retention_warning(spec, config=local.config, now=later)
    assert warning is not None and warning.queue_key == "plain" and warning.depth == 1
    assert timedelta(hours=11) < warning.expires_at - later <= timedelta(hours=12)
    assert "resume it" in warning.describe(later)


def test_warning_for_uses_the_oldest_message_when_it_is_older_than_the_pause():
    now = datetime(2026, 1, 5, tzinfo=UTC)
    paused = Mapping("job", "u", False, "Disabled", now - timedelta(hours=1))
    kept = warning_for(paused, depth=5, oldest_age_seconds=3.5 * 86400, now=now)
    assert kept is not None and kept.expires_at == now + timedelta(hours=12)
    assert warning_for(paused, depth=5, oldest_age_seconds=None, now=now) is None
    running = Mapping("job", "u", True, "Enabled", now - timedelta(days=4))
    assert warning_for(running, depth=5, oldest_age_seconds=3.9 * 86400, now=now) is None
