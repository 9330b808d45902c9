"""Cancelling jobs and workflows: `cancel(job_id)`, `cancel_workflow(workflow_id)`.

A cancel is a write to the job's record (`lifecycle.cancel`), never to its message: SQS cannot take a
message out of a queue by id. So the record says `cancelled` and every copy of the message that
arrives afterwards is dropped by the acquire that would have started it (its condition refuses a
cancelled record; the worker counts `JobCancelled`). Nothing is written at enqueue, so a job with no
record yet gets one, kept for the record's time to live: the same id stays cancelled that long, and
enqueued again under it never runs; enqueue it under a new id to run it.

- A job not running (not started, retrying, waiting for its rate-limit slot, sleeping or waiting for a
  signal) ends `cancelled` at once; its one-time schedule (`run_at` beyond 15 minutes, a wake-up
  beyond 15 minutes) is deleted too, when the job's name is known (`job=`, or its record).
- A running job is asked to stop (`cancel_requested`): `ctx.cancelled` reads it, and its next progress
  report or durable step raises `JobCancelled` in it; the worker then records it `cancelled`. A job
  that ends without a check keeps its outcome (it ran to the end).
- A finished job (succeeded, dead, cancelled, superseded) is left as it is: the result says so.
- A workflow: every member not finished is cancelled, with the callback (members of stages not sent
  yet get their cancel before they are sent, so they are dropped on arrival); its stages go on
  counting a cancelled member as dead.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from lambdajobs.runtime import lifecycle
from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.errors import CancelError, JobIdError
from lambdajobs.runtime.job_record import JobRecord, JobState

logger = logging.getLogger(__name__)

#: Members of a workflow cancelled at once (each one UpdateItem).
CANCEL_THREADS = 8


@dataclass(frozen=True)
class CancelResult:
    """What `cancel` did to one job: `outcome` is `cancelled` (it will not run), `requested` (it is
    running and stops at its next check) or `finished` (it had finished: nothing changed); `state` is
    the job's state before; `message` says it in a sentence."""

    job_id: str
    outcome: str
    state: str
    message: str
    #: The one-time schedule deleted with it (a `run_at` job, a durable job's wake-up), if any.
    schedule_deleted: str | None = None

    @property
    def changed(self) -> bool:
        return self.outcome != "finished"


def cancel(job_id: str, *, job: str | None = None, config: StackConfig | None = None) -> CancelResult:
    """Cancel a job by id: it never runs (again), or, running, stops at its next check.

    `job` names the job: needed only to delete the one-time schedule of a `run_at` job that has no
    record yet (without it, the scheduled message is still dropped when it arrives).

    Raises:
        JobIdError: `job_id` is empty or not a string.

    Example:
        >>> cancel("order-42").outcome
        'cancelled'
    """
    if not isinstance(job_id, str) or not job_id:
        raise JobIdError(f"job_id must be a non-empty string, got {job_id!r}")
    from lambdajobs.runtime.records import JobRecordStore

    cfg = resolve(config)
    store = JobRecordStore(cfg)
    outcome, before = lifecycle.cancel(
        store.client,
        store.table,
        job_id,
        job=job or "",
        ttl_seconds=cfg.record_ttl_seconds,
        index=cfg.job_index,
        reason="cancelled by an operator",
    )
    name = job or before.job
    deleted = _delete_schedules(cfg, name, job_id, before) if outcome == "cancelled" and name else None
    result = CancelResult(job_id, outcome, _state_text(before), _message(job_id, outcome, before), deleted)
    logger.info("cancel of job %s: %s", job_id, outcome)
    return result


def _state_text(record: JobRecord) -> str:
    if not record.exists or record.state is None:
        return JobState.PENDING.value
    return str(record.state)


def _message(job_id: str, outcome: str, before: JobRecord) -> str:
    state = _state_text(before)
    if outcome == "cancelled":
        if state == JobState.PENDING.value:
            return f"job '{job_id}' is cancelled: it has not run, and its message is dropped when it arrives."
        return f"job '{job_id}' was {state} and is cancelled: it will not run again."
    if outcome == "requested":
        return f"job '{job_id}' is running: it is asked to stop, and stops at its next check."
    return f"job '{job_id}' has already finished ({state}); nothing was changed."


def _delete_schedules(cfg: StackConfig, job: str, job_id: str, before: JobRecord) -> str | None:
    """Delete the job's one-time schedules that would send it again: a `run_at` schedule (a job not
    started yet) and a parked durable job's wake-up. Best effort: a message they send is dropped."""
    from lambdajobs.runtime.durable import wake_schedule_name
    from lambdajobs.runtime.producer import one_time_schedule_name

    names = []
    if not before.exists or before.state is None:
        names.append(one_time_schedule_name(job, job_id))
    if before.wake_at is not None:
        names.append(wake_schedule_name(job, job_id, before.wake_at))
    deleted = None
    try:
        _role, group, _dlq = cfg.scheduler_settings()
        scheduler = cfg.client("scheduler")
    except Exception as exc:  # a stack without one-time schedules: nothing to delete
        logger.info("no one-time schedule group to look in: %s", exc)
        return None
    for name in names:
        try:
            scheduler.delete_schedule(Name=name, GroupName=group)
            deleted = name
        except scheduler.exceptions.ResourceNotFoundException:
            continue
        except Exception as exc:  # the message it sends is dropped on arrival anyway
            logger.warning("could not delete schedule %s: %s", name, exc)
    return deleted


@dataclass(frozen=True)
class WorkflowCancelResult:
    """What `cancel_workflow` did: each member's `CancelResult`, in stage and member order."""

    workflow_id: str
    members: tuple[CancelResult, ...]

    @property
    def cancelled(self) -> int:
        return sum(1 for m in self.members if m.outcome == "cancelled")

    @property
    def requested(self) -> int:
        return sum(1 for m in self.members if m.outcome == "requested")

    @property
    def finished(self) -> int:
        return sum(1 for m in self.members if m.outcome == "finished")


def cancel_workflow(workflow_id: str, *, config: StackConfig | None = None) -> WorkflowCancelResult:
    """Cancel a workflow: each member not finished is cancelled (`cancel`), in every stage, sent or
    not (those not sent yet are dropped on arrival), the chord's callback with them.

    Raises:
        CancelError: no workflow with this id (or it expired).
    """
    from lambdajobs.runtime.workflow import _read, member_job_id

    cfg = resolve(config)
    item = _read(cfg, workflow_id) if isinstance(workflow_id, str) and workflow_id else None
    if item is None:
        raise CancelError(f"no workflow '{workflow_id}' (or it expired): nothing to cancel.")
    ids = []
    for stage, plan in enumerate(item.outline_stages):
        total = item.stage(stage).total or sum(plan.jobs.values())
        ids += [member_job_id(workflow_id, stage, i) for i in range(total)]
    with ThreadPoolExecutor(max_workers=CANCEL_THREADS) as pool:
        results = tuple(pool.map(lambda jid: cancel(jid, config=cfg), ids))
    logger.info("cancelled workflow %s: %d members", workflow_id, len(results))
    return WorkflowCancelResult(workflow_id, results)
