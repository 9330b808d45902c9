"""What every part of the bench shares: alternating runs and their statistics, a moto server, Lambda
events and contexts, a stubbed DynamoDB client, and write and read units counted the way DynamoDB
bills them."""

from __future__ import annotations

import json
import math
import os
import random
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "bench"
REGION = "us-east-1"
FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": REGION,
}


# -- alternation and statistics ------------------------------------------------------------------------


def alternate(rounds: int, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Run each side once per round, in turn (A B A B ...; with more sides the order rotates each round
    so no side always runs first); return every side's measurements."""
    names = list(sides)
    got: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        shift = r % len(names) if len(names) > 2 else 0
        for name in names[shift:] + names[:shift]:
            got[name].append(sides[name]())
    return got


def summary(values: list[float], digits: int = 6) -> dict[str, Any]:
    """Median and spread (min, max, interquartile range) of one side's measurements."""
    ordered = sorted(values)
    q1, _, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else (ordered[0],) * 3
    return {
        "median": round(statistics.median(ordered), digits),
        "min": round(ordered[0], digits),
        "max": round(ordered[-1], digits),
        "iqr": round(q3 - q1, digits),
        "runs": len(ordered),
    }


def ratio(a: list[float], b: list[float], digits: int = 3) -> float:
    """median(a) / median(b)."""
    return round(statistics.median(a) / statistics.median(b), digits)


def ratio_interval(
    a: list[float], b: list[float], level: float = 0.90, resamples: int = 10_000, digits: int = 3
) -> list[float]:
    """A paired percentile bootstrap interval of `ratio(a, b)`: `a[i]` and `b[i]` are one round's two
    measurements (alternated runs), so rounds are resampled with replacement, pairs kept together,
    and the ratio of medians computed on each resample; returns the (1 - level) / 2 and (1 + level) / 2
    quantiles of those ratios, [low, high]. A fixed seed: the same runs give the same interval."""
    if len(a) != len(b) or not a:
        raise ValueError(f"paired measurements needed: {len(a)} against {len(b)}")
    n = len(a)
    draw = random.Random(31)
    ratios = []
    for _ in range(resamples):
        picks = [draw.randrange(n) for _ in range(n)]
        ratios.append(statistics.median(a[i] for i in picks) / statistics.median(b[i] for i in picks))
    ratios.sort()
    tail = (1 - level) / 2
    low = ratios[math.floor(tail * (resamples - 1))]
    high = ratios[math.ceil((1 - tail) * (resamples - 1))]
    return [round(low, digits), round(high, digits)]


# -- a moto server in its own process (it must not share this process's CPU and GIL) --------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on a loopback port, in a child process; yields its endpoint URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **FAKE_CREDENTIALS},
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


# -- Lambda's side ------------------------------------------------------------------------------------


def Context(name: str = "bench", timeout_seconds: float = 30, memory_mb: int = 256) -> Any:
    """A Lambda context (what Powertools and the worker read): the local stack's emulation."""
    from lambdajobs.local.lambda_events import LambdaContext

    return LambdaContext(name, timeout_seconds, memory_mb)


def envelope(job: str, payload: dict[str, Any], job_id: str | None = None) -> str:
    """A message body as lambdajobs' producer writes it (its own encoder)."""
    from lambdajobs.runtime.envelope import encode

    return encode(job, payload, job_id or uuid.uuid4().hex)


def payload(i: int) -> dict[str, Any]:
    return {"to": f"user{i}@example.com", "subject": "Spring sale", "body": "20% off everything this week."}


def trace_id() -> str:
    """A fresh `_X_AMZN_TRACE_ID`, as Lambda sets it for each invocation (tracing not active)."""
    return f"Root=1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]};Parent={uuid.uuid4().hex[:16]};Sampled=0"


def sqs_event(bodies: list[str], queue_arn: str) -> dict[str, Any]:
    """Lambda's SQS event for these bodies, first receive."""
    now = str(int(time.time() * 1000))
    return {
        "Records": [
            {
                "messageId": str(uuid.uuid4()),
                "receiptHandle": uuid.uuid4().hex,
                "body": body,
                "attributes": {
                    "ApproximateReceiveCount": "1",
                    "SentTimestamp": now,
                    "SenderId": "AIDAEXAMPLE",
                    "ApproximateFirstReceiveTimestamp": now,
                },
                "messageAttributes": {},
                "md5OfBody": "",
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for body in bodies
        ]
    }


# -- DynamoDB stubbed: success for every call either side makes ------------------------------------------


class _Exceptions:
    class ConditionalCheckFailedException(ClientError):
        pass

    class TransactionCanceledException(ClientError):
        pass


class StubDynamoDB:
    """A DynamoDB client that answers every call with success and no item: the CPU a worker spends
    around its writes, without the SDK's HTTP or a database. Counts the calls."""

    exceptions = _Exceptions

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}
        self.meta = type("Meta", (), {"events": type("Events", (), {"register": lambda *a, **k: None})()})()

    def _call(self, name: str) -> dict[str, Any]:
        self.calls[name] = self.calls.get(name, 0) + 1
        return {}

    def put_item(self, **_: Any) -> dict[str, Any]:
        return self._call("PutItem")

    def update_item(self, **_: Any) -> dict[str, Any]:
        return self._call("UpdateItem")

    def delete_item(self, **_: Any) -> dict[str, Any]:
        return self._call("DeleteItem")

    def get_item(self, **_: Any) -> dict[str, Any]:
        return self._call("GetItem")

    def transact_write_items(self, **_: Any) -> dict[str, Any]:
        return self._call("TransactWriteItems")

    def __getattr__(self, name: str) -> Callable[..., dict[str, Any]]:
        """Any other operation (query, batch_get_item ...): success, empty, counted by its API name."""
        if name.startswith("_"):
            raise AttributeError(name)
        operation = "".join(part.title() for part in name.split("_"))
        return lambda **_: self._call(operation)


# -- write and read units, as DynamoDB bills them ----------------------------------------------------

WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
READS = ("GetItem", "BatchGetItem", "TransactGetItems", "Query", "Scan")


def _number_size(text: str) -> int:
    digits = str(Decimal(text).normalize()).lstrip("-").replace(".", "").lstrip("0") or "0"
    digits = digits.split("E")[0]
    return math.ceil(len(digits) / 2) + 1


def value_size(value: dict[str, Any]) -> int:
    """The size of one attribute value (DynamoDB's item size rules)."""
    (kind, v), *_ = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(v)
    if kind == "B":
        return len(v) if isinstance(v, bytes | bytearray) else len(str(v).encode())
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(n) for n in v)
    if kind == "M":
        return 3 + sum(len(k.encode()) + value_size(x) + 1 for k, x in v.items())
    if kind == "L":
        return 3 + sum(value_size(x) + 1 for x in v)
    return len(json.dumps(v))


