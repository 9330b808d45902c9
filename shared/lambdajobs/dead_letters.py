"""Dead letters for operators (the board and the CLI): listed without receiving, found and redriven
by id, redriven by a filter with progress.

Viewing a DLQ must not change its messages: every ReceiveMessage raises a message's
ApproximateReceiveCount (and hides it from other readers for a while). So a listing reads what the
worker recorded when it dead-lettered a job: the job's `dead` record, which the job index holds in
every mode (`records.list_dead`, one Query and one BatchGetItem per page). Only records that entered
`dead` after the queue's last purge count (`records.purged_at`): a purge deletes the messages, not the
records.

What the worker never recorded is still in the DLQ's depth: messages SQS moved itself after
`maxReceiveCount` receives (a crash, a throttle, an init failure), the workflow queue's and the
Scheduler's DLQs (no job record at all). `LetterPage.unrecorded` counts them (depth - recorded); seeing
them takes a receive (`peek`), which is an action of its own.

Acting needs the messages themselves, so `find`, `redrive_one` and `redrive` receive: batches of 10,
each message hidden (`visibility_seconds`) while it is looked at, so a scan reaches every message once.
A message that is not wanted stays hidden until the scan ends (or it would come back in the next
batch), then is released at once. `find` and a selection stop as soon as what they look for is in hand.
A message is deleted from the DLQ only once SendMessageBatch reported it sent: interrupted, the unmoved
come back after `visibility_seconds`, and one sent but not deleted runs once (its job id is the
idempotency key).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lambdajobs.ops import DeadLetter, _dead_letter, redrive_entry, release
from lambdajobs.runtime import pii, records
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.producer import chunk_by_size
from lambdajobs.runtime.settings import (
    ATTR_FAILED_AT,
    queue_key,
)
from lambdajobs.runtime.spec import JobSpec

#: How long a message looked at stays hidden from other readers (a scan of 1,000 messages on the
#: local stack takes seconds; on AWS, 100 ReceiveMessage calls).
VISIBILITY_SECONDS = 300
#: A page of the listing reads the index at most this many times to fill itself past a filter.
MAX_ROUNDS = 10
#: At most this many messages a `peek` receives (each receive counts on the message).
MAX_PEEK = 500


@dataclass(frozen=True)
class Entry:
    """A dead letter as its job's record tells it: nothing received. Texts as they may be shown:
    the job id and payload with the job's `pii_fields` values masked (the worker already masked the
    error message when it wrote it)."""

    job: str
    job_id: str
    level: str | None
    error_type: str
    reason: str
    attempts: int
    failed_at: str | None
    payload: Any = None
    payload_cut: bool = False
    #: The job id as it is (`job_id` is masked): what `find` and `redrive` take.
    link_id: str = ""


@dataclass(frozen=True)
class LetterPage:
    """One page of a DLQ's letters (newest first) and its counts: `recorded` letters have a dead
    record, `depth` is every message in the DLQ, `unrecorded` = depth - recorded (never below 0):
    what SQS moved itself, seen only by receiving."""

    items: list[Entry]
    cursor: str | None
    recorded: int
    depth: int
    unrecorded: int
    #: Records read past a filter without filling the page: the cursor goes on from there.
    scanned: int = 0


@dataclass
class Progress:
    """A redrive as it goes (the board's background task, the CLI's line): what was scanned,
    selected (wanted), moved back and what failed. `expected`: how many the filter should select,
    when it is known beforehand (from the records)."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    label: str = ""
    #: The queue's key (the board's `job`, `job@level`, `_workflows`, `_scheduler`).
    key: str = ""
    expected: int | None = None
    scanned: int = 0
    selected: int = 0
    moved: int = 0
    failed: int = 0
    done: bool = False
    line: str | None = None
    error: str | None = None
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None


def _now() -> datetime:
    return datetime.now(UTC)


def depth(config: StackConfig, dlq_url: str) -> int:
    """Messages in a DLQ: visible, in flight and delayed (one GetQueueAttributes, no receive)."""
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attrs = config.client("sqs").get_queue_attributes(QueueUrl=dlq_url, AttributeNames=names)
    return sum(int(attrs["Attributes"].get(n, 0)) for n in names)


