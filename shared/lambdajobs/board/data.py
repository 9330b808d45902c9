"""What the board shows and does, read and written through the same data layer as the CLI.

Queues come from the stack's manifest (`StackConfig.queue`, as `lambdajobs queues` reads them),
counters from `ops.queue_health` and `ops.oldest_age_seconds`, finished counts and the per-minute
activity from `ops.job_counts` and `ops.activity`, job records from `records.get_status` and
`records.list_jobs` (the one status reader), dead letters from `lambdajobs.dead_letters` (listed from
the dead records without receiving; found, peeked and redriven by receiving), pause and resume from
`lambdajobs.queue_control`, cancels from `lambdajobs.cancel`. Only what is the board's own lives here:
which queues a page names (a job's priority levels, the workflow queue, the Scheduler's DLQ), a dead
letter's body with its job's `pii_fields` masked (`pii.mask_payload`, the masking the worker's logs
get), the choice of redrive path, and redrives run in the background (`dead_letters.Tasks`).

CloudWatch and the job index are paid per request: what they answer is kept `cache_seconds` (their
figures are per minute anyway), so a page polling every few seconds does not multiply the bill.
Finished counts, activity and a DLQ's recorded count are kept at least `COUNTS_SECONDS` whatever
`cache_seconds` (the local stack's is 0): they count the job index, which a poll must not redo.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lambdajobs import dead_letters as letters
from lambdajobs import ops
from lambdajobs.ops import DeadLetter, QueueHealth
from lambdajobs.runtime import pii, records
from lambdajobs.runtime.cancellation import CancelResult, cancel
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import (
    ConfigurationError,
    JobIndexOffError,
    QueueNotFoundError,
    UnknownJobError,
)
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.records import JobStatus
from lambdajobs.runtime.settings import queue_key
from lambdajobs.runtime.spec import JobSpec

#: URL keys of the two dead-letter queues that belong to no job. Job names start with a letter, so
#: these never name a job's queue.
WORKFLOWS_KEY = "_workflows"
SCHEDULER_KEY = "_scheduler"
#: How many dead letters a receive-to-view shows at most (each one's receive count goes up by one).
MAX_PEEK = letters.MAX_PEEK
#: The least time finished counts and activity are kept (see `BoardData`).
COUNTS_SECONDS = 15.0
#: How many pending one-time schedules the schedules page reads (one GetSchedule each).
MAX_ONE_TIME = 100
#: A body longer than this is cut in the page.
MAX_BODY_CHARS = 20_000
#: What EventBridge Scheduler writes on a message it could not deliver (its DLQ).
SCHEDULER_ERROR_ATTRIBUTES = ("ERROR_CODE", "ERROR_MESSAGE")
_AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")


@dataclass(frozen=True)
class Queue:
    """A queue the board shows: a job's (one per priority level), the workflow queue, or the
    Scheduler's DLQ (which has no source queue)."""

    key: str
    label: str
    dlq_url: str
    url: str | None = None
    job: str | None = None
    priority: str | None = None
    kind: str = "job"  # "job", "workflows" or "scheduler"


@dataclass(frozen=True)
class QueueRow:
    """One line of the overview: a queue's counters, or why they could not be read."""

    queue: Queue
    health: QueueHealth | None = None
    oldest_seconds: float | None = None
    error: str | None = None
    #: Whether its worker's event sources are off (`queue_control`); None: not known (no mapping,
    #: or it could not be read: `pause_note` says why).
    paused: bool | None = None
    paused_since: datetime | None = None
    pause_note: str | None = None
    #: A paused queue whose oldest message nears the queue's retention: what SQS deletes, and when.
    retention_warning: str | None = None


@dataclass(frozen=True)
class JobRows:
    """A job on the overview: its queues (one per priority level), finished counts and activity."""

    job: str
    rows: list[QueueRow]
    #: {"succeeded": n, "dead": n} over the last hour and day; None when nothing counts them here
    #: (`counts_note` says why).
    hour: dict[str, int] | None = None
    day: dict[str, int] | None = None
    counts_note: str | None = None
    activity: list[Any] | None = None
    next_fire: datetime | None = None


