"""The workflow item's codec (`lambdajobs.runtime.workflow_item`): what is written reads back the same,
and each rule the code decides on a read (`WorkflowItem.stage_complete`, `may_claim`, `has_room`,
`advanced`) agrees with the condition expression a write checks it with. Each pair runs on a table of
items in DynamoDB as moto keeps it (in-process `mock_aws`): put the item, make a conditional
UpdateItem, compare "the condition passed" with the predicate."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lambdajobs.runtime import table
from lambdajobs.runtime.workflow_item import (
    LaterItem,
    Member,
    Outline,
    OutlineStage,
    StageItem,
    Tally,
    WorkflowItem,
    WorkflowState,
    workflow_key,
)
from tests.conditions import TABLE, condition_table, passes

NOW = "2026-11-29T12:00:00.000Z"
#: The continuer's clock (epoch s, with a fraction: the claim's `:now` is its integer part).
NOW_S = 1_800_000_000.7
OUTLINE = Outline(
    "chord",
    (OutlineStage({"deliver": 3}, 3, "continue"), OutlineStage({"summarize": 1}, 1, "stop")),
)
FRESH = WorkflowItem.new_item("wf", OUTLINE, digest="abc", now=NOW, expiration=1_900_000_000)
#: Stages each predicate is asked about: the first, the last, and one the item does not have.
STAGES = (0, 1, 5)


def with_stage(item: WorkflowItem, stage: int, **changes: Any) -> WorkflowItem:
    stages = dict(item.stage_items)
    stages[stage] = dataclasses.replace(stages.get(stage, StageItem()), **changes)
    return dataclasses.replace(item, stage_items=stages)


#: Items the producer, the members' tallies and the continuer write, and a few they never should.
ITEMS: dict[str, WorkflowItem | None] = {
    "no item": None,
    "fresh": FRESH,
    "two of three done": with_stage(FRESH, 0, ok=2, done=2),
    "all done": with_stage(FRESH, 0, ok=2, dead=1, done=3),
    "counted beyond its members": with_stage(FRESH, 0, ok=4, done=4),
    "all done, advanced": with_stage(FRESH, 0, ok=3, done=3, advanced=NOW, sent=NOW),
    "all done, claimed by t1": with_stage(
        FRESH, 0, done=3, claim="t1", claim_until=int(NOW_S) + 150, claims=1
    ),
    "all done, t1's claim lapsed": with_stage(
        FRESH, 0, done=3, claim="t1", claim_until=int(NOW_S) - 1, claims=1
    ),
    "all done, t1's claim ends now": with_stage(
        FRESH, 0, done=3, claim="t1", claim_until=int(NOW_S), claims=1
    ),
    "claimed by t1 and advanced": with_stage(
        FRESH, 0, done=3, claim="t1", claim_until=int(NOW_S) + 150, claims=2, advanced=NOW
    ),
    "last stage done": with_stage(with_stage(FRESH, 0, ok=3, done=3, advanced=NOW), 1, ok=1, done=1),
    "last stage counted, ended": dataclasses.replace(
        with_stage(FRESH, 1, dead=1, done=1, advanced=NOW, claim="t2", claim_until=int(NOW_S) + 9),
        wf_state=WorkflowState.DEAD,
        ended_at=NOW,
        reason="stage 1 (summarize x1): 1 of 1 dead",
    ),
}


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    with condition_table() as client:
        yield client


def condition_passes(client: Any, item: WorkflowItem | None, condition: str, values: dict[str, Any]) -> bool:
    """Put `item` (none: no item), then make an UpdateItem under `condition`: did it pass?"""
    return passes(client, workflow_key("wf"), item.to_item() if item is not None else None, condition, values)


def disagreements(
    client: Any,
    predicate: Callable[[WorkflowItem, int], bool],
    condition: Callable[[int], str],
    values: dict[str, Any] | None = None,
) -> tuple[list[tuple[str, int, bool]], set[bool]]:
    """Every (item, stage) where the predicate and the condition disagree, and the outcomes seen."""
    wrong, seen = [], set()
    for name, item in ITEMS.items():
        for stage in STAGES:
            expected = predicate(item if item is not None else WorkflowItem.from_item(None), stage)
            passed = condition_passes(client, item, condition(stage), values or {})
            seen.add(passed)
            if passed != expected:
                wrong.append((name, stage, expected))
    return wrong, seen


def test_stage_complete_agrees_with_its_condition(dynamodb):
    # GIVEN the table of items WHEN each is checked by the predicate and by the condition
    wrong, seen = disagreements(
        dynamodb, lambda item, stage: item.stage_complete(stage), WorkflowItem.stage_complete_condition
    )
    # THEN they agree on every item and stage, and the table has both outcomes
    assert wrong == [] and seen == {True, False}


@pytest.mark.parametrize("token", ["t1", "t2"])
def test_may_claim_agrees_with_the_continuers_claim_condition(dynamodb, token):
    # GIVEN the table of items, and a notice `token` at NOW_S (its `:now` is the integer second)
    # WHEN each is checked by the predicate and by the claim's condition
    wrong, seen = disagreements(
        dynamodb,
        lambda item, stage: item.may_claim(stage, token, NOW_S),
        WorkflowItem.may_claim_condition,
        {":token": token, ":now": int(NOW_S)},
    )
    # THEN they agree on every item and stage, and the table has both outcomes
    assert wrong == [] and seen == {True, False}


def test_has_room_agrees_with_the_tallys_guard(dynamodb):
    wrong, seen = disagreements(
        dynamodb, lambda item, stage: item.has_room(stage), WorkflowItem.has_room_condition
    )
    assert wrong == [] and seen == {True, False}
    # AND the tally's update is guarded by exactly that condition
    assert Tally(workflow_key("wf"), 0).update(TABLE, "succeeded")["ConditionExpression"] == (
        WorkflowItem.has_room_condition(0)
    )


def test_not_advanced_agrees_with_attribute_not_exists_advanced(dynamodb):
    wrong, seen = disagreements(
        dynamodb, lambda item, stage: not item.advanced(stage), WorkflowItem.not_advanced_condition
    )
    assert wrong == [] and seen == {True, False}


# -- the codec -------------------------------------------------------------------------------------


def test_every_item_of_the_table_reads_back_as_written_through_dynamodb(dynamodb):
    for name, item in ITEMS.items():
        if item is None:
            continue
        # GIVEN an item written WHEN it is read back from DynamoDB THEN it is the same item
        dynamodb.put_item(TableName=TABLE, Item=item.to_item())
        found = dynamodb.get_item(TableName=TABLE, Key=table.key(workflow_key("wf")), ConsistentRead=True)
        assert WorkflowItem.from_item(found["Item"]) == item, name
        assert WorkflowItem.from_item(item.to_item()) == item, name


def test_the_producers_item_keeps_its_wire_format():
    # The attributes (and the outline's JSON, which the workflow's digest covers) as stored by every
    # version before the codec: an item written then must read the same now, and a repeated enqueue
    # must find the same digest.
    outline = '{"kind":"chord","stages":[{"jobs":{"deliver":3},"on_dead":"continue","total":3},{"jobs":{"summarize":1},"on_dead":"stop","total":1}]}'  # noqa: E501
    assert FRESH.to_item() == {
        "id": {"S": "lambdajobs#wf#wf"},
        "kind": {"S": "chord"},
        "wf_state": {"S": "running"},
        "stages": {"N": "2"},
        "outline": {"S": outline},
        "digest": {"S": "abc"},
        "created_at": {"S": NOW},
        "updated_at": {"S": NOW},
        "expiration": {"N": "1900000000"},
        **{
            f"{name}_{i}": {"N": str(value)}
            for i, total in ((0, 3), (1, 1))
            for name, value in (("total", total), ("ok", 0), ("dead", 0), ("done", 0))
        },
    }
    assert Outline.from_text(outline) == OUTLINE


def test_a_projection_reads_as_an_item_with_only_its_attributes():
    # GIVEN what a member's stage check reads (a projection: no id, no outline)
    item = WorkflowItem.from_item({"done_1": {"N": "1"}, "total_1": {"N": "1"}})
    # THEN its stage reads as projected, and the other stages as absent
    assert item.workflow_id is None and item.outline is None and item.outline_stages == ()
    assert item.stage(1) == StageItem(total=1, done=1) and item.stage_complete(1)
    assert item.stage(0).total is None and not item.stage_complete(0) and not item.has_room(0)


def test_states_read_as_the_enum_and_compare_equal_to_their_text():
    assert WorkflowItem.from_item({"wf_state": {"S": "dead"}}).wf_state is WorkflowState.DEAD
    assert WorkflowItem.from_item({}).wf_state == "running"  # an item before it had a state
    assert WorkflowItem.from_item({"wf_state": {"S": "paused"}}).wf_state == "running"  # a newer version's
    assert WorkflowState.UNKNOWN == "unknown" and str(WorkflowState.SUCCEEDED) == "succeeded"


def test_the_later_stages_item_round_trips_and_keeps_its_json():
    # GIVEN the members of a chain's stages 1 and 2
    later = LaterItem(
        "wf",
        {
            1: (Member("step", {"name": "b"}, None, None),),
            2: (Member("step", {"name": "c"}, "high", "high"), Member("step", {"name": "d"})),
        },
        expiration=1_900_000_000,
    )
    # WHEN it is written and read back THEN it is the same, and its JSON is what the digest covers
    assert LaterItem.from_item(later.to_item()) == later
    assert later.to_item()["id"] == {"S": "lambdajobs#wf#wf#later"}
    assert later.text().startswith(
        '{"1":[{"job":"step","level":null,"payload":{"name":"b"},"priority":null}]'
    )
    assert later.members(2)[0].level == "high"
    with pytest.raises(KeyError):
        later.members(3)
