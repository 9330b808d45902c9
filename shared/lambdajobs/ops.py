"""Operator helpers shared by the CLI, the board and the demo: queue health, job counts and activity,
dead letters."""

from __future__ import annotations

import json
import time
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.envelope import parse_body
from lambdajobs.runtime.errors import EnvelopeError
from lambdajobs.runtime.producer import chunk_by_size
from lambdajobs.runtime.settings import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_TYPE,
    ATTR_FAILED_AT,
    ATTR_REASON,
    ATTR_REDRIVEN,
    HANDBACK_ATTRIBUTES,
)

PEEK_VISIBILITY_SECONDS = 30


def age_text(seconds: float | None, nothing: str = "-") -> str:
    """90 -> '90s', 5400 -> '90m', 36000 -> '10.0h', 3 days -> '3.0d' (the CLI's and the board's)."""
    if seconds is None:
        return nothing
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def duration_text(ms: int | float | None, nothing: str = "-") -> str:
    """How long a durable job's step ran (`JobStatus.steps`), as the CLI and the board write it:
    350 -> '350 ms', 12_300 -> '12.3 s', 240_000 -> '4m 00s', 5_400_000 -> '1h 30m'."""
    if ms is None:
        return nothing
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def until_text(moment: str | None, now: datetime | None = None, nothing: str = "-") -> str:
    """How far a time (RFC 3339 text, e.g. a parked job's `wake_at`) is from now: 'in 59m', or 'due'
    once it has passed; `nothing` for no time or text that is not one."""
    if not moment:
        return nothing
    try:
        at = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    except ValueError:
        return nothing
    at = at if at.tzinfo else at.replace(tzinfo=UTC)
    left = (at - (now or datetime.now(UTC))).total_seconds()
    return f"in {age_text(left)}" if left > 0 else "due"


def describe_error(
    exc: BaseException, *, elsewhere: str = "pass --stack, --region or --profile"
) -> str | None:
    """One line for an error an operator can cause or meet (the CLI and the board say the same), or
    None for one that is not theirs (a bug: the caller decides). `elsewhere`: how to point at another
    stack, for a stack that is not there."""
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
        NoRegionError,
        PartialCredentialsError,
    )

    from lambdajobs.runtime.errors import LambdaJobsError, StackNotFoundError

    if isinstance(exc, StackNotFoundError):
        return f"{exc} ({elsewhere} to point elsewhere)"
    if isinstance(exc, NoCredentialsError | PartialCredentialsError):
        return "no AWS credentials found: set AWS_PROFILE (or --profile), or run `aws configure`."
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region or set AWS_REGION."
    if isinstance(exc, EndpointConnectionError):
        return (
            f"cannot reach AWS at {exc.kwargs.get('endpoint_url')}: is the endpoint (or `lambdajobs dev`) up?"
        )
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"AWS refused {exc.operation_name}: {error.get('Code')}: {error.get('Message')}"
    if isinstance(exc, LambdaJobsError | ValueError | BotoCoreError):
        return str(exc)
    return None


@dataclass(frozen=True)
class DeadLetter:
    message_id: str
    receipt_handle: str
    body: str
    attributes: dict[str, Any]  # message attributes, in SendMessage's shape
    sent_at: datetime
    receive_count: int
    #: The fair-queue tenant it was sent with (`MessageGroupId`): a redrive keeps it.
    group: str | None = None

    @property
    def envelope(self) -> dict[str, Any]:
        """The body as a JSON object (the worker's parser), or {} when it is not one."""
        try:
            return parse_body(self.body)
        except EnvelopeError:
            return {}

    @property
    def body_error(self) -> str | None:
        """Why the body is not even a JSON object (nested too deeply, not JSON...), or None."""
        try:
            parse_body(self.body)
        except EnvelopeError as exc:
            return str(exc)
        return None

    @property
    def job_id(self) -> str | None:
        value = self.envelope.get("id")
        return str(value) if value is not None else None

    def attribute(self, name: str) -> str | None:
        value = self.attributes.get(name) or {}
        text = value.get("StringValue")
        return str(text) if text is not None else None

    @property
    def error_type(self) -> str:
        # Messages moved by SQS redrive (not by the worker) carry no reason of ours.
        return self.attribute(ATTR_ERROR_TYPE) or "MaxReceiveCountExceeded"

    @property
    def reason(self) -> str:
        return self.attribute(ATTR_REASON) or "moved by SQS redrive after max_attempts receives"

    @property
    def attempts(self) -> str:
        return self.attribute(ATTR_ATTEMPTS) or "?"

    @property
    def failed_at(self) -> str | None:
        return self.attribute(ATTR_FAILED_AT)

    def age_seconds(self, now: datetime | None = None) -> float:
        return ((now or datetime.now(UTC)) - self.sent_at).total_seconds()


