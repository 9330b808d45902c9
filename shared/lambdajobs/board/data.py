"""What the board shows and does, read and written through the same data layer as the CLI.

Queues come from the stack's manifest (`StackConfig.queue`, as `lambdajobs queues` reads them),
counters from `ops.queue_health` and `ops.oldest_age_seconds`, finished counts and the per-minute
activity from `ops.job_counts` and `ops.activity`, job records from `records.get_status` and
`records.list_jobs` (the one status reader), dead letters from `ops.peek_dead_letters`, redrives from
`ops.redrive`, cancels from `lambdajobs.cancel`. Only what is the board's own lives here: which
queues a page names (a job's priority levels, the workflow queue, the Scheduler's DLQ), a dead
letter's body with its job's `pii_fields` masked (`runtime.pii`, the masking the worker's logs get),
and the choice of redrive path.

CloudWatch and the job index are paid per request: what they answer is kept `cache_seconds` (their
figures are per minute anyway), so a page polling every few seconds does not multiply the bill.
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
#: How many dead letters a page peeks at most (each peek receives and releases: O(n) calls / 10).
MAX_PEEK = 500
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


@contextmanager
def _masking(fields: tuple[str, ...], payload: Any) -> Iterator[Callable[[str], str]]:
    """`pii.scrub` with these fields' values (from `payload`) bound: the worker's masking."""
    with pii.bound(fields, payload if isinstance(payload, dict) else {}):
        yield pii.scrub


def _erase(node: Any, path: list[str]) -> Any:
    """`node` with the value at `path` (a payload field, dotted) replaced by the mask."""
    if not isinstance(node, dict) or not path or path[0] not in node:
        return node
    head, rest = path[0], path[1:]
    return {**node, head: pii.MASK if not rest else _erase(node[head], rest)}


def _scrubbed(node: Any, scrub: Callable[[str], str]) -> Any:
    if isinstance(node, dict):
        return {scrub(str(k)): _scrubbed(v, scrub) for k, v in node.items()}
    if isinstance(node, list):
        return [_scrubbed(v, scrub) for v in node]
    if isinstance(node, str):
        return scrub(node)
    if isinstance(node, int | float) and not isinstance(node, bool):
        text = str(node)
        return pii.MASK if scrub(text) != text else node
    return node


def mask_envelope(envelope: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """An envelope with its payload's PII fields erased, and their values masked wherever else they
    appear (the id, another field, a nested list): what `pii` does to the worker's log lines."""
    payload = envelope.get("payload")
    with _masking(fields, payload) as scrub:
        if isinstance(payload, dict):
            for name in fields:
                payload = _erase(payload, name.split("."))
            envelope = {**envelope, "payload": payload}
        return dict(_scrubbed(envelope, scrub))


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

    def _row(self, queue: Queue) -> QueueRow:
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
        return QueueRow(queue=queue, health=health, oldest_seconds=oldest)

    def _counts(self, job: str, hours: int) -> dict[str, int] | None:
        def compute() -> dict[str, int] | None:
            until = datetime.now(UTC)
            return ops.job_counts(job, until - timedelta(hours=hours), until, config=self.config)

        found: dict[str, int] | None = self._cache.get(("counts", job, hours), compute)
        return found

    def job_rows(self, spec: JobSpec) -> JobRows:
        """One job's overview lines: every level's counters; finished counts and the last hour's
        activity per minute (from job records or CloudWatch: `ops`)."""
        try:
            queues = self.job_queues(spec)
        except Exception as exc:
            error = describe_error(exc)
            return JobRows(job=spec.name, rows=[QueueRow(Queue(spec.name, spec.name, ""), error=error)])
        rows = [self._row(q) for q in queues]
        hour = day = activity = None
        note = None
        try:
            hour, day = self._counts(spec.name, 1), self._counts(spec.name, 24)
            activity = self._cache.get(
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

    def dead_letters(self, queue: Queue, limit: int = 50) -> list[Letter]:
        """Up to `limit` messages of a DLQ, oldest first, masked; they stay in the DLQ."""
        letters = ops.peek_dead_letters(queue.dlq_url, limit=min(limit, MAX_PEEK), config=self.config)
        return [self._letter(queue, d) for d in sorted(letters, key=lambda d: d.sent_at)]

    def find_dead_letter(self, job: str, job_id: str) -> Letter | None:
        """A job's message in its DLQs (any level), if it is among the first `MAX_PEEK` of each."""
        for queue in self.job_queues(self.spec(job)):
            for d in ops.peek_dead_letters(queue.dlq_url, limit=MAX_PEEK, config=self.config):
                if d.job_id == job_id:
                    return self._letter(queue, d)
        return None

    def _target(self, queue: Queue, envelope: dict[str, Any]) -> str | None:
        """Where a dead letter goes back to: its queue's source, or (the Scheduler's DLQ) the queue
        of the job and priority its envelope names."""
        if queue.url:
            return queue.url
        spec = self.by_name.get(str(envelope.get("job")))
        if spec is None:
            return None
        priority = envelope.get("priority")
        return self.config.queue_url(spec.name, spec.level_for(str(priority) if priority else None))

    def redrive(self, queue: Queue, message_ids: list[str] | None = None) -> str:
        """Send a DLQ's messages back (those of `message_ids`, or all): one line saying what moved.

        All of a job's or the workflow queue's DLQ on AWS: SQS's StartMessageMoveTask, which moves
        them in the background at up to 500 messages a second. Otherwise `ops.redrive`, which deletes
        a message from the DLQ only once it was sent back (a filter, or the local stack).
        """
        if message_ids is None and queue.url and self.native_moves:
            return self._move_task(queue)
        if queue.url:
            report = ops.redrive(
                queue.dlq_url,
                queue.url,
                message_ids=message_ids,
                visibility_seconds=60,
                config=self.config,
            )
            return self._moved(report.moved, report.failed, queue)
        # The Scheduler's DLQ: each message back to its own job's queue.
        targets: dict[str, list[str]] = {}
        unknown = 0
        for d in ops.peek_dead_letters(queue.dlq_url, limit=MAX_PEEK, config=self.config):
            if message_ids is not None and d.message_id not in message_ids:
                continue
            target = self._target(queue, d.envelope)
            if target is None:
                unknown += 1
            else:
                targets.setdefault(target, []).append(d.message_id)
        moved = failed = 0
        for target, ids in targets.items():
            report = ops.redrive(
                queue.dlq_url, target, message_ids=ids, visibility_seconds=60, config=self.config
            )
            moved, failed = moved + report.moved, failed + report.failed
        line = self._moved(moved, failed, queue)
        return line + (f"; {unknown} name no job of this stack and stay" if unknown else "")

    @staticmethod
    def _moved(moved: int, failed: int, queue: Queue) -> str:
        plural = "s" if moved != 1 else ""
        line = f"moved {moved} message{plural} from the DLQ of {queue.label} back to its queue"
        if failed:
            line += f"; {failed} could not be sent back and stay in the DLQ: try again"
        return line

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
        confirmed. Returns (purged, count now, one line)."""
        count = self.depth(queue.dlq_url)
        if count > expected:
            return False, count, f"the DLQ of {queue.label} now holds {count} messages, not {expected}"
        self.config.client("sqs").purge_queue(QueueUrl=queue.dlq_url)
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
