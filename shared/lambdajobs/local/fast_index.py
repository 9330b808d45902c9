"""Quicker reads of the job table in the local stack's moto server, with the answers moto gives: the
job index (`settings.JOB_INDEX`) and job records at thousands of records.

Items are answered as JSON at once. moto 5.2 writes every DynamoDB answer through its generic,
shape-driven serializer, which visits each attribute value of each item through several layers:
2 s for a BatchGetItem of 50 job records that hold a payload and an attempt history (the board's
first page of dead jobs). An answer of GetItem, BatchGetItem, Query or Scan is already in DynamoDB's
wire shape once moto has built it (attribute values as `{"S": ...}` maps), so it is written with
`json.dumps` as it is (members that are None left out, as the serializer leaves them out); one that
holds something JSON cannot write (binary values) goes through moto's serializer as before.

moto answers a Query on an index by sorting every item of the table (its key comparisons go through
`DynamoType`), keeping those of the partition, measuring and deep-copying each whole item (payload,
traceback, history) and only then projecting it to the index's keys: with 5,000 job records, 0.3 to
1 s a Query, which a board overview makes dozens of. The same Query here reads each item's partition
key once, sorts only the partition's items by their sort key (then their table key, as moto does),
and projects before anything is copied: a few milliseconds.

Only a Query moto would answer the same way takes this path: an index of the table that is global,
`KEYS_ONLY`, keyed by one partition key and one sort key, on a table with a partition key only,
with one partition key condition and at most one sort key condition, not a consistent read, and no
legacy `QueryFilter`. Every other Query is moto's own. `install()` / `uninstall()`, as the local
stack's `atomic` module patches moto, for the server in this process.
"""

from __future__ import annotations

import json
import threading
from typing import Any

_lock = threading.Lock()
_installed: list[Any] = []
#: The operations whose answers are items, written as JSON at once.
ITEM_READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan"})
JSON_CONTENT_TYPE = "application/x-amz-json-1.0"


_sizes = threading.local()


def sized_once(size: Any) -> Any:
    """`Item.size`, computed once per item within a BatchGetItem (moto measures each item twice, and a
    job record's size walks its payload and history; nothing changes an item under the DynamoDB lock
    the request holds)."""

    def item_size(self: Any) -> int:
        memo = getattr(_sizes, "memo", None)
        if memo is None:
            return int(size(self))
        key = id(self)
        if key not in memo:
            memo[key] = size(self)
        return int(memo[key])

    return item_size


def measured_once(batch_get_item: Any) -> Any:
    def batch_get_item_measuring_once(self: Any) -> Any:
        _sizes.memo = {}
        try:
            return batch_get_item(self)
        finally:
            _sizes.memo = None

    return batch_get_item_measuring_once


def _pruned(value: dict[str, Any]) -> dict[str, Any]:
    """The answer without its members that are None (the serializer omits them; botocore would read a
    JSON null as a member that is there). Only the answer's own members: the items below hold what
    `DynamoType.to_json` gives, never None."""
    return {k: v for k, v in value.items() if v is not None}


def execute_result(original: Any) -> Any:
    def items_as_json(self: Any, context: Any) -> Any:
        if context.operation_model.name not in ITEM_READS or not isinstance(self.result, dict):
            return original(self, context)
        try:
            body = json.dumps(_pruned(self.result))
        except (TypeError, ValueError):  # bytes (binary attributes): moto's serializer encodes them
            return original(self, context)
        content_type = getattr(context.serializer_class, "CONTENT_TYPE", JSON_CONTENT_TYPE)
        status = context.operation_model.http.get("responseCode", 200)
        return status, {"Content-Type": content_type}, body

    return items_as_json


def _fast_shape(
    table: Any, index_name: str | None, consistent_read: bool, filter_kwargs: dict[str, Any]
) -> Any:
    """The index when the Query may take the quick path, else None."""
    from moto.dynamodb.models.table import GlobalSecondaryIndex

    if not index_name or consistent_read or filter_kwargs or table.range_key_attr:
        return None
    index = next((i for i in table.global_indexes or [] if i.name == index_name), None)
    if not isinstance(index, GlobalSecondaryIndex):
        return None
    if (index.projection or {}).get("ProjectionType") != "KEYS_ONLY":
        return None
    kinds = [k["KeyType"] for k in index.schema]
    return index if kinds == ["HASH", "RANGE"] else None


