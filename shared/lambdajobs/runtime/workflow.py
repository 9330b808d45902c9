"""Workflows: chain, group and chord, on the queues, workers and job records lambdajobs already has.

    from lambdajobs import chain, chord, group, sig

    workflow_id = chord(
        group(sig("send_email", {"to": to, "subject": "News", "body": "..."}) for to in recipients),
        sig("campaign_report", {"campaign": "november"}),
    ).enqueue(workflow_id="campaign-november")

A workflow is a sequence of stages. A stage is one job (a step of a chain) or many (a group); the next
stage is sent once every member of the one before has finished (succeeded or dead). `chain(a, b, c)`
is three stages of one job; `group([...])` one stage; `chord(group, callback)` two. Each member is an
ordinary job: its own queue, retries, DLQ, idempotency and record, with the job id
`<workflow id>.<stage>.<index>`.

How the next stage is sent exactly once:
1. The producer validates every step's payload, writes the workflow's item in the job table
   (`lambdajobs#wf#<id>`: per stage its member count, the counters, and the later stages' validated
   payloads), then sends the first stage.
2. A member's worker writes its outcome (succeeded, or dead) and counts it in the workflow's item in
   one DynamoDB transaction: the record keeps the outcome it counted (`wf_counted`), so a duplicate
   delivery, a retry or a crash between the two writes can neither count twice nor lose the count.
3. Then it reads the counters; when its stage is complete it sends a notice to the stack's workflow
   queue. Its message is deleted only after that: a crash before the notice redelivers the member,
   which runs no job again (it already succeeded) but checks and notices again.
4. The continuer (a small function on the workflow queue, the only one allowed to send the next
   stage's jobs) claims the stage with a conditional write, so one notice of many sends the next stage.
   The next stage's job ids are deterministic: a re-send after a crash of the continuer is deduplicated
   by the members' idempotency, so each runs once.

Both items are read and written only through their codec, `lambdajobs.runtime.workflow_item`
(`WorkflowItem`, `LaterItem`), whose predicates are the rules above with their condition expressions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lambdajobs.runtime import table
from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.envelope import MAX_WORKFLOW_ID_LENGTH, encode
from lambdajobs.runtime.errors import EnqueueError, WorkflowError
from lambdajobs.runtime.lifecycle import JobState, now_iso
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX
from lambdajobs.runtime.spec import JobRef, active_registry, ensure_loaded, get_spec
from lambdajobs.runtime.workflow_item import LATER_SUFFIX as LATER_SUFFIX
from lambdajobs.runtime.workflow_item import LaterItem, Member, OnDead, Outline, OutlineStage, WorkflowItem
from lambdajobs.runtime.workflow_item import WorkflowState as WorkflowState
from lambdajobs.runtime.workflow_item import later_key as later_key
from lambdajobs.runtime.workflow_item import workflow_key as workflow_key

logger = logging.getLogger(__name__)

#: The later stages' validated payloads are kept in the workflow's item (DynamoDB: 400 KB an item).
MAX_DEFINITION_BYTES = 300_000
MAX_STAGES = 100
#: Stages up to this many members have their running members counted by `get_workflow` (reading their
#: records: one BatchGetItem per 100); above it, only finished members are counted.
MAX_MEMBERS_READ = 1_000


# -- the canvas ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One job of a workflow: the job, its payload, and optionally its priority level."""

    job: JobRef
    payload: Any = None
    priority: str | None = None


def sig(job: JobRef, payload: Any = None, *, priority: str | None = None) -> Signature:
    """A step of a workflow: job `job` (its name or the decorated function) with `payload`."""
    return Signature(job, {} if payload is None else payload, priority)


class Canvas:
    """What `chain`, `group` and `chord` build: stages, sent by `.enqueue()`."""

    kind: str = "workflow"

    def stages(self) -> list[tuple[list[Signature], OnDead]]:
        """The stages in order, each with what happens after it when some of its members died."""
        raise NotImplementedError

    def enqueue(self, *, workflow_id: str | None = None, config: StackConfig | None = None) -> str:
        """Validate every step, record the workflow, send its first stage; return the workflow id.

        Give `workflow_id` to make the call safe to repeat: enqueuing the same workflow under the same
        id again sends nothing once its first stage was sent (and, after a call that stopped midway,
        sends that stage again: its jobs' ids are deterministic, so each runs once); another workflow
        under that id raises.

        Raises:
            UnknownJobError, PayloadValidationError, PayloadTooLargeError, UnknownPriorityError: for
                any step, before anything is written or sent.
            WorkflowError: no steps, too many stages or too large to record, or `workflow_id` taken
                by another workflow.
            EnqueueError: some jobs of the first stage could not be sent (enqueue again with the same
                `workflow_id`: nothing is sent twice).
        """
        return _enqueue(self, workflow_id, resolve(config))


