"""Seed a local stack with what an operator's board meets at scale: thousands of job records in every
state and a thousand dead letters, written directly (BatchWriteItem, SendMessageBatch), not run.

What it writes, for the jobs it is given (the example project's `handlers` by default):
- `records` job records, as the worker leaves them (`JobRecord.to_item`, with the job index's
  attributes for the states the stack's mode indexes): most succeeded, some retrying, running and
  cancelled, and the dead ones below; enqueued, started and finished over the last 24 hours (a fifth
  in the last hour), failed ones with their payload, error, traceback and attempt history;
- `dead_letters` messages in the jobs' dead-letter queues (every priority level's): for all but
  `unrecorded` of them a dead record and the message as the worker moves it (its envelope, with the
  error type, reason, attempts and time it failed); the other `unrecorded` with no record and no
  attribute of ours, as SQS moves a message itself (a crash, a throttle, an init failure).

Usage: `python -m bench.board_seed` starts nothing: `seed(config, specs, ...)` seeds a running stack
(`bench.board_scale` starts one and calls it).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.envelope import encode
from lambdajobs.runtime.job_record import INDEXED_STATES, JobIndex, JobRecord, JobState, index_key
from lambdajobs.runtime.settings import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_TYPE,
    ATTR_FAILED_AT,
    ATTR_REASON,
    queue_key,
)
from lambdajobs.runtime.spec import JobSpec

RECORDS = 5_000
DEAD_LETTERS = 1_000
#: Of the dead letters, those SQS moved itself: no record, no attribute of ours.
UNRECORDED = 50
#: Shares of the records that are not dead (the rest of `records` after the dead ones).
SHARES = {JobState.SUCCEEDED: 0.85, JobState.RETRYING: 0.06, JobState.RUNNING: 0.05, JobState.CANCELLED: 0.04}
ERRORS = [
    ("TimeoutError", "the provider did not answer within 10 s"),
    ("ConnectionError", "connection reset by peer"),
    ("ValueError", "the video has no audio track"),
    ("PermanentError", "invalid recipient address: expected name@domain.tld"),
]
BATCH_WRITE = 25
SEND_BATCH = 10


@dataclass
class Seeded:
    """What `seed` wrote: counts by state and by queue, and ids a benchmark can open."""

    records: Counter[str] = field(default_factory=Counter)
    letters: Counter[str] = field(default_factory=Counter)
    unrecorded: int = 0
    #: A job id per job (and one dead one), for the pages of one job.
    sample_ids: dict[str, str] = field(default_factory=dict)
    #: A dead job's id per job, and a dead letter's message id per queue key (`settings.queue_key`).
    dead_ids: dict[str, str] = field(default_factory=dict)
    letter_ids: dict[str, str] = field(default_factory=dict)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def payload_for(spec: JobSpec, n: int) -> dict[str, Any]:
    """A payload the example jobs would take (any other job gets a small generic one)."""
    examples: dict[str, dict[str, Any]] = {
        "send_email": {"to": f"user{n}@example.com", "subject": f"Order {n}", "body": "Thanks!"},
        "transcode_video": {"key": f"uploads/video-{n}.mp4", "formats": ["720p"]},
        "make_thumbnails": {"key": f"uploads/video-{n}.mp4"},
        "notify_uploader": {"key": f"uploads/video-{n}.mp4", "notify": f"user{n}@example.com"},
        "campaign_report": {"campaign_id": f"spring-{n % 7}"},
    }
    return examples.get(spec.name, {"n": n})


def _record(
    spec: JobSpec,
    level: str | None,
    state: JobState,
    n: int,
    now: datetime,
    mode: JobIndex,
    rng: random.Random,
) -> tuple[JobRecord, str]:
    """A record in `state` and its message body, as the worker would have left them."""
    age = timedelta(seconds=rng.uniform(0, 3600) if rng.random() < 0.2 else rng.uniform(3600, 86_400))
    enqueued = now - age - timedelta(seconds=rng.uniform(0.1, 30))
    started = enqueued + timedelta(seconds=rng.uniform(0.05, 20))
    finished = started + timedelta(seconds=rng.uniform(0.05, 5))
    job_id = f"seed-{spec.name}-{n:05d}"
    payload = payload_for(spec, n)
    priority = spec.priority_of(level) if spec.priorities else None
    body = encode(spec.name, payload, job_id, now=enqueued, priority=priority)
    failed = state in (JobState.DEAD, JobState.RETRYING)
    error_type, message = ERRORS[n % len(ERRORS)]
    attempts = (spec.max_attempts if state is JobState.DEAD else rng.randint(1, 3)) if failed else 1
    done = state in (JobState.SUCCEEDED, JobState.DEAD, JobState.CANCELLED)
    history = tuple(
        {
            "attempt": a,
            "started": _iso(started + timedelta(seconds=30 * (a - 1))),
            "ended": _iso(started + timedelta(seconds=30 * (a - 1) + 1)),
            "outcome": "failed",
            "error_type": error_type,
            "error_message": message,
        }
        for a in range(1, attempts + 1)
        if failed
    )
    indexed = state in INDEXED_STATES[mode]
    at = finished if done else started
    record = JobRecord(
        job_id=job_id,
        job=spec.name,
        state=state,
        attempts=attempts,
        max_attempts=spec.max_attempts,
        created_at=_iso(started),
        started_at=_iso(started),
        finished_at=_iso(finished) if done else None,
        updated_at=_iso(at),
        result=json.dumps({"ok": n}) if state is JobState.SUCCEEDED else None,
        error={"type": error_type, "message": message} if failed else None,
        expiration=int((now + timedelta(days=7)).timestamp()),
        ix=index_key(spec.name, state) if indexed else None,
        ix_at=_iso(at) if indexed else None,
        enqueued_at=_iso(enqueued),
        level=priority,
        payload=json.dumps(payload) if failed else None,
        traceback=(
            "Traceback (most recent call last):\n"
            f'  File "job.py", line 1, in {spec.name}\n{error_type}: {message}\n'
            if failed
            else None
        ),
        history=history,
        cancel_requested=_iso(started) if state is JobState.CANCELLED else None,
    )
    return record, body


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _write_records(config: StackConfig, items: list[dict[str, Any]]) -> None:
    ddb = config.client("dynamodb")
    assert config.table, "a configuration that names the job table"
    for chunk in _chunks(items, BATCH_WRITE):
        requests = {config.table: [{"PutRequest": {"Item": item}} for item in chunk]}
        while requests:
            requests = ddb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}


def _send(config: StackConfig, url: str, entries: list[dict[str, Any]]) -> list[str]:
    """Send the messages; their message ids."""
    sqs = config.client("sqs")
    ids: list[str] = []
    for chunk in _chunks(entries, SEND_BATCH):
        batch = [{"Id": str(i), **entry} for i, entry in enumerate(chunk)]
        answer = sqs.send_message_batch(QueueUrl=url, Entries=batch)
        if answer.get("Failed"):
            raise RuntimeError(f"seeding {url}: {answer['Failed']}")
        ids += [ok["MessageId"] for ok in answer.get("Successful", [])]
    return ids


def _dlq_entry(body: str, record: JobRecord | None) -> dict[str, Any]:
    if record is None:  # moved by SQS itself: nothing of ours on it
        return {"MessageBody": body}
    error = record.error or {}
    ours = {
        ATTR_ERROR_TYPE: error.get("type", "Error"),
        ATTR_REASON: error.get("message") or error.get("type", "Error"),
        ATTR_ATTEMPTS: str(record.attempts),
        ATTR_FAILED_AT: (record.finished_at or "")[:19] + "Z",
    }
    return {
        "MessageBody": body,
        "MessageAttributes": {k: {"DataType": "String", "StringValue": v} for k, v in ours.items()},
    }


def _log_lines(record: JobRecord) -> list[str]:
    """The worker's JSON lines (Powertools Logger's shape) for a record's attempts, as it writes them:
    a success writes none (a job's lines are kept and dropped when it succeeds: `logbuffer`); each
    failed attempt ends with its outcome, "job failed; will retry" or, for a dead job's last,
    "job failed for good"."""
    lines = []
    attempts = max(record.attempts, 1)
    for attempt in range(1, attempts + 1):
        last = attempt == attempts
        if record.error is None or (
            last and record.state is not JobState.DEAD and record.state is not JobState.RETRYING
        ):
            continue  # a success (or a run still going) writes nothing
        message = (
            "job failed for good" if last and record.state is JobState.DEAD else "job failed; will retry"
        )
        lines.append(
            json.dumps(
                {
                    "level": "WARNING",
                    "location": "run:1",
                    "timestamp": record.updated_at,
                    "service": "lambdajobs",
                    "correlation_id": record.job_id,
                    "job": record.job,
                    "attempt": attempt,
                    "message": message,
                    "error": record.error,
                }
            )
        )
    return lines


def seed(
    config: StackConfig,
    specs: Sequence[JobSpec],
    *,
    records: int = RECORDS,
    dead_letters: int = DEAD_LETTERS,
    unrecorded: int = UNRECORDED,
    job_index: str = "finished",
    seed_value: int = 30,
    now: datetime | None = None,
    worker_log: Path | None = None,
) -> Seeded:
    """Write `records` job records (of which `dead_letters - unrecorded` dead) and `dead_letters` DLQ
    messages into the stack `config` names (its table and queues known: a local stack's `config`).
    `worker_log`: also append the worker's log lines of every seeded attempt there (the job pages'
    logs panel reads them)."""
    rng = random.Random(seed_value)
    now = now or datetime.now(UTC)
    mode = JobIndex(job_index)
    targets = [(spec, level) for spec in specs if spec.schedule is None for level in spec.levels]
    assert targets, "jobs to seed"
    recorded_dead = max(0, min(dead_letters - unrecorded, records))
    states = [JobState.DEAD] * recorded_dead
    rest = records - recorded_dead
    for state, share in SHARES.items():
        states += [state] * int(rest * share)
    states += [JobState.SUCCEEDED] * (records - len(states))
    rng.shuffle(states)
    seeded = Seeded()
    items: list[dict[str, Any]] = []
    letters: dict[str, list[dict[str, Any]]] = {}
    key_of_dlq = {config.dlq_url(spec.name, level): queue_key(spec.name, level) for spec, level in targets}
    for n, state in enumerate(states):
        spec, level = targets[n % len(targets)]
        record, body = _record(spec, level, state, n, now, mode, rng)
        items.append(record.to_item())
        seeded.records[state.value] += 1
        seeded.sample_ids.setdefault(spec.name, record.job_id)
        if state is JobState.DEAD:
            seeded.dead_ids.setdefault(spec.name, record.job_id)
            letters.setdefault(config.dlq_url(spec.name, level), []).append(_dlq_entry(body, record))
            seeded.letters[record.job] += 1  # type: ignore[index]
    for n in range(unrecorded):
        spec, level = targets[n % len(targets)]
        job_id = f"seed-crashed-{spec.name}-{n:04d}"
        body = encode(spec.name, payload_for(spec, records + n), job_id, now=now - timedelta(hours=2))
        letters.setdefault(config.dlq_url(spec.name, level), []).append(_dlq_entry(body, None))
        seeded.letters[spec.name] += 1
        seeded.unrecorded += 1
    _write_records(config, items)
    if worker_log is not None:
        with worker_log.open("a", encoding="utf-8") as log:
            for item in items:
                log.writelines(line + "\n" for line in _log_lines(JobRecord.from_item(item)))
    for url, entries in letters.items():
        sent = _send(config, url, entries)
        if sent:
            seeded.letter_ids.setdefault(key_of_dlq[url], sent[0])
    return seeded


def main() -> None:  # pragma: no cover - a hint: the benchmark seeds a stack it starts
    print("bench.board_seed seeds a running local stack: run `make bench-board` (bench.board_scale).")


if __name__ == "__main__":
    main()
