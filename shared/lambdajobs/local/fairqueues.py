"""SQS fair queues, modelled in moto for the local stack and the test harness.

What AWS does (standard queues, July 2025, "Amazon SQS fair queues"): a producer names a tenant by
setting `MessageGroupId` on SendMessage / SendMessageBatch to a *standard* queue. When one tenant is
"noisy", SQS delivers the other tenants' messages first, so a quiet tenant's job is not stuck behind a
noisy tenant's backlog. Nothing changes for the consumer, and a FIFO queue keeps its own group rules.

The rules this module applies on every ReceiveMessage of a standard queue:
- a tenant is a message group. A message without a group is a tenant of its own: never noisy;
- a tenant is noisy when it holds more than 10% of the queue's in-flight messages *and* at least 30
  in-flight messages of its own (`IN_FLIGHT_SHARE`, `IN_FLIGHT_MIN`), or when it used more than 10% of
  the queue's processing time in the last `WINDOW_SECONDS` (60 s) (`PROCESSING_SHARE`);
- in flight means received and not visible again: read from moto's own messages at selection time
  (a message deleted, whose visibility expired or that was made visible with ChangeMessageVisibility
  0 is not in flight), so the counts never drift from the queue's state;
- processing time is the time from a receive to the delete of that receipt, counted when the delete
  lands (whole, in the window that holds the delete); a receipt that ends otherwise (visibility expired,
  handed back with ChangeMessageVisibility) adds none;
- the visible messages are taken quiet tenants' first, in moto's order, then noisy tenants', in moto's
  order. A queue whose visible messages carry no group keeps moto's order exactly.

How: the selection happens inside moto's receive (`SQSBackend.receive_message` iterates
`Queue.messages`, the visible messages): while a receive of a standard queue runs, that queue's
`messages` answers in fair order. Nothing is received and put back: a message skipped for a quiet
tenant's keeps its receive count and its attempts. `install()` / `uninstall()` are called by
`lambdajobs.local.atomic` (both the local stack and `TestStack` install it), so they run under the SQS
request lock. Never imported by the Lambda runtime.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Protocol, TypeVar

__all__ = [
    "IN_FLIGHT_MIN",
    "IN_FLIGHT_SHARE",
    "PROCESSING_SHARE",
    "WINDOW_SECONDS",
    "Tenants",
    "fair_order",
    "install",
    "noisy_groups",
    "uninstall",
]

#: A tenant is noisy above this share of the queue's in-flight messages (AWS: "more than 10%") ...
IN_FLIGHT_SHARE = Fraction(1, 10)
#: ... when it also holds at least this many in-flight messages itself (AWS: "at least 30").
IN_FLIGHT_MIN = 30
#: Or above this share of the queue's recent processing time (AWS: "more than 10%").
PROCESSING_SHARE = Fraction(1, 10)
#: "Recent" processing time: the deletes of the last minute. AWS does not publish its window; a
#: minute spans many batches of a busy queue and forgets a tenant soon after it goes quiet.
WINDOW_SECONDS = 60.0
#: A receipt older than SQS's longest visibility timeout (12 h) cannot still be in flight: forgotten.
RECEIPT_SECONDS = 12 * 3600.0


class _Grouped(Protocol):
    @property
    def group_id(self) -> str | None: ...


M = TypeVar("M", bound=_Grouped)


def _more_than(part: float, whole: float, share: Fraction) -> bool:
    # exact for counts: 10 of 100 is not more than 10% (0.1 * whole in floats can round either way)
    return part * share.denominator > whole * share.numerator


def noisy_groups(
    in_flight: Mapping[str, int],
    in_flight_total: int,
    processing: Mapping[str, float] | None = None,
    processing_total: float = 0.0,
) -> frozenset[str]:
    """The noisy tenants: `in_flight` and `processing` per group (no entry for ungrouped messages),
    the totals over the whole queue (ungrouped messages included)."""
    noisy = {
        group
        for group, count in in_flight.items()
        if count >= IN_FLIGHT_MIN and _more_than(count, in_flight_total, IN_FLIGHT_SHARE)
    }
    if processing_total > 0:
        noisy.update(
            group
            for group, seconds in (processing or {}).items()
            if _more_than(seconds, processing_total, PROCESSING_SHARE)
        )
    return frozenset(noisy)


def fair_order(messages: Sequence[M], noisy: Iterable[str]) -> list[M]:
    """Quiet tenants' messages first, then noisy tenants', each in the order given."""
    loud = frozenset(noisy)
    if not loud:
        return list(messages)
    quiet = [m for m in messages if m.group_id is None or m.group_id not in loud]
    if len(quiet) == len(messages):
        return list(messages)
    return quiet + [m for m in messages if m.group_id is not None and m.group_id in loud]


class Tenants:
    """One queue's recent processing time per tenant, and its open receipts (times in seconds).

    In-flight counts are not kept here: `noisy` is given them, read from the queue at that moment."""

    def __init__(self, window_seconds: float = WINDOW_SECONDS) -> None:
        self.window_seconds = window_seconds
        self._lock = threading.Lock()
        #: (deleted at, group, seconds), oldest first, and their sums per group and in all
        self._done: deque[tuple[float, str | None, float]] = deque()
        self._seconds: dict[str, float] = {}
        self._total = 0.0
        #: message id -> (receipt handle, group, received at), oldest receive first; handle -> id
        self._open: dict[str, tuple[str, str | None, float]] = {}
        self._by_handle: dict[str, str] = {}

    def received(self, message_id: str, receipt_handle: str, group: str | None, now: float) -> None:
        """A receive handed out `receipt_handle` for the message (its earlier receipt is over)."""
        with self._lock:
            earlier = self._open.pop(message_id, None)
            if earlier is not None:
                self._by_handle.pop(earlier[0], None)
            self._open[message_id] = (receipt_handle, group, now)
            self._by_handle[receipt_handle] = message_id
            while self._open:  # forget receipts no delete can follow any more (DLQ, purge, retention)
                oldest, (handle, _, at) = next(iter(self._open.items()))
                if at > now - RECEIPT_SECONDS:
                    break
                del self._open[oldest]
                self._by_handle.pop(handle, None)

    def deleted(self, receipt_handle: str, now: float) -> None:
        """The receipt's message was deleted: its time since the receive counts as processing time."""
        with self._lock:
            message_id = self._by_handle.pop(receipt_handle, None)
            if message_id is None:
                return  # an earlier receipt of a message received again, or one received before install
            _, group, at = self._open.pop(message_id)
        self.processed(group, max(0.0, now - at), now)

    def processed(self, group: str | None, seconds: float, now: float) -> None:
        """Count `seconds` of processing for `group` (None: an ungrouped message), ended `now`."""
        with self._lock:
            self._done.append((now, group, seconds))
            self._total += seconds
            if group is not None:
                self._seconds[group] = self._seconds.get(group, 0.0) + seconds
            self._forget(now)

    def processing(self, now: float) -> tuple[dict[str, float], float]:
        """Processing seconds per group in the window ending `now`, and the queue's in all."""
        with self._lock:
            self._forget(now)
            return dict(self._seconds), self._total

    def noisy(self, in_flight: Mapping[str, int], in_flight_total: int, now: float) -> frozenset[str]:
        """The noisy groups now, given the queue's in-flight messages per group and in all."""
        seconds, total = self.processing(now)
        return noisy_groups(in_flight, in_flight_total, seconds, total)

    def _forget(self, now: float) -> None:
        while self._done and self._done[0][0] <= now - self.window_seconds:
            _, group, seconds = self._done.popleft()
            self._total -= seconds
            if group is not None:
                left = self._seconds[group] - seconds
                if left > 1e-9:
                    self._seconds[group] = left
                else:
                    del self._seconds[group]
        if not self._done:
            self._total = 0.0  # no float residue once the window is empty