@dataclass(frozen=True)
class Letter:
    """A dead letter as the page shows it: every text with its job's PII values masked."""

    queue: Queue
    message_id: str
    job: str | None
    job_id: str | None
    error_type: str
    reason: str
    attempts: str
    failed_at: str | None
    sent_at: datetime
    receive_count: int
    body: str
    body_note: str | None
    attributes: dict[str, str] = field(default_factory=dict)
    #: The job id as it is (`job_id` is shown masked): the link to the job's page needs the real one.
    link_id: str | None = None


@dataclass(frozen=True)
class CronRow:
    job: str
    expression: str
    timezone: str
    next_fires: list[datetime]


@dataclass(frozen=True)
class OneTime:
    """A pending one-time schedule (`enqueue(run_at=...)`): when, which job, which job id."""

    name: str
    run_at: datetime | None
    job: str | None
    job_id: str | None
    state: str


def describe_error(exc: BaseException) -> str:
    """One line for an error an operator can cause or meet (the CLI's wording, `ops.describe_error`)."""
    line = ops.describe_error(exc, elsewhere="start the board with --stack, --region or --profile")
    return line if line is not None else f"{type(exc).__name__}: {exc}"


class _Cache:
    """Answers kept for `seconds` (0: none kept), per key; thread-safe."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._kept: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        if self.seconds <= 0:
            return compute()
        now = time.monotonic()
        with self._lock:
            found = self._kept.get(key)
        if found is not None and now - found[0] < self.seconds:
            return found[1]
        value = compute()
        with self._lock:
            self._kept[key] = (now, value)
        return value

    def forget(self, key: Any) -> None:
        with self._lock:
            self._kept.pop(key, None)

    def forget_queue(self, queue_key: str) -> None:
        """Forget every answer about one DLQ (its recorded count, its filters' matches)."""
        with self._lock:
            for key in [k for k in self._kept if isinstance(k, tuple) and k[1:2] == (queue_key,)]:
                del self._kept[key]


@contextmanager
def _masking(fields: tuple[str, ...], payload: Any) -> Iterator[Callable[[str], str]]:
    """`pii.scrub` with these fields' values (from `payload`) bound: the worker's masking."""
    with pii.bound(fields, payload if isinstance(payload, dict) else {}):
        yield pii.scrub


def mask_envelope(envelope: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """An envelope with its payload's PII fields erased, and their values masked wherever else they
    appear (the id, another field, a nested list): `pii.mask_payload` over the envelope, the fields
    being the payload's."""
    if not fields or not isinstance(envelope.get("payload"), dict):
        return dict(envelope)  # no field, or no payload to find its values in: nothing to mask
    return dict(pii.mask_payload(envelope, tuple(f"payload.{name}" for name in fields)))


class BoardData:
    """The board's view of one stack: `config` (the CLI's StackConfig) and the jobs it declares.

    `native_moves`: redrive a whole DLQ with SQS's own StartMessageMoveTask (default: on AWS, that
    is with no endpoint override; moto and the local stack do not have it).
    """

    def __init__(
        self,
        config: StackConfig,
        specs: list[JobSpec],
        *,
        cache_seconds: float = 30.0,
        native_moves: bool | None = None,
    ) -> None:
        self.config = config
        self.specs = list(specs)
        self.by_name = {s.name: s for s in self.specs}
        self.native_moves = config.endpoint_url is None if native_moves is None else native_moves
        self._cache = _Cache(cache_seconds)
        #: Finished counts and activity are counted at most every `COUNTS_SECONDS`, whatever
        #: `cache_seconds` (the local stack's is 0): a page polling every few seconds counts no more.
        self._counts_cache = _Cache(max(cache_seconds, COUNTS_SECONDS))
        #: How long before a paused queue's oldest message reaches the queue's retention the overview
        #: warns (`queue_control.WARN_WITHIN`, a day).
        self.retention_within = timedelta(days=1)
        #: Redrives running in the background, by id (their progress page polls them).
        self.redrives = letters.Tasks()

    # -- queues -----------------------------------------------------------------------------------

    def spec(self, job: str) -> JobSpec:
        found = self.by_name.get(job)
        if found is None:
            raise UnknownJobError(
                f"no job '{job}' in the jobs package {self.config.jobs or ''}".strip() + "."
            )
        return found

    def job_queues(self, spec: JobSpec) -> list[Queue]:
        """A job's queues, highest priority first (one when it has no priorities): the manifest's.

        Raises:
            StackNotFoundError: no such stack (said before "no queue for job", as the CLI does).
            QueueNotFoundError: the stack has no queue for the job (deployed without it).
        """
        self.config.stack_entry()
        found = []
        for level in spec.levels:
            address = self.config.queue(spec.name, level)
            named = spec.priority_of(level)
            label = f"{spec.name} ({named})" if len(spec.levels) > 1 else spec.name
            found.append(
                Queue(
                    key=queue_key(spec.name, level),
                    label=label,
                    dlq_url=address.dlq_url,
                    url=address.url,
                    job=spec.name,
                    priority=named if len(spec.levels) > 1 else None,
                )
            )
        return found

    def workflow_queue(self) -> Queue | None:
        """The stack's workflow queue and its DLQ (None: a stack deployed before workflows)."""
        entry = self.config.stack_entry()
        dlq_url = entry.get("workflow_dlq_url")
        if not dlq_url:
            return None
        return Queue(
            key=WORKFLOWS_KEY,
            label="workflows",
            dlq_url=str(dlq_url),
            url=self.config.workflow_queue(),
            kind="workflows",
        )

    def scheduler_dlq(self) -> Queue | None:
        """Where EventBridge Scheduler puts what it could not deliver (cron runs, `run_at` jobs)."""
        url = self.config.stack_entry().get("scheduler_dlq_url")  # the stack's manifest names it
        if not url:  # a stack deployed before the manifest did
            return None
        return Queue(key=SCHEDULER_KEY, label="scheduler", dlq_url=str(url), kind="scheduler")

    def dead_letter_queues(self) -> list[Queue]:
        """Every DLQ of the stack: each job's (every level's), the workflow queue's, the Scheduler's."""
        found = [q for spec in self.specs for q in self.job_queues(spec)]
        found += [q for q in (self.workflow_queue(), self.scheduler_dlq()) if q is not None]
        return found

    def queue(self, key: str) -> Queue:
        """A queue by its URL key (`job`, `job@level`, `_workflows`, `_scheduler`).

        Raises:
            QueueNotFoundError: no such queue in this stack.
        """
        if key == WORKFLOWS_KEY:
            found = self.workflow_queue()
        elif key == SCHEDULER_KEY:
            found = self.scheduler_dlq()
        else:
            job = key.split("@", 1)[0]
            found = next((q for q in self.job_queues(self.spec(job)) if q.key == key), None)
        if found is None:
            raise QueueNotFoundError(f"no queue '{key}' in stack '{self.config.stack}'.")
        return found

    def depth(self, url: str) -> int:
        """Messages in a queue: visible, in flight and delayed (what a purge deletes)."""
        names = [
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ]
        attrs = self.config.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)
        return sum(int(attrs["Attributes"].get(n, 0)) for n in names)

    # -- overview ---------------------------------------------------------------------------------

    def _row(self, queue: Queue, pause: dict[str, Any] | None = None) -> QueueRow:
        from botocore.exceptions import ClientError

        assert queue.url is not None
        try:
            health = ops.queue_health(queue.label, queue.url, queue.dlq_url, config=self.config)
        except Exception as exc:
            return QueueRow(queue=queue, error=describe_error(exc))
        try:
            oldest = self._cache.get(
                ("oldest", queue.url), lambda: ops.oldest_age_seconds(queue.url or "", config=self.config)
            )
        except ClientError:  # no CloudWatch read permission: the counters anyway (as `queues` does)
            oldest = None
        return QueueRow(queue=queue, health=health, oldest_seconds=oldest, **(pause or {}))

    def _pause_states(self, spec: JobSpec) -> dict[str, dict[str, Any]]:
        """Per queue key of the job: paused, since when, and a retention warning (`queue_control`):
        one ListEventSourceMappings per queue, and per paused queue one GetQueueAttributes (and one
        CloudWatch call on AWS); kept `cache_seconds` (a pause or resume here forgets it)."""
        from lambdajobs import queue_control

        def compute() -> dict[str, dict[str, Any]]:
            try:
                found = queue_control.mappings(spec, config=self.config)
            except Exception as exc:
                note = describe_error(exc)
                return {q: {"pause_note": note} for q in (queue_key(spec.name, lv) for lv in spec.levels)}
            states: dict[str, dict[str, Any]] = {}
            for m in found:
                state = states.setdefault(m.queue_key, {"paused": False})
                if m.paused:  # one mapping off is a queue not (fully) read
                    state.update(paused=True, paused_since=m.since)
            if any(m.paused for m in found):
                try:
                    for warning in queue_control.retention_warnings(
                        spec, config=self.config, found=found, within=self.retention_within
                    ):
                        states[warning.queue_key]["retention_warning"] = warning.describe()
                except Exception as exc:
                    for state in states.values():
                        state.setdefault("pause_note", describe_error(exc))
            return states

        found: dict[str, dict[str, Any]] = self._cache.get(("paused", spec.name), compute)
        return found

    def set_paused(self, key: str, paused: bool) -> str:
        """Pause (or resume) a job's queue: its worker's event sources off (on). One line."""
        from lambdajobs import queue_control

        queue = self.queue(key)
        if queue.job is None:
            raise QueueNotFoundError("only a job's queue can be paused (not the workflow or Scheduler DLQ).")
        spec = self.spec(queue.job)
        level = self._level(spec, queue)
        priority = spec.priority_of(level) if spec.priorities else None
        change = queue_control.pause if paused else queue_control.resume
        changed = change(spec, priority, config=self.config)
        self._cache.forget(("paused", spec.name))
        if paused:
            return (
                f"paused {queue.label}: {len(changed)} event source(s) off; its messages wait in the queue "
                "(SQS deletes what is older than the queue's retention, 4 days)"
            )
        return f"resumed {queue.label}: {len(changed)} event source(s) on"

    def _counts(self, job: str, hours: int) -> dict[str, int] | None:
        def compute() -> dict[str, int] | None:
            until = datetime.now(UTC)
            return ops.job_counts(job, until - timedelta(hours=hours), until, config=self.config)

        found: dict[str, int] | None = self._counts_cache.get(("counts", job, hours), compute)
        return found

    def job_rows(self, spec: JobSpec) -> JobRows:
        """One job's overview lines: every level's counters; finished counts and the last hour's
        activity per minute (from job records or CloudWatch: `ops`)."""
        try:
            queues = self.job_queues(spec)
        except Exception as exc:
            error = describe_error(exc)
            return JobRows(job=spec.name, rows=[QueueRow(Queue(spec.name, spec.name, ""), error=error)])
        pauses = self._pause_states(spec)
        rows = [self._row(q, pauses.get(q.key)) for q in queues]
        hour = day = activity = None
        note = None
        try:
            hour, day = self._counts(spec.name, 1), self._counts(spec.name, 24)
            activity = self._counts_cache.get(
                ("activity", spec.name), lambda: ops.activity(spec.name, minutes=60, config=self.config)
            )
        except JobIndexOffError as exc:
            note = str(exc)
        except Exception as exc:
            note = describe_error(exc)
        if hour is None and note is None:
            note = records.index_off_message(self.config.stack, "off", "counting finished jobs")
        nxt = spec.schedule.next_fire_times(1) if spec.schedule is not None else []
        return JobRows(
            job=spec.name,
            rows=rows,
            hour=hour,
            day=day,
            counts_note=note,
            activity=activity or None,
            next_fire=nxt[0] if nxt else None,
        )

    def overview(self) -> tuple[list[JobRows], QueueRow | None]:
        """Every job's lines, and the workflow queue's line (None: the stack has none).

        Raises:
            StackNotFoundError: the stack is not there (one line for the page, not one per job).
        """
        self.config.stack_entry()
        jobs = [self.job_rows(spec) for spec in self.specs]
        workflows = self.workflow_queue()
        return jobs, self._row(workflows) if workflows is not None else None

    # -- jobs -------------------------------------------------------------------------------------

    def status(self, job_id: str) -> JobStatus:
        return records.get_status(job_id, config=self.config)

    def cancel(self, job_id: str, job: str | None = None) -> CancelResult:
        """Cancel a job (`lambdajobs.cancel`, as `lambdajobs cancel` does); `job`, its name, also
        deletes the one-time schedule of a `run_at` job not started yet."""
        return cancel(job_id, job=self.spec(job).name if job else None, config=self.config)

    def list_jobs(self, job: str, state: JobState, cursor: str | None, limit: int = 25) -> Any:
        self.spec(job)
        return records.list_jobs(job, state, limit=limit, cursor=cursor, config=self.config)

    # -- dead letters ---------------------------------------------------------------------------

    def _fields(self, queue: Queue, envelope: dict[str, Any]) -> tuple[str, ...]:
        """The PII fields of a dead letter: its queue's job's, and its envelope's job's if another."""
        names = {queue.job, str(envelope.get("job")) if envelope.get("job") else None} - {None}
        found: list[str] = []
        for name in sorted(n for n in names if n):
            spec = self.by_name.get(name)
            found += spec.pii_fields if spec else ()
        return tuple(dict.fromkeys(found))

    def _letter(self, queue: Queue, d: DeadLetter) -> Letter:
        envelope = d.envelope
        fields = self._fields(queue, envelope)
        with _masking(fields, envelope.get("payload")) as scrub:
            note = None
            if envelope:
                body = json.dumps(mask_envelope(envelope, fields), indent=2, ensure_ascii=False)
            elif fields or queue.kind == "scheduler":
                # Not even JSON: no field can be found in it, so none can be masked.
                body, note = "", f"body not shown: {d.body_error}; it may hold personal data."
            else:
                body, note = d.body, d.body_error
            if len(body) > MAX_BODY_CHARS:
                body, note = body[:MAX_BODY_CHARS], f"cut at {MAX_BODY_CHARS} characters"
            attributes = {
                name: scrub(str(value.get("StringValue", value.get("BinaryValue", ""))))
                for name, value in sorted(d.attributes.items())
            }
            reason, error_type = d.reason, d.error_type
            if queue.kind == "scheduler" and d.attribute("ERROR_CODE"):
                error_type = d.attribute("ERROR_CODE") or error_type
                reason = d.attribute("ERROR_MESSAGE") or reason
            job_id = d.job_id
            return Letter(
                queue=queue,
                message_id=d.message_id,
                job=str(envelope["job"]) if envelope.get("job") else queue.job,
                job_id=scrub(job_id) if job_id else None,
                error_type=scrub(error_type),
                reason=scrub(reason),
                attempts=d.attempts,
                failed_at=d.failed_at,
                sent_at=d.sent_at,
                receive_count=d.receive_count,
                body=body,
                body_note=note,
                attributes=attributes,
                link_id=job_id,
            )

    def dead_letters(
        self,
        queue: Queue,
        cursor: str | None = None,
        *,
        limit: int = 50,
        error_type: str | None = None,
        older_than: timedelta | None = None,
    ) -> letters.LetterPage:
        """A page of a DLQ's letters from the dead records: nothing received (`dead_letters`). The
        workflow queue's and the Scheduler's DLQs have no records: all their messages are unrecorded."""
        if queue.job is None:
            found = self.depth(queue.dlq_url)
            return letters.LetterPage(items=[], cursor=None, recorded=0, depth=found, unrecorded=found)
        spec = self.spec(queue.job)
        return letters.list_letters(
            self.config,
            spec,
            self._level(spec, queue),
            cursor=cursor,
            limit=limit,
            error_type=error_type,
            older_than=older_than,
            dlq_url=queue.dlq_url,
            recorded=lambda count: int(self._counts_cache.get(("recorded", queue.key), count)),
        )

    @staticmethod
    def _level(spec: JobSpec, queue: Queue) -> str | None:
        """The queue level of a job's queue (its key `job@level`; None: the job's own queue)."""
        return queue.key.split("@", 1)[1] if "@" in queue.key else None

    def matching(self, queue: Queue, error_type: str | None, older_than: timedelta | None) -> int | None:
        """How many recorded letters pass the filter (None: a queue without records)."""
        if queue.job is None:
            return None
        spec = self.spec(queue.job)

        def count() -> int:
            return letters.count_matching(
                self.config, spec, self._level(spec, queue), error_type=error_type, older_than=older_than
            )

        found: int = self._counts_cache.get(("matching", queue.key, error_type, older_than), count)
        return found

    def peek(self, queue: Queue, *, only_unrecorded: bool) -> list[Letter]:
        """Receive a DLQ's messages to show them (each one's receive count goes up by one), masked:
        only those the worker never recorded (SQS moved them) for a job's DLQ."""
        found = letters.peek(self.config, queue.dlq_url, only_unrecorded=only_unrecorded)
        return [self._letter(queue, d) for d in found]

    def find(self, queue: Queue, wanted: str) -> Letter | None:
        """The message of `queue`'s DLQ whose message id or job id is `wanted` (receives until found)."""
        found = letters.find(self.config, queue.dlq_url, message_id=wanted, job_id=wanted)
        return self._letter(queue, found) if found is not None else None

    def _target(self, queue: Queue, envelope: dict[str, Any]) -> str | None:
        """Where a dead letter goes back to: its queue's source, or (the Scheduler's DLQ) the queue
        of the job and priority its envelope names."""
        if queue.url:
            return queue.url
        spec = self.by_name.get(str(envelope.get("job")))
        if spec is None:
            return None
        priority = envelope.get("priority")
        try:
            return self.config.queue_url(spec.name, spec.level_for(str(priority) if priority else None))
        except Exception:  # a priority the job no longer has: it stays
            return None

    def redrive(
        self,
        queue: Queue,
        message_ids: list[str] | None = None,
        *,
        job_ids: list[str] | None = None,
        error_type: str | None = None,
        older_than: timedelta | None = None,
        progress: letters.Progress | None = None,
    ) -> str:
        """Send a DLQ's messages back: those of `message_ids` or `job_ids` (a selection), else every
        one passing the filter (none: all). One line saying what moved.

        All of a job's or the workflow queue's DLQ on AWS, unfiltered: SQS's StartMessageMoveTask,
        which moves them in the background at up to 500 messages a second. Otherwise
        `letters.redrive`, batch by batch, `progress` updated as it goes.
        """
        selection = message_ids is not None or job_ids is not None
        unfiltered = not selection and not error_type and older_than is None
        if unfiltered and queue.url and self.native_moves:
            return self._move_task(queue)
        target: letters.Target = queue.url or (lambda d: self._target(queue, d.envelope))
        report = letters.redrive(
            self.config,
            queue.dlq_url,
            target,
            message_ids=message_ids,
            job_ids=job_ids,
            error_type=error_type,
            older_than=older_than,
            progress=progress,
        )
        line = letters.moved_line(report, queue.label)
        left = report.scanned - report.selected
        if queue.kind == "scheduler" and left and not selection:
            line += f"; {left} name no job of this stack (or do not pass the filter) and stay"
        if selection:
            missing = len(message_ids or ()) + len(job_ids or ()) - report.selected
            if missing > 0:
                line += f"; {missing} selected not found in the DLQ (redriven already, or purged)"
        return line

    def start_redrive(
        self,
        queue: Queue,
        *,
        message_ids: list[str] | None = None,
        job_ids: list[str] | None = None,
        error_type: str | None = None,
        older_than: timedelta | None = None,
        expected: int | None = None,
    ) -> letters.Progress:
        """`redrive` as a background task of the board (its progress polled by id)."""
        progress = letters.Progress(label=queue.label, key=queue.key, expected=expected)

        def run(p: letters.Progress) -> str:
            try:
                return self.redrive(
                    queue,
                    message_ids,
                    job_ids=job_ids,
                    error_type=error_type,
                    older_than=older_than,
                    progress=p,
                )
            finally:  # what moved is no longer in the DLQ: count again
                self._counts_cache.forget_queue(queue.key)

        return self.redrives.start(progress, run)

    def _move_task(self, queue: Queue) -> str:
        sqs = self.config.client("sqs")
        arns = {}
        for name, url in (("source", queue.dlq_url), ("destination", queue.url)):
            attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            arns[name] = attrs["Attributes"]["QueueArn"]
        count = self.depth(queue.dlq_url)
        sqs.start_message_move_task(SourceArn=arns["source"], DestinationArn=arns["destination"])
        return (
            f"started moving the DLQ of {queue.label} back to its queue (about {count} messages; "
            "SQS moves them in the background)"
        )

    def purge(self, queue: Queue, expected: int) -> tuple[bool, int, str]:
        """Delete every message of a DLQ, if it holds no more than the `expected` the operator
        confirmed, and mark the queue purged now (its dead records from before are no longer listed).
        Returns (purged, count now, one line)."""
        count = self.depth(queue.dlq_url)
        if count > expected:
            return False, count, f"the DLQ of {queue.label} now holds {count} messages, not {expected}"
        self.config.client("sqs").purge_queue(QueueUrl=queue.dlq_url)
        if queue.job is not None:  # after: a letter dead in between is counted as unrecorded, not lost
            records.mark_purged(queue.key, config=self.config)
            self._counts_cache.forget_queue(queue.key)
        return True, count, f"purged the DLQ of {queue.label} ({count} messages)"

    # -- schedules ------------------------------------------------------------------------------

    def cron_jobs(self, count: int = 3) -> list[CronRow]:
        return [
            CronRow(s.name, s.schedule.expression, s.schedule.timezone, s.schedule.next_fire_times(count))
            for s in self.specs
            if s.schedule is not None
        ]

    def trigger_now(self, job: str) -> str:
        """Run a cron job now, as `lambdajobs cron trigger` does: the envelope its schedule sends, for
        the current minute (a second trigger in the same minute is the same job id: it runs once)."""
        from lambdajobs.local.scheduler import slot_text

        spec = self.spec(job)
        if spec.schedule is None:
            raise ConfigurationError(f"job {job} is not a cron job.")
        slot = slot_text(datetime.now(UTC).replace(second=0, microsecond=0))
        body = json.dumps(spec.scheduled_envelope(slot), separators=(",", ":"))
        self.config.client("sqs").send_message(QueueUrl=self.config.queue_url(spec.name), MessageBody=body)
        return f"{spec.name}@{slot}"

    def run_once_now(self, name: str) -> tuple[str | None, str, str]:
        """Run a pending one-time schedule (`enqueue(run_at=...)`) now: send the envelope it would
        send, to the same queue (same job id: it runs once), then delete the schedule. If the delete
        fails, the schedule still fires at its time and its run finds the job done (the job id is the
        idempotency key). Returns (job, job id, one line).

        (A message sent with an SQS delay cannot be moved forward: SQS has no call for it. Only a
        schedule, which holds its message outside SQS, can be run early.)
        """
        _, group, _ = self.config.scheduler_settings()
        scheduler = self.config.client("scheduler")
        item = scheduler.get_schedule(Name=name, GroupName=group)
        target = item.get("Target", {})
        body = str(target.get("Input") or "")
        try:
            envelope = json.loads(body)
        except ValueError:
            envelope = None
        if not isinstance(envelope, dict) or not envelope.get("id") or not envelope.get("job"):
            raise ConfigurationError(f"schedule {name} does not hold a job's envelope: not run.")
        spec = self.spec(str(envelope["job"]))
        priority = envelope.get("priority")
        url = self.config.queue_url(spec.name, spec.level_for(str(priority) if priority else None))
        group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
        self.config.client("sqs").send_message(
            QueueUrl=url, MessageBody=body, **({"MessageGroupId": group_id} if group_id else {})
        )
        job_id = str(envelope["id"])
        with _masking(spec.pii_fields, envelope.get("payload")) as scrub:
            shown = scrub(job_id)
        try:
            scheduler.delete_schedule(Name=name, GroupName=group)
        except Exception as exc:
            return (
                spec.name,
                job_id,
                (
                    f"sent {shown} now; its schedule could not be deleted ({describe_error(exc)}): when it "
                    "fires, its run finds the job done"
                ),
            )
        return spec.name, job_id, f"sent {shown} now and deleted its schedule: it runs once"

    def one_time_schedules(self, limit: int = MAX_ONE_TIME) -> tuple[list[OneTime], bool]:
        """Pending one-time schedules (`enqueue(run_at=...)`), soonest first, at most `limit`; and
        whether there are more."""
        _, group, _ = self.config.scheduler_settings()
        scheduler = self.config.client("scheduler")
        names: list[str] = []
        more = False
        request: dict[str, Any] = {"GroupName": group}
        while True:
            page = scheduler.list_schedules(**request)
            names += [s["Name"] for s in page.get("Schedules", [])]
            if len(names) > limit:
                names, more = names[:limit], True
                break
            if not page.get("NextToken"):
                break
            request["NextToken"] = page["NextToken"]
        found = []
        for name in names:
            item = scheduler.get_schedule(Name=name, GroupName=group)
            match = _AT.match(item.get("ScheduleExpression", ""))
            run_at = datetime.fromisoformat(match[1]).replace(tzinfo=UTC) if match else None
            try:
                envelope = json.loads(item.get("Target", {}).get("Input") or "{}")
            except ValueError:
                envelope = {}
            envelope = envelope if isinstance(envelope, dict) else {}
            job = str(envelope["job"]) if envelope.get("job") else None
            spec = self.by_name.get(job or "")
            job_id = str(envelope["id"]) if envelope.get("id") else None
            if job_id and spec is not None:
                with _masking(spec.pii_fields, envelope.get("payload")) as scrub:
                    job_id = scrub(job_id)
            found.append(OneTime(name, run_at, job, job_id, str(item.get("State", ""))))
        far = datetime.max.replace(tzinfo=UTC)
        return sorted(found, key=lambda o: o.run_at or far), more
