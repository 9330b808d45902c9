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
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from lambdajobs.runtime.config import StackConfig, resolve
from lambdajobs.runtime.envelope import MAX_WORKFLOW_ID_LENGTH, encode
from lambdajobs.runtime.errors import EnqueueError, WorkflowError
from lambdajobs.runtime.lifecycle import JobState, now_iso
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX, WORKFLOW_ID_PREFIX
from lambdajobs.runtime.spec import JobRef, get_spec

logger = logging.getLogger(__name__)

OnDead = Literal["continue", "stop"]
#: The later stages' validated payloads are kept in the workflow's item (DynamoDB: 400 KB an item).
MAX_DEFINITION_BYTES = 300_000
MAX_STAGES = 100
#: Stages up to this many members have their running members counted by `get_workflow` (reading their
#: records: one BatchGetItem per 100); above it, only finished members are counted.
MAX_MEMBERS_READ = 1_000


class WorkflowState:
    """A workflow's state: `running`, then `succeeded` (every stage ran; its last stage's members all
    succeeded) or `dead` (a stage with dead members stopped it, or its last stage has dead members)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"


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


def workflow_key(workflow_id: str) -> str:
    """The workflow's item: its outline and counters."""
    return WORKFLOW_ID_PREFIX + workflow_id


LATER_SUFFIX = "#later"


def later_key(workflow_id: str) -> str:
    """The item with the validated payloads of the workflow's later stages."""
    return workflow_key(workflow_id) + LATER_SUFFIX


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


@dataclass(frozen=True)
class _Member:
    job: str
    payload: dict[str, Any]
    priority: str | None
    level: str | None

    def stored(self) -> dict[str, Any]:
        return {"job": self.job, "payload": self.payload, "priority": self.priority, "level": self.level}


def _validated(canvas: Canvas, cfg: StackConfig) -> list[tuple[list[_Member], OnDead]]:
    stages = canvas.stages()
    if not stages or any(not members for members, _ in stages):
        raise WorkflowError(f"this {canvas.kind} has an empty stage: give every group at least one sig(...).")
    if len(stages) > MAX_STAGES:
        raise WorkflowError(f"this {canvas.kind} has {len(stages)} stages; at most {MAX_STAGES}.")
    validated = []
    for members, on_dead in stages:
        checked = []
        for member in members:
            spec = get_spec(member.job, jobs=cfg.jobs)
            level = spec.level_for(member.priority)
            checked.append(_Member(spec.name, spec.payload_data(member.payload), member.priority, level))
        validated.append((checked, on_dead))
    return validated


def _body(workflow_id: str, stage: int, index: int, member: _Member, parents: dict[str, int] | None) -> str:
    ref: dict[str, Any] = {"id": workflow_id, "stage": stage, "index": index}
    if parents is not None:
        ref["parents"] = parents
    job_id = member_job_id(workflow_id, stage, index)
    return encode(member.job, member.payload, job_id, priority=member.priority, workflow=ref)


