"""The workflow item's codec: a workflow's outline and per-stage counters in the job table
(`lambdajobs#wf#<workflow id>`), and its later stages' payloads (`<that key>#later`); every item type
is listed in `lambdajobs.runtime.table`.

`WorkflowItem` and `LaterItem` are the one way in and out of those items: `from_item` reads what
DynamoDB returns (a whole item, or a projection of a few attributes), `new_item` is what the producer
writes, `to_item` its attribute values. The rules the workflow code decides on are predicates of
`WorkflowItem` (`stage_complete`, `may_claim`, `has_room`, `advanced`), each beside the condition
expression a conditional write checks the same rule with, so a read and a write never disagree (a
unit test runs each pair against DynamoDB, on moto).

`Tally` is how a member's outcome is counted in it, in the same transaction as the member's record.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from lambdajobs.runtime import table
from lambdajobs.runtime.settings import WORKFLOW_ID_PREFIX

#: What happens after a stage some of whose members died: the next stage is sent anyway, or not.
OnDead = Literal["continue", "stop"]
#: The suffix of a workflow's later-stages item.
LATER_SUFFIX = "#later"


def workflow_key(workflow_id: str) -> str:
    """The workflow's item: its outline and counters."""
    return WORKFLOW_ID_PREFIX + workflow_id


def later_key(workflow_id: str) -> str:
    """The item with the validated payloads of the workflow's later stages."""
    return workflow_key(workflow_id) + LATER_SUFFIX


def _workflow_id(item_id: Any, suffix: str = "") -> str | None:
    text = str(item_id) if item_id is not None else ""
    if not text.startswith(WORKFLOW_ID_PREFIX) or not text.endswith(suffix):
        return None
    return text[len(WORKFLOW_ID_PREFIX) : len(text) - len(suffix)]


