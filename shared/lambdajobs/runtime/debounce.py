"""Debounce: of many enqueues of one key within a window, only the last runs, with its payload.

    enqueue("reindex", {"doc": "42"}, debounce=Debounce("doc-42", seconds=30, max_wait_seconds=600))

Each debounced enqueue sends its message delayed by the window (at most until the key's maximum wait
from its first enqueue) and records itself as the key's latest in one item of the job table
(`lambdajobs#debounce#<job>#<hash of the key>`: the latest job id, when it was enqueued, and when the
key's first pending enqueue was). When a message arrives the worker reads that item:

- the item names a later enqueue: this one is **superseded**: its record says so (state
  `superseded`, metric `JobSuperseded`) and it never runs;
- the item names this enqueue (or none, or an earlier one: the producer's write failed after its send,
  and nothing newer is known): it runs, and marks the item `claimed` (conditionally on it still
  naming this enqueue), so an older enqueue arriving later is still superseded and the next enqueue
  starts a new burst with its own window and maximum wait;
- the item names a later send of the same job id: a duplicate (that send runs the job).

Order on the producer: the message is sent first, the item written second, so a failed write never
strands a job: at worst two enqueues run where one would have (never none). A key's burst therefore
runs once, `seconds` after its last enqueue, or at the latest `max_wait_seconds` after its first.

Bounds: a window of 1 s to 15 minutes (one SQS delay), a maximum wait from the window up to a day.
Cost: per enqueue one consistent read and one write on the item; per arrival one consistent read, and
one write for the run's claim (one record write for each superseded enqueue).

Other languages: write the item as `record` below does (UpdateItem on the job table) and put
`"debounce": {"key": ..., "at": <epoch ms>}` in the envelope, with the same delay: see
docs/how-to/debounce.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from dataclasses import dataclass
from typing import Any

from lambdajobs.runtime import table as codec
from lambdajobs.runtime.errors import EnqueueError
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX

ITEM_PREFIX = RESERVED_ID_PREFIX + "debounce#"
MIN_WINDOW_SECONDS, MAX_WINDOW_SECONDS = 1, 900
MAX_WAIT_LIMIT_SECONDS = 86_400
MAX_KEY_LENGTH = 256
#: A key's item outlives its last enqueue's window by this long (then it expires).
ITEM_TTL_SECONDS = 86_400


@dataclass(frozen=True)
class Debounce:
    """Debounce an enqueue: of the enqueues of `key` within `seconds` of each other, only the last
    runs, `seconds` after it; `max_wait_seconds` caps how long a key's first enqueue waits for a run
    while enqueues keep coming (default: a day, the longest).

    Example:
        >>> Debounce("doc-42", seconds=30, max_wait_seconds=600)
    """

    key: str
    seconds: int
    max_wait_seconds: int = MAX_WAIT_LIMIT_SECONDS

    def checked(self) -> Debounce:
        """This debounce, or raise EnqueueError saying which bound it breaks."""
        if not isinstance(self.key, str) or not 1 <= len(self.key) <= MAX_KEY_LENGTH:
            raise EnqueueError(
                f"debounce key must be text of 1 to {MAX_KEY_LENGTH} characters, got {self.key!r}."
            )
        for name, value in (("seconds", self.seconds), ("max_wait_seconds", self.max_wait_seconds)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise EnqueueError(f"debounce {name} must be a whole number of seconds, got {value!r}.")
        if not MIN_WINDOW_SECONDS <= self.seconds <= MAX_WINDOW_SECONDS:
            raise EnqueueError(
                f"debounce seconds={self.seconds} is out of range: {MIN_WINDOW_SECONDS} to "
                f"{MAX_WINDOW_SECONDS} (one SQS delay)."
            )
        if not self.seconds <= self.max_wait_seconds <= MAX_WAIT_LIMIT_SECONDS:
            raise EnqueueError(
                f"debounce max_wait_seconds={self.max_wait_seconds} is out of range: from the window "
                f"({self.seconds} s) to {MAX_WAIT_LIMIT_SECONDS} (a day)."
            )
        return self


def item_id(job: str, key: str) -> str:
    """The key's item id (the key may be personal data: it is hashed)."""
    return f"{ITEM_PREFIX}{job}#{hashlib.sha256(key.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class KeyState:
    """A key's item as read: its latest enqueue (job id, epoch ms), its first pending one's time, and
    whether the latest was claimed by its run (then the next enqueue starts a new window)."""

    latest: str
    latest_at: int
    first_at: int
    claimed: bool = False


