"""What the board's job views read and do beyond `BoardData`: a job's page with everything its record
holds (masked), a workflow's page, search, a job's logs, enqueue again and signal.

Every page reads as little as it can: a job's page is one GetItem (`records.get_status`); its logs are
a panel of their own that loads after it (`job_logs`: a local file, or a CloudWatch Logs Insights query
that runs asynchronously); its dead letter is found only when the operator asks (finding it receives
messages of the DLQ, so a page view never changes a message's receive count).

Whatever a job's producer or code wrote (its payload, result, error, traceback, attempts' errors, and
its id) is shown with the job's `pii_fields` masked: the fields erased from the payload, and their
values replaced wherever else they appear (`runtime.pii`, the masking of the worker's log lines). The
same masked view feeds the page and the JSON API (`JobView.plain`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lambdajobs import job_logs
from lambdajobs.board.data import BoardData
from lambdajobs.runtime import pii, records
from lambdajobs.runtime.job_record import JobState
from lambdajobs.runtime.records import JobStatus
from lambdajobs.runtime.settings import queue_key
from lambdajobs.runtime.spec import JobSpec

#: A workflow page lists each stage's members by state, this many per stage at most (one BatchGetItem).
MAX_MEMBERS_LISTED = 100
#: Where a job's page links for the pending one-time runs (`enqueue(run_at=...)`).
SCHEDULES_PATH = "/schedules"
#: What the board says of jobs that are queued: SQS holds them, no record does.
QUEUED_NOTE = (
    "A queued job has no record until a worker starts it (nothing is written at enqueue, so an "
    "enqueue costs no write), and SQS cannot list a queue's messages without receiving them: queued "
    "and delayed jobs are counted here, not listed. Find one by its id (it reads 'pending'), and see "
    "the pending one-time runs (enqueue(run_at=...)) on the schedules page."
)


class Masker:
    """A job's `pii_fields` applied to whatever it wrote: `payload()` erases the fields, `text()`
    and `value()` replace the fields' values (taken from the payload, when the record holds it)."""

    def __init__(self, fields: tuple[str, ...], payload: Any) -> None:
        self.fields = fields
        self.raw = payload if isinstance(payload, dict) else {}
        self.names = {f.split(".")[-1] for f in fields}

    @contextmanager
    def _bound(self) -> Iterator[Callable[[str], str]]:
        with pii.bound(self.fields, self.raw):
            yield pii.scrub

    def text(self, value: str | None) -> str | None:
        if value is None or not self.fields:
            return value
        with self._bound() as scrub:
            return scrub(value)

    def payload(self, payload: Any) -> Any:
        """The payload with its PII fields erased and their values masked elsewhere in it."""
        if payload is None or not self.fields:
            return payload
        return pii.mask_payload(payload, self.fields)

    def value(self, node: Any) -> Any:
        """Any JSON value (a result, an error): keys named like a PII field erased, the fields'
        values masked in every string (and number) it holds."""
        if not self.fields:
            return node
        with self._bound() as scrub:
            return self._walk(node, scrub)

    def _walk(self, node: Any, scrub: Callable[[str], str]) -> Any:
        if isinstance(node, dict):
            return {
                scrub(str(k)): pii.MASK if k in self.names else self._walk(v, scrub) for k, v in node.items()
            }
        if isinstance(node, list | tuple):
            return [self._walk(v, scrub) for v in node]
        if isinstance(node, str):
            return scrub(node)
        if isinstance(node, int | float) and not isinstance(node, bool):
            return pii.MASK if scrub(str(node)) != str(node) else node
        return node


@dataclass(frozen=True)
class AttemptRow:
    """One attempt of a job as its page shows it: start, end, how long, how it ended."""

    attempt: int
    started_at: str | None
    ended_at: str | None
    seconds: float | None
    outcome: str
    error_type: str | None = None
    error_message: str | None = None


