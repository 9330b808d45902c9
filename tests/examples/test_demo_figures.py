"""How `make demo` measures and judges its durable figures (demo.py): `steps_rerun` counts the runs of
a job's steps in the workers' log (each step's body logs its `step_key` when it starts) beyond the
steps checkpointed, so a step that ran twice shows; `durable_invocations` must be at least 3, and a
step run twice is wrong even when a wait timed out."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import demo
from handlers.video import TranscodeVideo
from lambdajobs.runtime.settings import SERVICE_NAME
from tests.examples.video_fakes import crashing, run_transcode


@contextmanager
def worker_log(path: Path) -> Iterator[None]:
    """The worker's log lines (Powertools' JSON) written to `path` inside the block, as the local
    stack's workers write them to the demo's log file."""
    import lambdajobs.runtime.worker  # noqa: F401  (creates the logger)

    handlers = [h for h in logging.getLogger(SERVICE_NAME).handlers if isinstance(h, logging.StreamHandler)]
    with path.open("a", encoding="utf-8") as stream:
        previous = [h.setStream(stream) for h in handlers]
        try:
            yield
        finally:
            for handler, old in zip(handlers, previous, strict=True):
                if old is not None:
                    handler.setStream(old)


@pytest.mark.parametrize(("crash", "rerun"), [(None, 0), ("1080p", 1)])
def test_steps_rerun_shows_a_step_that_ran_twice(clocked, clocked_encoder, tmp_path, crash, rerun):
    # GIVEN a log that already holds an earlier run's lines (the demo's log file is appended to)
    log = tmp_path / "worker.log"
    log.write_text(json.dumps({"step_key": "video-x.0.0:encode-720p"}) + "\nnot json\n")
    offset = log.stat().st_size
    runner = clocked.runner("transcode_video")
    runner.worker.handle = crashing(runner.worker.handle)  # type: ignore[method-assign]
    if crash:  # the invocation dies mid-encode, before the step's checkpoint: it runs again
        clocked_encoder.once[crash] = "crash"
    # WHEN an hour of video is transcoded, its worker logging to the file
    with worker_log(log):
        job_id = clocked.enqueue(
            "transcode_video",
            TranscodeVideo(video_id="v9", source_uri="s3://in/v9.mov", duration_seconds=3600),
        )
        run_transcode(clocked, job_id, runner=runner)
    status = clocked.status(job_id)
    assert status.state == "succeeded"
    # THEN the runs counted from the log, beyond the steps checkpointed, are the steps run again
    assert demo.step_runs(log, offset, job_id) - len(status.steps) == rerun
    assert demo.step_runs(log, offset, "video-x.0.0") == 0  # lines before the offset are not this run's


def figures(**changes: Any) -> dict[str, Any]:
    """A run's figures as the tour expects them, with `changes`."""
    good = {
        **demo.expected(),
        "max_sent_in_any_window": 20,
        "bulk_sent_after_last_premium": 100,
        "durable_invocations": 4,
        "max_running_per_key": 4,
        "fair_queue_latency_seconds": 0.4,
        "campaign_members": demo.expected()["campaign_summary"],
        "waits": {
            key: {"what": what, "limit": limit, "ok": True, "seconds": 1.0}
            for key, (what, limit) in demo.WAITS.items()
        },
    }
    return {**good, **changes}


def test_the_expected_durable_figures_pass():
    wrong, not_measured = demo.judge(figures())
    assert (wrong, not_measured) == ({}, {})


def test_a_step_run_twice_or_too_few_invocations_is_wrong():
    wrong, _ = demo.judge(figures(steps_rerun=1, durable_invocations=2))
    assert wrong == {"steps_rerun": (1, 0), "durable_invocations": (2, ">= 3")}


def test_a_step_run_twice_is_wrong_even_when_the_transcode_timed_out():
    waits = figures()["waits"]
    waits["transcode"] = {**waits["transcode"], "ok": False}
    wrong, not_measured = demo.judge(figures(steps_rerun=1, durable_invocations=2, waits=waits))
    # a run that already happened stays wrong; the invocations were cut short by the wait
    assert wrong == {"steps_rerun": (1, 0)}
    assert not_measured["durable_invocations"] == demo.timed_out_line("transcode", demo.WAITS["transcode"][1])
    assert "approval_example" in not_measured


def test_a_cancelled_job_that_ran_is_wrong_even_when_the_wait_timed_out():
    waits = figures()["waits"]
    waits["cancelled"] = {**waits["cancelled"], "ok": False}
    wrong, _ = demo.judge(figures(cancelled_ran=1, waits=waits))
    assert wrong == {"cancelled_ran": (1, 0)}


def test_the_fair_queue_latency_must_be_a_number_of_seconds():
    wrong, _ = demo.judge(figures(fair_queue_latency_seconds=None))
    assert wrong == {"fair_queue_latency_seconds": (None, "a number of seconds")}
    assert demo.judge(figures(fair_queue_latency_seconds=3))[0] == {}


def test_the_demo_report_has_the_flow_control_figures():
    # the figures `make demo` writes (build/reports/demo.json), as `run_flow_control` returns them
    assert demo.expected()["cancelled_ran"] == 0
    assert "fair_queue_latency_seconds" in demo.BOUNDS and "fair" in demo.WAITS


def test_a_campaign_over_its_concurrency_cap_is_wrong():
    cap = demo.emails.CAMPAIGN_CONNECTIONS.limit
    wrong, _ = demo.judge(figures(max_running_per_key=cap + 1))
    assert wrong == {"max_running_per_key": (cap + 1, f"1 to {cap}")}
