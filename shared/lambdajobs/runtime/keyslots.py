"""Concurrency per key: at most N runs of a job in progress at once per value of a payload field.

`@job(concurrency_key=ConcurrencyKey("customer_id", 2))` lets two exports of one customer run at once,
and any number of customers side by side; `quotas={"acme": 5}` gives a value its own cap. A payload
whose field is null (or absent) is not capped: it belongs to no key.

How: one item per key value in the job table (`lambdajobs#keyslots#<job>#<hash of the value>`) holds a
map of the runs in progress, each entry the run's job id (hashed) and its invocation's deadline (epoch
ms). Taking a slot is one conditional UpdateItem that adds this run's entry while the map holds fewer
than the cap (`size(runs) < :cap`); releasing it at the end of the run, whatever its outcome, removes
the entry. An entry whose deadline passed belongs to an invocation that is over (it crashed or timed
out): when the map is full, the worker reads it, removes such entries (each removal conditional on the
deadline it read) and tries again, so a killed run never holds a slot past its invocation.

A run over its key's cap is not started: its message is handed back for a few seconds (jittered),
without using an attempt. Cost: two write units per run (take and release), and a read and a write
per expired entry removed; a full key's try is one write unit that takes nothing and one consistent
read (looking for expired entries).

Items carry no job index key and expire (`expiration`) a day after their last use. The key's value
may be personal data: it is hashed with the stack and job name, so the table does not hold it.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lambdajobs.runtime import table as codec
from lambdajobs.runtime.errors import DeclarationError
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX

ITEM_PREFIX = RESERVED_ID_PREFIX + "keyslots#"
#: The most runs one key may have in progress (the item holds an entry per run: 400 KB an item).
MAX_CAP = 1000
#: An idle key's item expires this long after its last run started.
IDLE_TTL_SECONDS = 86_400
#: A run whose key is full comes back after a random delay in this range (seconds): no attempt used.
RETRY_DELAY_SECONDS = (1, 5)
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ConcurrencyKey:
    """At most `limit` runs in progress at once per value of payload field `key`; a value in `quotas`
    has its own limit (value -> limit).

    Example:
        >>> ConcurrencyKey("customer_id", 2)
        >>> ConcurrencyKey("tenant", 5, quotas={"acme": 20})
    """

    key: str
    limit: int
    quotas: tuple[tuple[str, int], ...] = field(default=())

    def __init__(self, key: str, limit: int, *, quotas: Mapping[str, int] | None = None) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "limit", limit)
        object.__setattr__(self, "quotas", tuple(sorted((quotas or {}).items())))

    def limit_for(self, value: str) -> int:
        return dict(self.quotas).get(value, self.limit)

    def describe(self) -> str:
        text = f"{self.limit} per {self.key}"
        if self.quotas:
            text += " (" + ", ".join(f"{k}: {v}" for k, v in self.quotas) + ")"
        return text


def checked(job: str, value: Any, fields: Mapping[str, Any]) -> ConcurrencyKey | None:
    """A job's `concurrency_key` option, checked (its key a field of the payload model `fields`), or
    raise DeclarationError naming the job and the fix."""
    if value is None:
        return None
    if not isinstance(value, ConcurrencyKey):
        raise DeclarationError(
            f"job '{job}': concurrency_key must be a ConcurrencyKey(field, limit), e.g. "
            f"ConcurrencyKey('customer_id', 2), not {type(value).__name__}."
        )
    if not isinstance(value.key, str) or not _FIELD.match(value.key) or value.key not in fields:
        raise DeclarationError(
            f"job '{job}': concurrency_key field {value.key!r} is not a field of the payload; "
            f"name one of {sorted(fields)}."
        )
    limits = [value.limit, *(n for _, n in value.quotas)]
    if any(isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CAP for n in limits):
        raise DeclarationError(
            f"job '{job}': concurrency_key limits must be integers from 1 to {MAX_CAP}, got {limits}."
        )
    return value


def key_value(limit: ConcurrencyKey, payload: Mapping[str, Any]) -> str | None:
    """The payload's value of the limit's field, as text; None when the field is null or absent: a
    job without a key is not capped (it belongs to no key's runs)."""
    found = payload.get(limit.key)
    return None if found is None else str(found)


def item_id(job: str, value: str, salt: str = "") -> str:
    """The key's item id: the value hashed with the stack and the job (it may be personal data)."""
    digest = hashlib.sha256(f"{salt}#{job}#{value}".encode()).hexdigest()[:32]
    return f"{ITEM_PREFIX}{job}#{digest}"


def holder(job_id: str) -> str:
    """A run's entry name in the map: the job id hashed (it may hold personal data)."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Slot:
    """A slot taken: the key's item and this run's entry in it."""

    item: str
    entry: str


class KeySlots:
    """Takes and releases per-key slots in the job table (`client`, `table`), for one stack (`salt`)."""

    def __init__(self, client: Any, table: str, *, salt: str = "") -> None:
        self.client = client
        self.table = table
        self.salt = salt

    def take(self, job: str, value: str, cap: int, job_id: str, deadline_ms: int) -> Slot | None:
        """Take a slot for run `job_id` (its invocation ends at `deadline_ms`): the slot, or None when
        `cap` runs of this key are in progress. Entries of invocations that are over are cleared."""
        slot = Slot(item_id(job, value, self.salt), holder(job_id))
        for _ in range(3):
            if self._add(slot, cap, deadline_ms):
                return slot
            if not self._clear_expired(slot, int(time.time() * 1000)):
                return None
        return None

    def _add(self, slot: Slot, cap: int, deadline_ms: int, *, mapped: bool = False) -> bool:
        request = codec.update(
            self.table,
            slot.item,
            sets=["#runs.#me = :deadline", "expiration = :exp"],
            condition="attribute_not_exists(#runs) OR size(#runs) < :cap OR attribute_exists(#runs.#me)",
            values={
                ":deadline": deadline_ms,
                ":cap": cap,
                ":exp": int(time.time()) + IDLE_TTL_SECONDS,
            },
            names={"#runs": "runs", "#me": slot.entry},
        )
        try:
            self.client.update_item(**request)
        except self.client.exceptions.ConditionalCheckFailedException:
            return False
        except Exception as exc:  # no map yet (a new key): DynamoDB refuses the entry's path
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code != "ValidationException" or mapped:  # (after the map's creation: another cause)
                raise
            self._create_map(slot)
            return self._add(slot, cap, deadline_ms, mapped=True)
        return True

    def _create_map(self, slot: Slot) -> None:
        request = codec.update(
            self.table,
            slot.item,
            sets=["#runs = if_not_exists(#runs, :empty)"],
            values={":empty": {}},
            names={"#runs": "runs"},
        )
        self.client.update_item(**request)

    def _clear_expired(self, slot: Slot, now_ms: int) -> bool:
        """Remove the entries whose invocation is over; whether any was removed."""
        found = self.client.get_item(TableName=self.table, Key=codec.key(slot.item), ConsistentRead=True)
        runs = codec.decode(found.get("Item") or {}).get("runs") or {}
        cleared = False
        for name, deadline in runs.items():
            if int(deadline) >= now_ms:
                continue
            request = codec.update(
                self.table,
                slot.item,
                remove=["#runs.#gone"],
                condition="#runs.#gone = :deadline",
                values={":deadline": int(deadline)},
                names={"#runs": "runs", "#gone": str(name)},
            )
            try:
                self.client.update_item(**request)
                cleared = True
            except self.client.exceptions.ConditionalCheckFailedException:
                continue  # taken again meanwhile, or cleared by another worker
        return cleared

    def release(self, slot: Slot) -> None:
        """Give the slot back (the run ended, whatever its outcome)."""
        request = codec.update(
            self.table, slot.item, remove=["#runs.#me"], names={"#runs": "runs", "#me": slot.entry}
        )
        self.client.update_item(**request)


def retry_delay(rng: random.Random) -> int:
    """Seconds before a run whose key is full comes back."""
    return rng.randint(*RETRY_DELAY_SECONDS)
