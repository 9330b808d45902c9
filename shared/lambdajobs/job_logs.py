"""A job's log lines, wherever its worker wrote them: the board's logs panel and the JSON API.

The worker's logger binds every line of a run to its job id (`correlation_id`, with `job` and
`attempt`), and masks the job's `pii_fields` before a line leaves (`runtime.pii`): what is read here is
already masked.

- Locally (`lambdajobs dev`, the local stack) the workers write JSON lines to one file
  (`build/local/worker.log` by default, `--log-file`): `local_lines` reads it, keeping a job's lines. It
  reads the file's last `MAX_LOCAL_BYTES` at most, so a long-running stack's big log stays quick.
- On AWS each job's worker has a log group of its own (named in the job's manifest entry, `log_group`).
  CloudWatch Logs Insights answers a query asynchronously: `start` sends StartQuery for the job id over
  the job's time span and returns the query's id at once; `results` reads GetQueryResults, which says
  whether the query is still running. The board's panel loads after the page and polls `results`, so
  the page's own time budget never waits for CloudWatch. A query costs $0.005 per GB scanned
  (us-east-1): the time span is the job's own (its enqueue to its last change, with a margin), not the
  log group's retention.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import LogsUnavailableError
from lambdajobs.runtime.settings import manifest_parameter

#: Where `lambdajobs dev` writes the workers' logs unless told otherwise (`--log-file`).
DEFAULT_LOCAL_LOG = Path("build/local/worker.log")
#: The environment variable naming the local worker log for the board (default `DEFAULT_LOCAL_LOG`).
ENV_WORKER_LOG = "LAMBDAJOBS_WORKER_LOG"
#: How much of the end of a local log file is read at most (a job's lines are near its end).
MAX_LOCAL_BYTES = 32 * 1024 * 1024
#: Lines returned at most (a query's `limit`, and the local reader's).
MAX_LINES = 200
#: A query's time span: from the job's enqueue (or first start) less this, to its last change plus this.
BEFORE = timedelta(minutes=5)
AFTER = timedelta(minutes=15)
#: With no time known for the job (no record): the last day.
NO_TIMES_SPAN = timedelta(days=1)
#: The fields a log line shows by name; every other key is shown as its `extra`.
SHOWN_KEYS = ("timestamp", "level", "message", "attempt")
#: Keys every worker line carries that say nothing about this job's run.
QUIET_KEYS = frozenset(
    {"correlation_id", "job", "service", "location", "xray_trace_id", "function_request_id", "cold_start"}
    | {"function_name", "function_arn", "function_memory_size", "sampling_rate", "@timestamp", "@message"}
    | {"@ptr", "@logStream", "@log", "requestId", "timestamp", "level", "message", "attempt"}
)
#: What Logs Insights query ids look like (a UUID); anything else is refused before it reaches AWS.
QUERY_ID = re.compile(r"^[0-9a-fA-F-]{8,64}$")
#: GetQueryResults statuses that end a query.
DONE_STATUSES = frozenset({"Complete", "Failed", "Cancelled", "Timeout", "Unknown"})


@dataclass(frozen=True)
class LogLine:
    """One line a job's worker logged: when, how loud, in which attempt, what; `extra` holds the
    line's other keys (its own fields, an exception's text)."""

    timestamp: str | None
    level: str | None
    message: str
    attempt: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Logs:
    """A job's log lines, oldest first, and where they came from.

    `status`: "complete" (every line found is here), "running" (a Logs Insights query still running:
    ask again with `query_id`), or "failed" (`note` says why). `source` names the file or log group.
    `cut`: more lines than `MAX_LINES` matched (the first ones are shown).
    """

    job_id: str
    status: str
    source: str
    lines: list[LogLine] = field(default_factory=list)
    query_id: str | None = None
    note: str | None = None
    cut: bool = False

    @property
    def done(self) -> bool:
        return self.status != "running"


def _parsed_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def time_span(*moments: str | None, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The span a query covers for a job whose times (RFC 3339; None: unknown) are `moments`: the
    earliest less `BEFORE` to the latest plus `AFTER` (never past now); the last day when none is
    known."""
    end_of_now = now or datetime.now(UTC)
    known = [m for m in (_parsed_time(t) for t in moments) if m is not None]
    if not known:
        return end_of_now - NO_TIMES_SPAN, end_of_now
    return min(known) - BEFORE, min(max(known) + AFTER, end_of_now)


