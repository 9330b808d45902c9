"""Rate limits that hold across every concurrent worker: one DynamoDB item per limiter, in the job table.

`@job(rate_limit="100/minute")` gives a job its own limiter; `RateLimit("sendgrid", 100, per="minute")`
on several jobs makes them share one (one API used by several jobs); `key="tier"` keys it by a payload
field, with per-key quotas (`quotas={"premium": 1000}`; other values get `count`).

The algorithm is the token bucket seen from when its next token is due (GCRA): the limiter's item holds
`tat`, the time (epoch microseconds) of the next free slot. Taking a slot reads it and writes
`tat + interval` with a condition that it is still what was read, so two workers never take the same
slot (a lost race reads again). Slots are spaced evenly, `period / count` apart, so no window of
`period` holds more than `count` slots. A job's copy is taken on its slot up to LATE_TOLERANCE_US
after it (SQS delivery, earlier records of its batch), checked after the limiter's read; its function
then starts at most START_ALLOWANCE_US after the slot (the lock's write comes between), or the run
gives its lock back, uses no attempt and takes a new slot. So in the worst case a window holds
`count + START_ALLOWANCE_US / interval` starts (for per-minute and longer limits, at most 1/40 more).
A slot less than INLINE_WAIT_US away is waited for in the worker; a job whose slot is further away is
not run: the worker hands it back to its queue, due just before its slot and carrying it
(`lambdajobs.rate_slot`), so it neither takes a second slot nor uses an attempt, and waits as long as
it must without coming back in between. A job on a priority level above its job's lowest does not
queue behind those reservations: it takes the earliest one ahead of its holder (see `take_slot`), so
premium mail is not stuck behind a rate-limited campaign.

Why the job table: its items are keyed by `id` already, the worker may read and write them, and
nothing else needs provisioning or permissions; a limiter item (`lambdajobs#ratelimit#...`) has no
job index key (`ix`), so it never enters the job index, and its `expiration` lets an idle limiter
vanish (a missing limiter is a fresh one). Cost: one consistent read and one write per job (and a
record write when a job has to wait, and one more consistent read when it comes back on its slot).
"""

from __future__ import annotations

import hashlib
import logging
import random
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import table as codec
from lambdajobs.runtime.errors import DeclarationError, RateLimitBusyError
from lambdajobs.runtime.settings import RESERVED_ID_PREFIX

if TYPE_CHECKING:
    from lambdajobs.runtime.delivery import CarriedSlot, Delivery
    from lambdajobs.runtime.gates import Decision
    from lambdajobs.runtime.job_record import JobRecord

logger = logging.getLogger(__name__)

PERIODS = {"second": 1, "minute": 60, "hour": 3600, "day": 86_400}
ITEM_PREFIX = RESERVED_ID_PREFIX + "ratelimit#"
#: A copy handed back to wait for its slot runs on that slot if it arrives at most this late (SQS
#: delays are whole seconds); a later one takes a fresh slot, so late copies cannot start in a burst.
LATE_TOLERANCE_US = 1_000_000
#: ... and its job function starts at most this long after its slot: the time the lock's write may
#: take (a run that would start later gives its lock back: `lifecycle.RunNotStarted`).
START_ALLOWANCE_US = LATE_TOLERANCE_US + 500_000
_TEXT = re.compile(r"^\s*(\d+)\s*/\s*(second|minute|hour|day)\s*$")
#: Tries when other workers keep winning the same slot; each lost race means a slot was taken.
TAKE_TRIES = 30
#: The longest pause between two tries of `take_slot` (jittered, doubling from 2 ms).
RETRY_PAUSE_MAX_SECONDS = 0.05
#: A slot at most this far away is waited for in the worker (a sleep before the job starts) instead of
#: a hand-back: SQS delays are whole seconds, so a copy is sent back due up to this much before its
#: slot and waits the rest. 0 (tests with a stopped clock): every wait is a hand-back.
INLINE_WAIT_US = 1_000_000
#: A higher-priority job takes a reserved slot ahead only this far in the future: the slot's holder
#: checks it at most INLINE_WAIT_US before the slot, so the taking write is long done by then.
STEAL_MARGIN_US = 1_500_000
#: How far two workers' clocks may disagree (Lambda hosts keep theirs synchronised to milliseconds).
CLOCK_SKEW_US = 250_000
#: At most this many slots taken ahead at once (the set lives in the limiter's item); beyond, a
#: higher-priority job queues like the others.
MAX_STOLEN = 1000


