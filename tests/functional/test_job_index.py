"""The opt-in job index: a job's records by state, newest first, paged, and counted, on moto; what each
mode writes to it (the write units a job costs), and what a reader hears when it is off."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lambdajobs.runtime import aws, lifecycle
from lambdajobs.runtime.errors import ConfigurationError, InvalidOptionError, JobIndexOffError
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.records import count_dead, count_finished, list_dead, list_jobs, listed_states
from lambdajobs.runtime.spec import job_index_mode
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE


def indexed_stack(mode: str | None) -> TestStack:
    return TestStack(JOBS_PACKAGE, stack="test", job_index=mode)


def mail(to: str) -> dict[str, str]:
    return {"to": to, "subject": "News", "body": "Hi"}


class IndexWrites:
    """Counts the job index's entry writes the way DynamoDB bills them: after each write of a job
    record, compare the record's index key before and after (an entry put or deleted: 1; an entry
    whose key changed: 2, a delete and a put)."""

    def __init__(self, table: str) -> None:
        self.table = table
        self.units = 0
        self._before: dict[str, Any] = {}

    def _key(self, job_id: str) -> Any:
        client = aws.client("dynamodb")
        item = client.get_item(TableName=self.table, Key={"id": {"S": job_id}}, ConsistentRead=True)
        found = item.get("Item") or {}
        return (found.get("ix", {}).get("S"), found.get("ix_at", {}).get("S"))

    def before(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context["index_ids"] = ids = self._ids(params)
        for job_id in ids:
            self._before[job_id] = self._key(job_id)

    def after(self, context: dict[str, Any], **_: Any) -> None:
        for job_id in context.get("index_ids", []):
            old, new = self._before.pop(job_id, (None, None)), self._key(job_id)
            if old == new:
                continue
            self.units += 2 if old[0] is not None and new[0] is not None else 1

    def _ids(self, params: dict[str, Any]) -> list[str]:
        if "Item" in params:  # a first attempt's PutItem
            return [params["Item"]["id"]["S"]] if params.get("TableName") == self.table else []
        updates = [params] if "Key" in params else [t.get("Update", {}) for t in params["TransactItems"]]
        return [u["Key"]["id"]["S"] for u in updates if u.get("TableName") == self.table]


def count_index_writes(stack: TestStack) -> IndexWrites:
    counter = IndexWrites(stack.config.table_name())
    events = aws.client("dynamodb").meta.events
    for operation in ("PutItem", "UpdateItem", "TransactWriteItems"):
        events.register(f"provide-client-params.dynamodb.{operation}", counter.before)
        events.register(f"after-call.dynamodb.{operation}", counter.after)
    return counter


@pytest.mark.parametrize(("mode", "units"), [(None, 0), ("off", 0), ("finished", 1), ("all", 3)])
def test_a_job_that_succeeds_at_once_costs_the_index_writes_its_mode_states(mode, units, sink):
    with indexed_stack(mode) as stack:
        counter = count_index_writes(stack)
        job_id = stack.enqueue("deliver", mail("ada@example.com"))
        stack.runner("deliver").drain()
        assert stack.status(job_id).state is JobState.SUCCEEDED
        assert counter.units == units


@pytest.mark.parametrize(
    ("mode", "units"),
    [
        # retrying entered (1), left at the next attempt (1), succeeded entered (1)
        ("finished", 3),
        # running entered (1), to retrying (2), to running (2), to succeeded (2): a key change is 2
        ("all", 7),
    ],
)
def test_a_retry_costs_the_index_writes_its_mode_states(sink, clock, mode, units):
    sink.flaky["bob@example.com"] = 1
    with indexed_stack(mode) as stack:
        counter = count_index_writes(stack)
        job_id = stack.enqueue("deliver", mail("bob@example.com"))
        runner = stack.runner("deliver")
        runner.drain()
        assert stack.status(job_id).state is JobState.RETRYING
        assert [s.job_id for s in list_jobs("deliver", "retrying").items] == [job_id]
        clock.shift(timedelta(minutes=10))  # past its backoff
        runner.drain()
        assert stack.status(job_id).state is JobState.SUCCEEDED
        assert counter.units == units
        assert list_jobs("deliver", "retrying").items == []


def test_with_the_index_off_a_write_drops_keys_an_earlier_period_left(sink):
    # GIVEN a dead record in the index (a period with the index on)
    with indexed_stack("finished") as stack:
        job_id = stack.enqueue("deliver", mail("bad"))
        stack.runner("deliver").drain()
        table, client = stack.config.table_name(), aws.client("dynamodb")

        def keys() -> dict:
            item = client.get_item(TableName=table, Key={"id": {"S": job_id}})["Item"]
            return {k: item[k]["S"] for k in ("ix", "ix_at") if k in item}

        assert keys()["ix"] == "deliver#dead"
        # WHEN it is redriven and runs while the stack's index is off
        lifecycle.acquire(
            client,
            table,
            job_id,
            "deliver",
            expiration=2_000_000_000,
            in_progress_expiration=None,
            index="off",
        )
        # THEN it left the index: turned on again, the index would not list it as dead
        assert keys() == {}


def test_records_are_listed_by_state_newest_first_and_paged(sink):
    with indexed_stack("finished") as stack:
        ok = []
        for i in range(5):
            ok.append(stack.enqueue("deliver", mail(f"user{i}@example.com")))
            stack.runner("deliver").drain()  # one at a time: each finishes after the one before
        dead = stack.enqueue("deliver", mail("not-an-address"))
        stack.runner("deliver").drain()

        first = list_jobs("deliver", JobState.SUCCEEDED, limit=2)
        assert [s.job_id for s in first.items] == [ok[4], ok[3]]
        assert first.cursor
        second = list_jobs("deliver", "succeeded", limit=2, cursor=first.cursor)
        third = list_jobs("deliver", "succeeded", limit=2, cursor=second.cursor)
        assert [s.job_id for s in second.items + third.items] == [ok[2], ok[1], ok[0]]
        assert third.cursor is None or list_jobs("deliver", "succeeded", cursor=third.cursor).items == []
        assert all(s.state is JobState.SUCCEEDED and s.job == "deliver" for s in first.items)

        [corpse] = list_jobs("deliver", "dead").items
        assert corpse.job_id == dead and corpse.error and "not-an-address" not in str(corpse.error)
        assert list_jobs("encode", "dead").items == []  # another job's partition


def test_finished_mode_cannot_list_running_jobs_and_says_what_would(sink):
    with indexed_stack("finished"):
        assert listed_states() == [
            JobState.RETRYING,
            JobState.SUCCEEDED,
            JobState.DEAD,
            JobState.CANCELLED,
            JobState.SUPERSEDED,
        ]
        with pytest.raises(JobIndexOffError, match=r"job_index='all'.*3 write units"):
            list_jobs("deliver", "running")


def test_all_mode_lists_running_jobs(sink):
    with indexed_stack("all") as stack:
        job_id = stack.enqueue("deliver", mail("ada@example.com"))
        seen: list[Any] = []

        def peek(to: str, subject: str, body: str) -> str:
            seen.append([s.job_id for s in list_jobs("deliver", "running").items])
            return "provider-1"

        sink.send = peek  # type: ignore[method-assign]
        stack.runner("deliver").drain()
        assert seen == [[job_id]]
        assert list_jobs("deliver", "running").items == []
        assert [s.job_id for s in list_jobs("deliver", "succeeded").items] == [job_id]


def test_with_the_index_off_listing_says_how_to_turn_it_on_and_counting_reads_the_metrics(sink):
    with indexed_stack(None) as stack:
        assert stack.provisioned.job_index == "off"
        assert listed_states() == [JobState.DEAD]
        with pytest.raises(
            JobIndexOffError, match=r"dead jobs only.*'off'.*job_index='finished'.*1 write unit"
        ):
            list_jobs("deliver", "succeeded")
        # counting needs no index: the worker's metrics (tests/functional/test_job_stats.py)
        stack.enqueue("deliver", mail("ada@example.com"))
        stack.runner("deliver").drain()
        now = datetime.now(UTC)
        assert count_finished("deliver", now - timedelta(days=1), now + timedelta(minutes=1)) == {
            "succeeded": 1,
            "dead": 0,
        }
        # and the table has the index all the same: mode off writes dead records to it
        table = aws.client("dynamodb").describe_table(TableName=stack.config.table_name())["Table"]
        assert [i["IndexName"] for i in table["GlobalSecondaryIndexes"]] == ["by_job_state"]


def test_with_the_index_off_a_dead_job_costs_one_index_write_and_is_listed(sink):
    with indexed_stack("off") as stack:
        counter = count_index_writes(stack)
        good = stack.enqueue("deliver", mail("ada@example.com"))
        dead = stack.enqueue("deliver", mail("not-an-address"))
        stack.runner("deliver").drain()
        assert stack.status(good).state is JobState.SUCCEEDED
        assert stack.status(dead).state is JobState.DEAD
        # THEN only the dead job entered the index: 1 write unit, none for the success
        assert counter.units == 1
        assert [s.job_id for s in list_jobs("deliver", "dead").items] == [dead]
        assert [s.job_id for s in list_dead("deliver").items] == [dead]
        assert count_dead("deliver") == 1


def test_counts_of_finished_jobs_come_from_the_index(sink):
    with indexed_stack("finished") as stack:
        for to in ("a@example.com", "b@example.com", "bad", "c@example.com"):
            stack.enqueue("deliver", mail(to))
        stack.runner("deliver").drain()
        now = datetime.now(UTC)
        assert count_finished("deliver", now - timedelta(hours=1), now + timedelta(seconds=1)) == {
            "succeeded": 3,
            "dead": 1,
        }
        assert count_finished("deliver", now - timedelta(days=2), now - timedelta(days=1)) == {
            "succeeded": 0,
            "dead": 0,
        }


def test_a_damaged_cursor_is_one_clear_error(sink):
    with indexed_stack("finished"), pytest.raises(InvalidOptionError, match="first page"):
        list_jobs("deliver", "succeeded", cursor="not-a-cursor")


def test_the_mode_is_off_unless_asked_even_with_job_stats(sink):
    from lambdajobs.runtime.spec import load_jobs

    specs = load_jobs(JOBS_PACKAGE)
    assert job_index_mode(specs) == "off"
    assert job_index_mode(specs, "all") == "all"
    with pytest.raises(ConfigurationError, match="use one of off, finished, all"):
        job_index_mode(specs, "everything")
    reports = load_jobs("handlers")
    # daily_report uses job_stats: it counts from the worker's metrics, and the index stays off
    # unless the stack asks for it (issue 31: it cost every job a third write unit)
    assert job_index_mode(reports) == "off"
    assert job_index_mode(reports, "off") == "off"
    assert job_index_mode(reports, "finished") == "finished"


def test_activity_and_counts_come_from_the_index_when_the_stack_has_it(sink):
    from lambdajobs.ops import activity, job_counts

    with indexed_stack("finished") as stack:
        for to in ("a@example.com", "b@example.com", "bad", "c@example.com"):
            stack.enqueue("deliver", mail(to))
        stack.runner("deliver").drain()
        minutes = activity("deliver", minutes=60, source="records")  # as on the local stack
        assert len(minutes) == 60 and minutes[0].at < minutes[-1].at
        assert (sum(m.succeeded for m in minutes), sum(m.failed for m in minutes)) == (3, 1)
        now = datetime.now(UTC)
        counted = job_counts(
            "deliver", now - timedelta(hours=1), now + timedelta(seconds=1), source="records"
        )
        assert counted == {"succeeded": 3, "dead": 1}


@pytest.mark.parametrize("mode", ["off", "finished"])
def test_on_aws_activity_and_counts_come_from_cloudwatch_in_every_mode(sink, mode):
    from lambdajobs.ops import activity, job_counts

    with indexed_stack(mode) as stack:
        now = datetime.now(UTC).replace(second=30, microsecond=0) - timedelta(minutes=1)
        dims = [
            {"Name": "service", "Value": "lambdajobs"},
            {"Name": "job", "Value": "deliver"},
            {"Name": "stack", "Value": stack.stack},
        ]
        aws.client("cloudwatch").put_metric_data(
            Namespace="LambdaJobs",
            MetricData=[
                {"MetricName": name, "Dimensions": dims, "Timestamp": now, "Value": value, "Unit": "Count"}
                for name, value in (("JobSucceeded", 7), ("JobDeadLettered", 2), ("JobFailed", 3))
            ],
        )
        # counts: from the metrics on AWS, whatever the index holds (a count on the index would read
        # every entry of the window at each view)
        assert job_counts("deliver", now - timedelta(hours=1), now + timedelta(minutes=5)) == {
            "succeeded": 7,
            "dead": 2,
        }
        minutes = activity("deliver", minutes=10)  # every failed attempt, on AWS
        assert (sum(m.succeeded for m in minutes), sum(m.failed for m in minutes)) == (7, 3)


def test_the_local_stack_without_the_index_has_no_chart(sink):
    from lambdajobs.ops import activity

    with indexed_stack("off") as stack:
        local = stack.config.with_resources(endpoint_url="http://127.0.0.1:1")  # never called
        assert activity("deliver", config=local) == []
        # (its counts come from the records: tests/local/test_ops_local.py)


def test_redrive_moves_only_the_selected_messages(sink):
    from lambdajobs.ops import peek_dead_letters, redrive

    with indexed_stack("finished") as stack:
        ids = [stack.enqueue("deliver", mail(f"bad{i}")) for i in range(3)]
        runner = stack.runner("deliver")
        runner.drain()
        dlq = runner.queues.dlq_url
        letters = {d.job_id: d for d in peek_dead_letters(dlq)}
        assert set(letters) == set(ids)
        chosen = letters[ids[1]].message_id
        report = redrive(dlq, runner.queues.queue_url, message_ids={chosen}, visibility_seconds=1)
        assert report.scanned <= 3 and (report.selected, report.moved) == (1, 1)
        assert runner.depth() == 1
        assert {d.job_id for d in peek_dead_letters(dlq)} == {ids[0], ids[2]}


def test_redriving_a_selection_stops_reading_the_dlq_once_it_has_it(sink):
    from lambdajobs.ops import peek_dead_letters, redrive

    with indexed_stack("finished") as stack:
        for i in range(25):
            stack.enqueue("deliver", mail(f"bad{i}"))
        runner = stack.runner("deliver")
        runner.drain()
        dlq = runner.queues.dlq_url
        first = peek_dead_letters(dlq, limit=1)[0].message_id
        calls: list[int] = []
        aws.client("sqs").meta.events.register(
            "before-call.sqs.ReceiveMessage", lambda **kwargs: calls.append(1)
        )
        report = redrive(dlq, runner.queues.queue_url, message_ids={first}, visibility_seconds=1)
        assert report.moved == 1
        # a deep DLQ is not read (and hidden) to the end for one message
        assert report.scanned < 25 and len(calls) < 3