@dataclass(frozen=True)
class QueueHealth:
    job: str
    depth: int
    in_flight: int
    delayed: int
    #: Every message in the DLQ: visible ones and those someone is looking at (a `dlq list` or a
    #: redrive hides them for a while; they are still there).
    dlq_depth: int
    #: Of `dlq_depth`, the ones hidden right now.
    dlq_in_flight: int = 0


def queue_health(job: str, queue_url: str, dlq_url: str, *, config: StackConfig | None = None) -> QueueHealth:
    """Queue and DLQ counters (two GetQueueAttributes calls)."""
    sqs = resolve(config).client("sqs")
    names = [
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesNotVisible",
        "ApproximateNumberOfMessagesDelayed",
    ]
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=names)["Attributes"]
    dlq = sqs.get_queue_attributes(
        QueueUrl=dlq_url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    dlq_hidden = int(dlq.get("ApproximateNumberOfMessagesNotVisible", 0))
    return QueueHealth(
        job=job,
        depth=int(attrs.get("ApproximateNumberOfMessages", 0)),
        in_flight=int(attrs.get("ApproximateNumberOfMessagesNotVisible", 0)),
        delayed=int(attrs.get("ApproximateNumberOfMessagesDelayed", 0)),
        dlq_depth=int(dlq.get("ApproximateNumberOfMessages", 0)) + dlq_hidden,
        dlq_in_flight=dlq_hidden,
    )


def oldest_age_seconds(queue_url: str, *, config: StackConfig | None = None) -> float | None:
    """ApproximateAgeOfOldestMessage from CloudWatch over the last 5 minutes (SQS does not answer it
    directly); None when CloudWatch has no datapoint (an idle queue). With an endpoint (the local
    stack, whose SQS publishes no metrics) None at once: the call would only cost time."""
    cfg = resolve(config)
    if cfg.endpoint_url:
        return None
    name = queue_url.rstrip("/").rsplit("/", 1)[-1]
    now = datetime.now(UTC)
    points = (
        cfg.client("cloudwatch")
        .get_metric_statistics(
            Namespace="AWS/SQS",
            MetricName="ApproximateAgeOfOldestMessage",
            Dimensions=[{"Name": "QueueName", "Value": name}],
            StartTime=now - timedelta(minutes=5),
            EndTime=now,
            Period=60,
            Statistics=["Maximum"],
        )
        .get("Datapoints", [])
    )
    return max((float(p["Maximum"]) for p in points), default=None)


def job_counts(
    job: str,
    since: datetime,
    until: datetime,
    *,
    source: str | None = None,
    config: StackConfig | None = None,
) -> dict[str, int] | None:
    """How many of `job`'s runs succeeded and died in [since, until), or None when there is no source.

    `source` "metrics" (the default on AWS): the worker's CloudWatch metrics, JobSucceeded and
    JobDeadLettered, by the minute (one GetMetricData call, whatever the number of jobs: the metrics
    cost nothing more per job, the worker emits them anyway; `job_metrics.finished_counts`, what
    `count_finished` reads with the job index off). "records" (the default with an endpoint: the local
    stack, which has no CloudWatch metrics): `count_finished` from the records, a counting Query of
    the job index per state (the local stack answers it in milliseconds, `lambdajobs.local.fast_index`),
    or with the index off (mode "off") the dead on the index and the succeeded by a counting Scan. On
    AWS a count on the index would read every entry of the window at each view (1 read unit per 4 KB
    of keys), which is why the metrics are the default there, whatever the index holds. Never None
    today: the type stays for a source that has nothing to count from.
    """
    from lambdajobs.runtime.job_metrics import finished_counts
    from lambdajobs.runtime.records import count_finished

    cfg = resolve(config)
    source = source or ("records" if cfg.endpoint_url else "metrics")
    if source == "records":
        return count_finished(job, since, until, config=cfg)
    return finished_counts(job, since, until, cfg)


@dataclass(frozen=True)
class Minute:
    """One minute of a job's activity: runs that succeeded and that failed (retried or died)."""

    at: datetime
    succeeded: int
    failed: int


def activity(
    job: str, *, minutes: int = 60, source: str | None = None, config: StackConfig | None = None
) -> list[Minute]:
    """`job`'s succeeded and failed runs per minute over the last `minutes`, oldest first (one entry
    per minute), or [] when there is no source.

    `source` "metrics" (the default on AWS): the worker's CloudWatch metrics, JobSucceeded and
    JobFailed (every failed attempt). "records" (the default with an endpoint, the local stack, which
    has no CloudWatch metrics): the job records on the job index, by the time they entered their
    state now (succeeded; retrying and dead count as failed); none without the index."""
    from lambdajobs.runtime.errors import JobIndexOffError
    from lambdajobs.runtime.job_metrics import metric_sums
    from lambdajobs.runtime.records import entered_at

    cfg = resolve(config)
    source = source or ("records" if cfg.endpoint_url else "metrics")
    end = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
    start = end - timedelta(minutes=minutes)
    slots = [start + timedelta(minutes=i) for i in range(minutes)]
    ok: dict[datetime, int] = dict.fromkeys(slots, 0)
    bad: dict[datetime, int] = dict.fromkeys(slots, 0)
    if source == "metrics":
        sums = metric_sums(job, ["JobSucceeded", "JobFailed"], start, end, 60, cfg)
        for name, into in (("JobSucceeded", ok), ("JobFailed", bad)):
            for at, value in sums[name].items():
                if at in into:
                    into[at] = int(value)
    else:
        try:
            for state, into in (("succeeded", ok), ("retrying", bad), ("dead", bad)):
                for at in entered_at(job, state, start, end, config=cfg):
                    slot = at.replace(second=0, microsecond=0)
                    if slot in into:
                        into[slot] += 1
        except JobIndexOffError:
            return []
    return [Minute(at=at, succeeded=ok[at], failed=bad[at]) for at in slots]


def _dead_letter(message: dict[str, Any]) -> DeadLetter:
    attrs = message.get("Attributes", {})
    sent_ms = int(attrs.get("SentTimestamp", "0"))
    return DeadLetter(
        message_id=message["MessageId"],
        receipt_handle=message["ReceiptHandle"],
        body=message["Body"],
        attributes={
            k: {kk: vv for kk, vv in v.items() if kk in ("StringValue", "BinaryValue", "DataType")}
            for k, v in message.get("MessageAttributes", {}).items()
        },
        sent_at=datetime.fromtimestamp(sent_ms / 1000, tz=UTC),
        receive_count=int(attrs.get("ApproximateReceiveCount", "0")),
        group=attrs.get("MessageGroupId") or None,
    )


def receive_dead_letters(
    dlq_url: str,
    *,
    limit: int = 100,
    visibility_seconds: int = PEEK_VISIBILITY_SECONDS,
    until_found: Collection[str] | None = None,
    config: StackConfig | None = None,
) -> list[DeadLetter]:
    """Receive up to `limit` DLQ messages, hidden for `visibility_seconds` so a caller can act on them
    (redrive, delete) without another reader taking them. Batch calls: moto's SQS costs O(depth).
    `until_found`: stop as soon as these message ids are all in hand (a selection: the rest of a deep
    DLQ stays visible to other readers)."""
    sqs = resolve(config).client("sqs")
    seen: dict[str, DeadLetter] = {}
    empty_rounds = 0
    wanted = set(until_found) if until_found is not None else None
    while len(seen) < limit and empty_rounds < 2 and not (wanted is not None and wanted <= seen.keys()):
        got = sqs.receive_message(
            QueueUrl=dlq_url,
            MaxNumberOfMessages=min(10, limit - len(seen)),
            VisibilityTimeout=visibility_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        ).get("Messages", [])
        new = [m for m in got if m["MessageId"] not in seen]
        for message in got:  # keep the newest receipt handle: only it can delete or release
            seen[message["MessageId"]] = _dead_letter(message)
        empty_rounds = 0 if new else empty_rounds + 1
    return list(seen.values())


def release(dlq_url: str, letters: list[DeadLetter], *, config: StackConfig | None = None) -> None:
    """Make received messages visible again at once (after a peek)."""
    sqs = resolve(config).client("sqs")
    for start in range(0, len(letters), 10):
        chunk = letters[start : start + 10]
        sqs.change_message_visibility_batch(
            QueueUrl=dlq_url,
            Entries=[
                {"Id": str(i), "ReceiptHandle": d.receipt_handle, "VisibilityTimeout": 0}
                for i, d in enumerate(chunk)
            ],
        )


def peek_dead_letters(
    dlq_url: str, *, limit: int = 100, config: StackConfig | None = None
) -> list[DeadLetter]:
    """List DLQ messages without taking them: receive, then make them visible again."""
    letters = receive_dead_letters(dlq_url, limit=limit, config=config)
    release(dlq_url, letters, config=config)
    return letters


def wait_until(predicate: Any, timeout_seconds: float, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return bool(predicate())


@dataclass
class RedriveReport:
    scanned: int = 0
    selected: int = 0
    moved: int = 0
    failed: int = 0


def redrive_entry(index: int, letter: DeadLetter) -> dict[str, Any]:
    """The SendMessageBatch entry that sends a dead letter back: its body, its attributes but the
    worker's hand-back ones (a redriven job starts again), marked a redrive when SQS moved it (no
    `failed_at` of the worker's), in its tenant's group as it was sent."""
    entry: dict[str, Any] = {"Id": str(index), "MessageBody": letter.body}
    kept = {k: v for k, v in letter.attributes.items() if k not in HANDBACK_ATTRIBUTES}
    if ATTR_FAILED_AT not in kept:
        kept[ATTR_REDRIVEN] = {"DataType": "String", "StringValue": "1"}
    if kept:
        entry["MessageAttributes"] = kept
    if letter.group:
        entry["MessageGroupId"] = letter.group
    return entry


def redrive(
    dlq_url: str,
    queue_url: str,
    *,
    error_type: str | None = None,
    older_than: timedelta | None = None,
    limit: int | None = None,
    dry_run: bool = False,
    message_ids: Collection[str] | None = None,
    visibility_seconds: int = 300,
    on_selected: Any = None,
    on_moved: Any = None,
    config: StackConfig | None = None,
) -> RedriveReport:
    """Move DLQ messages back to their queue, body and attributes as they were.

    The DLQ messages are hidden while this works on them. A message is deleted from the DLQ only
    after SendMessageBatch reported it sent; messages not selected, or whose send failed, are made
    visible again. If this is interrupted, what was not yet moved reappears in the DLQ after
    `visibility_seconds`, and what was sent but not yet deleted runs once: its job id is the
    idempotency key. (SQS's own StartMessageMoveTask cannot filter, and moto lacks it.)
    `message_ids`: only these messages (a selection on the board); the other filters apply too.
    """
    sqs = resolve(config).client("sqs")
    report = RedriveReport()
    now = datetime.now(UTC)
    letters = receive_dead_letters(
        dlq_url,
        limit=100_000,
        visibility_seconds=visibility_seconds,
        until_found=message_ids,
        config=config,
    )
    report.scanned = len(letters)
    selected: list[DeadLetter] = []
    skipped: list[DeadLetter] = []
    for letter in letters:
        wanted = (
            (error_type is None or letter.error_type == error_type)
            and (older_than is None or now - letter.sent_at >= older_than)
            and (message_ids is None or letter.message_id in message_ids)
        )
        (selected if wanted and (limit is None or len(selected) < limit) else skipped).append(letter)
    release(dlq_url, skipped, config=config)
    report.selected = len(selected)
    if on_selected:
        on_selected(len(selected))
    if dry_run:
        release(dlq_url, selected, config=config)
        report.moved = len(selected)
        return report
    # SendMessageBatch: at most 10 entries and 1 MiB in total (bodies and attributes).
    by_index = dict(enumerate(selected))
    sized = [(i, d.body + json.dumps(d.attributes, default=str)) for i, d in by_index.items()]
    done: set[int] = set()
    for chunk_ids in chunk_by_size(sized):
        chunk = [by_index[i] for i, _ in chunk_ids]
        entries = [redrive_entry(i, letter) for i, letter in enumerate(chunk)]
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
        except Exception:
            unsent_yet = [d for i, d in by_index.items() if i not in done]
            release(dlq_url, unsent_yet, config=config)  # not sent: back at once
            raise
        sent = [chunk[int(ok["Id"])] for ok in response.get("Successful", [])]
        unsent = [chunk[int(bad["Id"])] for bad in response.get("Failed", [])]
        done.update(i for i, _ in chunk_ids)
        if sent:
            deleted = sqs.delete_message_batch(
                QueueUrl=dlq_url,
                Entries=[{"Id": str(i), "ReceiptHandle": d.receipt_handle} for i, d in enumerate(sent)],
            )
            # Sent but still in the DLQ: it may be redriven again later; the job id keeps it one run.
            report.failed += len(deleted.get("Failed", []))
            report.moved += len(sent) - len(deleted.get("Failed", []))
        release(dlq_url, unsent, config=config)
        report.failed += len(unsent)
        if on_moved:
            on_moved(report.moved)
    return report