# -- locally: the worker log file ----------------------------------------------------------------------


def local_log_file(environ: dict[str, str] | None = None) -> Path:
    """The local workers' log file: `LAMBDAJOBS_WORKER_LOG`, else `build/local/worker.log` (what
    `lambdajobs dev` writes in the directory it was started from)."""
    env = os.environ if environ is None else environ
    return Path(env.get(ENV_WORKER_LOG) or DEFAULT_LOCAL_LOG)


def _line_of(entry: dict[str, Any]) -> LogLine:
    attempt = entry.get("attempt")
    extra = {k: v for k, v in entry.items() if k not in QUIET_KEYS}
    return LogLine(
        timestamp=str(entry["timestamp"]) if entry.get("timestamp") is not None else None,
        level=str(entry["level"]) if entry.get("level") is not None else None,
        message=str(entry.get("message", "")),
        attempt=int(attempt) if isinstance(attempt, int | str) and str(attempt).isdigit() else None,
        extra=extra,
    )


def _tail(path: Path, limit_bytes: int) -> list[str]:
    with path.open("rb") as stream:
        size = stream.seek(0, os.SEEK_END)
        start = max(0, size - limit_bytes)
        stream.seek(start)
        data = stream.read()
    lines = data.decode("utf-8", "replace").splitlines()
    return lines[1:] if start else lines  # a cut first line is not a whole one


def local_lines(path: Path, job_id: str, *, limit: int = MAX_LINES, max_bytes: int = MAX_LOCAL_BYTES) -> Logs:
    """The lines of `job_id` in a local worker log (JSON lines whose `correlation_id` is the job id),
    oldest first, at most `limit`.

    Raises:
        LogsUnavailableError: there is no such file (the board was started elsewhere than
            `lambdajobs dev`, or with another `--log-file`: set LAMBDAJOBS_WORKER_LOG).
    """
    if not path.is_file():
        raise LogsUnavailableError(
            f"no worker log at {path}: start the board where `lambdajobs dev` runs, or set "
            f"{ENV_WORKER_LOG} to its --log-file."
        )
    # the id as JSON writes it: a cheap test before parsing (most lines are other jobs')
    needle = json.dumps(job_id)[1:-1]
    found: list[LogLine] = []
    cut = False
    for text in _tail(path, max_bytes):
        if needle not in text or not text.startswith("{"):
            continue
        try:
            entry = json.loads(text)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("correlation_id") != job_id:
            continue
        if len(found) >= limit:
            cut = True
            break
        found.append(_line_of(entry))
    return Logs(job_id=job_id, status="complete", source=str(path), lines=found, cut=cut)


# -- on AWS: CloudWatch Logs Insights ----------------------------------------------------------------


def log_group(config: StackConfig, job: str) -> str:
    """The log group of `job`'s worker, as the stack's manifest names it.

    Raises:
        LogsUnavailableError: the manifest names none (a stack deployed by an earlier version).
        QueueNotFoundError: the stack has no such job.
    """
    entry = config._parameter(
        manifest_parameter(config.stack, job), f"no job '{job}' in stack '{config.stack}'"
    )
    group = entry.get("log_group")
    if not group:
        raise LogsUnavailableError(
            f"stack '{config.stack}' names no log group for job '{job}': deploy it with this version "
            "of lambdajobs to see a job's logs here."
        )
    return str(group)


