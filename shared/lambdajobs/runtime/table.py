"""The job table: the one DynamoDB table of a stack, its item types, and the codec every item goes through.

Every item is keyed on `id` (a string). The item types, told apart by their id:

- **Job record** (`<job id>`; `lambdajobs.runtime.job_record.JobRecord`): the job's idempotency lock
  and its status in one item. Attributes: `job`, `state`, `attempts`, `max_attempts`, `created_at`,
  `started_at`, `finished_at`, `updated_at` (RFC 3339, ms), `result` (JSON text), `error`
  {type, message}, `progress`, `progress_message`, `waiting_until` (a rate-limited job's slot),
  `expiration` (TTL, epoch s), `in_progress_expiration` (the run's lock: epoch ms, also the lock's
  token), `wf_counted` (a workflow member's outcome already counted), `ix`/`ix_at` (the optional job
  index's keys). Its rules (may a copy start a run, is the lock live, ...) are `JobRecord`'s
  predicates, each beside the condition expression it mirrors; `lambdajobs.runtime.lifecycle` writes it.
- **Workflow item** (`lambdajobs#wf#<workflow id>`; `lambdajobs.runtime.workflow_item.WorkflowItem`):
  its outline and per-stage counters. Attributes: `kind`, `wf_state` (running, succeeded, dead),
  `stages` (their number), `outline` (JSON: per stage its jobs, members and rule), `digest`,
  `created_at`, `updated_at`, `ended_at`, `reason`, `expiration`, and per stage `i`
  (`workflow_item.StageItem`): `total_i`, `ok_i`, `dead_i`, `done_i` (counted by `workflow_item.Tally`),
  `sent_i`, `advanced_i` (RFC 3339), `claim_i`, `claim_until_i` (epoch s), `claims_i` (the continuer's
  claim on the stage). The rules decided on it (`stage_complete`, `may_claim`, `has_room`, `advanced`)
  are `WorkflowItem` predicates, each beside the condition expression a write checks it with.
- **Workflow later-stages item** (`lambdajobs#wf#<workflow id>#later`; `workflow_item.LaterItem`):
  `later` (JSON: the validated members of the stages after the first, by stage), `expiration`.
- **Rate limiter** (`lambdajobs#ratelimit#<name>[#<key hash>]`; `lambdajobs.runtime.ratelimit`): `tat`
  (the next free slot, epoch µs), `v` (version), `stolen` (slots taken ahead by higher priorities),
  `expiration`.

DynamoDB's wire format (attribute values such as `{"S": "text"}`) is written and read only here and in
the codecs of those item types: everything else works with Python values. Strings and integers are
converted here; any other value by boto3's own `TypeSerializer`/`TypeDeserializer` (imported on first
use: boto3 is loaded by then anyway), with floats written as decimals and numbers read back as int or
float, in `lambdajobs.runtime.wire`, with the UpdateItem requests' builder (`update`, importable from
here): loaded the first time a value is neither, or an update is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import lazy

if TYPE_CHECKING:  # in `wire`, loaded on first use
    from lambdajobs.runtime.wire import update as update

#: An attribute value as DynamoDB's API takes it: {"S": ...}, {"N": ...}, {"M": {...}}, ...
AttributeValue = dict[str, Any]
Item = dict[str, AttributeValue]


def to_value(value: Any) -> AttributeValue:
    """A Python value as an attribute value: str -> S, int/float -> N, dict -> M, set of ints -> NS,
    bool -> BOOL, None -> NULL, list -> L."""
    if isinstance(value, str):  # the common cases first, as boto3 writes them (a write has a dozen)
        return {"S": str(value)}  # (a StrEnum as its text)
    if type(value) is int:
        return {"N": str(value)}
    from lambdajobs.runtime import wire

    return wire.to_value(value)


def from_value(value: AttributeValue) -> Any:
    """An attribute value as a Python value (numbers as int or float, never Decimal)."""
    if "S" in value:
        return value["S"]
    if "N" in value and "." not in value["N"] and "e" not in value["N"].lower():
        return int(value["N"])
    from lambdajobs.runtime import wire

    return wire.from_value(value)


def encode(values: Mapping[str, Any]) -> Item:
    """A mapping of names (attributes, or `:placeholders`) to Python values, as attribute values;
    None values are left out (an attribute a record does not have)."""
    return {name: to_value(value) for name, value in values.items() if value is not None}


def decode(item: Mapping[str, AttributeValue] | None) -> dict[str, Any]:
    """An item as plain Python values ({} for no item)."""
    return {name: from_value(value) for name, value in (item or {}).items()}


def key(item_id: str) -> Item:
    """The key of the item with this id."""
    return {"id": to_value(item_id)}


def item_id(item: Mapping[str, AttributeValue]) -> str:
    """The id of an item as read."""
    return str(from_value(item["id"]))


def all_of(*conditions: str | None) -> str:
    """Conditions joined with AND (each in parentheses); None and empty ones are left out."""
    given = [c for c in conditions if c]
    return given[0] if len(given) == 1 else " AND ".join(f"({c})" for c in given)


def cancellation_codes(exc: Any) -> list[str]:
    """The reason code of each item of a cancelled transaction ("None": that item's write was fine)."""
    return [str(r.get("Code") or "None") for r in exc.response.get("CancellationReasons", [])]


# `update` lives in `wire`, loaded on first use
__getattr__ = lazy.exports(__name__, {"update": "lambdajobs.runtime.wire"})
