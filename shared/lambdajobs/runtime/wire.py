"""DynamoDB's wire format beyond strings and integers, loaded the first time it is needed: boto3's
`TypeSerializer`/`TypeDeserializer` for any other value (floats written as decimals, numbers read back
as int or float), and the keyword arguments of an UpdateItem (`update`).

Split out of `lambdajobs.runtime.table`, whose `to_value` and `from_value` convert strings and integers
themselves (a worker's success writes only those) and call these for anything else; `update` is
importable from `table` (PEP 562).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from lambdajobs.runtime.table import AttributeValue, encode, key

_serializer: Any = None
_deserializer: Any = None


def _codecs() -> tuple[Any, Any]:
    global _serializer, _deserializer
    if _serializer is None:
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        _serializer, _deserializer = TypeSerializer(), TypeDeserializer()
    return _serializer, _deserializer


def to_value(value: Any) -> AttributeValue:
    """`table.to_value` for a value other than a string or an integer."""
    serializer, _ = _codecs()
    converted: AttributeValue = serializer.serialize(_decimals(value))
    return converted


def from_value(value: AttributeValue) -> Any:
    """`table.from_value` for an attribute value other than a string or an integer."""
    _, deserializer = _codecs()
    return _numbers(deserializer.deserialize(value))


def _decimals(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)  # a StrEnum (JobState) as its text
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Mapping):
        return {str(k): _decimals(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_decimals(v) for v in value]
    return value


def _numbers(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_numbers(v) for v in value]
    if isinstance(value, set | frozenset):
        return {_numbers(v) for v in value}
    return value


def update(
    table: str,
    item_id: str,
    *,
    sets: Iterable[str] = (),
    remove: Iterable[str] = (),
    adds: Iterable[str] = (),
    condition: str | None = None,
    values: Mapping[str, Any] | None = None,
    names: Mapping[str, str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """The keyword arguments of one UpdateItem: `sets`, `remove` and `adds` are clauses written with
    `:placeholders` whose Python values are in `values` (converted here) and `#names` in `names`."""
    clauses = []
    if sets:
        clauses.append("SET " + ", ".join(sets))
    if adds:
        clauses.append("ADD " + ", ".join(adds))
    if remove:
        clauses.append("REMOVE " + ", ".join(remove))
    request: dict[str, Any] = {"TableName": table, "Key": key(item_id), "UpdateExpression": " ".join(clauses)}
    if condition:
        request["ConditionExpression"] = condition
    if values:
        request["ExpressionAttributeValues"] = encode(values)
    if names:
        request["ExpressionAttributeNames"] = dict(names)
    return {**request, **extra}
