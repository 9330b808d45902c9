"""Pause and resume a job's queues: its worker's Lambda event source mappings, disabled and enabled.

A paused queue keeps its messages (SQS holds them; nothing receives them) until it is resumed, or
until they reach the queue's retention (4 days, `settings.QUEUE_RETENTION_SECONDS`): SQS then deletes
them, unseen by the worker and never moved to the DLQ. `retention_warning` says when a paused queue's
oldest message gets close to that.

The same API calls on AWS and on the local stack: a queue's mappings are found by the queue's ARN
(`ListEventSourceMappings(EventSourceArn=...)`, which needs no function name: CDK names the worker
functions), and changed with `UpdateEventSourceMapping(UUID=..., Enabled=...)`. On AWS Lambda stops
polling within seconds (a batch already received finishes); the local stack registers its emulated
mappings in its moto server's Lambda and each one reads its own `Enabled` before every poll.

The operator's IAM policy needs `lambda:ListEventSourceMappings` (it takes no resource) and
`lambda:GetEventSourceMapping` / `lambda:UpdateEventSourceMapping` on the stack's worker mappings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.errors import NoMappingError
from lambdajobs.runtime.settings import QUEUE_RETENTION_SECONDS, queue_key
from lambdajobs.runtime.spec import JobSpec

#: Mapping states in which Lambda polls, or is about to (`State` of an event source mapping).
POLLING_STATES = frozenset({"Creating", "Enabling", "Enabled", "Updating"})
#: How long before a paused queue's oldest message reaches its retention `retention_warning` warns.
WARN_WITHIN = timedelta(days=1)


@dataclass(frozen=True)
class Mapping:
    """One event source mapping of a job's queue (a priority level's queue has its own)."""

    #: `settings.queue_key(job, level)`: the job's name for its own queue, `<job>@<level>` for a level's.
    queue_key: str
    uuid: str
    #: Whether Lambda polls the queue (or is about to): `state` in `POLLING_STATES`.
    enabled: bool
    #: Lambda's state: Creating, Enabling, Enabled, Disabling, Disabled, Updating, Deleting.
    state: str
    #: When the mapping was last changed (a pause or resume, or a deploy), UTC.
    since: datetime | None
    function_arn: str = ""

    @property
    def paused(self) -> bool:
        return not self.enabled


@dataclass(frozen=True)
class RetentionWarning:
    """A paused queue whose oldest message will be deleted by SQS at `expires_at` (its retention)."""

    queue_key: str
    paused_since: datetime | None
    depth: int
    #: The oldest message's age: CloudWatch's ApproximateAgeOfOldestMessage on AWS; where it has no
    #: datapoint (the local stack) at least the time since the pause, as no message sent during a
    #: pause was received.
    oldest_age_seconds: float
    retention_seconds: int
    expires_at: datetime

    def seconds_left(self, now: datetime | None = None) -> float:
        return (self.expires_at - (now or datetime.now(UTC))).total_seconds()

    def describe(self, now: datetime | None = None) -> str:
        from lambdajobs.ops import age_text

        left = self.seconds_left(now)
        when = f"in {age_text(left)}" if left > 0 else "now"
        return (
            f"{self.queue_key} is paused and holds {self.depth} message(s): SQS deletes the oldest {when} "
            f"(retention {age_text(self.retention_seconds)}); resume it before then."
        )


def _levels(spec: JobSpec, level: str | None) -> tuple[str | None, ...]:
    """The queue levels `level` names: a priority's (`spec.level_for`), or every one when None."""
    return spec.levels if level is None else (spec.level_for(level),)