def _enqueue(canvas: Canvas, workflow_id: str | None, cfg: StackConfig) -> str:
    wid = _check_id(workflow_id) if workflow_id is not None else uuid.uuid4().hex
    stages = _validated(canvas, cfg)
    first = [_body(wid, 0, i, m, None) for i, m in enumerate(stages[0][0])]  # size-checked here
    outline = {
        "kind": canvas.kind,
        "stages": [
            {"jobs": _job_counts(members), "total": len(members), "on_dead": on_dead}
            for members, on_dead in stages
        ],
    }
    later = {str(i): [m.stored() for m in members] for i, (members, _) in enumerate(stages) if i}
    text = json.dumps(later, separators=(",", ":"), sort_keys=True)
    outline_text = json.dumps(outline, separators=(",", ":"), sort_keys=True)
    everything = [outline_text, text, json.dumps([m.stored() for m in stages[0][0]], sort_keys=True)]
    digest = hashlib.sha256("\n".join(everything).encode()).hexdigest()
    if len(text.encode()) > MAX_DEFINITION_BYTES:
        raise WorkflowError(
            f"this {canvas.kind}'s later stages take {len(text.encode())} bytes; at most "
            f"{MAX_DEFINITION_BYTES} are kept in the workflow's record: put the large group first, "
            f"or keep big payloads in S3."
        )
    if _create(cfg, wid, outline, outline_text, text if later else None, digest):
        return wid  # the same workflow, already recorded and sent: nothing to send again
    by_queue: dict[str, list[tuple[str, str]]] = {}
    for i, member in enumerate(stages[0][0]):
        url = cfg.queue_url(member.job, member.level)
        by_queue.setdefault(url, []).append((member_job_id(wid, 0, i), first[i]))
    from lambdajobs.runtime.producer import send_bodies

    failed = [r for url, bodies in by_queue.items() for r in send_bodies(cfg, url, bodies).failed]
    if failed:
        raise EnqueueError(
            f"workflow '{wid}': {len(failed)} of {len(first)} jobs of its first stage were not sent "
            f"({failed[0].error}); enqueue it again with workflow_id='{wid}': nothing is sent twice."
        )
    _mark(cfg, wid, "sent_0")
    return wid


def _job_counts(members: list[_Member]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for member in members:
        counts[member.job] = counts.get(member.job, 0) + 1
    return counts


def _create(
    cfg: StackConfig, wid: str, outline: dict[str, Any], outline_text: str, later: str | None, digest: str
) -> bool:
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
    item: dict[str, Any] = {
        "id": {"S": workflow_key(wid)},
        "kind": {"S": outline["kind"]},
        "wf_state": {"S": WorkflowState.RUNNING},
        "stages": {"N": str(len(outline["stages"]))},
        "outline": {"S": outline_text},
        "digest": {"S": digest},
        "created_at": {"S": now_iso()},
        "updated_at": {"S": now_iso()},
        "expiration": {"N": str(int(time.time()) + cfg.record_ttl_seconds)},
    }
    for i, stage in enumerate(outline["stages"]):
        item[f"total_{i}"] = {"N": str(stage["total"])}
        for counter in ("ok", "dead", "done"):
            item[f"{counter}_{i}"] = {"N": "0"}
    client = store.client
    puts = [
        {"Put": {"TableName": store.table, "Item": item, "ConditionExpression": "attribute_not_exists(id)"}}
    ]
    if later is not None:
        rest = {"id": {"S": later_key(wid)}, "later": {"S": later}, "expiration": item["expiration"]}
        puts.append(
            {
                "Put": {
                    "TableName": store.table,
                    "Item": rest,
                    "ConditionExpression": "attribute_not_exists(id)",
                }
            }
        )
    try:
        client.transact_write_items(TransactItems=puts)
    except client.exceptions.TransactionCanceledException as exc:
        codes = [str(r.get("Code") or "None") for r in exc.response.get("CancellationReasons", [])]
        if "ConditionalCheckFailed" not in codes:
            raise
        found = client.get_item(TableName=store.table, Key={"id": item["id"]}, ConsistentRead=True).get(
            "Item"
        )
        if not found or found.get("digest", {}).get("S") != digest:
            raise WorkflowError(
                f"workflow id '{wid}' is taken by another workflow; use a new workflow_id."
            ) from None
        if "sent_0" in found:
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
            TableName=store.table,
            Key={"id": {"S": workflow_key(wid)}},
            UpdateExpression=f"SET {name} = if_not_exists({name}, :now)",
            ConditionExpression="attribute_exists(id)",
            ExpressionAttributeValues={":now": {"S": now_iso()}},
        )
    except Exception as exc:
        logger.warning("could not mark workflow %s %s: %s", wid, name, exc)


# -- a member finished: notice -----------------------------------------------------------------------