@dataclass(frozen=True)
class Group(Canvas):
    """Many jobs at once, followed as one workflow."""

    members: tuple[Signature, ...]
    kind: str = field(default="group", init=False)

    def stages(self) -> list[tuple[list[Signature], OnDead]]:
        return [(list(self.members), "continue")]


@dataclass(frozen=True)
class Chord(Canvas):
    """A group, then a callback once every member has finished (succeeded or dead). With
    `on_dead="stop"` the callback is not sent when a member died."""

    header: Group
    body: Signature
    on_dead: OnDead = "continue"
    kind: str = field(default="chord", init=False)

    def stages(self) -> list[tuple[list[Signature], OnDead]]:
        return [(list(self.header.members), self.on_dead), ([self.body], "stop")]


@dataclass(frozen=True)
class Chain(Canvas):
    """Steps in order, each sent once the one before succeeded. A dead step stops the chain (with
    `on_dead="continue"`, the next step is sent anyway and sees it in `ctx.workflow.parents`)."""

    parts: tuple[Signature | Group | Chord | Chain, ...]
    on_dead: OnDead = "stop"
    kind: str = field(default="chain", init=False)

    def stages(self) -> list[tuple[list[Signature], OnDead]]:
        stages: list[tuple[list[Signature], OnDead]] = []
        for part in self.parts:
            if isinstance(part, Signature):
                stages.append(([part], self.on_dead))
            elif isinstance(part, Chord):  # the chord's own rule between its group and its callback
                (members, inner), (body, _) = part.stages()
                stages += [(members, inner), (body, self.on_dead)]
            else:
                nested = part.stages()  # a group, or a chain: its own rules inside, ours after it
                stages += [*nested[:-1], (nested[-1][0], self.on_dead)]
        return stages


def _signatures(items: Iterable[Any], what: str) -> tuple[Signature, ...]:
    members = tuple(items)
    for member in members:
        if not isinstance(member, Signature):
            raise WorkflowError(
                f"{what} takes sig(...) steps, got {type(member).__name__}: use sig(job, payload)."
            )
    return members


def group(*members: Signature | Iterable[Signature]) -> Group:
    """`group(sig(...), sig(...))` or `group([sig(...), ...])` (any iterable, a generator too)."""
    if len(members) == 1 and not isinstance(members[0], Signature):
        return Group(_signatures(members[0], "group"))
    return Group(_signatures(members, "group"))


def chord(header: Group | Iterable[Signature], body: Signature, *, on_dead: OnDead = "continue") -> Chord:
    """`chord(group([...]), sig("callback", {...}))`: the callback runs once, after every member."""
    if not isinstance(body, Signature):
        raise WorkflowError(f"a chord's callback is one sig(...), got {type(body).__name__}.")
    return Chord(header if isinstance(header, Group) else group(header), body, _on_dead(on_dead))


def chain(*steps: Signature | Group | Chord | Chain, on_dead: OnDead = "stop") -> Chain:
    """`chain(sig("a", {...}), sig("b", {...}))`: b is sent once a succeeded. A step may be a group (or
    a chord): the next step is sent once all its members finished."""
    for step in steps:
        if not isinstance(step, Signature | Group | Chord | Chain):
            raise WorkflowError(
                f"chain takes sig(...), group(...) or chord(...) steps, got {type(step).__name__}."
            )
    return Chain(tuple(steps), _on_dead(on_dead))


def _on_dead(value: str) -> OnDead:
    if value not in ("continue", "stop"):
        raise WorkflowError(f"on_dead={value!r}: use 'continue' or 'stop'.")
    return value  # type: ignore[return-value]


# -- ids and keys ----------------------------------------------------------------------------------


def member_job_id(workflow_id: str, stage: int, index: int) -> str:
    """The job id of a workflow's member: `<workflow id>.<stage>.<index>`."""
    return f"{workflow_id}.{stage}.{index}"


# `workflow_key(workflow_id)` and `later_key(workflow_id)`, the ids of its two items, are workflow_item's.