@dataclass(frozen=True)
class JobView:
    """Everything a job's page shows, masked: what `records.get_status` read (one GetItem), and what
    follows from it (queue wait, run time, the actions it allows)."""

    #: The id as shown: its PII values masked (an id should hold none: docs/how-to/personal-data.md).
    job_id: str
    #: The id as it is (what a link to the job's page needs), as the dead letters' API names it.
    link_id: str
    job: str | None
    state: JobState
    described_state: str
    done: bool
    has_record: bool
    note: str | None
    attempts: int
    enqueued_at: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    updated_at: str | None
    queue_wait_seconds: float | None
    run_seconds: float | None
    level: str | None
    tenant: str | None
    workflow: dict[str, Any] | None
    payload: Any
    #: Whether the record holds the payload (it does once an attempt failed: a success costs nothing).
    payload_recorded: bool
    payload_cut: bool
    result: Any
    error: dict[str, str] | None
    traceback: str | None
    attempt_rows: list[AttemptRow]
    progress: float | None
    progress_message: str | None
    waiting_until: str | None
    wake_at: str | None
    waiting_for: str | None
    suspensions: int
    steps: tuple[Any, ...]
    cancel_requested: str | None
    #: The job's PII fields (what was masked).
    pii_fields: tuple[str, ...] = ()
    #: The queue key of the job's level (its DLQ's page: /dead-letters/<key>).
    queue_key: str | None = None
    #: Why "enqueue again" is not offered (None: it is).
    again_note: str | None = None
    #: The status as read, for the page's own fields (never given to the JSON API: it is not masked).
    status: JobStatus | None = field(default=None, repr=False, compare=False)

    @property
    def can_enqueue_again(self) -> bool:
        return self.again_note is None

    def plain(self) -> dict[str, Any]:
        """What the JSON API answers: every field but the raw status."""
        return {
            name: getattr(self, name) for name in self.__dataclass_fields__ if name not in ("status",)
        } | {"can_enqueue_again": self.can_enqueue_again}


def _attempt_rows(status: JobStatus, masker: Masker) -> list[AttemptRow]:
    found = []
    for row in status.attempt_rows():
        found.append(
            AttemptRow(
                attempt=int(row.attempt),
                started_at=row.started_at,
                ended_at=row.ended_at,
                seconds=row.seconds,
                outcome=str(row.outcome),
                error_type=row.error_type,
                error_message=masker.text(row.error_message),
            )
        )
    return found


def job_view(status: JobStatus, spec: JobSpec | None) -> JobView:
    """A job's record as its page and the JSON API show it: masked by the job's `pii_fields`."""
    fields = tuple(spec.pii_fields) if spec is not None else ()
    raw_payload = status.payload
    masker = Masker(fields, raw_payload)
    level = status.level
    error = status.error
    workflow = status.workflow
    again_note = None
    if spec is None:
        again_note = "its job is not in this board's jobs package."
    elif raw_payload is None:
        again_note = (
            "its payload is not recorded (a job's record keeps it once an attempt failed; a job that "
            "never failed keeps none): enqueue it from your code."
        )
    elif status.payload_cut:
        again_note = "its recorded payload was cut (over 32 KB): enqueue it from your code."
    elif workflow:
        again_note = "it is a workflow's member: its workflow runs it (enqueue the workflow again)."
    return JobView(
        job_id=masker.text(status.job_id) or status.job_id,
        link_id=status.job_id,
        job=status.job or (spec.name if spec else None),
        state=status.state,
        described_state=masker.text(status.described_state) or status.state.value,
        done=status.done,
        has_record=status.has_record,
        note=status.note,
        attempts=status.attempts,
        enqueued_at=status.enqueued_at,
        created_at=status.created_at,
        started_at=status.started_at,
        finished_at=status.finished_at,
        updated_at=status.updated_at,
        queue_wait_seconds=status.queue_wait_seconds,
        run_seconds=status.run_seconds,
        level=level,
        tenant=masker.text(status.tenant),
        workflow=dict(workflow) if workflow else None,
        payload=masker.payload(raw_payload),
        payload_recorded=raw_payload is not None,
        payload_cut=status.payload_cut,
        result=masker.value(status.result),
        error={k: masker.text(str(v)) or "" for k, v in error.items()} if error else None,
        traceback=masker.text(status.traceback),
        attempt_rows=_attempt_rows(status, masker),
        progress=status.progress,
        progress_message=masker.text(status.progress_message),
        waiting_until=status.waiting_until,
        wake_at=status.wake_at,
        waiting_for=status.waiting_for,
        suspensions=status.suspensions,
        steps=status.steps,
        cancel_requested=status.cancel_requested,
        pii_fields=fields,
        queue_key=_queue_key(spec, level),
        again_note=again_note,
        status=status,
    )


def _queue_key(spec: JobSpec | None, level: str | None) -> str | None:
    """The URL key of the queue of the job's level (None: not a job of this board, or a level it no
    longer has)."""
    if spec is None:
        return None
    try:
        return queue_key(spec.name, spec.level_for(level))
    except Exception:
        return None


