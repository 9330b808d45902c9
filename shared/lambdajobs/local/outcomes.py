"""What became of the jobs the local stack's event sources delivered: succeeded, retrying, dead.

The source of truth is each job's record, read as `get_status` reads it (`get_statuses`, including a
reconciled `dead`): the worker writes there what it decided for every job. The event source cannot
know: it sees only the batch response, and the worker reports success for a record it moved to the
DLQ itself (a `PermanentError`, an invalid payload, the last attempt) or handed back (a rate-limited
job, a lock held elsewhere), so that SQS deletes the original. Counted from the batch response, a
dead-lettered job read as ok.

The local stack notes the job id of every record it delivers (`received`), by queue; `counts()` reads
the records of the jobs not settled yet (in BatchGetItem calls of 100 keys) and counts each job once,
in its state now, on the queue that delivered it last: a job retried three times is one `retrying`,
then one `succeeded`; a dead job redriven from its DLQ that then succeeds moves from `dead` to
`succeeded`. A message whose job id cannot be read (an envelope that does not decode) has no record:
the DLQ column shows it.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.records import get_statuses


class JobOutcomes:
    """The state now of every job delivered since the stack started, counted per queue key."""

    def __init__(self, config: StackConfig) -> None:
        self.config = config
        self._lock = threading.Lock()
        self._queue: dict[str, str] = {}  # job id -> the queue key that delivered it last
        self._state: dict[str, JobState] = {}
        self._unsettled: set[str] = set()  # to read again: delivered since, or not final yet
        self._delivered: dict[str, int] = {}  # job id -> the number of its last delivery
        self._deliveries = 0

    def received(self, key: str, job_ids: Iterable[str | None]) -> None:
        """The event source of queue `key` delivered records of these jobs (None: no job id)."""
        with self._lock:
            for job_id in job_ids:
                if job_id:
                    self._deliveries += 1
                    self._queue[job_id] = key
                    self._delivered[job_id] = self._deliveries
                    self._unsettled.add(job_id)

    def counts(self) -> dict[str, Counter[JobState]]:
        """Per queue key: how many of the jobs it delivered are in each state now."""
        with self._lock:
            to_read, read_after = list(self._unsettled), self._deliveries
        statuses = get_statuses(to_read, config=self.config) if to_read else {}
        with self._lock:
            for job_id, status in statuses.items():
                self._state[job_id] = status.state
                # settled, unless delivered again while its record was read (a redrive): read again
                if status.state.is_final and self._delivered[job_id] <= read_after:
                    self._unsettled.discard(job_id)
            tally: dict[str, Counter[JobState]] = {}
            for job_id, key in self._queue.items():
                tally.setdefault(key, Counter())[self._state.get(job_id, JobState.PENDING)] += 1
        return tally
