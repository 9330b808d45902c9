"""`lambdajobs pause` and `resume` on the local stack: the worker's event source mappings disabled
and enabled (lambdajobs.queue_control), and the pause shown by `lambdajobs queues`."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from lambdajobs.cli import app
from lambdajobs.local.stack import LocalStack
from lambdajobs.queue_control import mappings
from lambdajobs.runtime.config import using
from tests.functional.conftest import JOBS_PACKAGE


@pytest.fixture
def local(tmp_path) -> Iterator[LocalStack]:
    with LocalStack(
        JOBS_PACKAGE, stack="cli-pause", port=0, log_file=tmp_path / "worker.log", wait_seconds=1
    ) as stack:
        stack.start_workers(scheduler=False)
        with using(stack.config):
            yield stack


def run(local: LocalStack, *args: str):
    return CliRunner().invoke(app, list(args), env={**local.environment(), "COLUMNS": "200"})


def spec_of(local: LocalStack, name: str):
    return next(s for s in local.specs if s.name == name)


def test_pause_and_resume_a_jobs_queue_and_queues_shows_it(local):
    # WHEN the operator pauses deliver
    paused = run(local, "pause", "deliver")
    # THEN its mapping is disabled, and the command says how to start it again
    assert paused.exit_code == 0, paused.output
    assert "paused deliver: deliver (1 event source mapping)" in paused.output
    assert "lambdajobs resume deliver" in paused.output
    assert [m.paused for m in mappings(spec_of(local, "deliver"), config=local.config)] == [True]
    # AND `queues` shows it paused, in the table and in its JSON
    shown = run(local, "queues")
    assert shown.exit_code == 0, shown.output
    [row] = [line for line in shown.output.splitlines() if line.strip().startswith("deliver")]
    assert "paused" in row, shown.output
    document = json.loads(run(local, "queues", "--json").stdout)
    [deliver] = [j for j in document["jobs"] if j["job"] == "deliver"]
    assert deliver["queues"][0]["paused"] is True and deliver["queues"][0]["paused_since"]
    [encode] = [j for j in document["jobs"] if j["job"] == "encode"]
    assert encode["queues"][0]["paused"] is False
    # WHEN it is resumed THEN the mapping is enabled again
    resumed = run(local, "resume", "deliver", "--json")
    assert resumed.exit_code == 0, resumed.output
    assert [m["enabled"] for m in json.loads(resumed.stdout)["mappings"]] == [True]
    assert [m.paused for m in mappings(spec_of(local, "deliver"), config=local.config)] == [False]


def test_pause_of_an_unknown_priority_is_one_line(local):
    failed = run(local, "pause", "deliver", "--priority", "urgent")
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    lines = [line for line in failed.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), failed.output


def test_queues_warns_before_a_paused_queues_messages_reach_its_retention(local, monkeypatch):
    from datetime import timedelta

    from lambdajobs import queue_control
    from lambdajobs.runtime.producer import enqueue
    from tests.jobs.messages import Message

    # GIVEN deliver paused with a message waiting, and a warning window wider than the retention (4
    # days), so the message is already within it
    real = queue_control.retention_warnings
    monkeypatch.setattr(
        queue_control, "retention_warnings", lambda *a, **k: real(*a, **{**k, "within": timedelta(days=5)})
    )
    assert run(local, "pause", "deliver").exit_code == 0
    time.sleep(2)  # a long poll under way when the pause came has ended (wait_seconds=1)
    enqueue("deliver", Message(to="ada@example.com", subject="s", body="b"), config=local.config)
    # WHEN the operator lists the queues THEN a warning on stderr says to resume it, and the JSON has it
    shown = run(local, "queues")
    assert shown.exit_code == 0, shown.output
    assert "warning: deliver is paused and holds 1 message(s): SQS deletes the oldest" in shown.stderr
    document = json.loads(run(local, "queues", "--json").stdout)
    assert [w.split(" is paused")[0] for w in document["retention_warnings"]] == ["deliver"]