@dataclass(frozen=True)
class JobSummary:
    """One line of a list of jobs (by state, a time range, a search), masked as a job's page is."""

    #: The id masked by the job's `pii_fields`; `link_id` is the id as it is (a link's).
    job_id: str
    link_id: str
    job: str | None
    state: JobState
    described_state: str
    done: bool
    attempts: int
    enqueued_at: str | None
    created_at: str | None
    updated_at: str | None
    finished_at: str | None
    wake_at: str | None
    level: str | None
    tenant: str | None
    error: dict[str, str] | None


def summary(status: JobStatus, spec: JobSpec | None) -> JobSummary:
    fields = tuple(spec.pii_fields) if spec is not None else ()
    masker = Masker(fields, status.payload)
    return JobSummary(
        job_id=masker.text(status.job_id) or status.job_id,
        link_id=status.job_id,
        job=status.job,
        state=status.state,
        described_state=status.described_state,
        done=status.done,
        attempts=status.attempts,
        enqueued_at=status.enqueued_at,
        created_at=status.created_at,
        updated_at=status.updated_at,
        finished_at=status.finished_at,
        wake_at=status.wake_at,
        level=status.level,
        tenant=masker.text(status.tenant),
        error={k: masker.text(str(v)) or "" for k, v in status.error.items()} if status.error else None,
    )


@dataclass(frozen=True)
class Listed:
    """A page of jobs (newest first) and the cursor of the next one (None: the last)."""

    items: list[JobSummary]
    cursor: str | None


@dataclass(frozen=True)
class QueuedCount:
    """A level's queue: what SQS counts of jobs that have no record yet."""

    label: str
    key: str
    visible: int | None
    delayed: int | None
    in_flight: int | None
    error: str | None = None


@dataclass(frozen=True)
class MemberRow:
    job_id: str
    stage: int
    index: int
    state: str
    job: str | None


@dataclass(frozen=True)
class WorkflowView:
    """A workflow's page: its status (`get_workflow`), its stages' members by state (the first
    `MAX_MEMBERS_LISTED` of each stage), and its callback."""

    workflow_id: str
    status: Any
    members: dict[int, dict[str, list[MemberRow]]]
    members_cut: dict[int, int]

    def plain(self) -> dict[str, Any]:
        st = self.status
        return {
            "workflow_id": self.workflow_id,
            "state": st.state.value,
            "kind": st.kind,
            "progress": st.progress,
            "callback_job_id": st.callback_job_id,
            "reason": st.reason,
            "created_at": st.created_at,
            "updated_at": st.updated_at,
            "ended_at": st.ended_at,
            "note": st.note,
            "stages": [
                {
                    "index": s.index,
                    "jobs": s.jobs,
                    "total": s.total,
                    "pending": s.pending,
                    "running": s.running,
                    "succeeded": s.succeeded,
                    "dead": s.dead,
                    "sent": s.sent,
                    "members": self.members.get(s.index, {}),
                    "members_not_listed": self.members_cut.get(s.index, 0),
                }
                for s in st.stages
            ],
        }


