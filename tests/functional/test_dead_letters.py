"""`lambdajobs.dead_letters` on moto: a DLQ listed from the dead records with no message received, a
purge hiding what died before it, find and redrive by id stopping once found, a filtered redrive with
its progress, and a failed send that deletes nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

from lambdajobs import dead_letters
from lambdajobs.runtime import aws, records
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE, ATTR_FAILED_AT
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE


def mail(to: str) -> dict[str, str]:
    return {"to": to, "subject": "News", "body": "Hi"}


def counted(operation: str) -> list[int]:
    """Calls of an SQS operation from now on (a before-call hook)."""
    calls: list[int] = []
    aws.client("sqs").meta.events.register(f"before-call.sqs.{operation}", lambda **_: calls.append(1))
    return calls


def visible(url: str) -> tuple[int, int]:
    attrs = aws.client("sqs").get_queue_attributes(
        QueueUrl=url,
        AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
    )["Attributes"]
    return int(attrs["ApproximateNumberOfMessages"]), int(attrs["ApproximateNumberOfMessagesNotVisible"])


def put_letters(url: str, count: int, error_type: str = "PermanentError", prefix: str = "raw") -> list[str]:
    """Messages as the worker moves them to a DLQ (its attributes), sent straight there."""
    sqs = aws.client("sqs")
    ids = []
    for i in range(count):
        body = json.dumps({"v": 1, "job": "deliver", "id": f"{prefix}-{i}", "payload": mail(f"x{i}")})
        # error_type "": as SQS moves one after maxReceiveCount receives, none of the worker's attributes
        attributes = {
            ATTR_ERROR_TYPE: {"DataType": "String", "StringValue": error_type},
            ATTR_FAILED_AT: {"DataType": "String", "StringValue": "2026-01-01T00:00:00Z"},
        }
        sqs.send_message(
            QueueUrl=url, MessageBody=body, **({"MessageAttributes": attributes} if error_type else {})
        )
        ids.append(f"{prefix}-{i}")
    return ids


@pytest.fixture
def dead(sink: Any) -> Any:
    """A stack whose `deliver` job died three times (its DLQ and dead records), and its runner."""
    with TestStack(JOBS_PACKAGE, stack="test") as stack:
        ids = [stack.enqueue("deliver", mail(f"bad{i}")) for i in range(3)]
        runner = stack.runner("deliver")
        runner.drain()
        yield stack, runner, ids


def test_a_dlq_is_listed_from_its_dead_records_without_receiving_a_message(dead):
    stack, runner, ids = dead
    spec = next(s for s in stack.specs if s.name == "deliver")
    # GIVEN three dead jobs in the DLQ, and one message SQS moved itself (no record)
    put_letters(runner.queues.dlq_url, 1, error_type="", prefix="crashed")
    receives = counted("ReceiveMessage")
    # WHEN the DLQ is listed
    page = dead_letters.list_letters(stack.config, spec, None)
    # THEN its three letters come from the records, the crash is counted as unrecorded, and nothing
    # was received
    assert {e.link_id for e in page.items} == set(ids)
    assert (page.recorded, page.depth, page.unrecorded) == (3, 4, 1)
    assert all(e.error_type and e.attempts >= 1 for e in page.items)
    assert receives == []


def test_a_page_of_the_listing_goes_on_from_its_cursor_through_every_letter(dead):
    stack, _, ids = dead
    spec = next(s for s in stack.specs if s.name == "deliver")
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        page = dead_letters.list_letters(stack.config, spec, None, limit=2, cursor=cursor)
        seen += [e.link_id for e in page.items]
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == sorted(ids) and len(seen) == 3


def test_a_filter_on_error_type_and_age_is_applied_to_the_records(dead):
    stack, _, _ = dead
    spec = next(s for s in stack.specs if s.name == "deliver")
    [one] = dead_letters.list_letters(stack.config, spec, None, limit=1).items
    assert dead_letters.list_letters(stack.config, spec, None, error_type=one.error_type).items
    assert dead_letters.list_letters(stack.config, spec, None, error_type="NoSuchError").items == []
    assert dead_letters.list_letters(stack.config, spec, None, older_than=timedelta(days=1)).items == []
    assert dead_letters.count_matching(stack.config, spec, None, error_type=one.error_type) == 3


def test_after_a_purge_the_records_of_before_are_not_listed(dead):
    stack, runner, _ = dead
    spec = next(s for s in stack.specs if s.name == "deliver")
    # WHEN the DLQ is purged and its purge recorded
    aws.client("sqs").purge_queue(QueueUrl=runner.queues.dlq_url)
    records.mark_purged("deliver", config=stack.config)
    # THEN none of the dead records from before are letters any more
    page = dead_letters.list_letters(stack.config, spec, None)
    assert (page.items, page.recorded) == ([], 0)


def test_find_by_job_id_stops_once_found_and_leaves_every_message_visible(dead):
    stack, runner, ids = dead
    url = runner.queues.dlq_url
    put_letters(url, 40)
    receives = counted("ReceiveMessage")
    # WHEN one dead job's message is looked for by its job id
    found = dead_letters.find(stack.config, url, job_id=ids[1])
    # THEN it is found; every message received was made visible again at once
    assert found is not None and found.job_id == ids[1]
    assert visible(url) == (43, 0)
    # AND one that is not there is not found (the whole DLQ read once, then released)
    assert dead_letters.find(stack.config, url, job_id="nobody") is None
    assert visible(url) == (43, 0)
    assert len(receives) >= 5


def test_redrive_one_by_job_id_moves_only_it(dead):
    stack, runner, ids = dead
    url = runner.queues.dlq_url
    put_letters(url, 30)
    report = dead_letters.redrive_one(stack.config, url, runner.queues.queue_url, job_id=ids[0])
    assert (report.selected, report.moved, report.failed) == (1, 1, 0)
    assert visible(url) == (32, 0)
    assert runner.depth() == 1


def test_a_filtered_redrive_moves_every_match_reporting_progress_per_batch(dead):
    stack, runner, _ = dead
    url = runner.queues.dlq_url
    put_letters(url, 25, error_type="TimeoutError", prefix="slow")
    seen: list[tuple[int, int]] = []
    # WHEN every TimeoutError letter is redriven
    report = dead_letters.redrive(
        stack.config,
        url,
        runner.queues.queue_url,
        error_type="TimeoutError",
        on_progress=lambda p: seen.append((p.scanned, p.moved)),
    )
    # THEN all 25 moved (and only they); progress grew batch by batch; the rest stay, visible
    assert (report.selected, report.moved, report.done) == (25, 25, True)
    assert report.scanned == 28
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] == (28, 25)
    assert visible(url) == (3, 0)
    assert runner.depth() == 25


def test_a_send_that_fails_deletes_nothing_and_releases_what_it_held(dead):
    stack, runner, _ = dead
    url = runner.queues.dlq_url

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "SendMessageBatch")

    aws.client("sqs").meta.events.register("before-call.sqs.SendMessageBatch", refuse)
    try:
        with pytest.raises(ClientError):
            dead_letters.redrive(stack.config, url, runner.queues.queue_url)
    finally:
        aws.client("sqs").meta.events.unregister("before-call.sqs.SendMessageBatch", refuse)
    # THEN every message is still in the DLQ, visible again at once; none reached the queue
    assert visible(url) == (3, 0)
    assert runner.depth() == 0


def test_the_background_tasks_run_a_redrive_and_keep_its_progress(dead):
    stack, runner, _ = dead
    tasks = dead_letters.Tasks()
    progress = dead_letters.Progress(label="deliver", key="deliver", expected=3)
    started = tasks.start(
        progress,
        lambda p: dead_letters.moved_line(
            dead_letters.redrive(stack.config, runner.queues.dlq_url, runner.queues.queue_url, progress=p),
            "deliver",
        ),
    )
    from lambdajobs.ops import wait_until

    assert wait_until(lambda: started.done, 10)
    assert tasks.get(started.id) is started
    assert (started.moved, started.line) == (3, "moved 3 messages from the DLQ of deliver back to its queue")


def test_peek_returns_at_most_its_limit_and_leaves_every_message_visible(dead):
    stack, runner, _ = dead
    url = runner.queues.dlq_url
    put_letters(url, 14, prefix="worker")
    put_letters(url, 1, error_type="", prefix="sqs-moved")
    # WHEN five are peeked THEN five come back, and none of the 18 stays hidden
    assert len(dead_letters.peek(stack.config, url, limit=5)) == 5
    assert visible(url) == (18, 0)
    # AND the unrecorded alone are those without the worker's failed_at attribute
    unrecorded = dead_letters.peek(stack.config, url, only_unrecorded=True)
    assert [d.job_id for d in unrecorded] == ["sqs-moved-0"]
