"""The local stack's quick Query of a keys-only index (`lambdajobs.local.fast_index`) answers exactly
what moto's own Query answers: the same items, order, pages, counts and projections."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from lambdajobs.local import fast_index

TABLE = "jobs"
INDEX = "by_job_state"


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(
            TableName=TABLE,
            AttributeDefinitions=[
                {"AttributeName": "id", "AttributeType": "S"},
                {"AttributeName": "ix", "AttributeType": "S"},
                {"AttributeName": "ix_at", "AttributeType": "S"},
            ],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
            GlobalSecondaryIndexes=[
                {
                    "IndexName": INDEX,
                    "KeySchema": [
                        {"AttributeName": "ix", "KeyType": "HASH"},
                        {"AttributeName": "ix_at", "KeyType": "RANGE"},
                    ],
                    "Projection": {"ProjectionType": "KEYS_ONLY"},
                }
            ],
        )
        items = []
        for n in range(300):
            item: dict[str, Any] = {
                "id": {"S": f"job-{n:04d}"},
                "state": {"S": "dead"},
                "payload": {"S": "x" * 2000},
                "history": {"L": [{"M": {"attempt": {"N": str(a)}}} for a in range(3)]},
            }
            if n % 10 != 0:  # one in ten has no index entry
                item["ix"] = {"S": f"job{n % 3}#dead"}
                # pairs share their time: the table key breaks the tie, as DynamoDB's index does
                item["ix_at"] = {"S": f"2026-12-02T10:{(n // 2) % 60:02d}:00.000Z"}
            items.append(item)
        for start in range(0, len(items), 25):  # 25 a request: a twelfth of the calls put_item makes
            batch = [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            assert not client.batch_write_item(RequestItems={TABLE: batch}).get("UnprocessedItems")
        yield client


QUERIES: list[dict[str, Any]] = [
    {"ScanIndexForward": False, "Limit": 25},
    {"ScanIndexForward": True, "Limit": 7},
    {"ScanIndexForward": False},
    {"Select": "COUNT"},
    {"ProjectionExpression": "#at", "Limit": 40},
    {
        "range": (
            "#at BETWEEN :a AND :b",
            {":a": "2026-12-02T10:10:00.000Z", ":b": "2026-12-02T10:40:00.000Z"},
        )
    },
    {"range": ("#at >= :a", {":a": "2026-12-02T10:30:00.000Z"}), "Limit": 9, "ScanIndexForward": False},
    {"range": ("#at < :a", {":a": "2026-12-02T10:20:00.000Z"}), "Select": "COUNT"},
    {"FilterExpression": "begins_with(id, :p)", "values": {":p": "job-01"}, "Limit": 30},
]


def pages(client: Any, partition: str, query: dict[str, Any]) -> list[Any]:
    """Every page of the query, with its Items, Count and LastEvaluatedKey."""
    query = dict(query)
    condition, values = "#ix = :ix", {":ix": partition}
    names = {"#ix": "ix"}
    if "range" in query:
        more, extra = query.pop("range")
        condition += f" AND {more}"
        values.update(extra)
    values.update(query.pop("values", {}))
    if "#at" in condition or "#at" in str(query.get("ProjectionExpression", "")):
        names["#at"] = "ix_at"
    request = {
        "TableName": TABLE,
        "IndexName": INDEX,
        "KeyConditionExpression": condition,
        "ExpressionAttributeNames": names,
        "ExpressionAttributeValues": {k: {"S": v} for k, v in values.items()},
        **query,
    }
    found = []
    while len(found) < 100:  # a cursor that never ends is a failure, not a hang
        answer = client.query(**request)
        found.append((answer.get("Items"), answer["Count"], answer.get("LastEvaluatedKey")))
        if "LastEvaluatedKey" not in answer:
            return found
        request["ExclusiveStartKey"] = answer["LastEvaluatedKey"]
    raise AssertionError(f"more than 100 pages: {found[:3]}")


@pytest.mark.parametrize("query", QUERIES, ids=[str(i) for i in range(len(QUERIES))])
@pytest.mark.parametrize("partition", ["job1#dead", "nothing#dead"])
def test_the_quick_query_answers_as_moto_does(ddb, query, partition):
    expected = pages(ddb, partition, query)
    fast_index.install()
    try:
        assert pages(ddb, partition, query) == expected
    finally:
        fast_index.uninstall()


def test_the_quick_query_is_quicker_at_a_thousand_items(ddb, monkeypatch):
    for start in range(300, 1300, 25):
        batch = [
            {
                "PutRequest": {
                    "Item": {
                        "id": {"S": f"job-{n:04d}"},
                        "ix": {"S": "job1#dead"},
                        "ix_at": {"S": f"2026-12-02T11:{n % 60:02d}:00.000Z"},
                        "payload": {"S": "x" * 2000},
                    }
                }
            }
            for n in range(start, start + 25)
        ]
        assert not ddb.batch_write_item(RequestItems={TABLE: batch}).get("UnprocessedItems")

    # the work, not the time (a loaded machine once timed the quick Query slower): attribute values
    # copied, which moto's own Query does for every attribute of every item before projecting it
    from moto.dynamodb.models.dynamo_type import DynamoType

    copied = [0]
    deepcopy = DynamoType.__deepcopy__

    def counted(self: Any, memo: dict[int, Any]) -> Any:
        copied[0] += 1
        return deepcopy(self, memo)

    monkeypatch.setattr(DynamoType, "__deepcopy__", counted)

    def work() -> int:
        copied[0] = 0
        assert sum(count for _, count, _ in pages(ddb, "job1#dead", {"Select": "COUNT"})) >= 1000
        return copied[0]

    slow = work()
    fast_index.install()
    try:
        fast = work()
    finally:
        fast_index.uninstall()
    assert fast * 5 < slow, (fast, slow)


def test_installs_nest_and_the_last_uninstall_restores_moto(ddb):
    from moto.dynamodb.models.dynamo_type import Item
    from moto.dynamodb.models.table import Table
    from moto.dynamodb.responses import DynamoResult

    own, serialized, size = Table.query, DynamoResult.execute_result, Item.size
    fast_index.install()
    fast_index.install()
    fast_index.uninstall()
    assert Table.query is not own and DynamoResult.execute_result is not serialized
    fast_index.uninstall()
    assert (Table.query, DynamoResult.execute_result, Item.size) == (own, serialized, size)


def reads(client: Any) -> list[Any]:
    """Answers of every item read, without their metadata (request ids, retries)."""
    keys = [{"id": {"S": "typed-1"}}, {"id": {"S": "typed-2"}}, {"id": {"S": "absent"}}]
    answers = [
        client.get_item(TableName=TABLE, Key=keys[0]),
        client.get_item(TableName=TABLE, Key=keys[1], ProjectionExpression="mixed, flag"),
        client.get_item(TableName=TABLE, Key=keys[2]),
        client.batch_get_item(RequestItems={TABLE: {"Keys": keys}}),
        client.query(
            TableName=TABLE,
            KeyConditionExpression="id = :id",
            ExpressionAttributeValues={":id": {"S": "typed-2"}},
        ),
        client.scan(TableName=TABLE, Limit=40),
        client.scan(TableName=TABLE, Select="COUNT"),
    ]
    for answer in answers:
        answer.pop("ResponseMetadata", None)
    answers[3]["Responses"][TABLE].sort(key=lambda item: item["id"]["S"])
    return answers


def test_item_reads_answer_as_moto_does(ddb):
    typed = {
        "id": {"S": "typed-1"},
        "n": {"N": "12.5"},
        "flag": {"BOOL": False},
        "nothing": {"NULL": True},
        "mixed": {"L": [{"S": "a"}, {"N": "1"}, {"M": {"deep": {"L": []}}}]},
        "strings": {"SS": ["x", "y"]},
        "numbers": {"NS": ["1", "2"]},
        "empty": {"M": {}},
    }
    ddb.put_item(TableName=TABLE, Item=typed)
    ddb.put_item(TableName=TABLE, Item={**typed, "id": {"S": "typed-2"}, "raw": {"B": b"\x00\x01bytes"}})
    expected = reads(ddb)
    fast_index.install()
    try:
        assert reads(ddb) == expected
    finally:
        fast_index.uninstall()