class WorkflowState(StrEnum):
    """A workflow's state: `running`, then `succeeded` (every stage ran; its last stage's members all
    succeeded) or `dead` (a stage with dead members stopped it, or its last stage has dead members).
    `unknown`: there is no such workflow (never enqueued, or its item expired); no item holds it."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    UNKNOWN = "unknown"


def _state(text: Any) -> WorkflowState:
    try:
        return WorkflowState(text) if text else WorkflowState.RUNNING
    except ValueError:  # a state written by a newer version: show it as running, not crash
        return WorkflowState.RUNNING


# -- the outline -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutlineStage:
    """One stage as outlined at enqueue: its jobs (name: members), its member count, and its rule."""

    jobs: dict[str, int]
    total: int
    on_dead: OnDead


@dataclass(frozen=True)
class Outline:
    """The workflow's shape, kept as JSON in its item (`outline`): its kind and its stages."""

    kind: str
    stages: tuple[OutlineStage, ...]

    def text(self) -> str:
        """The JSON as stored; the workflow's digest covers it, so it never changes for an outline."""
        stages = [{"jobs": s.jobs, "total": s.total, "on_dead": s.on_dead} for s in self.stages]
        return json.dumps({"kind": self.kind, "stages": stages}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> Outline:
        data = json.loads(text or "{}")
        stages = tuple(
            OutlineStage(dict(s.get("jobs", {})), int(s.get("total", 0)), s.get("on_dead", "stop"))
            for s in data.get("stages", [])
        )
        return cls(str(data.get("kind", "")), stages)


# -- the workflow item ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class StageItem:
    """One stage's attributes in the workflow item (attribute `<name>_<stage>`). `total` is None when
    the item has no such stage (or a projection left it out); `ok`, `dead` and `done` are written as 0
    by the producer and counted by `Tally`; `sent`, `advanced` are timestamps (RFC 3339); `claim` is the
    continuer's claim (a notice's message id) held until `claim_until` (epoch s), `claims` how many
    claims were made (None: never claimed)."""

    total: int | None = None
    ok: int = 0
    dead: int = 0
    done: int = 0
    sent: str | None = None
    advanced: str | None = None
    claim: str | None = None
    claim_until: int | None = None
    claims: int | None = None

    @property
    def finished(self) -> int:
        """Members counted so far (succeeded or dead)."""
        return self.ok + self.dead


_STAGE_FIELDS = frozenset(f.name for f in dataclasses.fields(StageItem))
_NO_STAGE = StageItem()


def _stages_of(values: Mapping[str, Any]) -> dict[int, StageItem]:
    """Per-stage attributes (`ok_0`, `claim_until_3`, ...) gathered by stage."""
    found: dict[int, dict[str, Any]] = {}
    for name, value in values.items():
        prefix, _, index = name.rpartition("_")
        if prefix in _STAGE_FIELDS and index.isdigit():
            found.setdefault(int(index), {})[prefix] = value
    return {i: StageItem(**fields) for i, fields in sorted(found.items())}


@dataclass(frozen=True)
class WorkflowItem:
    """A workflow's item as read (`from_item`) or as the producer writes it (`new_item`, `to_item`).
    A projection reads as an item with only its attributes (`workflow_id` None without `id`)."""

    workflow_id: str | None = None
    kind: str = ""
    wf_state: WorkflowState = WorkflowState.RUNNING
    #: The number of stages (the attribute `stages`).
    stages: int = 0
    outline: Outline | None = None
    #: The hash of the whole workflow as enqueued: an enqueue again under its id must match it.
    digest: str | None = None
    created_at: str | None = None
    updated_at: str | None = None
    ended_at: str | None = None
    reason: str | None = None
    #: The item's TTL (epoch s).
    expiration: int | None = None
    #: Per stage index, its attributes (only the stages the item has).
    stage_items: Mapping[int, StageItem] = field(default_factory=dict)

    @classmethod
    def new_item(
        cls, workflow_id: str, outline: Outline, *, digest: str, now: str, expiration: int
    ) -> WorkflowItem:
        """The item the producer writes: running, each stage's member count, every counter at 0."""
        return cls(
            workflow_id=workflow_id,
            kind=outline.kind,
            wf_state=WorkflowState.RUNNING,
            stages=len(outline.stages),
            outline=outline,
            digest=digest,
            created_at=now,
            updated_at=now,
            expiration=expiration,
            stage_items={i: StageItem(total=s.total) for i, s in enumerate(outline.stages)},
        )

    @classmethod
    def from_item(cls, item: Mapping[str, table.AttributeValue] | None) -> WorkflowItem:
        """An item (or a projection of it, or the old attributes an update returned) as read."""
        values = table.decode(item)
        outline = values.get("outline")
        return cls(
            workflow_id=_workflow_id(values.get("id")),
            kind=str(values.get("kind", "")),
            wf_state=_state(values.get("wf_state")),
            stages=int(values.get("stages", 0)),
            outline=Outline.from_text(outline) if outline is not None else None,
            digest=values.get("digest"),
            created_at=values.get("created_at"),
            updated_at=values.get("updated_at"),
            ended_at=values.get("ended_at"),
            reason=values.get("reason"),
            expiration=values.get("expiration"),
            stage_items=_stages_of(values),
        )

    def to_item(self) -> table.Item:
        """The item's attribute values (those it has: None is left out)."""
        values: dict[str, Any] = {
            "id": workflow_key(self.workflow_id) if self.workflow_id is not None else None,
            "kind": self.kind,
            "wf_state": self.wf_state,
            "stages": self.stages,
            "outline": self.outline.text() if self.outline is not None else None,
            "digest": self.digest,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "ended_at": self.ended_at,
            "reason": self.reason,
            "expiration": self.expiration,
        }
        for i, stage in self.stage_items.items():
            values.update({f"{name}_{i}": getattr(stage, name) for name in sorted(_STAGE_FIELDS)})
        return table.encode(values)

    def stage(self, stage: int) -> StageItem:
        """Stage `stage`'s attributes (all unset for a stage the item does not have)."""
        return self.stage_items.get(stage, _NO_STAGE)

    @property
    def outline_stages(self) -> tuple[OutlineStage, ...]:
        """The outline's stages (none when the item was read without its outline)."""
        return self.outline.stages if self.outline is not None else ()

    # -- the rules: each predicate beside the condition expression a write checks it with ----------

    def stage_complete(self, stage: int) -> bool:
        """Every member of `stage` has finished, and the stage was not advanced yet."""
        s = self.stage(stage)
        return s.total is not None and s.done >= s.total and s.advanced is None

    @staticmethod
    def stage_complete_condition(stage: int) -> str:
        return f"done_{stage} >= total_{stage} AND attribute_not_exists(advanced_{stage})"

    def may_claim(self, stage: int, token: str, now: float) -> bool:
        """The continuer handling notice `token` may claim `stage` at `now` (epoch s): the stage is not
        advanced, and nobody claimed it, or this notice did (it came back), or the claim lapsed."""
        s = self.stage(stage)
        lapsed = s.claim_until is not None and s.claim_until < int(now)
        return s.advanced is None and (s.claim is None or s.claim == token or lapsed)

    @staticmethod
    def may_claim_condition(stage: int) -> str:
        """With `:token` (the notice's message id) and `:now` (int epoch s)."""
        return (
            f"attribute_not_exists(advanced_{stage}) AND (attribute_not_exists(claim_{stage}) "
            f"OR claim_{stage} = :token OR claim_until_{stage} < :now)"
        )

    def has_room(self, stage: int) -> bool:
        """Another member's outcome may be counted in `stage` (no count beyond its members)."""
        s = self.stage(stage)
        return s.total is not None and s.done < s.total

    @staticmethod
    def has_room_condition(stage: int) -> str:
        return f"done_{stage} < total_{stage}"

    def advanced(self, stage: int) -> bool:
        """`stage` was advanced: its next stage sent, or the workflow's end recorded."""
        return self.stage(stage).advanced is not None

    @staticmethod
    def not_advanced_condition(stage: int) -> str:
        return f"attribute_not_exists(advanced_{stage})"


# -- the later-stages item -------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    """A validated step of a workflow as its stage's message is made from it: its job, its payload
    (validated, as JSON data), its priority and the level that priority maps to."""

    job: str
    payload: dict[str, Any]
    priority: str | None = None
    level: str | None = None

    def stored(self) -> dict[str, Any]:
        """As kept in the later-stages item (and hashed into the workflow's digest)."""
        return {"job": self.job, "payload": self.payload, "priority": self.priority, "level": self.level}

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Member:
        return cls(data["job"], data["payload"], data.get("priority"), data.get("level"))


@dataclass(frozen=True)
class LaterItem:
    """A workflow's later-stages item: the validated members of every stage after the first, by stage
    index (kept as JSON in `later`), and the item's TTL."""

    workflow_id: str | None
    stages: Mapping[int, tuple[Member, ...]]
    expiration: int | None = None

    def text(self) -> str:
        """The JSON as stored; the workflow's digest covers it."""
        later = {str(i): [m.stored() for m in members] for i, members in self.stages.items()}
        return json.dumps(later, separators=(",", ":"), sort_keys=True)

    def members(self, stage: int) -> tuple[Member, ...]:
        """Stage `stage`'s members. Raises KeyError for a stage it does not keep."""
        return self.stages[stage]

    @classmethod
    def from_item(cls, item: Mapping[str, table.AttributeValue] | None) -> LaterItem:
        values = table.decode(item)
        later = json.loads(values.get("later") or "{}")
        return cls(
            workflow_id=_workflow_id(values.get("id"), LATER_SUFFIX),
            stages={int(i): tuple(Member.from_stored(m) for m in members) for i, members in later.items()},
            expiration=values.get("expiration"),
        )

    def to_item(self) -> table.Item:
        return table.encode(
            {
                "id": later_key(self.workflow_id) if self.workflow_id is not None else None,
                "later": self.text(),
                "expiration": self.expiration,
            }
        )


# -- counting a member's outcome ---------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """Counting a workflow member's outcome in its workflow's item (`key`), stage `stage`, in the same
    transaction as the member's record write: per-member idempotence comes from the record, which
    keeps `wf_counted` (the outcome counted), so no outcome is counted twice and none is lost to a
    crash between the two writes."""

    key: str
    stage: int
    #: Renews the workflow item's expiry (the job records' TTL from now): a stage may stay open for days.
    ttl_seconds: int = 0

    def update(self, table_name: str, outcome: str, *, from_dead: bool = False) -> dict[str, Any]:
        """The workflow item's update: `ok_<stage>` or `dead_<stage>` up by one, and `done_<stage>`
        with it; `from_dead`: a member counted dead that succeeded after a redrive moves from dead to
        ok (`done` unchanged). `outcome` is the member's `JobState` (succeeded or dead). The guard
        `done < total` (`WorkflowItem.has_room`) refuses a count beyond the stage's members (and an
        item that is gone). Kept this short on purpose: every member of a workflow makes one."""
        i = self.stage
        values: dict[str, Any] = {":one": 1}
        if from_dead:
            values[":minus"], values[":zero"] = -1, 0
            adds, condition = [f"ok_{i} :one", f"dead_{i} :minus"], f"dead_{i} > :zero"
        else:
            counter = "ok" if outcome == "succeeded" else "dead"  # a JobState
            adds, condition = [f"{counter}_{i} :one", f"done_{i} :one"], WorkflowItem.has_room_condition(i)
        sets = []
        if self.ttl_seconds:
            values[":exp"] = int(time.time()) + self.ttl_seconds
            sets = ["expiration = :exp"]
        return table.update(table_name, self.key, sets=sets, adds=adds, condition=condition, values=values)