class JobsData:
    """The job views' reads and actions, on the board's `BoardData` (its config, its jobs)."""

    def __init__(self, data: BoardData) -> None:
        self.data = data

    @property
    def config(self) -> Any:
        return self.data.config

    def spec_of(self, name: str | None) -> JobSpec | None:
        return self.data.by_name.get(name or "")

    # -- a job ------------------------------------------------------------------------------------

    def job(self, job_id: str, job: str | None = None) -> JobView:
        """A job's page: one GetItem."""
        status = self.data.status(job_id)
        return job_view(status, self.spec_of(status.job or job))

    def enqueue_again(self, job_id: str) -> tuple[str, str]:
        """Send the job again under a new id, with its recorded payload, level and tenant.
        Returns (the new job id, one line)."""
        from lambdajobs.runtime.errors import InvalidOptionError
        from lambdajobs.runtime.producer import enqueue

        status = self.data.status(job_id)
        spec = self.spec_of(status.job)
        view = job_view(status, spec)
        if spec is None or view.again_note is not None:
            raise InvalidOptionError(f"cannot enqueue it again: {view.again_note}")
        new_id = uuid.uuid4().hex
        enqueue(
            spec.name,
            status.payload,
            job_id=new_id,
            priority=view.level,
            tenant=status.tenant,
            config=self.config,
        )
        return new_id, "enqueued again as a new job: this one, with the same payload, level and tenant"

    def signal(self, job_id: str, name: str, data: Any) -> str:
        from lambdajobs.runtime.durable import signal

        sent = signal(job_id, name, data, config=self.config)
        if sent.woke:
            return f"signal {name} sent: it woke the job"
        return f"signal {name} kept: the job gets it when it waits for it"

    # -- lists ------------------------------------------------------------------------------------

    def list_jobs(
        self,
        job: str,
        state: JobState,
        cursor: str | None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 25,
    ) -> Listed:
        spec = self.data.spec(job)
        if since is None and until is None:
            page = self.data.list_jobs(job, state, cursor, limit)
        else:
            page = records.list_jobs(
                job, state, limit=limit, cursor=cursor, since=since, until=until, config=self.config
            )
        return Listed([summary(s, spec) for s in page.items], page.cursor)

    def searchable(self, job: str) -> tuple[str, ...]:
        return self.data.spec(job).searchable

    def search(
        self,
        job: str,
        field_name: str,
        value: str,
        cursor: str | None,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 25,
    ) -> Listed:
        spec = self.data.spec(job)
        page = records.search(
            spec, field_name, value, since=since, until=until, limit=limit, cursor=cursor, config=self.config
        )
        return Listed([summary(s, spec) for s in page.items], page.cursor)

    def queued(self, job: str) -> list[QueuedCount]:
        """What SQS counts in each of the job's queues (one GetQueueAttributes each, twice with its
        DLQ: `ops.queue_health`): jobs queued have no record to list."""
        from lambdajobs import ops
        from lambdajobs.board.data import describe_error

        found = []
        for queue in self.data.job_queues(self.data.spec(job)):
            try:
                health = ops.queue_health(queue.label, queue.url or "", queue.dlq_url, config=self.config)
            except Exception as exc:
                found.append(QueuedCount(queue.label, queue.key, None, None, None, describe_error(exc)))
                continue
            found.append(QueuedCount(queue.label, queue.key, health.depth, health.delayed, health.in_flight))
        return found

    # -- workflows --------------------------------------------------------------------------------

    def workflow(self, workflow_id: str) -> WorkflowView:
        """A workflow's page: `get_workflow` (its item, and a running stage's member records), and each
        sent stage's members by state (one BatchGetItem per stage, `MAX_MEMBERS_LISTED` at most)."""
        from lambdajobs.runtime.workflow import get_workflow, member_job_id

        status = get_workflow(workflow_id, config=self.config)
        members: dict[int, dict[str, list[MemberRow]]] = {}
        cut: dict[int, int] = {}
        for stage in status.stages:
            if not stage.sent or not stage.total:
                continue
            shown = min(stage.total, MAX_MEMBERS_LISTED)
            cut[stage.index] = stage.total - shown
            ids = [member_job_id(workflow_id, stage.index, i) for i in range(shown)]
            statuses = records.get_statuses(ids, config=self.config)
            by_state: dict[str, list[MemberRow]] = {}
            for i, member_id in enumerate(ids):
                st = statuses[member_id]
                row = MemberRow(member_id, stage.index, i, st.state.value, st.job)
                by_state.setdefault(st.state.value, []).append(row)
            members[stage.index] = by_state
        return WorkflowView(workflow_id, status, members, cut)

    # -- logs -------------------------------------------------------------------------------------

    def logs(self, job_id: str, job: str | None, query_id: str | None, worker_log: Any) -> job_logs.Logs:
        """A job's log lines: the local worker log, or a Logs Insights query (started on the first
        call, its results read on the next ones, `query_id`)."""
        if job_logs.is_local(self.config):
            return job_logs.local_lines(worker_log or job_logs.local_log_file(), job_id)
        if query_id:
            return job_logs.results(self.config, job_id, query_id)
        status = self.data.status(job_id)
        name = status.job or job
        if not name:
            raise job_logs.LogsUnavailableError(
                "this id has no record naming its job: its logs cannot be looked up by job."
            )
        span = job_logs.time_span(
            status.enqueued_at,
            status.created_at,
            status.started_at,
            status.finished_at,
            status.updated_at,
        )
        return job_logs.start(self.config, name, job_id, span)


def parse_time(text: str | None) -> datetime | None:
    """A time from a form (`datetime-local`: '2026-12-02T13:45', taken as UTC) or the API (RFC 3339);
    None for nothing.

    Raises:
        ValueError: not a time.
    """
    if not text or not text.strip():
        return None
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


__all__ = [
    "QUEUED_NOTE",
    "AttemptRow",
    "JobSummary",
    "JobView",
    "JobsData",
    "Listed",
    "Masker",
    "QueuedCount",
    "WorkflowView",
    "job_view",
    "parse_time",
    "summary",
]