# -- moto -------------------------------------------------------------------------------------------

_tenants: weakref.WeakKeyDictionary[Any, Tenants] = weakref.WeakKeyDictionary()
_tenants_lock = threading.Lock()
_receiving = threading.local()  # .queue: the standard queue a receive on this thread is selecting from
_patched: list[tuple[Any, str, Any]] = []


def tenants_of(queue: Any) -> Tenants:
    """The tenants' bookkeeping of one moto queue (made on first use; gone with the queue)."""
    with _tenants_lock:
        found = _tenants.get(queue)
        if found is None:
            found = _tenants[queue] = Tenants()
        return found


def _now() -> float:
    import moto.sqs.models as sqs_models

    return float(sqs_models.unix_time_millis()) / 1000.0  # moto's clock: test clocks move it too


def _fair_selection(queue: Any, visible: list[Any]) -> list[Any]:
    """`visible` (moto's order) with quiet tenants first, judged from the queue's state now."""
    if not any(m.group_id is not None for m in visible):
        return visible  # no tenants to tell apart: exactly moto's order
    now = _now()
    now_ms = now * 1000.0
    in_flight: dict[str, int] = {}
    total = 0
    for message in list(queue._messages):
        if message.visible_at >= now_ms:  # received, not deleted, not visible yet (moto: `visible`)
            total += 1
            if message.group_id is not None:
                in_flight[message.group_id] = in_flight.get(message.group_id, 0) + 1
    return fair_order(visible, tenants_of(queue).noisy(in_flight, total, now))