@dataclass(frozen=True)
class RateLimit:
    """At most `count` starts per `per` (second, minute, hour or day), across every worker.

    `name` names a limiter several jobs share (None: the job's own, named after the job). `key` is a
    payload field whose value keys the limit: each value has its own `count` per period, or its quota
    from `quotas` (value -> count).

    Example:
        >>> RateLimit("sendgrid", 100, per="minute")
        >>> RateLimit("exports", 100, per="hour", key="tier", quotas={"premium": 1000})
    """

    name: str | None
    count: int
    per: str = "second"
    key: str | None = None
    quotas: tuple[tuple[str, int], ...] = field(default=())

    def __init__(
        self,
        name: str | None,
        count: int,
        per: str = "second",
        *,
        key: str | None = None,
        quotas: Mapping[str, int] | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "per", per)
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "quotas", tuple(sorted((quotas or {}).items())))

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """`"100/minute"` -> RateLimit(None, 100, "minute")."""
        match = _TEXT.match(text)
        if not match:
            raise ValueError(f"rate_limit {text!r} is not 'COUNT/PERIOD', e.g. '100/minute'")
        return cls(None, int(match.group(1)), match.group(2))

    @property
    def period_seconds(self) -> int:
        return PERIODS[self.per]

    def count_for(self, value: str | None) -> int:
        return dict(self.quotas).get(value, self.count) if value is not None else self.count

    def interval_us(self, value: str | None = None) -> int:
        """The spacing between two starts (microseconds), rounded up: never more than the count."""
        return -(-self.period_seconds * 1_000_000 // self.count_for(value))

    def describe(self) -> str:
        text = f"{self.count}/{self.per}"
        if self.key:
            text += f" per {self.key}"
            if self.quotas:
                text += " (" + ", ".join(f"{k}: {v}" for k, v in self.quotas) + ")"
        return text


def checked(job: str, value: Any) -> RateLimit | None:
    """A job's `rate_limit` option as a RateLimit (its name defaulted to the job's), or raise
    DeclarationError naming the job and the fix."""
    if value is None:
        return None
    try:
        limit = RateLimit.parse(value) if isinstance(value, str) else value
    except ValueError as exc:
        raise DeclarationError(f"job '{job}': {exc}.") from None
    if not isinstance(limit, RateLimit):
        raise DeclarationError(
            f"job '{job}': rate_limit must be 'COUNT/PERIOD' (e.g. '100/minute') or a RateLimit, "
            f"not {type(value).__name__}."
        )
    _check_counts(job, limit)
    name = limit.name or job
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name):
        raise DeclarationError(
            f"job '{job}': rate_limit name {name!r}: use letters, digits, '_', '.', '-' (at most 64)."
        )
    return RateLimit(name, limit.count, limit.per, key=limit.key, quotas=dict(limit.quotas))


def _check_counts(job: str, limit: RateLimit) -> None:
    if limit.per not in PERIODS:
        raise DeclarationError(f"job '{job}': rate_limit per={limit.per!r}; use one of {sorted(PERIODS)}.")
    counts = [limit.count, *(c for _, c in limit.quotas)]
    if any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in counts):
        raise DeclarationError(f"job '{job}': rate_limit counts must be positive integers, got {counts}.")
    if max(counts) > PERIODS[limit.per] * 1000:
        raise DeclarationError(
            f"job '{job}': rate_limit of {max(counts)}/{limit.per} is more than one start a millisecond; "
            f"use a longer period or a lower count."
        )
    if limit.quotas and not limit.key:
        raise DeclarationError(f"job '{job}': rate_limit quotas need key='<payload field>'.")


def key_value(limit: RateLimit, payload: Mapping[str, Any]) -> str | None:
    """The payload's value for the limit's key (as text), None for an unkeyed limit."""
    if not limit.key:
        return None
    value = payload.get(limit.key)
    return "" if value is None else str(value)


def item_id(limit: RateLimit, value: str | None, salt: str = "") -> str:
    """The limiter's item id. A key value may be personal data (a customer id): it is hashed with the
    stack and limiter name as salt, so the table does not hold it in clear."""
    base = f"{ITEM_PREFIX}{limit.name}"
    if value is None:
        return base
    digest = hashlib.sha256(f"{salt}#{limit.name}#{value}".encode()).hexdigest()[:32]
    return f"{base}#{digest}"


