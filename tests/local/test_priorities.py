"""Priorities on the local stack (moto's server, the event source emulator): a high-priority job sent
after a backlog of normal ones (200) starts before that backlog drains, because its level has its own
queue and event source on the same worker."""

from __future__ import annotations

import threading
import time

from pydantic import BaseModel

from lambdajobs.local.stack import WORKFLOWS, LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime.config import using
from lambdajobs.runtime.producer import enqueue, enqueue_many
from lambdajobs.runtime.records import wait_for
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry

BACKLOG = 200


class Task(BaseModel):
    n: int


class Started:
    def __init__(self) -> None:
        self.order: list[int] = []
        self._lock = threading.Lock()

    def job(self):
        def work(payload: Task) -> None:
            with self._lock:
                self.order.append(payload.n)
            time.sleep(0.01)  # a little work, so the backlog takes a while

        return work


def test_a_high_job_sent_after_a_backlog_of_normal_ones_starts_before_it_drains(tmp_path):
    started = Started()
    with isolated_registry(keep=True):
        spec = job(name="export", priorities=("high", "normal"), max_concurrency=2)(started.job()).spec
        local = LocalStack(specs=[spec], stack="prio", port=0, log_file=tmp_path / "worker.log")
        with local, using(local.config):
            # GIVEN a backlog of normal jobs queued
            assert enqueue_many("export", [Task(n=i) for i in range(BACKLOG)]).ok
            local.start_workers(scheduler=False)
            assert wait_until(lambda: len(started.order) >= 20, 30)  # the backlog is being worked
            # WHEN a high-priority job is sent after them
            urgent = enqueue("export", Task(n=-1), priority="high")
            status = wait_for(urgent, timeout_seconds=60, poll_seconds=0.05)
            assert wait_until(lambda: len(started.order) == BACKLOG + 1, 120)
    # THEN it ran, and it started while most of the backlog was still waiting
    assert status.state == "succeeded"
    position = started.order.index(-1)
    assert BACKLOG - position >= BACKLOG // 2, (
        f"the high job started after {position} of {BACKLOG} normal jobs"
    )
    # AND both levels have their own event source on the local stack
    assert set(local.mappings) == {"export", "export@high", WORKFLOWS}
    assert local.mappings["export@high"].max_concurrency == 4