def query(original: Any) -> Any:
    def fast_query(
        self: Any,
        hash_key: Any,
        range_comparison: str | None,
        range_objs: list[Any],
        limit: int,
        exclusive_start_key: dict[str, Any],
        scan_index_forward: bool,
        projection_expressions: list[list[str]] | None,
        index_name: str | None = None,
        consistent_read: bool = False,
        filter_expression: Any = None,
        hash_key_conditions: list[tuple[str, Any]] | None = None,
        range_key_conditions: list[tuple[str, str, list[Any]]] | None = None,
        **filter_kwargs: Any,
    ) -> Any:
        index = _fast_shape(self, index_name, consistent_read, filter_kwargs)
        hash_attr = index.schema[0]["AttributeName"] if index is not None else None
        conditions = hash_key_conditions or []
        if (
            index is None
            or len(conditions) != 1
            or conditions[0][0] != hash_attr
            or len(range_key_conditions or []) > 1
        ):
            return original(
                self,
                hash_key,
                range_comparison,
                range_objs,
                limit,
                exclusive_start_key,
                scan_index_forward,
                projection_expressions,
                index_name,
                consistent_read,
                filter_expression,
                hash_key_conditions=hash_key_conditions,
                range_key_conditions=range_key_conditions,
                **filter_kwargs,
            )
        return _query_keys_only(
            self,
            index,
            conditions[0][1],
            range_comparison,
            range_objs,
            limit,
            exclusive_start_key,
            scan_index_forward,
            projection_expressions,
            filter_expression,
        )

    return fast_query


def _query_keys_only(
    table: Any,
    index: Any,
    wanted: Any,
    range_comparison: str | None,
    range_objs: list[Any],
    limit: int,
    exclusive_start_key: dict[str, Any] | None,
    scan_index_forward: bool,
    projection_expressions: list[list[str]] | None,
    filter_expression: Any,
) -> tuple[list[Any], int, dict[str, Any] | None]:
    from moto.dynamodb.models.dynamo_type import Item

    hash_attr, range_attr = (k["AttributeName"] for k in index.schema)
    table_key = table.hash_key_attr
    kind, text = wanted.type, wanted.value
    partition = [
        item
        for item in table.items.values()
        if isinstance(item, Item)
        and (value := item.attrs.get(hash_attr)) is not None
        and value.type == kind
        and value.value == text
        and item.attrs.get(range_attr)  # an item without the sort key is not in the index
    ]
    partition.sort(key=_order(partition, range_attr))
    if scan_index_forward is False:
        partition.reverse()
    hash_attrs, range_attrs = [hash_attr, table_key], [range_attr, None]
    keys = [table_key, hash_attr, range_attr]
    results: list[Any] = []
    last_evaluated_key = None
    skipping = exclusive_start_key is not None
    for item in partition:
        if skipping:
            if table._item_comes_before_dct(
                item, exclusive_start_key, hash_attrs, range_attrs, scan_index_forward
            ):
                continue
            skipping = False
        if len(results) == limit:
            last_evaluated_key = table._get_last_evaluated_key(results[-1], index.name)
            break
        if range_comparison and not item.attrs[range_attr].compare(range_comparison, range_objs):
            continue
        results.append(_keys_of(item, keys))
    scanned = len(results)
    if filter_expression is not None:
        results = [item for item in results if filter_expression.expr(item)]
    if projection_expressions:
        results = [r.project(projection_expressions) for r in results]
    return results, scanned, last_evaluated_key


def _order(items: list[Any], range_attr: str) -> Any:
    """The index's order: by sort key, then table key. Plain text when every key is a string (moto's
    own comparisons of `DynamoType` cost most of a Query), else moto's comparisons."""
    if all(i.attrs[range_attr].type == "S" and i.hash_key.type == "S" for i in items):
        return lambda item: (item.attrs[range_attr].value, item.hash_key.value)
    return lambda item: (item.attrs[range_attr], item.hash_key)


def _keys_of(item: Any, keys: list[str]) -> Any:
    """The item projected to the index's keys: a new item sharing the key values (moto's answer is
    built from it and nothing changes it), without `Item.__init__`'s conversion and size checks."""
    from moto.dynamodb.models.dynamo_type import Item

    projected: Any = Item.__new__(Item)
    projected.hash_key, projected.range_key = item.hash_key, None
    projected.attrs = {k: item.attrs[k] for k in keys if k in item.attrs}
    return projected


def install() -> None:
    """Give moto's tables the quick Query and its item reads the JSON answer (once per process; nested
    installs are counted)."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    with _lock:
        if not _installed:
            originals = (
                Table.query,
                DynamoResult.__dict__.get("execute_result"),
                Item.size,
                DynamoHandler.batch_get_item,
            )
            Table.query = query(originals[0])  # type: ignore[method-assign]
            DynamoResult.execute_result = execute_result(DynamoResult.execute_result)  # type: ignore[method-assign]
            Item.size = sized_once(originals[2])  # type: ignore[method-assign]
            DynamoHandler.batch_get_item = measured_once(originals[3])  # type: ignore[method-assign]
            _installed.append(originals)
        else:
            _installed.append(None)


def uninstall() -> None:
    """Undo one `install` (moto's own Query and serializer are back after the last)."""
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoHandler, DynamoResult

    with _lock:
        if not _installed:
            return
        originals = _installed.pop()  # the first install kept moto's own; nested ones kept None
        if not _installed:
            Table.query = originals[0]  # type: ignore[method-assign]
            Item.size = originals[2]  # type: ignore[method-assign]
            DynamoHandler.batch_get_item = originals[3]  # type: ignore[method-assign]
            if originals[1] is None:  # inherited from ActionResult: inherit it again
                del DynamoResult.execute_result
            else:
                DynamoResult.execute_result = originals[1]  # type: ignore[method-assign]