def usable(held_slot_us: int, now_us: int) -> bool:
    """Whether a slot a copy carries may still be used now (due within the inline wait, and not too
    late)."""
    return held_slot_us - INLINE_WAIT_US <= now_us <= held_slot_us + LATE_TOLERANCE_US


def hand_back_delay(slot_us: int, now_us: int) -> int:
    """Whole seconds to delay a copy waiting for `slot_us`: due at most INLINE_WAIT_US early (the
    worker waits the rest), never late; at least 1."""
    return max(1, -(-(slot_us - now_us - INLINE_WAIT_US) // 1_000_000))


@dataclass(frozen=True)
class LimiterItem:
    """A limiter's item in the job table (its codec): `tat`, the next free slot (epoch µs); `v`, its
    version; `stolen`, the slots taken ahead by higher priority levels (see `take_slot`)."""

    tat: int | None = None
    version: int | None = None
    stolen: tuple[int, ...] = ()
    exists: bool = False

    @classmethod
    def from_item(cls, item: Mapping[str, Any] | None) -> LimiterItem:
        if not item:
            return cls()
        data = codec.decode(item)
        tat, version = data.get("tat"), data.get("v")
        return cls(tat, version, tuple(sorted(int(n) for n in data.get("stolen", ()))), True)

    def unchanged(self) -> tuple[str, dict[str, Any]]:
        """The condition that the item is as read: no item, or its version and next slot the same (a
        writer that does not know the version would still move `tat`)."""
        if not self.exists:
            return "attribute_not_exists(id)", {}
        parts, values = [], {}
        for name, seen in (("v", self.version), ("tat", self.tat)):
            if seen is None:
                parts.append(f"attribute_not_exists({name})")
            else:
                parts.append(f"{name} = :old_{name}")
                values[f":old_{name}"] = seen
        return " AND ".join(parts), values


def _read_limiter(client: Any, table_name: str, limiter_id: str) -> LimiterItem:
    response = client.get_item(TableName=table_name, Key=codec.key(limiter_id), ConsistentRead=True)
    return LimiterItem.from_item(response.get("Item"))


def taken_ahead(
    client: Any, table: str, limit: RateLimit, value: str | None, slot_us: int, *, salt: str = ""
) -> bool:
    """Whether a higher-priority job took this reserved slot ahead of its holder (who then takes a new
    slot instead of running: the slot starts one job, not two)."""
    return slot_us in _read_limiter(client, table, item_id(limit, value, salt)).stolen


def _next_slot(item: LimiterItem, interval: int, now: int, ahead: bool) -> tuple[int, int, list[int], bool]:
    """(the slot to take, the limiter's next `tat`, its taken-ahead slots after, whether taken ahead)."""
    # Taken-ahead slots matter until their holders have come back for them (at most a second late;
    # another second for clocks that disagree).
    stolen = [n for n in item.stolen if n >= now - 2 * LATE_TOLERANCE_US]
    slot = _slot_ahead(item.tat, interval, now, stolen) if ahead and len(stolen) < MAX_STOLEN else None
    if slot is None:
        slot = max(item.tat or 0, now)
        return slot, slot + interval, stolen, False
    return slot, item.tat or slot + interval, [*stolen, slot], True


def _write_slot(
    client: Any, table_name: str, limiter_id: str, item: LimiterItem, tat: int, stolen: list[int]
) -> bool:
    """Move the limiter to `tat` (and its taken-ahead set) if it is unchanged since read; False: another
    worker took a slot meanwhile."""
    condition, values = item.unchanged()
    values |= {
        ":tat": tat,
        ":v": (item.version or 0) + 1,
        # An idle limiter vanishes a day after its last slot: a missing one is a fresh one.
        ":exp": tat // 1_000_000 + 86_400,
    }
    sets, remove = ["tat = :tat", "v = :v", "expiration = :exp"], ["stolen"]
    if stolen:
        values[":stolen"], remove = set(stolen), []
        sets.append("stolen = :stolen")
    request = codec.update(
        table_name, limiter_id, sets=sets, remove=remove, condition=condition, values=values
    )
    try:
        client.update_item(**request)
    except client.exceptions.ConditionalCheckFailedException:
        return False
    return True


def take_slot(
    client: Any,
    table: str,
    limit: RateLimit,
    value: str | None,
    *,
    salt: str = "",
    now_us: int | None = None,
    ahead: bool = False,
) -> tuple[int, bool]:
    """Take the limiter's next slot: (its time in epoch microseconds, now or earlier means go; whether
    it was taken ahead of the queue).

    With `ahead` (a job on a priority level above its job's lowest) the job does not queue behind the
    slots other jobs reserved: it takes the earliest reserved slot at least `STEAL_MARGIN_US` away
    that no one took ahead yet, and records it in the limiter's `stolen` set; the job that reserved
    it finds it there when it comes back (at most INLINE_WAIT_US before the slot) and takes a new slot
    at the end. A taking write that lands too close to the slot to be sure the holder will see it
    leaves the slot unused and takes another. The rate holds (one start per slot), and a
    high-priority job waits about a second and a half, not the whole backlog.

    Raises:
        RateLimitBusyError: other workers won every try (never in practice: each loss is a slot taken).
    """
    interval = limit.interval_us(value)
    limiter_id = item_id(limit, value, salt)
    for attempt in range(TAKE_TRIES):
        if attempt:  # lost the race to another worker: a short jittered pause spreads the retries out
            time.sleep(random.random() * min(RETRY_PAUSE_MAX_SECONDS, 0.001 * 2**attempt))
        now = int(time.time() * 1_000_000) if now_us is None else now_us
        item = _read_limiter(client, table, limiter_id)
        slot, tat, stolen, stole = _next_slot(item, interval, now, ahead)
        if not _write_slot(client, table, limiter_id, item, tat, stolen):
            continue  # another worker took a slot meanwhile: read again
        if stole and time.time() * 1_000_000 + INLINE_WAIT_US + CLOCK_SKEW_US >= slot:
            # The write landed so late (throttled, retried) that the slot's holder may already have
            # checked it and be waiting to start on it: leave it unused (it stays taken) and take another.
            continue
        return slot, stole
    raise RateLimitBusyError(f"rate limiter {limit.name}: could not take a slot in {TAKE_TRIES} tries")


def _slot_ahead(tat: int | None, interval: int, now: int, stolen: list[int]) -> int | None:
    """The earliest reserved slot at least STEAL_MARGIN_US from now that no one took ahead, or None.
    Reserved future slots are contiguous, `interval` apart, ending one interval before `tat`."""
    if tat is None:
        return None
    earliest = now + STEAL_MARGIN_US
    if tat - interval < earliest:
        return None
    k = (tat - earliest) // interval  # tat - k * interval is the first grid slot >= earliest
    taken = set(stolen)
    for n in range(k, 0, -1):
        slot = tat - n * interval
        if slot not in taken:
            return slot
    return None


# -- the worker's rate-limit gate -------------------------------------------------------------------


@dataclass(frozen=True)
class Limiter:
    """The limiters of one stack's job table, as the worker's rate-limit gate uses them."""

    client: Any
    table: str
    #: Salts the hash of a key value (the stack's name).
    salt: str = ""

    def take(self, limit: RateLimit, value: str | None, *, ahead: bool) -> tuple[int, bool]:
        """A slot (`take_slot`); each try reads the clock: a try that lost a race comes later, and a
        slot taken ahead is judged against the time it is taken (a fixed time made every later try of
        a slow, contended limiter void its slot)."""
        return take_slot(self.client, self.table, limit, value, salt=self.salt, ahead=ahead)

    def taken_ahead(self, limit: RateLimit, value: str | None, slot_us: int) -> bool:
        return taken_ahead(self.client, self.table, limit, value, slot_us, salt=self.salt)


def gate(
    d: Delivery,
    limiter: Limiter,
    record: Callable[[], JobRecord | None],
    *,
    now_us: int,
    room: Callable[[float], bool],
    warn: Callable[[str, BaseException], None],
    clock: Callable[[], int] | None = None,
) -> Decision | None:
    """The worker's gate for a rate-limited job: run on this attempt's slot, or hand the message back
    due at its slot, carrying it (waiting costs no attempt and never comes back before its time; the
    record reads `waiting` meanwhile). None: the job has no rate limit.

    A carried slot is used only by the attempt that took it and only up to LATE_TOLERANCE_US late (SQS
    delays are whole seconds), checked again after the limiter's read (`clock`: now, in epoch µs); a
    later copy takes a fresh slot, so late copies never start in a burst, and the run starts by
    START_ALLOWANCE_US after the slot (the lock's write comes between) or gives its lock back.
    A slot at most INLINE_WAIT_US away is waited for in the worker (`room(wait_ms)`: whether the
    invocation has time for the wait and the job). A job that may not start (it succeeded, a live run
    holds it, its attempt already ran) takes no slot: the run answers it; nor does a duplicate of a copy
    that waits for its slot (`gates.waits_elsewhere`): it is done. `record` reads the job's
    record; `warn` logs why the limiter could not be used (the message is then handed back)."""
    from lambdajobs.runtime.aws import transient
    from lambdajobs.runtime.gates import HandBack

    limit = d.spec.rate_limit
    if limit is None:
        return None
    assert d.payload is not None
    value = key_value(limit, d.payload.model_dump(mode="json"))
    now = clock or (lambda: int(time.time() * 1_000_000))
    try:
        return _on_slot(d, limiter, limit, value, record, now_us, room, now)
    except Exception as exc:  # the limiter could not be read or written: not an attempt
        if not transient(exc) and not isinstance(exc, RateLimitBusyError):
            raise
        warn("could not use the rate limiter", exc)
        return HandBack(1, "rate limiter")


def _on_slot(
    d: Delivery,
    limiter: Limiter,
    limit: RateLimit,
    value: str | None,
    record: Callable[[], JobRecord | None],
    now_us: int,
    room: Callable[[float], bool],
    clock: Callable[[], int],
) -> Decision:
    from lambdajobs.runtime.delivery import CarriedSlot
    from lambdajobs.runtime.gates import Done, HandBack, Run, waits_elsewhere

    held = d.carried_slot
    if held is not None and held.attempt == d.attempt:
        found = _on_carried_slot(d, limiter, limit, value, held, now_us, room, clock)
        if found is not None:
            return found
    current = _read_quietly(record)
    if waits_elsewhere(d, current):
        return Done("a duplicate of a copy that waits for its slot", metric="JobDuplicate")
    if current is not None and not current.may_start(now_us / 1_000_000, d.attempt, d.redriven):
        return Run()  # the run answers it: a duplicate, or a lock held
    slot, ahead = limiter.take(limit, value, ahead=d.source_level is not None)
    taken, now_us = CarriedSlot(d.attempt, slot, ahead), clock()  # (the reads and the write took time)
    if slot - now_us <= INLINE_WAIT_US:
        return _start_on(taken, now_us, room, fresh=True)
    return HandBack(
        hand_back_delay(slot, now_us), "rate limited", slot=taken, mark_waiting=True, metric="JobRateLimited"
    )


def _on_carried_slot(
    d: Delivery,
    limiter: Limiter,
    limit: RateLimit,
    value: str | None,
    held: CarriedSlot,
    now_us: int,
    room: Callable[[float], bool],
    clock: Callable[[], int],
) -> Decision | None:
    """Run on the slot this attempt carries, or wait on for it; None: take a fresh one (too late,
    also once the limiter was read, or a higher priority took it ahead)."""
    from lambdajobs.runtime.gates import HandBack

    if usable(held.slot_us, now_us):
        if not held.ahead and limiter.taken_ahead(limit, value, held.slot_us):
            logger.info("a higher-priority job took this rate-limit slot; taking another")
            return None
        later = clock()
        if later > held.slot_us + LATE_TOLERANCE_US:  # the read took it past the slot's second
            return None
        return _start_on(held, later, room)
    if held.slot_us > now_us:  # not yet: wait on (a wait beyond 15 minutes hops)
        return HandBack(hand_back_delay(held.slot_us, now_us), "rate limited", slot=held)
    return None


def _start_on(
    slot: CarriedSlot, now_us: int, room: Callable[[float], bool], *, fresh: bool = False
) -> Decision:
    """Start on `slot` (now, or less than INLINE_WAIT_US away: waited for in the worker, if the
    invocation has the time), and not after START_ALLOWANCE_US past it. `fresh`: a slot just taken
    (a copy handed back with it marks the record waiting for it, as any copy waiting for a slot does)."""
    from lambdajobs.runtime.gates import HandBack, Run

    wait_ms = max(0.0, (slot.slot_us - now_us) / 1000)
    if wait_ms > 0 and not room(wait_ms):
        return HandBack(1, "rate limited, no time to wait", slot=slot, mark_waiting=fresh)
    start_at = slot.slot_us if wait_ms > 0 else None
    return Run(start_at_us=start_at, start_by_us=slot.slot_us + START_ALLOWANCE_US)


def _read_quietly(record: Callable[[], JobRecord | None]) -> JobRecord | None:
    """The job's record, or None when it cannot be read (the slot is taken anyway: the run decides)."""
    try:
        return record()
    except Exception as exc:
        logger.warning("could not read the job's record before taking a slot: %s", type(exc).__name__)
        return None
