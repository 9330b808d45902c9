"""Priorities on moto: each level has its own queue and DLQ, the producer picks the level (and refuses
one the job does not have, sending nothing), the worker keeps every record on its own level's queues,
and a rate-limited high-priority job does not wait behind the normal backlog's reserved slots."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from lambdajobs.ops import peek_dead_letters, redrive
from lambdajobs.runtime import PermanentError, UnknownPriorityError
from lambdajobs.runtime.producer import enqueue, enqueue_many
from lambdajobs.runtime.records import get_status, get_statuses
from lambdajobs.runtime.settings import ATTR_REASON
from lambdajobs.runtime.worker import Worker


class Mail(BaseModel):
    n: int
    fail: bool = False


class Starts:
    """When each job started (the controlled clock's time) and at which priority."""

    def __init__(self) -> None:
        self.at: list[tuple[float, int]] = []
        self._lock = threading.Lock()

    def job(self):
        def send(payload: Mail) -> dict:
            if payload.fail:
                raise PermanentError("this one never works")
            with self._lock:
                self.at.append((time.time(), payload.n))
            return {}

        return send


def bodies(stack, url: str) -> list[dict]:
    got = stack.client("sqs").receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


@pytest.fixture
def mail(stack, declare):
    starts = Starts()
    normal = declare(starts.job(), name="mail", priorities=("high", "normal"), max_attempts=2)
    high = stack.runner("mail", priority="high")
    return starts, normal, high


def test_the_producer_sends_each_priority_to_its_own_queue(stack, mail):
    _, normal, high = mail
    # WHEN one job is sent at high priority, one at normal and one without a priority, and a batch at high
    urgent = enqueue("mail", Mail(n=1), priority="high")
    enqueue("mail", Mail(n=2), priority="normal")
    enqueue("mail", Mail(n=3))
    many = enqueue_many("mail", [Mail(n=i) for i in range(10, 14)], priority="high")
    # THEN the high ones are in the high queue, marked with their level; the others in the job's own queue
    assert many.ok
    assert high.depth() == 5 and normal.depth() == 2
    urgent_body = next(b for b in bodies(stack, high.queues.queue_url) if b["id"] == urgent)
    assert (urgent_body["v"], urgent_body["priority"]) == (1, "high")
    assert sorted(b["payload"]["n"] for b in bodies(stack, normal.queues.queue_url)) == [2, 3]


def test_an_unknown_priority_is_refused_and_nothing_is_sent(stack, mail, declare):
    _, normal, high = mail
    with pytest.raises(
        UnknownPriorityError, match=r"no priority 'urgent': choose one of \['high', 'normal'\]"
    ):
        enqueue("mail", Mail(n=1), priority="urgent")
    with pytest.raises(UnknownPriorityError):
        enqueue_many("mail", [Mail(n=i) for i in range(3)], priority="urgent")
    plain = declare(Starts().job(), name="plain")
    with pytest.raises(UnknownPriorityError, match="it has no priorities"):
        enqueue("plain", Mail(n=1), priority="high")
    assert (normal.depth(), high.depth(), plain.depth()) == (0, 0, 0)


def test_a_high_job_runs_from_its_queue_and_its_failure_lands_in_the_high_dlq(stack, mail):
    _, normal, high = mail
    ok = enqueue("mail", Mail(n=1), priority="high")
    bad = enqueue("mail", Mail(n=2, fail=True), priority="high")
    high.drain()
    # THEN the good one succeeded; the bad one is in the high level's DLQ with its reason, not the other
    assert get_status(ok).state == "succeeded" and get_status(bad).state == "dead"
    assert high.depth() == 0 and high.depth(dlq=True) == 1 and normal.depth(dlq=True) == 0
    [letter] = peek_dead_letters(high.queues.dlq_url)
    assert letter.job_id == bad and letter.attributes[ATTR_REASON]["StringValue"] == "this one never works"
    # AND a redrive sends it back to the high queue, not the normal one
    report = redrive(high.queues.dlq_url, high.queues.queue_url)
    assert report.moved == 1 and high.depth() == 1 and normal.depth() == 0


def test_a_message_naming_another_level_is_moved_to_that_levels_queue_without_using_an_attempt(stack, mail):
    starts, normal, high = mail
    # GIVEN a producer in another language that knows only the job's queue and names the level in JSON
    body = {"v": 1, "job": "mail", "id": "from-go-1", "payload": {"n": 7}, "priority": "high"}
    stack.client("sqs").send_message(QueueUrl=normal.queues.queue_url, MessageBody=json.dumps(body))
    # WHEN the normal queue's worker receives it
    normal.drain()
    # THEN it did not run there: it now waits in the high queue
    assert starts.at == [] and normal.depth() == 0 and high.depth() == 1
    high.drain()
    status = get_status("from-go-1")
    assert (status.state, status.attempts) == ("succeeded", 1)
    assert [n for _, n in starts.at] == [7]


def test_a_message_naming_a_level_the_job_does_not_have_is_dead_lettered_with_the_levels(stack, mail):
    _, normal, _ = mail
    body = {"v": 1, "job": "mail", "id": "bad-level", "payload": {"n": 1}, "priority": "urgent"}
    stack.client("sqs").send_message(QueueUrl=normal.queues.queue_url, MessageBody=json.dumps(body))
    normal.drain()
    [letter] = peek_dead_letters(normal.queues.dlq_url)
    assert "no priority 'urgent'" in letter.reason and "['high', 'normal']" in letter.reason


def test_a_later_job_at_high_priority_is_scheduled_on_the_high_queue(stack, mail):
    _, _, high = mail
    enqueue("mail", Mail(n=1), priority="high", run_at=datetime.now(UTC) + timedelta(hours=2))
    [schedule] = stack.client("scheduler").list_schedules(GroupName=stack.config.one_time_group)["Schedules"]
    target = stack.client("scheduler").get_schedule(
        Name=schedule["Name"], GroupName=stack.config.one_time_group
    )
    assert target["Target"]["Arn"] == high.queues.queue_arn


def test_a_rate_limited_high_job_goes_ahead_of_the_normal_backlog_without_breaking_the_limit(
    stack, declare, clock
):
    # GIVEN a job limited to 1 start a second, with 30 normal jobs already received (each reserved a
    # slot: the last one 30 s away)
    starts = Starts()
    normal = declare(
        starts.job(), name="paced", priorities=("high", "normal"), rate_limit="1/second", max_attempts=1
    )
    high = stack.runner("paced", priority="high", worker=Worker("paced", config=stack.config))
    backlog = [r.job_id for r in enqueue_many("paced", [Mail(n=i) for i in range(30)])]
    normal.drain()
    assert len(starts.at) == 1  # one slot was free now; 29 wait for theirs
    # WHEN a high job is sent after them
    clock.shift(1)
    urgent = enqueue("paced", Mail(n=1000), priority="high")
    started_at = time.time()
    for _ in range(60):
        high.drain()
        normal.drain()
        clock.shift(1)
    # THEN the high job started within a few seconds, long before the backlog was done
    when = dict((n, t) for t, n in starts.at)
    assert when[1000] - started_at <= 3
    assert sum(1 for t, n in starts.at if n != 1000 and t > when[1000]) >= 20
    # AND the limit held in every second (the slot it took is not used twice)
    times = sorted(t for t, _ in starts.at)
    assert max(sum(1 for u in times if t <= u < t + 1) for t in times) == 1
    # AND every job ran once, none used an attempt waiting (max_attempts=1), none was dead-lettered
    statuses = get_statuses([*backlog, urgent])
    assert {s.state for s in statuses.values()} == {"succeeded"}
    assert len(starts.at) == 31
    assert normal.depth(dlq=True) == 0 and high.depth(dlq=True) == 0


def test_a_slot_taken_ahead_too_late_for_its_holder_to_see_is_left_unused(stack, clock, monkeypatch):
    # GIVEN a limiter of 1 a second with 10 slots reserved by a normal backlog, whose holders check
    # their slot up to a second before it (the worker's wait in place)
    from lambdajobs.runtime import RateLimit, ratelimit

    monkeypatch.setattr(ratelimit, "INLINE_WAIT_US", 1_000_000)
    limit = ratelimit.checked("paced", RateLimit(None, 1, per="second"))
    dynamodb, table = stack.client("dynamodb"), stack.config.table_name()
    for _ in range(10):
        ratelimit.take_slot(dynamodb, table, limit, None)
    # AND a high-priority job whose taking write lands 1.4 s after it read the limiter (throttled and
    # retried): by then the holder of the slot it chose may have checked it and be about to start
    delayed = []

    def late_write(**_):
        if not delayed:
            delayed.append(True)
            clock.shift(1.4)

    dynamodb.meta.events.register("before-call.dynamodb.UpdateItem", late_write)
    try:
        chosen_at = time.time()
        slot, ahead = ratelimit.take_slot(dynamodb, table, limit, None, ahead=True)
    finally:
        dynamodb.meta.events.unregister("before-call.dynamodb.UpdateItem", late_write)
    # THEN it did not keep the slot it first chose (at least 1.5 s after it read): it took a later one
    assert ahead and delayed
    assert slot / 1_000_000 >= time.time() + ratelimit.STEAL_MARGIN_US / 1_000_000
    item = dynamodb.get_item(TableName=table, Key={"id": {"S": ratelimit.item_id(limit, None)}})["Item"]
    taken = sorted(int(n) for n in item["stolen"]["NS"])
    assert len(taken) == 2 and taken[1] == slot
    assert taken[0] < slot and taken[0] / 1_000_000 >= chosen_at + ratelimit.STEAL_MARGIN_US / 1_000_000
    # AND the holder of the first one finds it taken when it comes back: it will not start on it
    assert ratelimit.taken_ahead(dynamodb, table, limit, None, taken[0])