def stage_complete(item: dict[str, Any] | None, stage: int) -> bool:
    """Whether every member of `stage` has finished and the stage was not advanced yet."""
    if not item:
        return False
    done = int(item.get(f"done_{stage}", {}).get("N", "0"))
    total = int(item.get(f"total_{stage}", {}).get("N", "-1"))
    return done >= total >= 0 and f"advanced_{stage}" not in item


def notify(config: StackConfig, workflow_id: str, stage: int) -> bool:
    """After a member's outcome is counted: if its stage is complete and not advanced yet, send a
    notice to the workflow queue for the continuer. Returns whether a notice was sent. Raises on any
    failure (the member's message must then come back, so the check is made again)."""
    from lambdajobs.runtime.records import JobRecordStore

    store = JobRecordStore(config)
    item = store.client.get_item(
        TableName=store.table,
        Key={"id": {"S": workflow_key(workflow_id)}},
        ConsistentRead=True,
        ProjectionExpression=f"done_{stage}, total_{stage}, advanced_{stage}",
    ).get("Item")
    if not stage_complete(item, stage):
        return False
    config.client("sqs").send_message(
        QueueUrl=config.workflow_queue(),
        MessageBody=json.dumps({"workflow": workflow_id, "stage": stage}, separators=(",", ":")),
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
    """What `get_workflow` returns."""

    workflow_id: str
    state: str
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
    from lambdajobs.runtime.records import JobRecordStore, get_statuses

    if not isinstance(workflow_id, str) or not workflow_id:
        raise WorkflowError(f"workflow_id must be a non-empty string, got {workflow_id!r}")
    cfg = resolve(config)
    store = JobRecordStore(cfg)
    item = store.client.get_item(
        TableName=store.table, Key={"id": {"S": workflow_key(workflow_id)}}, ConsistentRead=True
    ).get("Item")
    if not item:
        return WorkflowStatus(workflow_id, "unknown", note="no workflow with this id (or it expired)")

    def n(name: str) -> int:
        return int(item.get(name, {}).get("N", "0"))

    def s(name: str) -> str | None:
        value = item.get(name, {}).get("S")
        return str(value) if value is not None else None

    outline = json.loads(s("outline") or "{}")
    stages = []
    for i, stage in enumerate(outline.get("stages", [])):
        total, ok, dead = n(f"total_{i}"), n(f"ok_{i}"), n(f"dead_{i}")
        sent = f"sent_{i}" in item
        running: int | None = 0
        unfinished = max(0, total - ok - dead)
        if sent and unfinished and f"advanced_{i}" not in item:
            if total <= MAX_MEMBERS_READ:
                ids = [member_job_id(workflow_id, i, j) for j in range(total)]
                states = get_statuses(ids, config=cfg)
                active = (JobState.RUNNING, JobState.RETRYING, JobState.WAITING)
                running = sum(1 for st in states.values() if st.state in active)
            else:
                running = None
        stages.append(
            StageStatus(
                index=i,
                jobs=dict(stage.get("jobs", {})),
                total=total,
                pending=max(0, unfinished - (running or 0)),
                running=running,
                succeeded=ok,
                dead=dead,
                sent=sent,
            )
        )
    everyone = sum(st.total for st in stages)
    finished = sum(st.succeeded + st.dead for st in stages)
    callback = None
    if s("kind") == "chord" and len(stages) == 2 and stages[1].sent:
        callback = member_job_id(workflow_id, 1, 0)
    return WorkflowStatus(
        workflow_id=workflow_id,
        state=s("wf_state") or WorkflowState.RUNNING,
        kind=s("kind") or "",
        stages=tuple(stages),
        progress=round(100.0 * finished / everyone, 1) if everyone else 0.0,
        callback_job_id=callback,
        reason=s("reason"),
        created_at=s("created_at"),
        updated_at=s("updated_at"),
        ended_at=s("ended_at"),
    )
