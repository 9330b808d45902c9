"""Priority levels in a job's declaration: names, concurrency per level, and the producer's choice."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lambdajobs.runtime import DeclarationError, UnknownPriorityError
from lambdajobs.runtime.settings import (
    dead_letter_queue_name,
    dead_letter_queue_pattern,
    job_queue_pattern,
    queue_key,
    queue_name,
    queue_of,
    workflow_queue_name,
)
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry


class Mail(BaseModel):
    to: str


def send(payload: Mail) -> None:
    return None


@pytest.fixture(autouse=True)
def registry():
    with isolated_registry():
        yield


def test_levels_are_highest_first_and_the_lowest_uses_the_jobs_own_queue():
    spec = job(name="mail", priorities=("urgent", "high", "normal"), max_concurrency=5)(send).spec
    # THEN every level but the lowest has its own queue; the lowest is the job's own (None)
    assert spec.levels == ("urgent", "high", None)
    assert spec.default_priority == "normal"
    assert [spec.level_for(p) for p in (None, "normal", "high", "urgent")] == [None, None, "high", "urgent"]
    assert [spec.priority_of(level) for level in spec.levels] == ["urgent", "high", "normal"]
    # AND each level up has twice the concurrency of the one below
    assert [spec.concurrency_of(level) for level in spec.levels] == [20, 10, 5]
    assert spec.total_concurrency == 35


def test_concurrency_per_level_can_be_given_and_a_job_without_levels_has_one_queue():
    spec = job(name="mail", priorities={"high": 50, "normal": 4})(send).spec
    assert (spec.concurrency_of("high"), spec.concurrency_of(None)) == (50, 4)
    plain = job(name="plain", max_concurrency=7)(send).spec
    assert (plain.levels, plain.concurrency_of(None), plain.default_priority) == ((None,), 7, None)


def test_doubling_stops_at_the_event_source_maximum():
    spec = job(name="mail", priorities=("a", "b", "c"), max_concurrency=400)(send).spec
    assert [spec.concurrency_of(level) for level in spec.levels] == [1000, 800, 400]


@pytest.mark.parametrize(
    ("priorities", "says"),
    [
        (("high",), "two or more distinct levels"),
        (("high", "high"), "two or more distinct levels"),
        (("High", "normal"), "not level names"),
        (("high_1", "normal"), "not level names"),
        (("dlq", "normal"), "not level names"),
        ("high", "give the levels as a tuple"),
        ({"high": 1, "normal": 5}, "priorities['high']"),
    ],
)
def test_bad_priorities_are_refused_with_the_fix(priorities, says):
    with pytest.raises(DeclarationError, match="job 'mail'") as caught:
        job(name="mail", priorities=priorities)(send)
    assert says in str(caught.value)


def test_a_reservation_must_cover_every_levels_concurrency():
    # 20 + 10 batches at once across the two event sources: a reservation of 25 would throttle them
    with pytest.raises(DeclarationError, match="reserved_concurrency"):
        job(name="mail", priorities=("high", "normal"), max_concurrency=10, reserved_concurrency=25)(send)
    job(name="mail2", priorities=("high", "normal"), max_concurrency=10, reserved_concurrency=30)(send)


def test_an_unknown_priority_names_the_levels():
    spec = job(name="mail", priorities=("high", "normal"))(send).spec
    with pytest.raises(
        UnknownPriorityError, match=r"no priority 'urgent': choose one of \['high', 'normal'\]"
    ):
        spec.level_for("urgent")
    plain = job(name="plain")(send).spec
    with pytest.raises(UnknownPriorityError, match="it has no priorities"):
        plain.level_for("high")


def test_queue_names_and_keys_round_trip():
    assert queue_name("prod", "send_email", "high") == "prod_send_email--high"
    assert dead_letter_queue_name("prod", "send_email", "high") == "prod_send_email--high-dlq"
    assert queue_of("prod", "arn:aws:sqs:us-east-1:1:prod_send_email--high") == ("send_email", "high")
    assert queue_of("my-app", "arn:aws:sqs:us-east-1:1:my-app_send_email") == ("send_email", None)
    assert queue_of("prod", "prod_send_email--high-dlq") is None
    assert queue_of("prod", "other_send_email") is None
    # the stack's workflow queue is no job's queue, nor a priority level's
    assert queue_of("prod", "arn:aws:sqs:us-east-1:1:" + workflow_queue_name("prod")) is None
    assert queue_key("send_email", None) == "send_email"
    assert queue_key("send_email", "high") == "send_email@high"


def test_no_two_stacks_share_a_queue_name_and_no_stacks_pattern_matches_anothers():
    from fnmatch import fnmatchcase

    from lambdajobs.runtime import ConfigurationError

    # a stack whose name is another's plus "-<something>" (a neighbour "shop-2") cannot meet its names
    assert queue_name("shop", "export", "high") != queue_name("shop-export", "high")
    assert queue_of("shop", "shop_export--high") == ("export", "high")
    assert queue_of("shop", "shop-2_export") is None
    neighbour = [queue_name("shop-2", "export"), dead_letter_queue_name("shop-2", "export", "high")]
    for name in neighbour:  # IAM's '*' is fnmatch's
        assert not fnmatchcase(name, job_queue_pattern("shop"))
        assert not fnmatchcase(name, dead_letter_queue_pattern("shop"))
    assert fnmatchcase(queue_name("shop", "export", "high"), job_queue_pattern("shop"))
    assert not fnmatchcase(queue_name("shop", "export", "high"), dead_letter_queue_pattern("shop"))
    assert fnmatchcase(dead_letter_queue_name("shop", "export", "high"), dead_letter_queue_pattern("shop"))
    with pytest.raises(ConfigurationError, match="has '_'"):
        queue_name("shop_2", "export")
    with pytest.raises(ConfigurationError, match="SQS allows 80"):
        queue_name("s" * 25, "j" * 48, "high")  # its DLQ's name would be 84 characters