def item_size(item: dict[str, Any] | None) -> int:
    return sum(len(name.encode()) + value_size(value) for name, value in (item or {}).items())


def write_kind(name: str, params: dict[str, Any]) -> str:
    """Which job record write a DynamoDB write is, from its request (`lambdajobs.runtime.lifecycle`):
    `acquire` (a first attempt's PutItem, or the UpdateItem that takes a record again: a retry, a
    continuation), `checkpoint:<step>`, `park` (a durable job's suspension), `complete`, `progress`;
    else the operation's name."""
    values = params.get("ExpressionAttributeValues") or {}
    if name == "PutItem":
        state = (params.get("Item") or {}).get("state", {}).get("S")
        return {"running": "acquire", "succeeded": "complete"}.get(str(state), name)
    if name == "UpdateItem":
        names = params.get("ExpressionAttributeNames") or {}
        if ":step" in values:
            return "checkpoint:" + str(names.get("#step", "")).removeprefix("step:")
        if ":wake" in values:
            return "park"
        if ":result" in values:
            return "complete"
        if "started_at = :now_iso" in str(params.get("UpdateExpression", "")):
            return "acquire"
        if ":p" in values:
            return "progress"
    return name


class WriteUnits:
    """Counts the write units of every write a DynamoDB client makes, as DynamoDB bills them: the
    larger of the item's size before and after, 1 unit per KB rounded up (2 per KB in a transaction);
    per global secondary index of the table (as provisioned), 1 per index entry put or deleted, 2 when
    an entry's key changes (a delete and a put), 1 when a projected attribute changes. Reads the item
    before and after each write with `reader` (another client, not counted). `kinds`: the calls and
    units of each kind of write (`write_kind`).

    Its reads too (`read_units`, `read_calls`), as DynamoDB bills them: per item read, 1 unit per 4 KB
    rounded up (at least 1) for a strongly consistent read, half that for an eventually consistent one,
    twice that in a transaction; the size of the whole item (read again with `reader`) whatever the
    projection; a Query or Scan by the total size of the items it returned, 4 KB rounded up."""

    def __init__(self, client: Any, reader: Any) -> None:
        self.reader = reader
        self.units = 0.0
        self.calls: dict[str, int] = {}
        self.read_units = 0.0
        self.read_calls: dict[str, int] = {}
        self._read_params: dict[str, Any] = {}
        self.kinds: dict[str, dict[str, float]] = {}
        self._kind = ""
        self._tables: dict[str, tuple[list[str], list[tuple[list[str], str, list[str]]]]] = {}
        self._before: list[tuple[str, dict[str, Any], dict[str, Any] | None, int]] = []
        self._events = client.meta.events
        self._events.register("before-parameter-build.dynamodb", self._before_call)
        self._events.register("after-call.dynamodb", self._after_call)

    def close(self) -> None:
        """Stop counting (the client's later writes are not this meter's)."""
        self._events.unregister("before-parameter-build.dynamodb", self._before_call)
        self._events.unregister("after-call.dynamodb", self._after_call)

    def _schema(self, table: str) -> tuple[list[str], list[tuple[list[str], str, list[str]]]]:
        if table not in self._tables:
            t = self.reader.describe_table(TableName=table)["Table"]
            key = [k["AttributeName"] for k in t["KeySchema"]]
            gsis = [
                (
                    [k["AttributeName"] for k in g["KeySchema"]],
                    g["Projection"]["ProjectionType"],
                    g["Projection"].get("NonKeyAttributes", []),
                )
                for g in t.get("GlobalSecondaryIndexes", [])
            ]
            self._tables[table] = (key, gsis)
        return self._tables[table]

    def _targets(self, name: str, params: dict[str, Any]) -> list[tuple[str, dict[str, Any], int]]:
        """(table, key, units multiplier) of each item a write touches."""

        def key_of(table: str, request: dict[str, Any]) -> dict[str, Any]:
            if "Key" in request:
                return dict(request["Key"])
            names, _ = self._schema(table)
            return {n: request["Item"][n] for n in names}

        if name in ("PutItem", "UpdateItem", "DeleteItem"):
            return [(params["TableName"], key_of(params["TableName"], params), 1)]
        found = []
        if name == "TransactWriteItems":
            for entry in params["TransactItems"]:
                (kind, request), *_ = entry.items()
                if kind != "ConditionCheck":
                    found.append((request["TableName"], key_of(request["TableName"], request), 2))
        if name == "BatchWriteItem":
            for table, requests in params["RequestItems"].items():
                for r in requests:
                    request = r.get("PutRequest") or r.get("DeleteRequest")
                    found.append((table, key_of(table, request), 1))
        return found

    def _read(self, table: str, key: dict[str, Any]) -> dict[str, Any] | None:
        return self.reader.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name in READS:
            self.read_calls[model.name] = self.read_calls.get(model.name, 0) + 1
            self._read_params = dict(params)
            return
        if model.name not in WRITES:
            return
        self.calls[model.name] = self.calls.get(model.name, 0) + 1
        self._kind = write_kind(model.name, params)
        self._before = [(t, k, self._read(t, k), m) for t, k, m in self._targets(model.name, params)]

    def _after_call(self, model: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name in READS:
            self.read_units += self._read_units(model.name, self._read_params, parsed)
            self._read_params = {}
            return
        if model.name not in WRITES:
            return
        units = 0.0
        for table, key, old, multiplier in self._before:
            new = self._read(table, key)
            size = max(item_size(old), item_size(new))
            units += multiplier * max(1, math.ceil(size / 1024))
            for keys, projection, extra in self._schema(table)[1]:
                units += multiplier * _index_units(old, new, keys, projection, extra)
        self.units += units
        kind = self.kinds.setdefault(self._kind, {"calls": 0, "units": 0.0})
        kind["calls"] += 1
        kind["units"] += units
        self._before = []

    def _read_units(self, name: str, params: dict[str, Any], parsed: dict[str, Any]) -> float:
        def units(size: int, consistent: bool, multiplier: int = 1) -> float:
            whole = multiplier * max(1, math.ceil(size / 4096))
            return float(whole) if consistent else whole / 2

        if name == "GetItem":
            item = self._read(params["TableName"], dict(params["Key"]))
            return units(item_size(item), bool(params.get("ConsistentRead")))
        if name == "BatchGetItem":
            total = 0.0
            for table, request in params["RequestItems"].items():
                for key in request["Keys"]:
                    item = self._read(table, dict(key))
                    total += units(item_size(item), bool(request.get("ConsistentRead")))
            return total
        if name == "TransactGetItems":
            total = 0.0
            for entry in params["TransactItems"]:
                get = entry["Get"]
                total += units(item_size(self._read(get["TableName"], dict(get["Key"]))), True, 2)
            return total
        # Query, Scan: the items returned (as projected: a lower bound when a projection is asked)
        size = sum(item_size(item) for item in parsed.get("Items", []))
        return units(size, bool(params.get("ConsistentRead")))


def _index_units(
    old: dict[str, Any] | None, new: dict[str, Any] | None, keys: list[str], projection: str, extra: list[str]
) -> int:
    def entry(item: dict[str, Any] | None) -> tuple[Any, ...] | None:
        if item is None or any(k not in item for k in keys):
            return None
        return tuple(json.dumps(item[k], sort_keys=True) for k in keys)

    before, after = entry(old), entry(new)
    if before is None and after is None:
        return 0
    if before is None or after is None:
        return 1
    if before != after:
        return 2
    if projection == "KEYS_ONLY":
        return 0
    watched = (old or {}).keys() | (new or {}).keys() if projection == "ALL" else set(extra)
    return int(any((old or {}).get(a) != (new or {}).get(a) for a in watched))