def record_level(spec: JobSpec, level: str | None) -> str | None:
    """The level name a dead record of queue level `level` carries (`JobStatus.level`): the
    priority's name, None for a job without priorities."""
    return spec.priority_of(level) if spec.priorities else None


# -- masking ----------------------------------------------------------------------------------------


def mask_payload(payload: Any, fields: tuple[str, ...]) -> Any:
    """A payload with its PII fields erased and their values masked wherever else they appear."""
    return pii.mask_payload(payload, fields)


def masked_id(job_id: str, fields: tuple[str, ...], payload: Any) -> str:
    """A job id with the values of the payload's PII fields masked (an id that holds an address)."""
    if not fields or not isinstance(payload, dict):
        return job_id
    with pii.bound(fields, payload):
        return pii.scrub(job_id)


def entry_of(spec: JobSpec, status: Any) -> Entry:
    """A dead record as a listing shows it, masked by the job's `pii_fields`."""
    error = status.error or {}
    payload = getattr(status, "payload", None)
    fields = tuple(spec.pii_fields)
    return Entry(
        job=status.job or spec.name,
        job_id=masked_id(status.job_id, fields, payload),
        level=getattr(status, "level", None),
        error_type=str(error.get("type") or "?"),
        reason=str(error.get("message") or ""),
        attempts=int(status.attempts or 0),
        failed_at=status.finished_at or status.updated_at,
        payload=mask_payload(payload, fields) if payload is not None else None,
        payload_cut=bool(getattr(status, "payload_cut", False)),
        link_id=status.job_id,
    )


# -- listing (no receive) ---------------------------------------------------------------------------


def _age_seconds(moment: str | None, now: datetime) -> float:
    if not moment:
        return 0.0
    try:
        at = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return 0.0
    return (now - (at if at.tzinfo else at.replace(tzinfo=UTC))).total_seconds()


def matches(entry: Entry, error_type: str | None, older_than: timedelta | None, now: datetime) -> bool:
    """Whether a listed letter passes the filter (the same test `redrive` applies to a message)."""
    if error_type and entry.error_type != error_type:
        return False
    return older_than is None or _age_seconds(entry.failed_at, now) >= older_than.total_seconds()


def counts(config: StackConfig, spec: JobSpec, level: str | None, dlq_url: str) -> tuple[int, int, int]:
    """(recorded, depth, unrecorded) of a job's DLQ at `level`: a counting Query and one
    GetQueueAttributes."""
    after = records.purged_at(queue_key(spec.name, level), config=config)
    recorded = records.count_dead(spec.name, level=record_level(spec, level), after=after, config=config)
    found = depth(config, dlq_url)
    return recorded, found, max(0, found - recorded)


def list_letters(
    config: StackConfig,
    spec: JobSpec,
    level: str | None,
    *,
    cursor: str | None = None,
    limit: int = 50,
    error_type: str | None = None,
    older_than: timedelta | None = None,
    dlq_url: str | None = None,
    recorded: Callable[[Callable[[], int]], int] | None = None,
) -> LetterPage:
    """A page of the DLQ of `spec` at queue level `level`, newest first, from the dead records: no
    ReceiveMessage, so no message's receive count changes. `cursor` from the previous page.

    A filter (`error_type`, `older_than`) is applied to the records read; a page reads the index at
    most `MAX_ROUNDS` times to fill itself, and says how many it read past (`scanned`).
    `recorded`: how the count of recorded letters is had, given the function that counts them (the
    board keeps it a while: a counting Query per view, and with levels every record read, is what
    a page polled by many must not pay each time).
    """
    limit = max(1, min(int(limit), 100))
    after = records.purged_at(queue_key(spec.name, level), config=config)
    named = record_level(spec, level)
    now = _now()
    items: list[Entry] = []
    scanned = 0
    filtered = bool(error_type) or older_than is not None
    for _ in range(MAX_ROUNDS):
        # read no more than the page still needs: the cursor then never skips a record
        page = records.list_dead(
            spec.name, level=named, after=after, limit=limit - len(items), cursor=cursor, config=config
        )
        cursor = page.cursor
        for status in page.items:
            scanned += 1
            entry = entry_of(spec, status)
            if matches(entry, error_type, older_than, now):
                items.append(entry)
        if len(items) >= limit or cursor is None or not filtered:
            break
    url = dlq_url or config.dlq_url(spec.name, level)

    def count() -> int:
        return int(records.count_dead(spec.name, level=named, after=after, config=config))

    counted = recorded(count) if recorded is not None else count()
    found = depth(config, url)
    return LetterPage(
        items=items,
        cursor=cursor,
        recorded=counted,
        depth=found,
        unrecorded=max(0, found - counted),
        scanned=scanned - len(items),
    )