def _since(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value.astimezone(UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, tz=UTC)
    return None


def _mapping(key: str, raw: dict[str, Any]) -> Mapping:
    state = str(raw.get("State", ""))
    return Mapping(
        queue_key=key,
        uuid=str(raw["UUID"]),
        enabled=state in POLLING_STATES,
        state=state,
        since=_since(raw.get("LastModified")),
        function_arn=str(raw.get("FunctionArn", "")),
    )


def mappings(spec: JobSpec, level: str | None = None, *, config: StackConfig | None = None) -> list[Mapping]:
    """The event source mappings of a job's queues (one priority's with `level`), highest level first:
    one ListEventSourceMappings call per queue. A queue with none (not deployed, workers not started)
    has no entry."""
    cfg = resolve(config)
    client = cfg.client("lambda")
    found: list[Mapping] = []
    for queue_level in _levels(spec, level):
        arn = cfg.queue_arn(spec.name, queue_level)
        key = queue_key(spec.name, queue_level)
        for page in client.get_paginator("list_event_source_mappings").paginate(EventSourceArn=arn):
            found.extend(_mapping(key, raw) for raw in page.get("EventSourceMappings", []))
    return found


def _set_enabled(
    spec: JobSpec, level: str | None, enabled: bool, config: StackConfig | None
) -> list[Mapping]:
    cfg = resolve(config)
    current = mappings(spec, level, config=cfg)
    if not current:
        where = f"priority {level!r} of job '{spec.name}'" if level else f"job '{spec.name}'"
        raise NoMappingError(
            f"no event source mapping reads the queue of {where} in stack '{cfg.stack}': is the stack "
            "deployed with this job (or, locally, are the workers started)?"
        )
    client = cfg.client("lambda")
    changed = []
    for mapping in current:
        if mapping.enabled == enabled and mapping.state in ("Enabled", "Disabled"):
            changed.append(mapping)  # already so: no change, and its `since` stays
            continue
        raw = client.update_event_source_mapping(UUID=mapping.uuid, Enabled=enabled)
        changed.append(_mapping(mapping.queue_key, raw))
    return changed


def pause(spec: JobSpec, level: str | None = None, *, config: StackConfig | None = None) -> list[Mapping]:
    """Stop the worker receiving from a job's queues (every level's, or one priority's with `level`):
    UpdateEventSourceMapping(Enabled=False) per mapping. Messages stay in the queue, and keep ageing
    towards its retention (`retention_warning`). A pause already in place is left as it is.

    Raises:
        NoMappingError: no mapping reads the queue.
        UnknownPriorityError: the job has no such priority.
    """
    return _set_enabled(spec, level, False, config)


def resume(spec: JobSpec, level: str | None = None, *, config: StackConfig | None = None) -> list[Mapping]:
    """Let the worker receive from a job's queues again (every level's, or one priority's with
    `level`): UpdateEventSourceMapping(Enabled=True) per mapping.

    Raises:
        NoMappingError: no mapping reads the queue.
        UnknownPriorityError: the job has no such priority.
    """
    return _set_enabled(spec, level, True, config)


def warning_for(
    mapping: Mapping,
    *,
    depth: int,
    oldest_age_seconds: float | None,
    retention_seconds: int = QUEUE_RETENTION_SECONDS,
    within: timedelta = WARN_WITHIN,
    now: datetime | None = None,
) -> RetentionWarning | None:
    """The warning for one mapping, or None: it is not paused, its queue is empty, or its oldest
    message is further than `within` from its retention. `oldest_age_seconds` None (no datapoint):
    the time since the pause."""
    if mapping.enabled or depth <= 0:
        return None
    now = now or datetime.now(UTC)
    paused_for = (now - mapping.since).total_seconds() if mapping.since else 0.0
    oldest = max(oldest_age_seconds or 0.0, paused_for)
    expires_at = now + timedelta(seconds=retention_seconds - oldest)
    if expires_at - now > within:
        return None
    return RetentionWarning(
        queue_key=mapping.queue_key,
        paused_since=mapping.since,
        depth=depth,
        oldest_age_seconds=oldest,
        retention_seconds=retention_seconds,
        expires_at=expires_at,
    )


def retention_warnings(
    spec: JobSpec,
    *,
    config: StackConfig | None = None,
    found: list[Mapping] | None = None,
    within: timedelta = WARN_WITHIN,
    now: datetime | None = None,
) -> list[RetentionWarning]:
    """A warning per paused queue of the job whose oldest message reaches the queue's retention within
    `within`, soonest first. `found`: the job's mappings when the caller has them (no second listing).
    Per paused queue: one GetQueueAttributes (depth, retention) and, on AWS, one CloudWatch call."""
    from lambdajobs.ops import oldest_age_seconds

    cfg = resolve(config)
    current = found if found is not None else mappings(spec, config=cfg)
    sqs = cfg.client("sqs")
    warnings: list[RetentionWarning] = []
    for mapping in current:
        if mapping.enabled:
            continue
        job, _, level = mapping.queue_key.partition("@")
        url = cfg.queue_url(job, level or None)
        attrs = sqs.get_queue_attributes(
            QueueUrl=url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesDelayed",
                "MessageRetentionPeriod",
            ],
        )["Attributes"]
        depth = int(attrs.get("ApproximateNumberOfMessages", 0)) + int(
            attrs.get("ApproximateNumberOfMessagesDelayed", 0)
        )
        if depth <= 0:
            continue
        oldest = None if cfg.endpoint_url else oldest_age_seconds(url, config=cfg)
        warning = warning_for(
            mapping,
            depth=depth,
            oldest_age_seconds=oldest,
            retention_seconds=int(attrs.get("MessageRetentionPeriod", QUEUE_RETENTION_SECONDS)),
            within=within,
            now=now,
        )
        if warning is not None:
            warnings.append(warning)
    return sorted(warnings, key=lambda w: w.expires_at)


def retention_warning(
    spec: JobSpec,
    level: str | None = None,
    *,
    config: StackConfig | None = None,
    found: list[Mapping] | None = None,
    within: timedelta = WARN_WITHIN,
    now: datetime | None = None,
) -> RetentionWarning | None:
    """The most urgent `retention_warnings` entry of the job's queues (one priority's with `level`),
    or None."""
    cfg = resolve(config)
    current = found if found is not None else mappings(spec, level, config=cfg)
    if level is not None:
        key = queue_key(spec.name, spec.level_for(level))
        current = [m for m in current if m.queue_key == key]
    warnings = retention_warnings(spec, config=cfg, found=current, within=within, now=now)
    return warnings[0] if warnings else None


__all__ = [
    "POLLING_STATES",
    "WARN_WITHIN",
    "Mapping",
    "NoMappingError",
    "RetentionWarning",
    "mappings",
    "pause",
    "resume",
    "retention_warning",
    "retention_warnings",
    "warning_for",
]