def _check_id(workflow_id: str) -> str:
    if not isinstance(workflow_id, str) or not workflow_id or len(workflow_id) > MAX_WORKFLOW_ID_LENGTH:
        raise WorkflowError(
            f"workflow_id must be a string of 1 to {MAX_WORKFLOW_ID_LENGTH} characters, got {workflow_id!r}"
        )
    if workflow_id.startswith(RESERVED_ID_PREFIX):
        raise WorkflowError(
            f"workflow_id {workflow_id!r}: ids starting with {RESERVED_ID_PREFIX!r} are reserved"
        )
    return workflow_id


# -- enqueue ---------------------------------------------------------------------------------------


def _validated(canvas: Canvas, cfg: StackConfig) -> list[tuple[list[Member], OnDead]]:
    stages = canvas.stages()
    if not stages or any(not members for members, _ in stages):
        raise WorkflowError(f"this {canvas.kind} has an empty stage: give every group at least one sig(...).")
    if len(stages) > MAX_STAGES:
        raise WorkflowError(f"this {canvas.kind} has {len(stages)} stages; at most {MAX_STAGES}.")
    validated = []
    for members, on_dead in stages:
        checked = []
        for member in members:
            if isinstance(member.job, str) and member.job not in active_registry():
                ensure_loaded(cfg.jobs)  # a job given by name: the stack's jobs package, explicitly
            spec = get_spec(member.job)
            level = spec.level_for(member.priority)
            checked.append(Member(spec.name, spec.payload_data(member.payload), member.priority, level))
        validated.append((checked, on_dead))
    return validated


def _body(workflow_id: str, stage: int, index: int, member: Member, parents: dict[str, int] | None) -> str:
    ref: dict[str, Any] = {"id": workflow_id, "stage": stage, "index": index}
    if parents is not None:
        ref["parents"] = parents
    job_id = member_job_id(workflow_id, stage, index)
    return encode(member.job, member.payload, job_id, priority=member.priority, workflow=ref)


def _enqueue(canvas: Canvas, workflow_id: str | None, cfg: StackConfig) -> str:
    wid = _check_id(workflow_id) if workflow_id is not None else uuid.uuid4().hex
    stages = _validated(canvas, cfg)
    first = [_body(wid, 0, i, m, None) for i, m in enumerate(stages[0][0])]  # size-checked here
    outline = Outline(
        canvas.kind,
        tuple(OutlineStage(_job_counts(members), len(members), on_dead) for members, on_dead in stages),
    )
    later = LaterItem(wid, {i: tuple(members) for i, (members, _) in enumerate(stages) if i})
    size = len(later.text().encode())
    if size > MAX_DEFINITION_BYTES:
        raise WorkflowError(
            f"this {canvas.kind}'s later stages take {size} bytes; at most "
            f"{MAX_DEFINITION_BYTES} are kept in the workflow's record: put the large group first, "
            f"or keep big payloads in S3."
        )
    if _create(cfg, wid, outline, later, _digest(outline, later, stages[0][0])):
        return wid  # the same workflow, already recorded and sent: nothing to send again
    _send_first(cfg, wid, stages[0][0], first)
    _mark(cfg, wid, "sent_0")
    return wid


