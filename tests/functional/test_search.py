"""Finding jobs, on moto: by a searchable payload field or the tenant (search entries the worker
writes at a job's first attempt, 2 write units per field), by time range, and dead jobs from the
index in every mode (with a queue's purge marker), without receiving one message."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError
from pydantic import BaseModel

from lambdajobs import TENANT_FIELD
from lambdajobs.runtime import aws
from lambdajobs.runtime.errors import DeclarationError, InvalidOptionError
from lambdajobs.runtime.job_record import JobState
from lambdajobs.runtime.records import (
    count_dead,
    count_dead_levels,
    list_dead,
    list_jobs,
    mark_purged,
    purged_at,
    search,
)
from lambdajobs.runtime.settings import SEARCH_ID_PREFIX
from lambdajobs.runtime.spec import get_spec
from lambdajobs.testing import TestStack

JOBS = "tests.functional.record_jobs"
START = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def stack() -> Iterator[TestStack]:
    with TestStack(JOBS, stack="search", clock=START) as clocked:
        yield clocked


def ids(page: Any) -> list[str]:
    return [s.job_id for s in page.items]


def entries(stack: TestStack) -> list[dict[str, Any]]:
    table = stack.config.table_name()
    items = aws.client("dynamodb").scan(TableName=table)["Items"]
    return [i for i in items if i["id"]["S"].startswith(SEARCH_ID_PREFIX)]


def test_jobs_are_found_by_each_searchable_field_newest_first(stack):
    # GIVEN three lookups enqueued a minute apart, two for one customer, tenants told apart
    first = stack.enqueue("lookup", {"customer_id": "c-1", "address": {"country": "NZ"}}, tenant="acme")
    stack.clock.advance(60)
    second = stack.enqueue("lookup", {"customer_id": "c-2", "address": {"country": "NZ"}}, tenant="zeta")
    stack.clock.advance(60)
    third = stack.enqueue("lookup", {"customer_id": "c-1"}, tenant="acme")
    stack.runner("lookup").drain()
    # WHEN they are searched by each field THEN each search finds its jobs, newest first
    assert ids(search("lookup", "customer_id", "c-1", config=stack.config)) == [third, first]
    assert ids(search("lookup", "address.country", "NZ", config=stack.config)) == [second, first]
    assert ids(search("lookup", TENANT_FIELD, "zeta", config=stack.config)) == [second]
    assert ids(search("lookup", "customer_id", "nobody", config=stack.config)) == []
    # AND by time range: enqueued in [since, until)
    found = search(
        "lookup",
        "customer_id",
        "c-1",
        since=START + timedelta(seconds=60),
        until=START + timedelta(seconds=180),
        config=stack.config,
    )
    assert ids(found) == [third]
    # AND paged, with a cursor
    page = search("lookup", "customer_id", "c-1", limit=1, config=stack.config)
    assert ids(page) == [third] and page.cursor
    assert ids(search("lookup", "customer_id", "c-1", limit=1, cursor=page.cursor, config=stack.config)) == [
        first
    ]
    # AND each status is the record's
    assert search("lookup", "customer_id", "c-1", config=stack.config).items[0].state is JobState.SUCCEEDED


def test_a_pii_field_is_stored_hashed_and_found_by_its_exact_value(stack):
    job_id = stack.enqueue("lookup", {"customer_id": "c-9", "email": "ada@example.com"})
    stack.runner("lookup").drain()
    # THEN no entry holds the address
    assert all("ada@example.com" not in str(item) for item in entries(stack))
    # AND it is found by its value (hashed the same way), not by another's
    assert ids(search("lookup", "email", "ada@example.com", config=stack.config)) == [job_id]
    assert ids(search("lookup", "email", "bob@example.com", config=stack.config)) == []


def test_entries_are_written_once_in_one_batch_with_the_record_ttl(stack):
    calls: list[dict[str, Any]] = []
    events = aws.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.BatchWriteItem", lambda params, **_: calls.append(params))
    # GIVEN a job that fails once and then succeeds (two attempts)
    stack.enqueue("lookup", {"customer_id": "c-5", "address": {"country": "FR"}, "fail_first": 1})
    runner = stack.runner("lookup")
    runner.attempt()
    stack.clock.advance_past_backoff()
    runner.attempt()
    # THEN its entries were one BatchWriteItem, at the first attempt only: one item per field with a
    # value (customer_id, address.country, email; no tenant)
    assert len(calls) == 1
    written = next(iter(calls[0]["RequestItems"].values()))
    assert len(written) == 3
    expirations = {int(e["expiration"]["N"]) for e in entries(stack)}
    assert expirations == {int(START.timestamp()) + stack.config.record_ttl_seconds}


def test_a_failed_entry_write_never_fails_the_job(stack):
    # GIVEN DynamoDB refusing the entries' batch
    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "BatchWriteItem")

    aws.client("dynamodb").meta.events.register("before-call.dynamodb.BatchWriteItem", refuse)
    metrics: list[str] = []
    runner = stack.runner("lookup")
    runner.worker._count = lambda name, value: metrics.append(name)  # type: ignore[method-assign]
    job_id = stack.enqueue("lookup", {"customer_id": "c-6"})
    runner.attempt()
    # THEN the job succeeded, no entry was written, and the failure was counted
    assert stack.status(job_id).state is JobState.SUCCEEDED
    assert entries(stack) == []
    assert "JobSearchEntryFailed" in metrics


def test_unprocessed_entries_are_sent_once_more(stack):
    # GIVEN a first BatchWriteItem answer that leaves every item unprocessed (a throttle)
    calls: list[int] = []

    def throttle_first(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            parsed["UnprocessedItems"] = {stack.config.table_name(): pending}

    pending: list[Any] = []

    def remember(params: dict[str, Any], **_: Any) -> None:
        pending[:] = next(iter(params["RequestItems"].values()))

    events = aws.client("dynamodb").meta.events
    events.register("provide-client-params.dynamodb.BatchWriteItem", remember)
    events.register("after-call.dynamodb.BatchWriteItem", throttle_first)
    job_id = stack.enqueue("lookup", {"customer_id": "c-7"})
    stack.runner("lookup").attempt()
    # THEN the items were sent a second time, and the job is found
    assert len(calls) == 2
    assert ids(search("lookup", "customer_id", "c-7", config=stack.config)) == [job_id]


def test_searching_a_field_the_job_does_not_declare_names_the_declared_ones(stack):
    with pytest.raises(
        InvalidOptionError, match=r"no searchable field 'subject'.*customer_id, address.country"
    ):
        search(get_spec("lookup"), "subject", "x", config=stack.config)
    with pytest.raises(InvalidOptionError, match=r"declared: none"):
        search("ranked", "key", "x", config=stack.config)


class Order(BaseModel):
    order_id: str


def test_a_searchable_field_that_is_not_a_payload_field_is_refused_at_declaration():
    from lambdajobs.runtime.spec import Registry, job, using_registry

    with (
        using_registry(Registry()),
        pytest.raises(DeclarationError, match=r"'customer' is not a field of Order"),
    ):

        @job(searchable=("order_id", "customer.name"))
        def ship(payload: Order) -> None: ...


def test_dead_jobs_are_listed_and_counted_from_the_index_after_the_last_purge(stack):
    # GIVEN two dead jobs, a purge of the queue, then one more dead job
    runner = stack.runner("lookup")
    before = [stack.enqueue("lookup", {"customer_id": f"d-{n}", "fail_always": True}) for n in range(2)]
    for _ in range(3):
        runner.attempt()
        stack.clock.advance(5)
    assert purged_at("lookup", config=stack.config) is None
    purged = mark_purged("lookup", config=stack.config)
    stack.clock.advance(5)
    after = stack.enqueue("lookup", {"customer_id": "d-late", "fail_always": True})
    for _ in range(3):
        runner.attempt()
        stack.clock.advance(5)
    # THEN every dead job is listed (mode off), newest first; after the purge, only the last
    assert purged_at("lookup", config=stack.config) == purged
    assert ids(list_dead("lookup", config=stack.config))[0] == after
    assert set(ids(list_dead("lookup", config=stack.config))) == {after, *before}
    assert ids(list_dead("lookup", after=purged, config=stack.config)) == [after]
    assert count_dead("lookup", config=stack.config) == 3
    assert count_dead("lookup", after=purged, config=stack.config) == 1
    # AND listing by state says the same
    assert set(ids(list_jobs("lookup", "dead", config=stack.config))) == {after, *before}


def test_dead_jobs_are_listed_by_priority_level(stack):
    high = [stack.enqueue("ranked", {"key": f"h{n}", "fail": True}, priority="high") for n in range(3)]
    normal = stack.enqueue("ranked", {"key": "n", "fail": True})
    stack.runner("ranked", priority="high").drain()
    stack.runner("ranked").drain()
    assert set(ids(list_dead("ranked", level="high", config=stack.config))) == set(high)
    assert ids(list_dead("ranked", level="normal", config=stack.config)) == [normal]
    assert count_dead("ranked", level="high", config=stack.config) == 3
    assert count_dead("ranked", config=stack.config) == 4
    # AND every level counted in one pass, each after its own queue's purge
    assert count_dead_levels("ranked", {"high": None, "normal": None}, config=stack.config) == {
        "high": 3,
        "normal": 1,
    }
    later = "2999-01-01T00:00:00.000Z"  # a purge after every death: nothing of that level counts
    assert count_dead_levels("ranked", {"high": later, "normal": None}, config=stack.config) == {
        "high": 0,
        "normal": 1,
    }
    # AND paged by level: a short page's cursor goes on
    page = list_dead("ranked", level="high", limit=2, config=stack.config)
    rest = list_dead("ranked", level="high", limit=2, cursor=page.cursor, config=stack.config)
    assert len(page.items) == 2 and set(ids(page) + ids(rest)) == set(high) and rest.cursor is None


def test_list_jobs_takes_a_time_range():
    with TestStack(JOBS, stack="ranged", job_index="finished") as ranged:
        early = ranged.enqueue("lookup", {"customer_id": "r-1"})
        ranged.runner("lookup").drain()
        time.sleep(0.01)
        middle = datetime.now(UTC)
        time.sleep(0.01)
        late = ranged.enqueue("lookup", {"customer_id": "r-2"})
        ranged.runner("lookup").drain()
        assert ids(list_jobs("lookup", "succeeded", config=ranged.config)) == [late, early]
        assert ids(list_jobs("lookup", "succeeded", since=middle, config=ranged.config)) == [late]
        assert ids(list_jobs("lookup", "succeeded", until=middle, config=ranged.config)) == [early]


def test_a_script_searches_by_job_name_with_only_its_stacks_jobs_package_configured(stack):
    # GIVEN a job found once by a search, and a fresh process's view: no jobs module imported yet,
    # only the stack's configured jobs package (what LAMBDAJOBS_JOBS gives a script)
    stack.enqueue("lookup", {"customer_id": "c-script"})
    stack.runner("lookup").drain()
    from lambdajobs.runtime.spec import Registry, using_registry

    with using_registry(Registry()):
        # WHEN it searches by the job's name
        found = search("lookup", "customer_id", "c-script", config=stack.config)
    # THEN the package is loaded for it and the job is found (no UnknownJobError)
    assert len(found.items) == 1
