"""Regressions the soak must catch, each monkeypatched in at a stable seam (tests/chaos runs them).

- `no_partial_batch`: ReportBatchItemFailures off, so the failure list is ignored and every message of
  the batch is deleted. Seam: `Worker.handle`, its response replaced by `{}` (what Lambda makes of a
  failure list then). Gate that must fail: `lost` > 0.
- `message_id_key`: idempotency keyed on the SQS message id instead of the job id. Seams: Powertools'
  `BatchProcessor._process_record` notes the record's message id, and the store's
  `JobRecordStore._get_hashed_idempotency_key` returns it. Must fail: `duplicate_effects.other` > 0.
- `no_lambda_context`: the Lambda context never registered, so no in-progress expiry is written and
  a crashed invocation's lock is held for ever. Seam: `IdempotencyConfig.register_lambda_context`
  does nothing. Must fail: `stuck_records` > 0 or `record_mismatches` > 0 (a record left `running`).
- `no_workflow_tally`: a workflow member's outcome written without its count (the transactional
  count disabled). Seam: `lifecycle._apply`, called with `tally=None`. Must fail: `workflows_done`
  and `workflow_callbacks` (no stage completes: no callback, the chain stops at its first step).
- `no_step_replay`: a durable job's run never finds its checkpoints (every step runs again in each
  attempt and continuation). Seam: `Durable.checkpoint` returns None. Must fail:
  `steps_run_after_checkpoint` > 0.
- `success_drops_checkpoints`: a run that created the record writes its success as that record whole,
  dropping the checkpoints it wrote since (the rewrite the store avoids once a run checkpointed). Seam:
  `JobRecordStore.checkpoint` forgets that it checkpointed. Must fail: `step_records_true` > 0.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor
from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig
from pytest import MonkeyPatch

from lambdajobs.runtime import lifecycle
from lambdajobs.runtime.durable import Durable
from lambdajobs.runtime.records import JobRecordStore
from lambdajobs.runtime.worker import Worker


def no_partial_batch(monkeypatch: MonkeyPatch) -> None:
    """The event source ignores batchItemFailures (ReportBatchItemFailures off): any response the
    handler returns is a full success, so failed records are deleted."""
    handle = Worker.handle

    def handle_without_partial_failures(self: Worker, event: dict[str, Any], context: Any) -> Any:
        handle(self, event, context)
        return {}

    monkeypatch.setattr(Worker, "handle", handle_without_partial_failures)


def message_id_key(monkeypatch: MonkeyPatch) -> None:
    """Idempotency keyed on the SQS message id instead of the job id: a re-sent job is a new key."""
    current = threading.local()
    process_record = BatchProcessor._process_record

    def noting_message_id(self: BatchProcessor, record: dict[str, Any]) -> Any:
        current.message_id = record["messageId"]
        return process_record(self, record)

    def message_id(self: JobRecordStore, data: dict[str, Any]) -> str:
        return str(getattr(current, "message_id", None) or data["job_id"])

    monkeypatch.setattr(BatchProcessor, "_process_record", noting_message_id)
    monkeypatch.setattr(JobRecordStore, "_get_hashed_idempotency_key", message_id)


def no_lambda_context(monkeypatch: MonkeyPatch) -> None:
    """The worker's idempotency config never gets the Lambda context: no in-progress expiry is
    written, so the lock of a crashed invocation is held for ever."""
    monkeypatch.setattr(IdempotencyConfig, "register_lambda_context", lambda self, context: None)


def no_workflow_tally(monkeypatch: MonkeyPatch) -> None:
    """A workflow member's record written without counting its outcome in the workflow's item."""
    apply = lifecycle._apply

    def without_tally(*args: Any, **kwargs: Any) -> bool:
        return apply(*args, **{**kwargs, "tally": None})

    monkeypatch.setattr(lifecycle, "_apply", without_tally)


def no_step_replay(monkeypatch: MonkeyPatch) -> None:
    """A durable job's run never finds its checkpoints: every step runs again in every attempt and
    continuation, also those whose checkpoint landed."""
    monkeypatch.setattr(Durable, "checkpoint", lambda self, name: None)


def success_drops_checkpoints(monkeypatch: MonkeyPatch) -> None:
    """A run that created the job's record writes its success as the whole record it created, its
    checkpoints written since forgotten (the store no longer notes that it checkpointed)."""
    checkpoint = JobRecordStore.checkpoint

    def forgetting(
        self: JobRecordStore, job_id: str, name: str, value: dict[str, Any], lock: int | None
    ) -> bool:
        landed = checkpoint(self, job_id, name, value, lock)
        self._checkpointed.discard(job_id)
        return landed

    monkeypatch.setattr(JobRecordStore, "checkpoint", forgetting)


MUTATIONS: dict[str, Callable[[MonkeyPatch], None]] = {
    "no_partial_batch": no_partial_batch,
    "message_id_key": message_id_key,
    "no_lambda_context": no_lambda_context,
    "no_workflow_tally": no_workflow_tally,
    "no_step_replay": no_step_replay,
    "success_drops_checkpoints": success_drops_checkpoints,
}
