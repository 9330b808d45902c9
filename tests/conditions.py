"""Does DynamoDB let a condition expression through on an item? Asked of moto in-process, so a Python
predicate and the condition expression it mirrors can be checked against each other on a table of
items (tests/unit/test_job_record.py, tests/unit/test_workflow_item.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from lambdajobs.runtime import table

TABLE = "conditions"


@contextmanager
def condition_table() -> Iterator[Any]:
    """A DynamoDB client on moto with an empty table keyed on `id`, as the job table is."""
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        yield client


def passes(
    client: Any,
    item_id: str,
    item: table.Item | None,
    condition: str,
    values: Mapping[str, Any],
    names: Mapping[str, str] | None = None,
) -> bool:
    """Put `item` under `item_id` (None: no item), then make an UpdateItem under `condition` (with its
    `values` and `names`): did DynamoDB let it through?"""
    client.delete_item(TableName=TABLE, Key=table.key(item_id))
    if item is not None:
        client.put_item(TableName=TABLE, Item=item)
    used = {name: path for name, path in (names or {}).items() if name in condition}
    request = table.update(
        TABLE,
        item_id,
        sets=["probe = :probe"],
        condition=condition,
        values={**values, ":probe": 1},
        names=used or None,
    )
    try:
        client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True
