"""The local stack keeps what it holds across restarts when given a `state_dir` (`lambdajobs dev`
gives it build/local/), and starts empty when asked, or when its state file cannot be trusted.

The 200-job test counts runs from the job's own side effect (a counter the job increments), not
from the stack's bookkeeping: a job lost in the restart never reaches its count, and a job restored
twice, or restored after it ran, counts two."""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs.local import persist
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime import Backoff, JobContext
from lambdajobs.runtime.config import using
from lambdajobs.runtime.envelope import encode
from lambdajobs.runtime.producer import enqueue, enqueue_many
from lambdajobs.runtime.records import get_statuses
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry

JOBS = 200
FAIL_ONCE = 10  # the first ten fail on their first attempt, then wait out a long backoff (in flight)
DELAYED = 30  # the last thirty are sent with a delay still running when the stack stops
DELAY_SECONDS = 10  # a margin over the first stack's run (about 3 s here, loaded): still delayed at its stop


class Item(BaseModel):
    n: int


class Runs:
    """The job's side effect: per job id, the attempt of every successful run."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.succeeded: defaultdict[str, list[int]] = defaultdict(list)
        self.failed: Counter[str] = Counter()

    def total(self) -> int:
        with self.lock:
            return sum(len(v) for v in self.succeeded.values())


RUNS = Runs()


def counted(payload: Item, ctx: JobContext) -> int:
    if payload.n < FAIL_ONCE and ctx.attempt == 1:
        with RUNS.lock:
            RUNS.failed[ctx.job_id] += 1
        raise RuntimeError("the first attempt of this one fails")
    time.sleep(0.01)  # a little work, so that a stop finds some of them done and most of them not
    with RUNS.lock:
        RUNS.succeeded[ctx.job_id].append(ctx.attempt)
    return payload.n


@pytest.fixture
def specs():
    with isolated_registry():
        spec = job(
            name="counted",
            batch_size=10,
            max_concurrency=2,
            max_attempts=3,
            backoff=Backoff.fixed(600),  # a retry waits in flight far beyond the test
        )(counted).spec
        yield [spec]


def stack(specs, state_dir: Path, **options) -> LocalStack:
    return LocalStack(
        specs=specs, stack="keep", port=0, log_file=state_dir / "worker.log", state_dir=state_dir, **options
    )


def test_200_jobs_stopped_mid_drain_each_run_exactly_once_after_the_restart(specs, tmp_path):
    global RUNS
    RUNS = Runs()
    ids = [f"job-{n:03d}" for n in range(JOBS)]
    later = datetime.now(UTC) + timedelta(minutes=30)  # beyond SQS delays: a one-time schedule
    # GIVEN a stack that keeps its state, 200 jobs queued (the last 30 delayed) and one scheduled
    with stack(specs, tmp_path) as first:
        with using(first.config):
            now = list(range(JOBS - DELAYED))
            assert enqueue_many("counted", [Item(n=n) for n in now], job_ids=[ids[n] for n in now]).ok
            delayed = list(range(JOBS - DELAYED, JOBS))
            sent = enqueue_many(
                "counted",
                [Item(n=n) for n in delayed],
                job_ids=[ids[n] for n in delayed],
                delay_seconds=DELAY_SECONDS,
            )
            assert sent.ok
            enqueue("counted", Item(n=JOBS), job_id="job-scheduled", run_at=later)
            first.config.client("s3").put_object(
                Bucket=first.provisioned.bucket, Key="kept.txt", Body=b"kept"
            )
        # WHEN it stops mid-drain: some done, the failed ones in flight, most queued, the delayed ones waiting
        first.start_workers()
        assert wait_until(lambda: RUNS.total() >= 40 and len(RUNS.failed) == FAIL_ONCE, 20, 0.02)
    done_before = RUNS.total()
    assert 40 <= done_before < JOBS - DELAYED - FAIL_ONCE, done_before
    assert "Saved" in first.state_notes[-1], first.state_notes

    # THEN a new stack on the same state puts back what was left, delays still running ...
    with stack(specs, tmp_path) as second:
        restored = second.restored
        assert restored is not None, second.state_notes
        assert restored.messages == JOBS - done_before, second.state_notes
        assert restored.in_flight == FAIL_ONCE and restored.schedules == 1 and restored.objects == 1
        health = second.health("counted")
        assert health.delayed == DELAYED and health.in_flight == 0, health
        # ... and draining it runs every job exactly once, the scheduled one included when it comes due
        second.start_workers()
        assert second.scheduler is not None
        second.scheduler.run_due(later + timedelta(seconds=1))
        assert wait_until(lambda: RUNS.total() >= JOBS + 1, 30, 0.05), f"{RUNS.total()} of {JOBS + 1} ran"
        assert wait_until(lambda: _drained(second), 10, 0.1)
        runs = dict(RUNS.succeeded)
        assert set(runs) == {*ids, "job-scheduled"}
        assert {job_id: len(r) for job_id, r in runs.items() if len(r) != 1} == {}
        # a failed job came back with its receive count kept: its second run is attempt 2
        assert {runs[ids[n]][0] for n in range(FAIL_ONCE)} == {2}
        statuses = get_statuses([*ids, "job-scheduled"], config=second.config)
        assert {s.state for s in statuses.values()} == {"succeeded"}  # the table came back too
        body = second.config.client("s3").get_object(Bucket=second.provisioned.bucket, Key="kept.txt")["Body"]
        assert body.read() == b"kept"


def _drained(local: LocalStack) -> bool:
    health = local.health("counted")
    return health.depth == 0 and health.in_flight == 0 and health.delayed == 0


def saved_state(stack: str, queues: dict[str, list[str]]) -> dict[str, Any]:
    """A state file as a stack of version 1 writes it, with these message bodies queued."""
    return {
        "format": persist.FORMAT,
        "version": persist.VERSION,
        "stack": stack,
        "saved_at": "2026-01-01T00:00:00Z",
        "queues": {
            name: [{"id": str(uuid.uuid4()), "body": body} for body in bodies]
            for name, bodies in queues.items()
        },
    }


def test_a_fresh_start_is_empty_and_keeps_the_previous_state_aside(specs, tmp_path):
    # GIVEN a saved state with a queued job
    saved = saved_state("keep", {"keep_counted": [encode("counted", {"n": 1}, "queued")]})
    (tmp_path / persist.STATE_FILE).write_text(json.dumps(saved))
    # WHEN the stack starts fresh
    with stack(specs, tmp_path, fresh=True) as fresh:
        # THEN it is empty, says so, and the previous state is kept, not deleted
        assert fresh.health("counted").depth == 0 and fresh.restored is None
        previous = tmp_path / persist.PREVIOUS_FILE
        assert (
            fresh.state_notes[0]
            == f"Starting empty (fresh start); the state saved before is kept in {previous}."
        )
    assert json.loads(previous.read_text()) == saved


def test_a_corrupt_state_file_is_set_aside_with_one_line_and_the_stack_starts_empty(specs, tmp_path):
    # GIVEN a state file cut short (a disk full, an editor)
    (tmp_path / persist.STATE_FILE).write_text('{"format": "lambdajobs-local-state", "ver')
    # WHEN the stack starts on it
    with stack(specs, tmp_path) as local:
        # THEN it starts empty, with one line saying where the file went
        [note] = local.state_notes
        [aside] = tmp_path.glob("state.set-aside-*.json")
        assert note.startswith(
            f"Starting empty: {tmp_path / persist.STATE_FILE} was set aside as {aside.name}"
        )
        assert "unreadable: JSONDecodeError" in note and "\n" not in note
        assert local.health("counted").depth == 0
    assert aside.read_text() == '{"format": "lambdajobs-local-state", "ver'  # kept as it was
    assert local.state_notes[-1].startswith("Saved 0 messages")  # and a good file written in its place


@pytest.mark.parametrize(
    ("header", "why"),
    [
        ({"format": persist.FORMAT, "version": 99, "stack": "keep"}, "another format wrote it"),
        ({"format": persist.FORMAT, "version": persist.VERSION, "stack": "prod"}, "stack 'prod' wrote it"),
        ([1, 2], "unreadable: ValueError"),
    ],
)
def test_a_state_of_another_stack_or_version_is_set_aside(tmp_path, header, why):
    (tmp_path / persist.STATE_FILE).write_text(json.dumps(header))
    state, note = persist.StateFile(tmp_path, "keep").load()
    assert state is None and note is not None and why in note
    assert not (tmp_path / persist.STATE_FILE).exists() and len(list(tmp_path.glob("state.set-aside-*"))) == 1


def test_messages_whose_queue_is_gone_are_not_restored_silently(specs, tmp_path):
    # GIVEN a saved state with a message of a job the package no longer declares
    queues = {
        "keep-gone": [encode("gone", {"n": 1}, "orphan")],
        "keep_counted": [encode("counted", {"n": 2}, "kept")],
    }
    (tmp_path / persist.STATE_FILE).write_text(json.dumps(saved_state("keep", queues)))
    # WHEN the stack starts without it
    with stack(specs, tmp_path) as local:
        # THEN the rest is restored, and one line says what was not and where it is kept
        assert local.health("counted").depth == 1
        [restored, missing] = local.state_notes
        [kept] = tmp_path.glob("state.not-restored-*.json")
        assert restored.startswith("Restored 1 message, ")
        assert missing == f"Not restored: 1 message (no queue keep-gone now); kept in {kept}."
    assert "orphan" in json.loads(kept.read_text())["queues"]["keep-gone"][0]["body"]


def test_a_delay_restores_what_is_left_of_it_by_the_wall_clock_not_what_was_left_at_the_save(specs, tmp_path):
    # GIVEN a state saved a while ago (an idle stack saves nothing more): one delay ended since, one not
    now_ms = time.time() * 1000
    state = saved_state("keep", {"keep_counted": []})
    state["queues"]["keep_counted"] = [
        {
            "id": str(uuid.uuid4()),
            "body": encode("counted", {"n": 1}, "ended"),
            "delay_ms": 600_000,
            "delayed_until_ms": int(now_ms - 1_000),
        },
        {
            "id": str(uuid.uuid4()),
            "body": encode("counted", {"n": 2}, "later"),
            "delay_ms": 600_000,
            "delayed_until_ms": int(now_ms + 300_000),
        },
    ]
    (tmp_path / persist.STATE_FILE).write_text(json.dumps(state))
    # WHEN the stack starts on it
    with stack(specs, tmp_path) as local:
        # THEN the ended delay is visible now, the other waits what is left of it (not 10 minutes again)
        health = local.health("counted")
        assert (health.depth, health.delayed) == (1, 1), health  # depth: the visible ones
        assert local.restored is not None and local.restored.delayed == 1
        saved = local.save()
    assert saved.delayed == 1
    [later] = [
        m
        for m in json.loads((tmp_path / persist.STATE_FILE).read_text())["queues"]["keep_counted"]
        if m["delay_ms"]
    ]
    assert 290_000 < later["delay_ms"] <= 300_000


def test_a_running_stack_saves_periodically_so_a_crash_loses_little(specs, tmp_path):
    # GIVEN a stack that saves every 0.2 s
    with stack(specs, tmp_path, save_every_seconds=0.2) as local:
        state_file = tmp_path / persist.STATE_FILE
        # WHEN a job is queued and nothing stops the stack (a crash would not)
        with using(local.config):
            enqueue("counted", Item(n=1), job_id="before-the-crash")

        def queued() -> list[str]:
            try:
                saved = json.loads(state_file.read_text())
            except (OSError, ValueError):
                return []
            return [m["body"] for m in saved.get("queues", {}).get("keep_counted", [])]

        # THEN the state file holds it within a save or two
        assert wait_until(lambda: any("before-the-crash" in body for body in queued()), 5, 0.05)
        # and an idle stack does not rewrite it
        written = state_file.stat().st_mtime_ns
        time.sleep(0.5)
        assert state_file.stat().st_mtime_ns == written


def test_an_idle_stack_reads_nothing_to_save_and_a_change_is_saved(specs, tmp_path):
    # GIVEN a running stack, its event sources polling, that would save every 0.1 s
    with stack(specs, tmp_path, save_every_seconds=0.1) as local:
        local.start_workers(scheduler=False)
        reads = []
        capture = local._capture
        local._capture = lambda: (reads.append(time.monotonic()), capture())[1]
        time.sleep(0.5)  # what provisioning and the workers' start changed is saved by now
        settled = len(reads)
        # WHEN nothing happens for a while (the pollers' empty receives go on)
        time.sleep(1.5)
        # THEN nothing was read to be saved
        assert len(reads) == settled
        # AND a change is read and saved at the next tick
        with using(local.config):
            enqueue("counted", Item(n=1), job_id="a-change")
        assert wait_until(lambda: len(reads) > settled, 5, 0.05)
        # AND the last save on stop is skipped when nothing changed since
        assert wait_until(lambda: local.changes == local._saved_at_changes, 5, 0.05)
        local.stop_workers()
    assert local.state_notes[-1].startswith("Nothing changed since the last save"), local.state_notes


def test_parameters_you_put_in_the_stacks_ssm_survive_a_restart(specs, tmp_path):
    with stack(specs, tmp_path) as first:
        ssm = first.config.client("ssm")
        ssm.put_parameter(Name="/myapp/feature-flag", Value="on", Type="String")
        ssm.put_parameter(Name="/myapp/secret", Value="s3cr3t", Type="SecureString")
    with stack(specs, tmp_path) as second:
        assert second.restored is not None and second.restored.parameters == 2, second.state_notes
        ssm = second.config.client("ssm")
        assert ssm.get_parameter(Name="/myapp/feature-flag")["Parameter"]["Value"] == "on"
        secret = ssm.get_parameter(Name="/myapp/secret", WithDecryption=True)["Parameter"]
        assert secret["Value"] == "s3cr3t" and secret["Type"] == "SecureString"
        # the stack's own manifest is provisioned, not restored: it names this stack's queues
        manifest = json.loads(ssm.get_parameter(Name="/lambdajobs/keep/stack")["Parameter"]["Value"])
        assert manifest["table"] == second.provisioned.table


def test_a_second_stack_on_the_same_state_folder_is_refused_with_one_line(specs, tmp_path):
    # GIVEN a running stack keeping its state in a folder
    with stack(specs, tmp_path):
        # WHEN a second one starts on that folder THEN it is refused (both would run the same jobs)
        with pytest.raises(persist.StateInUseError) as refused:
            stack(specs, tmp_path).start()
        assert str(refused.value) == (
            f"another local stack (pid {os.getpid()}) keeps its state in {tmp_path}: stop it, or give "
            "this one another folder (lambdajobs dev: a --log-file elsewhere)."
        )
    # and once the first has stopped, the folder is free again
    with stack(specs, tmp_path) as again:
        assert again.state_notes[0].startswith("Restored 0 messages")