def query_text(job_id: str, limit: int = MAX_LINES) -> str:
    """The Logs Insights query for one job's lines: its id is a JSON string literal in the query (a
    quote or backslash in the id cannot end it)."""
    return (
        "fields @timestamp, level, message, attempt, @message"
        f" | filter correlation_id = {json.dumps(job_id)}"
        f" | sort @timestamp asc | limit {int(limit) + 1}"
    )


def start(
    config: StackConfig, job: str, job_id: str, span: tuple[datetime, datetime], *, limit: int = MAX_LINES
) -> Logs:
    """Start the Logs Insights query of `job_id`'s lines in `job`'s log group over `span`; returns at
    once (`status` "running", with the `query_id` to pass to `results`).

    Raises:
        LogsUnavailableError: the manifest names no log group for the job.
        botocore's ClientError: CloudWatch refused (no `logs:StartQuery`, the group is gone).
    """
    group = log_group(config, job)
    answer = config.client("logs").start_query(
        logGroupName=group,
        startTime=int(span[0].timestamp()),
        endTime=int(span[1].timestamp()) + 1,
        queryString=query_text(job_id, limit),
        limit=limit + 1,
    )
    return Logs(job_id=job_id, status="running", source=group, query_id=str(answer["queryId"]))


def _row_line(row: list[dict[str, str]], job_id: str) -> LogLine | None:
    """A result row as a line; None for a line of another job (the query filters on the id; this
    holds even where a query engine does not)."""
    fields = {cell.get("field", ""): cell.get("value", "") for cell in row}
    try:
        entry = json.loads(fields.get("@message", ""))
    except ValueError:
        entry = None
    if isinstance(entry, dict):
        if entry.get("correlation_id") not in (None, job_id):
            return None
        line = _line_of(entry)
        return line if line.timestamp else replace(line, timestamp=fields.get("@timestamp"))
    return LogLine(
        timestamp=fields.get("@timestamp"),
        level=fields.get("level"),
        message=fields.get("message") or fields.get("@message", ""),
    )


def results(
    config: StackConfig,
    job_id: str,
    query_id: str,
    source: str = "CloudWatch Logs Insights",
    *,
    limit: int = MAX_LINES,
) -> Logs:
    """What the query `query_id` (from `start`) found so far: `status` "running" while CloudWatch
    still runs it (ask again), "complete" with its lines, or "failed" with why.

    Raises:
        LogsUnavailableError: `query_id` is not a query id.
        botocore's ClientError: CloudWatch refused (no `logs:GetQueryResults`, an unknown id).
    """
    if not QUERY_ID.match(query_id):
        raise LogsUnavailableError(f"{query_id!r} is not a CloudWatch Logs Insights query id.")
    answer = config.client("logs").get_query_results(queryId=query_id)
    status = str(answer.get("status", "Unknown"))
    if status not in DONE_STATUSES:
        return Logs(job_id=job_id, status="running", source=source, query_id=query_id)
    if status != "Complete":
        note = f"the Logs Insights query ended {status.lower()}: open the page again to run it again."
        return Logs(job_id=job_id, status="failed", source=source, query_id=query_id, note=note)
    rows = [line for line in (_row_line(row, job_id) for row in answer.get("results", [])) if line]
    return Logs(
        job_id=job_id,
        status="complete",
        source=source,
        lines=rows[:limit],
        query_id=query_id,
        cut=len(rows) > limit,
    )


def is_local(config: StackConfig) -> bool:
    """Whether the stack's workers log to a local file (an endpoint override: the local stack)."""
    return bool(config.endpoint_url)


__all__ = [
    "DEFAULT_LOCAL_LOG",
    "ENV_WORKER_LOG",
    "LogLine",
    "Logs",
    "LogsUnavailableError",
    "is_local",
    "local_lines",
    "local_log_file",
    "log_group",
    "query_text",
    "results",
    "start",
    "time_span",
]
