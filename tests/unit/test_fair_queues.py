"""SQS fair queues, the model (`lambdajobs.local.fairqueues`): which tenants are noisy, and the order a
receive takes messages in. Plain values and fakes standing in for moto's queue: no AWS, no moto (the
local layer's `tests/local/test_fair_queues.py` runs it in moto and on the local stack)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from lambdajobs.local import fairqueues
from lambdajobs.local.fairqueues import (
    IN_FLIGHT_MIN,
    WINDOW_SECONDS,
    Tenants,
    fair_order,
    noisy_groups,
)


@dataclass(frozen=True)
class Msg:
    name: str
    group_id: str | None = None


def names(messages: list[Msg]) -> list[str]:
    return [m.name for m in messages]


# -- in flight: more than 10% of the queue's, and at least 30 ----------------------------------------


@pytest.mark.parametrize(
    ("tenant", "total", "noisy"),
    [
        (30, 299, True),  # 30 messages, just over 10%
        (30, 300, False),  # exactly 10%: not more than 10%
        (31, 300, True),
        (29, 30, False),  # 97% of the queue, but fewer than 30 of its own
        (IN_FLIGHT_MIN, IN_FLIGHT_MIN, True),  # alone in flight, at exactly 30
        (1000, 10_000, False),  # exactly 10% of a large queue
        (1001, 10_000, True),
    ],
)
def test_a_tenant_is_noisy_in_flight_above_a_tenth_of_the_queue_with_at_least_30(tenant, total, noisy):
    assert (noisy_groups({"a": tenant}, total) == {"a"}) is noisy


def test_ungrouped_messages_count_in_the_queues_in_flight_total():
    # GIVEN 40 of tenant a's in flight among 400 ungrouped ones (each ungrouped message its own tenant)
    # THEN a holds 40 of 440: under 10%, quiet; the ungrouped messages are never noisy
    assert noisy_groups({"a": 40}, 440) == set()
    assert noisy_groups({"a": 45}, 440) == {"a"}


# -- processing time: more than 10% of the queue's in the window ------------------------------------


def test_a_tenant_is_noisy_above_a_tenth_of_the_recent_processing_time():
    tenants = Tenants()
    # GIVEN 9 s of processing by ungrouped messages and 1 s by tenant a: exactly 10%
    tenants.processed(None, 9.0, now=100.0)
    tenants.processed("a", 1.0, now=100.0)
    assert tenants.noisy({}, 0, now=100.0) == set()
    # WHEN a processes another 0.5 s: 1.5 of 10.5 s
    tenants.processed("a", 0.5, now=101.0)
    # THEN a is noisy, with nothing of it in flight
    assert tenants.noisy({}, 0, now=101.0) == {"a"}


def test_processing_time_older_than_the_window_is_forgotten():
    tenants = Tenants()
    tenants.processed("a", 5.0, now=0.0)
    tenants.processed(None, 1.0, now=30.0)
    assert tenants.noisy({}, 0, now=59.0) == {"a"}
    # a's processing ended a window ago: a is quiet again, and the sums hold only what is left
    assert tenants.noisy({}, 0, now=WINDOW_SECONDS) == set()
    assert tenants.processing(WINDOW_SECONDS) == ({}, 1.0)
    assert tenants.processing(WINDOW_SECONDS + 30.0) == ({}, 0.0)


def test_processing_time_is_from_the_receive_to_the_delete_of_that_receipt():
    tenants = Tenants()
    # GIVEN a message of a received at 10 s, received again at 12 s (a new receipt), and b's message
    tenants.received("m1", "r1", "a", now=10.0)
    tenants.received("m1", "r2", "a", now=12.0)
    tenants.received("m2", "r3", "b", now=12.0)
    # WHEN the earlier receipt is used, then the later one, then b's
    tenants.deleted("r1", now=13.0)
    tenants.deleted("r2", now=15.0)
    tenants.deleted("r3", now=12.5)
    tenants.deleted("unknown", now=15.0)
    # THEN a's time counts from its latest receive, once; b's too
    assert tenants.processing(15.0) == ({"a": 3.0, "b": 0.5}, 3.5)


def test_receipts_no_delete_can_follow_are_forgotten():
    tenants = Tenants()
    tenants.received("m1", "r1", "a", now=0.0)
    tenants.received("m2", "r2", "a", now=fairqueues.RECEIPT_SECONDS + 1)
    assert "m1" not in tenants._open and "r1" not in tenants._by_handle
    tenants.deleted("r1", now=fairqueues.RECEIPT_SECONDS + 2)
    assert tenants.processing(fairqueues.RECEIPT_SECONDS + 2) == ({}, 0.0)


# -- the order a receive takes --------------------------------------------------------------------


def test_quiet_tenants_messages_come_first_each_part_in_its_order():
    messages = [Msg("a1", "a"), Msg("a2", "a"), Msg("u1"), Msg("b1", "b"), Msg("a3", "a"), Msg("c1", "c")]
    assert names(fair_order(messages, {"a"})) == ["u1", "b1", "c1", "a1", "a2", "a3"]
    assert names(fair_order(messages, {"a", "c"})) == ["u1", "b1", "a1", "a2", "a3", "c1"]


def test_the_order_is_unchanged_when_no_tenant_is_noisy_or_there_are_no_groups():
    grouped = [Msg("a1", "a"), Msg("b1", "b"), Msg("a2", "a")]
    plain = [Msg(f"m{i}") for i in range(5)]
    assert fair_order(grouped, set()) == grouped
    assert fair_order(grouped, {"z"}) == grouped  # a noisy tenant with nothing visible
    assert fair_order(plain, {"a"}) == plain


# -- the patch's selection, on fakes of moto's queue and backend ------------------------------------


@dataclass(eq=False)
class FakeMessage:
    id: str
    group_id: str | None = None
    visible_at: float = 0.0  # in flight when it is later than now (ms), as in moto
    receipt_handle: str = ""


@dataclass(eq=False)
class FakeQueue:
    fifo_queue: bool
    _messages: list[FakeMessage] = field(default_factory=list)

    @property
    def messages(self) -> list[FakeMessage]:  # moto's: the visible ones, in its order
        return [m for m in self._messages if m.visible_at == 0.0]


class FakeBackend:
    def __init__(self, queue: FakeQueue) -> None:
        self.queue = queue

    def get_queue(self, name: str) -> FakeQueue:
        return self.queue

    def receive_message(self, queue_name: str, count: int, *args: Any) -> list[FakeMessage]:
        taken = self.queue.messages[:count]  # what moto's loop does: the first visible ones
        for i, m in enumerate(taken):
            m.receipt_handle = f"{m.id}-{i}"
        return taken


@pytest.fixture
def patched(monkeypatch: pytest.MonkeyPatch) -> type[FakeBackend]:
    monkeypatch.setattr(fairqueues, "_now", lambda: 1000.0)
    monkeypatch.setattr(FakeQueue, "messages", fairqueues._fair_messages(FakeQueue.__dict__["messages"]))
    monkeypatch.setattr(
        FakeBackend, "receive_message", fairqueues._selecting_fairly(FakeBackend.receive_message)
    )
    return FakeBackend


def queue_with_a_noisy_tenant(fifo: bool) -> FakeQueue:
    # 30 of tenant a's messages in flight (alone in flight: noisy), then a visible backlog a, a, b, a
    in_flight = [FakeMessage(f"f{i}", "a", visible_at=2_000_000.0) for i in range(30)]
    visible = [FakeMessage("a1", "a"), FakeMessage("a2", "a"), FakeMessage("b1", "b"), FakeMessage("a3", "a")]
    return FakeQueue(fifo_queue=fifo, _messages=in_flight + visible)


def test_a_receive_of_a_standard_queue_takes_the_quiet_tenant_first(patched):
    backend = patched(queue_with_a_noisy_tenant(fifo=False))
    assert [m.id for m in backend.receive_message("q", 2)] == ["b1", "a1"]


def test_a_fifo_queue_is_untouched(patched):
    backend = patched(queue_with_a_noisy_tenant(fifo=True))
    assert [m.id for m in backend.receive_message("q", 2)] == ["a1", "a2"]


def test_outside_a_receive_the_queues_messages_are_moto_s(patched):
    queue = queue_with_a_noisy_tenant(fifo=False)
    assert [m.id for m in queue.messages] == ["a1", "a2", "b1", "a3"]