def count_matching(
    config: StackConfig,
    spec: JobSpec,
    level: str | None,
    *,
    error_type: str | None = None,
    older_than: timedelta | None = None,
) -> int:
    """How many recorded letters pass the filter (every page read; what "select all N" names)."""
    after = records.purged_at(queue_key(spec.name, level), config=config)
    named = record_level(spec, level)
    if not error_type and older_than is None:
        return int(records.count_dead(spec.name, level=named, after=after, config=config))
    now = _now()
    total, cursor = 0, None
    while True:
        page = records.list_dead(spec.name, level=named, after=after, limit=100, cursor=cursor, config=config)
        total += sum(1 for s in page.items if matches(entry_of(spec, s), error_type, older_than, now))
        cursor = page.cursor
        if cursor is None:
            return total


# -- receiving: find, peek ----------------------------------------------------------------------------


class _Scan:
    """Receive a DLQ's messages once each: batches of 10, each message hidden while the scan runs.
    `held` are the messages looked at and not taken: release them at the end (`close`)."""

    def __init__(self, config: StackConfig, dlq_url: str, visibility_seconds: int) -> None:
        self.config = config
        self.dlq_url = dlq_url
        self.visibility_seconds = visibility_seconds
        self.sqs = config.client("sqs")
        self.seen: set[str] = set()
        self.held: dict[str, DeadLetter] = {}
        self.empty_rounds = 0

    def batch(self) -> list[DeadLetter] | None:
        """The next messages not seen yet; None once the DLQ has nothing more to give (two receives
        in a row brought nothing new)."""
        while self.empty_rounds < 2:
            got = self.sqs.receive_message(
                QueueUrl=self.dlq_url,
                MaxNumberOfMessages=10,
                VisibilityTimeout=self.visibility_seconds,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            new = [_dead_letter(m) for m in got if m["MessageId"] not in self.seen]
            for m in got:  # the newest receipt handle of one seen again is the one that acts
                if m["MessageId"] in self.held:
                    self.held[m["MessageId"]] = _dead_letter(m)
            if not new:
                self.empty_rounds += 1
                continue
            self.empty_rounds = 0
            self.seen.update(d.message_id for d in new)
            return new
        return None

    def close(self) -> None:
        release(self.dlq_url, list(self.held.values()), config=self.config)
        self.held.clear()


def _wanted(letter: DeadLetter, message_ids: Collection[str] | None, job_ids: Collection[str] | None) -> bool:
    if message_ids is not None and letter.message_id in message_ids:
        return True
    return job_ids is not None and letter.job_id in job_ids


def find(
    config: StackConfig,
    dlq_url: str,
    *,
    message_id: str | None = None,
    job_id: str | None = None,
    progress: Callable[[int], None] | None = None,
    visibility_seconds: int = VISIBILITY_SECONDS,
) -> DeadLetter | None:
    """The DLQ message with this message id or job id (None: not there). Receives until it is found,
    then makes every message it received visible again (each one's receive count went up by one).
    `progress(scanned)` after each batch."""
    if message_id is None and job_id is None:
        raise ValueError("find needs a message id or a job id.")
    scan = _Scan(config, dlq_url, visibility_seconds)
    ids = {message_id} if message_id else None
    jobs = {job_id} if job_id else None
    try:
        while (batch := scan.batch()) is not None:
            for letter in batch:
                scan.held[letter.message_id] = letter
            if progress:
                progress(len(scan.seen))
            found = next((d for d in batch if _wanted(d, ids, jobs)), None)
            if found is not None:
                return found
        return None
    finally:
        scan.close()


def peek(
    config: StackConfig,
    dlq_url: str,
    *,
    limit: int = MAX_PEEK,
    only_unrecorded: bool = False,
) -> list[DeadLetter]:
    """Up to `limit` messages of a DLQ, oldest first, received and made visible again: each one's
    receive count goes up by one. `only_unrecorded`: only those the worker did not move (no
    `lambdajobs.failed_at` attribute: SQS moved them after maxReceiveCount receives)."""
    scan = _Scan(config, dlq_url, VISIBILITY_SECONDS)
    try:
        while len(scan.held) < limit and (batch := scan.batch()) is not None:
            for letter in batch:  # every one received is released, even past the limit
                scan.held[letter.message_id] = letter
        letters = list(scan.held.values())
    finally:
        scan.close()
    if only_unrecorded:
        letters = [d for d in letters if d.attribute(ATTR_FAILED_AT) is None]
    return sorted(letters, key=lambda d: d.sent_at)[:limit]


# -- redriving --------------------------------------------------------------------------------------

#: Where a dead letter goes back to: a queue URL, or a function of the letter (the Scheduler's DLQ:
#: each message to its own job's queue; None: nowhere, it stays).
Target = str | Callable[[DeadLetter], str | None]


def _send_back(config: StackConfig, dlq_url: str, target: str, letters: list[DeadLetter]) -> tuple[int, int]:
    """Send letters to `target`, then delete each one sent from the DLQ; release the unsent.
    Returns (moved, failed)."""
    sqs = config.client("sqs")
    moved = failed = 0
    sized = [(i, d.body + json.dumps(d.attributes, default=str)) for i, d in enumerate(letters)]
    for chunk_ids in chunk_by_size(sized):
        chunk = [letters[i] for i, _ in chunk_ids]
        try:
            response = sqs.send_message_batch(
                QueueUrl=target, Entries=[redrive_entry(i, d) for i, d in enumerate(chunk)]
            )
        except Exception:
            release(dlq_url, chunk, config=config)  # not sent: back at once
            raise
        sent = [chunk[int(ok["Id"])] for ok in response.get("Successful", [])]
        unsent = [chunk[int(bad["Id"])] for bad in response.get("Failed", [])]
        if sent:
            deleted = sqs.delete_message_batch(
                QueueUrl=dlq_url,
                Entries=[{"Id": str(i), "ReceiptHandle": d.receipt_handle} for i, d in enumerate(sent)],
            )
            # Sent but still in the DLQ: it may be redriven again later; the job id keeps it one run.
            failed += len(deleted.get("Failed", []))
            moved += len(sent) - len(deleted.get("Failed", []))
        release(dlq_url, unsent, config=config)
        failed += len(unsent)
    return moved, failed


def _select(
    letter: DeadLetter,
    *,
    message_ids: Collection[str] | None,
    job_ids: Collection[str] | None,
    error_type: str | None,
    older_than: timedelta | None,
    now: datetime,
) -> bool:
    if (message_ids is not None or job_ids is not None) and not _wanted(letter, message_ids, job_ids):
        return False
    if error_type and letter.error_type != error_type:
        return False
    return older_than is None or now - letter.sent_at >= older_than


def redrive(
    config: StackConfig,
    dlq_url: str,
    target: Target,
    *,
    message_ids: Collection[str] | None = None,
    job_ids: Collection[str] | None = None,
    error_type: str | None = None,
    older_than: timedelta | None = None,
    progress: Progress | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    visibility_seconds: int = VISIBILITY_SECONDS,
) -> Progress:
    """Move the DLQ's messages that pass every filter given back to their queue, batch by batch as
    they are received (so `progress` moves while a deep DLQ is scanned). `message_ids`/`job_ids`: a
    selection (the scan stops once all are found); `error_type`, `older_than`: a filter over every
    message. Returns the progress, done; `on_progress` is called after each batch."""
    report = progress or Progress()
    wanted_ids = set(message_ids) if message_ids is not None else None
    wanted_jobs = set(job_ids) if job_ids is not None else None
    selection = (wanted_ids or set()) | (wanted_jobs or set())
    scan = _Scan(config, dlq_url, visibility_seconds)
    now = _now()
    found: set[str] = set()
    try:
        while (wanted_ids is None and wanted_jobs is None) or len(found) < len(selection):
            batch = scan.batch()
            if batch is None:
                break
            report.scanned += len(batch)
            chosen: dict[str, list[DeadLetter]] = {}
            for letter in batch:
                keep = _select(
                    letter,
                    message_ids=wanted_ids,
                    job_ids=wanted_jobs,
                    error_type=error_type,
                    older_than=older_than,
                    now=now,
                )
                where = (target if isinstance(target, str) else target(letter)) if keep else None
                if where is None:
                    scan.held[letter.message_id] = letter
                    continue
                found.update(x for x in (letter.message_id, letter.job_id) if x in selection)
                chosen.setdefault(where, []).append(letter)
            for where, letters in chosen.items():
                report.selected += len(letters)
                moved, failed = _send_back(config, dlq_url, where, letters)
                report.moved += moved
                report.failed += failed
            if on_progress:
                on_progress(report)
    finally:
        scan.close()
    report.done = True
    report.finished_at = _now()
    return report


def redrive_one(
    config: StackConfig,
    dlq_url: str,
    target: Target,
    *,
    message_id: str | None = None,
    job_id: str | None = None,
    progress: Progress | None = None,
) -> Progress:
    """Move one message, by message id or job id, back to its queue (receives until it is found;
    the rest are released). `Progress.moved` is 1 when it moved, 0 when it was not found."""
    if message_id is None and job_id is None:
        raise ValueError("redrive_one needs a message id or a job id.")
    return redrive(
        config,
        dlq_url,
        target,
        message_ids=[message_id] if message_id else None,
        job_ids=[job_id] if job_id else None,
        progress=progress,
    )


def moved_line(report: Progress, label: str) -> str:
    """One line saying what a redrive moved (the board's notice, the CLI's output)."""
    plural = "s" if report.moved != 1 else ""
    line = f"moved {report.moved} message{plural} from the DLQ of {label} back to its queue"
    if report.failed:
        line += f"; {report.failed} could not be sent back and stay in the DLQ: try again"
    return line


class Tasks:
    """Redrives running in the background of one process (the board's), by id; kept an hour after
    they end. Thread-safe: each runs on its own thread and updates its `Progress` in place."""

    KEEP_SECONDS = 3600

    def __init__(self) -> None:
        self._tasks: dict[str, Progress] = {}
        self._lock = threading.Lock()

    def start(self, progress: Progress, run: Callable[[Progress], str]) -> Progress:
        """Run `run(progress)` on a thread; its return is the line shown when it ends."""
        with self._lock:
            self._forget_old()
            self._tasks[progress.id] = progress

        def work() -> None:
            try:
                progress.line = run(progress)
            except Exception as exc:  # shown on the progress page
                from lambdajobs.ops import describe_error

                progress.error = describe_error(exc) or f"{type(exc).__name__}: {exc}"
            finally:
                progress.done = True
                progress.finished_at = progress.finished_at or _now()

        threading.Thread(target=work, name=f"redrive-{progress.id}", daemon=True).start()
        return progress

    def get(self, task_id: str) -> Progress | None:
        with self._lock:
            return self._tasks.get(task_id)

    def _forget_old(self) -> None:
        cutoff = time.time() - self.KEEP_SECONDS
        for key, task in list(self._tasks.items()):
            if task.finished_at is not None and task.finished_at.timestamp() < cutoff:
                del self._tasks[key]