def _fair_messages(messages: property) -> property:
    fget = messages.fget
    assert fget is not None

    @functools.wraps(fget)
    def fair_messages(queue: Any) -> Any:
        visible = fget(queue)
        if getattr(_receiving, "queue", None) is not queue:
            return visible  # attribute reads, long-poll checks: moto as it is
        return _fair_selection(queue, visible)

    return property(fair_messages)


def _selecting_fairly(receive: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(receive)
    def receive_message(self: Any, queue_name: str, *args: Any, **kwargs: Any) -> Any:
        queue = self.get_queue(queue_name)
        if queue.fifo_queue:
            return receive(self, queue_name, *args, **kwargs)  # FIFO: moto's group rules, untouched
        outer = getattr(_receiving, "queue", None)
        _receiving.queue = queue
        try:
            result = receive(self, queue_name, *args, **kwargs)
        finally:
            _receiving.queue = outer
        if result:
            tenants, now = tenants_of(queue), _now()
            for message in result:
                tenants.received(message.id, message.receipt_handle, message.group_id, now)
        return result

    return receive_message


def _timing_deletes(delete: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(delete)
    def delete_message(self: Any, queue_name: str, receipt_handle: str) -> Any:
        result = delete(self, queue_name, receipt_handle)  # raises for a bad handle: nothing counted
        queue = self.get_queue(queue_name)
        if not queue.fifo_queue:
            tenants_of(queue).deleted(receipt_handle, _now())
        return result

    return delete_message


def _patch(cls: Any, name: str, wrap: Callable[[Any], Any]) -> None:
    current = getattr(cls, name)  # a property read from the class is the property itself
    _patched.append((cls, name, cls.__dict__.get(name)))
    setattr(cls, name, wrap(current))


def install() -> None:
    """Patch moto's SQS with fair queues (`lambdajobs.local.atomic.install` calls it; not counted)."""
    if _patched:
        return
    from moto.sqs.models import Queue, SQSBackend

    try:
        _patch(Queue, "messages", _fair_messages)
        _patch(SQSBackend, "receive_message", _selecting_fairly)
        _patch(SQSBackend, "delete_message", _timing_deletes)  # DeleteMessageBatch calls it per entry
    except BaseException:
        uninstall()
        raise


def uninstall() -> None:
    """Restore moto's SQS as it was."""
    while _patched:
        cls, name, own = _patched.pop()
        if own is None:
            delattr(cls, name)
        else:
            setattr(cls, name, own)
