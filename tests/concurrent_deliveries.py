"""Concurrent deliveries of the same job ids, for the concurrency tests of in-process moto
(`tests/functional/test_concurrency.py`) and of the local stack (`tests/local/test_atomic.py`).

Each id is sent `copies` times; every copy is received (so it has a real receipt handle and receive
count), then the copies of one id are released together by a barrier, each on its own thread, each
handed to the handler as its own one-record invocation by the event source emulator's `invoke` (the
event and context Lambda builds; successes deleted, failures kept), as Lambda runs concurrent
invocations of one function. The job counts its runs per job id.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import BaseModel

from lambdajobs import JobContext
from lambdajobs.local.emulator import BatchOutcome, EventSourceMapping
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import decode
from lambdajobs.runtime.producer import enqueue_many
from lambdajobs.runtime.records import get_status

COPIES = 5  # concurrent deliveries of one job id
IDS = 50  # job ids
WAVE = 10  # ids delivered at a time: moto's SQS calls cost O(queue depth), small waves keep them fast


class Numbered(BaseModel):
    n: int


class Deliveries:
    """The test job (`job()`: counts its runs per job id, and how many other deliveries of its id
    were in flight when it started) and the concurrent deliveries (`deliver(mapping, name)`)."""

    def __init__(self, *, ids: int = IDS, copies: int = COPIES, job_seconds: float = 0.02) -> None:
        self.job_ids = [f"job-{i:03d}" for i in range(ids)]
        self.copies, self.job_seconds = copies, job_seconds
        self.runs: Counter[str] = Counter()  # job id -> times the job ran
        self.overlapped: Counter[str] = Counter()  # job id -> other deliveries in flight at its start
        self.peak: Counter[str] = Counter()  # job id -> most deliveries of it in flight at once
        self.outcomes: dict[str, list[BatchOutcome]] = {}
        self._in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()

    def job(self) -> Any:
        def counted(payload: Numbered, ctx: JobContext) -> dict[str, int]:
            with self._lock:
                self.runs[ctx.job_id] += 1
                self.overlapped[ctx.job_id] += self._in_flight[ctx.job_id] - 1
            time.sleep(self.job_seconds)  # the other copies arrive while it runs
            return {"n": payload.n}

        return counted

    def assert_each_ran_once(self, config: StackConfig) -> None:
        """Every job ran exactly once, the deliveries really overlapped, and every record succeeded."""
        assert self.runs == {jid: 1 for jid in self.job_ids}
        # copies of every id in flight together, and other copies still arriving when the job started
        assert min(self.peak.values()) >= 2 and max(self.peak.values()) == self.copies
        assert sum(self.overlapped.values()) > 0
        for jid in self.job_ids:
            assert get_status(jid, config=config).state == "succeeded", jid

    def deliver(self, mapping: EventSourceMapping, job: str, *, wave: int = WAVE) -> None:
        """Send the copies of every id, then deliver the copies of each id at once, `wave` ids at a time."""
        with ThreadPoolExecutor(max_workers=self.copies * wave, thread_name_prefix="delivery") as pool:
            for first in range(0, len(self.job_ids), wave):
                self._wave(mapping, job, self.job_ids[first : first + wave], pool)

    def _wave(
        self, mapping: EventSourceMapping, job: str, job_ids: list[str], pool: ThreadPoolExecutor
    ) -> None:
        sent = enqueue_many(
            job,
            [Numbered(n=self.job_ids.index(jid)) for jid in job_ids for _ in range(self.copies)],
            job_ids=[jid for jid in job_ids for _ in range(self.copies)],
            config=mapping.config,
        )
        assert sent.ok, sent.failed
        by_id = receive_all(mapping.config, mapping.queue_url, job_ids, self.copies)

        def one(jid: str, message: dict[str, Any], start: threading.Barrier) -> BatchOutcome:
            start.wait()  # the copies of one id start together
            with self._lock:
                self._in_flight[jid] += 1
                self.peak[jid] = max(self.peak[jid], self._in_flight[jid])
            try:
                return mapping.invoke([message])
            finally:
                with self._lock:
                    self._in_flight[jid] -= 1

        # The pool has a thread for every copy of a wave: every barrier fills.
        futures = {}
        for jid, messages in by_id.items():
            start = threading.Barrier(self.copies, timeout=60)
            futures[jid] = [pool.submit(one, jid, message, start) for message in messages]
        for jid, fs in futures.items():
            self.outcomes[jid] = [f.result() for f in fs]


def receive_all(
    config: StackConfig, queue_url: str, job_ids: list[str], copies: int, timeout: float = 30
) -> dict[str, list[dict[str, Any]]]:
    """Receive the `copies` messages of each job id (left in flight for the deliveries), by id.
    Messages of other ids (a copy handed back early) are left in flight, unused."""
    sqs = config.client("sqs")
    by_id: dict[str, list[dict[str, Any]]] = {jid: [] for jid in job_ids}
    wanted, got = len(job_ids) * copies, 0
    deadline = time.monotonic() + timeout
    while got < wanted and time.monotonic() < deadline:
        for message in sqs.receive_message(
            QueueUrl=queue_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", []):
            jid = decode(message["Body"]).id
            if jid in by_id:
                by_id[jid].append(message)
                got += 1
    assert all(len(messages) == copies for messages in by_id.values()), {
        jid: len(messages) for jid, messages in by_id.items()
    }
    return by_id