def read(client: Any, table: str, job: str, key: str) -> KeyState | None:
    """The key's item (one consistent GetItem), or None."""
    found = client.get_item(TableName=table, Key=codec.key(item_id(job, key)), ConsistentRead=True)
    values = codec.decode(found.get("Item") or {})
    if "latest" not in values:
        return None
    return KeyState(
        str(values["latest"]),
        int(values["latest_at"]),
        int(values.get("first_at") or 0),
        bool(values.get("claimed")),
    )


def delay_seconds(debounce: Debounce, state: KeyState | None, now_ms: int) -> int:
    """The SQS delay of an enqueue now: the window, or less when the key's maximum wait from its first
    pending enqueue ends sooner (never below 0)."""
    window = debounce.seconds
    if state is None or state.claimed:  # a new burst: its own window and maximum wait
        return window
    left_ms = state.first_at + debounce.max_wait_seconds * 1000 - now_ms
    return max(0, min(window, -(-left_ms // 1000)))


def record(
    client: Any,
    table: str,
    job: str,
    debounce: Debounce,
    job_id: str,
    at_ms: int,
    first_ms: int,
    restart: bool = False,
) -> None:
    """Make enqueue `job_id` (enqueued at `at_ms`) the key's latest; its burst's first enqueue is
    `first_ms` (`restart`: a new burst, the item's earlier one was claimed; else the item's, if it
    has one). Written after the message is sent."""
    expires = first_ms // 1000 + debounce.max_wait_seconds + debounce.seconds + ITEM_TTL_SECONDS
    request = codec.update(
        table,
        item_id(job, debounce.key),
        sets=[
            "latest = :latest",
            "latest_at = :at",
            "first_at = :first" if restart else "first_at = if_not_exists(first_at, :first)",
            "expiration = :exp",
        ],
        remove=["claimed"],
        condition="attribute_not_exists(latest_at) OR latest_at <= :at",
        values={":latest": job_id, ":at": at_ms, ":first": first_ms, ":exp": expires},
    )
    # a later enqueue recorded already: this one is superseded, as it should be
    with contextlib.suppress(client.exceptions.ConditionalCheckFailedException):
        client.update_item(**request)


#: What an arriving debounced enqueue does (`claim`).
RUN, SUPERSEDED, DUPLICATE = "run", "superseded", "duplicate"


def claim(client: Any, table: str, job: str, key: str, job_id: str, at_ms: int) -> str:
    """An arriving enqueue (`job_id`, enqueued at `at_ms`) decides:

    - `RUN`: it is the key's latest (it marks the item `claimed`: an older enqueue that arrives later
      is still superseded, and the next enqueue starts a new burst), or the item knows nothing newer
      (none: it expired; or an earlier one: this enqueue's own write failed after its send);
    - `SUPERSEDED`: a later enqueue of the key came;
    - `DUPLICATE`: the same job id was sent again later (that send runs it, with its payload).
    """
    for _ in range(3):
        state = read(client, table, job, key)
        if state is None or state.latest_at < at_ms:
            return RUN
        if state.latest_at > at_ms or state.latest != job_id:
            return DUPLICATE if state.latest == job_id else SUPERSEDED
        if state.claimed:  # this very enqueue, delivered again: its job's lock decides
            return RUN
        request = codec.update(
            table,
            item_id(job, key),
            sets=["claimed = :yes"],
            condition="latest = :latest AND latest_at = :at",
            values={":yes": True, ":latest": job_id, ":at": at_ms},
        )
        try:
            client.update_item(**request)
            return RUN
        except client.exceptions.ConditionalCheckFailedException:
            continue  # an enqueue came meanwhile: read again
    return SUPERSEDED


def now_ms() -> int:
    return int(time.time() * 1000)