def _job_counts(members: list[Member]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for member in members:
        counts[member.job] = counts.get(member.job, 0) + 1
    return counts


def _digest(outline: Outline, later: LaterItem, first: list[Member]) -> str:
    """The whole workflow's hash: its outline, its later stages and its first stage, as stored."""
    everything = [outline.text(), later.text(), json.dumps([m.stored() for m in first], sort_keys=True)]
    return hashlib.sha256("\n".join(everything).encode()).hexdigest()


def _send_first(cfg: StackConfig, wid: str, members: list[Member], bodies: list[str]) -> None:
    """Send the first stage's jobs, grouped by queue.

    Raises:
        EnqueueError: some were not sent.
    """
    from lambdajobs.runtime.producer import send_bodies

    by_queue: dict[str, list[tuple[str, str]]] = {}
    for i, member in enumerate(members):
        url = cfg.queue_url(member.job, member.level)
        by_queue.setdefault(url, []).append((member_job_id(wid, 0, i), bodies[i]))
    traced = any(get_spec(member.job).tracing for member in members)  # their trace context goes along
    failed = [r for url, sent in by_queue.items() for r in send_bodies(cfg, url, sent, traced=traced).failed]
    if failed:
        raise EnqueueError(
            f"workflow '{wid}': {len(failed)} of {len(bodies)} jobs of its first stage were not sent "
            f"({failed[0].error}); enqueue it again with workflow_id='{wid}': nothing is sent twice."
        )


def _put_new(table_name: str, item: table.Item) -> dict[str, Any]:
    return {"Put": {"TableName": table_name, "Item": item, "ConditionExpression": "attribute_not_exists(id)"}}


def _create(cfg: StackConfig, wid: str, outline: Outline, later: LaterItem, digest: str) -> bool:
    """Record the workflow: its item (the outline: per stage its jobs, members and rule; and the
    counters) and, with later stages, a second item (`<key>#later`) with their validated payloads, both
    in one transaction. The counter item stays small on purpose: every member of the workflow writes
    it once and reads it once, and DynamoDB charges both by the item's size. True: this same workflow
    was recorded and its first stage sent before (a repeated enqueue); False: send its first stage
    (again, if an earlier enqueue stopped midway: the jobs' ids are the same, so each runs once).

    Raises:
        WorkflowError: another workflow has this id.
    """
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(cfg)
    expiration = int(time.time()) + cfg.record_ttl_seconds
    item = WorkflowItem.new_item(wid, outline, digest=digest, now=now_iso(), expiration=expiration)
    puts = [_put_new(store.table, item.to_item())]
    if later.stages:
        puts.append(_put_new(store.table, LaterItem(wid, later.stages, expiration).to_item()))
    client = store.client
    try:
        client.transact_write_items(TransactItems=puts)
    except client.exceptions.TransactionCanceledException as exc:
        if "ConditionalCheckFailed" not in table.cancellation_codes(exc):
            raise
        return _recorded_before(store, wid, digest)
    return False


def _recorded_before(store: Any, wid: str, digest: str) -> bool:
    """An item under this workflow's id exists: whether it is this workflow, its first stage sent.

    Raises:
        WorkflowError: it is another workflow's.
    """
    found = store.client.get_item(
        TableName=store.table, Key=table.key(workflow_key(wid)), ConsistentRead=True
    ).get("Item")
    existing = WorkflowItem.from_item(found) if found else None
    if existing is None or existing.digest != digest:
        raise WorkflowError(
            f"workflow id '{wid}' is taken by another workflow; use a new workflow_id."
        ) from None
    if existing.stage(0).sent is not None:
        logger.info("workflow %s was already enqueued; nothing sent again", wid)
        return True
    logger.info("workflow %s already recorded; sending its first stage again (deduplicated)", wid)
    return False


def _mark(cfg: StackConfig, wid: str, name: str) -> None:
    """Set a timestamp on the workflow's item (best effort: it is shown, never decided on)."""
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(cfg)
    try:
        store.client.update_item(
            **table.update(
                store.table,
                workflow_key(wid),
                sets=[f"{name} = if_not_exists({name}, :now)"],
                condition="attribute_exists(id)",
                values={":now": now_iso()},
            )
        )
    except Exception as exc:
        logger.warning("could not mark workflow %s %s: %s", wid, name, exc)


# -- a member finished: notice -----------------------------------------------------------------------


def stage_complete(item: Mapping[str, table.AttributeValue] | None, stage: int) -> bool:
    """Whether every member of `stage` has finished and the stage was not advanced yet (`item`: the
    workflow's item as read, or a projection of it; None: no item). See `WorkflowItem.stage_complete`."""
    return bool(item) and WorkflowItem.from_item(item).stage_complete(stage)


def notify(config: StackConfig, workflow_id: str, stage: int) -> bool:
    """After a member's outcome is counted: if its stage is complete and not advanced yet, send a
    notice to the workflow queue for the continuer. Returns whether a notice was sent. Raises on any
    failure (the member's message must then come back, so the check is made again)."""
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(config)
    item = store.client.get_item(
        TableName=store.table,
        Key=table.key(workflow_key(workflow_id)),
        ConsistentRead=True,
        ProjectionExpression=f"done_{stage}, total_{stage}, advanced_{stage}",
    ).get("Item")
    if not stage_complete(item, stage):
        return False
    tracing = sys.modules.get("lambdajobs.runtime.tracing")  # loaded only when tracing is on
    config.client("sqs").send_message(
        QueueUrl=config.workflow_queue(),
        MessageBody=json.dumps({"workflow": workflow_id, "stage": stage}, separators=(",", ":")),
        **(tracing.send_options(on=config.tracing) if tracing is not None else {}),  # the member's span
    )
    return True


# -- status ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageStatus:
    """One stage: its jobs (name: members), and its members by state. `running` counts members whose
    record says running, retrying or waiting; None when the stage has more than `MAX_MEMBERS_READ`
    members (then `pending` holds every unfinished member)."""

    index: int
    jobs: dict[str, int]
    total: int
    pending: int
    running: int | None
    succeeded: int
    dead: int
    sent: bool


@dataclass(frozen=True)
class WorkflowStatus:
    """What `get_workflow` returns. `state` is a `WorkflowState` (equal to its text: "running"), and
    `unknown` for an id with no workflow."""

    workflow_id: str
    state: WorkflowState
    kind: str = ""
    stages: tuple[StageStatus, ...] = ()
    #: Finished members over all members of all stages, 0 to 100.
    progress: float = 0.0
    #: A chord's callback job id, once its stage is sent.
    callback_job_id: str | None = None
    reason: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    ended_at: str | None = None
    note: str | None = None

    @property
    def done(self) -> bool:
        return self.state in (WorkflowState.SUCCEEDED, WorkflowState.DEAD)


def get_workflow(workflow_id: str, *, config: StackConfig | None = None) -> WorkflowStatus:
    """A workflow's state, its stages' member counts (pending, running, succeeded, dead), progress
    and, for a chord, the callback's job id once sent. An unknown (or expired) id reads `unknown`.

    Example:
        >>> status = get_workflow("campaign-november")
        >>> status.state, status.progress, status.stages[0].dead
        ('running', 41.5, 2)
    """
    if not isinstance(workflow_id, str) or not workflow_id:
        raise WorkflowError(f"workflow_id must be a non-empty string, got {workflow_id!r}")
    cfg = resolve(config)
    item = _read(cfg, workflow_id)
    if item is None:
        return WorkflowStatus(
            workflow_id, WorkflowState.UNKNOWN, note="no workflow with this id (or it expired)"
        )
    stages = tuple(
        _stage_status(cfg, workflow_id, i, plan, item) for i, plan in enumerate(item.outline_stages)
    )
    return _status(workflow_id, item, stages)


def _read(cfg: StackConfig, workflow_id: str) -> WorkflowItem | None:
    """The workflow's item, read consistently (None: there is none)."""
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(cfg)
    found = store.client.get_item(
        TableName=store.table, Key=table.key(workflow_key(workflow_id)), ConsistentRead=True
    ).get("Item")
    return WorkflowItem.from_item(found) if found else None


def _stage_status(
    cfg: StackConfig, workflow_id: str, index: int, plan: OutlineStage, item: WorkflowItem
) -> StageStatus:
    counts = item.stage(index)
    total = counts.total or 0
    unfinished = max(0, total - counts.finished)
    sent = counts.sent is not None
    # Only a stage under way has running members: one not sent has none, one advanced has none left.
    under_way = sent and unfinished and not item.advanced(index)
    running = _running(cfg, workflow_id, index, total) if under_way else 0
    return StageStatus(
        index=index,
        jobs=dict(plan.jobs),
        total=total,
        pending=max(0, unfinished - (running or 0)),
        running=running,
        succeeded=counts.ok,
        dead=counts.dead,
        sent=sent,
    )


def _running(cfg: StackConfig, workflow_id: str, stage: int, total: int) -> int | None:
    """How many of the stage's members run now (their records read in batches); None: too many to read."""
    from lambdajobs.runtime.records import get_statuses

    if total > MAX_MEMBERS_READ:
        return None
    states = get_statuses([member_job_id(workflow_id, stage, j) for j in range(total)], config=cfg)
    active = (JobState.RUNNING, JobState.RETRYING, JobState.WAITING)
    return sum(1 for st in states.values() if st.state in active)


def _status(workflow_id: str, item: WorkflowItem, stages: tuple[StageStatus, ...]) -> WorkflowStatus:
    everyone = sum(st.total for st in stages)
    finished = sum(st.succeeded + st.dead for st in stages)
    callback = None
    if item.kind == "chord" and len(stages) == 2 and stages[1].sent:
        callback = member_job_id(workflow_id, 1, 0)
    return WorkflowStatus(
        workflow_id=workflow_id,
        state=item.wf_state,
        kind=item.kind,
        stages=stages,
        progress=round(100.0 * finished / everyone, 1) if everyone else 0.0,
        callback_job_id=callback,
        reason=item.reason,
        created_at=item.created_at,
        updated_at=item.updated_at,
        ended_at=item.ended_at,
    )
