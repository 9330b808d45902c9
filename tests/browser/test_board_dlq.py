"""The board's dead-letter views in headless Chromium (a local stack of this module's own): listed from
the job records without receiving, paged through, filtered, redriven with progress, found by id;
pause and resume on the overview; "run now" of a one-time schedule; the JSON twins of these pages.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from lambdajobs import queue_control
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import peek_dead_letters, wait_until
from lambdajobs.runtime.producer import enqueue_many, one_time_schedule_name
from lambdajobs.runtime.records import get_status, wait_for
from tests.browser.board_server import BoardServer
from tests.browser.test_board import broken, dlq_depth, finished, send, shot

KEY = "board_signup"
SEEDED = 55  # more than a page (50)


def dlq_url(local: LocalStack, key: str = KEY) -> str:
    assert local.provisioned is not None
    return local.provisioned.queues[key].dlq_url


def receive_counts(local: LocalStack, key: str = KEY) -> dict[str, int]:
    """Each DLQ message's ApproximateReceiveCount, as a receive reads it (this receive counts too)."""
    return {
        d.message_id: d.receive_count
        for d in peek_dead_letters(dlq_url(local, key), limit=1000, config=local.config)
    }


def inject_unrecorded(local: LocalStack, job_id: str, key: str = KEY) -> str:
    """A message as SQS moves one after maxReceiveCount receives (a crash): the envelope alone, none
    of the worker's attributes, no dead record."""
    body = json.dumps(
        {"v": 1, "job": "board_signup", "id": job_id, "payload": {"email": "crash@example.org"}}
    )
    sent = local.config.client("sqs").send_message(QueueUrl=dlq_url(local, key), MessageBody=body)
    return str(sent["MessageId"])


@pytest.fixture(scope="module")
def seeded(local: LocalStack) -> list[str]:
    """SEEDED signups dead (their addresses refused), and one message SQS moved itself."""
    addresses = [f"seed-{i}@example.org" for i in range(SEEDED)]
    broken().update(addresses)
    ids = [f"seed-{i:02d}" for i in range(SEEDED)]
    enqueue_many("board_signup", [{"email": a} for a in addresses], job_ids=ids, config=local.config)
    finished(local, *ids)
    assert wait_until(lambda: dlq_depth(local, KEY) == SEEDED, 20)
    inject_unrecorded(local, "crashed-1")
    return ids


def test_viewing_a_dlq_changes_no_receive_count(local, board, page, seeded):
    # GIVEN a DLQ of 56 messages (55 recorded dead, one moved by SQS) and their receive counts
    before = receive_counts(local)
    assert len(before) == SEEDED + 1
    # WHEN its page, its JSON and the DLQ list are opened five times each, on a board that acts and on
    # a read-only one
    from lambdajobs.board import create_app

    with BoardServer(create_app(local.config, local.specs, read_only=True)) as read_only:
        for base in (board.url, read_only.url):
            for _ in range(5):
                page.goto(f"{base}/dead-letters/{KEY}")
                expect(page.locator("tbody.letter")).to_have_count(50)
                assert page.request.get(f"{base}/api/dead-letters/{KEY}").ok
                page.goto(f"{base}/dead-letters")
    # THEN every message's receive count is as it was (+1: the receive that reads them now)
    after = receive_counts(local)
    assert after == {m: n + 1 for m, n in before.items()}


def test_the_dlq_page_lists_every_dead_letter_50_at_a_time_and_counts_the_unrecorded(
    local, page, seeded, screenshots
):
    # WHEN the DLQ page opens
    page.goto(f"/dead-letters/{KEY}")
    # THEN it lists the newest 50, says 55 are recorded and one more was never recorded
    expect(page.locator("tbody.letter")).to_have_count(50)
    expect(page.locator("[data-counts]")).to_contain_text(f"{SEEDED} recorded")
    expect(page.locator('[data-col="unrecorded"]')).to_have_text("1")
    # AND reasons are masked: no address is in the page
    expect(page.locator("tbody.letter td.reason").first).to_have_text("cannot reach *****")
    assert "@example.org" not in page.content()
    shot(page, screenshots, "dlq-from-records")
    listed = set(page.locator("tbody.letter td.id a").all_inner_texts())
    # WHEN the operator goes to the next page THEN the other 5 are there, and no more pages
    page.get_by_role("link", name=re.compile("^next")).click()
    expect(page.locator("tbody.letter")).to_have_count(SEEDED - 50)
    listed |= set(page.locator("tbody.letter td.id a").all_inner_texts())
    expect(page.get_by_role("link", name=re.compile("^next"))).to_have_count(0)
    assert listed == set(seeded)


def test_the_unrecorded_are_received_only_on_a_post_and_shown_with_their_receive_count(local, page, seeded):
    # GIVEN the DLQ page, with one message the worker never recorded
    page.goto(f"/dead-letters/{KEY}")
    # WHEN the operator asks to receive the unrecorded
    page.get_by_role("button", name="Receive the 1 unrecorded to view them").click()
    # THEN that message alone is listed, masked, its receive count shown, and the page says receiving
    # counts
    letters = page.locator("tbody.letter")
    expect(letters).to_have_count(1)
    expect(letters.first.locator("td.id")).to_have_text("crashed-1")
    expect(letters.first).to_contain_text("MaxReceiveCountExceeded")
    expect(page.locator("p.info")).to_contain_text("receive count raised by one")
    letters.first.locator("details").click()
    expect(letters.first.locator("pre.body")).to_contain_text('"email": "*****"')
    assert "crash@example.org" not in page.content()


def test_find_by_job_id_then_redrive_that_one(local, page, seeded, screenshots):
    # GIVEN one seeded signup whose address is accepted again
    broken().discard("seed-7@example.org")
    page.goto(f"/dead-letters/{KEY}")
    # WHEN the operator finds it by its job id
    page.get_by_label("Find by job id or message id").fill("seed-07")
    page.get_by_role("button", name="Find", exact=True).last.click()
    found = page.locator("tbody.letter")
    expect(found).to_have_count(1)
    expect(found.locator("td.id")).to_have_text("seed-07")
    expect(found.locator("pre.body")).to_contain_text('"email": "*****"')
    shot(page, screenshots, "dlq-find")
    # AND redrives it
    found.get_by_role("button", name="Redrive").click()
    # THEN the progress page ends with one moved, and the job succeeds
    expect(page.locator("p.progress")).to_have_attribute("data-done", "yes", timeout=20_000)
    expect(page.locator("[data-line]")).to_contain_text("moved 1 message")
    assert wait_until(lambda: get_status("seed-07", config=local.config).state == "succeeded", 30)


def test_select_all_matching_redrives_every_match_with_progress(local, page, seeded, screenshots):
    # GIVEN the seeded dead signups, now accepted, and the unrecorded crash (another error type)
    broken().difference_update(f"seed-{i}@example.org" for i in range(SEEDED))
    dead = [j for j in seeded if get_status(j, config=local.config).state == "dead"]
    page.goto(f"/dead-letters/{KEY}")
    # WHEN the operator filters on the error type, older than nothing, and selects all matching
    page.get_by_label("error type").fill("PermanentError")
    page.get_by_label("older than").fill("0s")
    page.get_by_role("button", name="Filter").click()
    select_all = page.get_by_role("button", name=f"Redrive all {len(dead)} matching")
    expect(select_all).to_be_visible()
    select_all.click()
    # THEN a progress page follows the redrive to its end: all matching moved, more than a page
    expect(page).to_have_url(re.compile(r"/redrives/[0-9a-f]+(\?notice=.*)?$"))
    expect(page.locator("p.progress")).to_have_attribute("data-done", "yes", timeout=30_000)
    expect(page.locator('[data-col="moved"]')).to_have_text(str(len(dead)))
    expect(page.locator('[data-col="selected"]')).to_have_text(str(len(dead)))
    shot(page, screenshots, "dlq-redrive-progress")
    task = page.url.rsplit("/", 1)[1].split("?")[0]
    progress = page.request.get(f"/api/redrives/{task}").json()
    assert (progress["moved"], progress["done"], progress["failed"]) == (len(dead), True, 0)

    # AND every one runs again and succeeds; the crash (not matching) stays in the DLQ
    def all_succeeded() -> bool:
        return all(get_status(j, config=local.config).state == "succeeded" for j in dead)

    assert wait_until(all_succeeded, 40)
    left = peek_dead_letters(dlq_url(local), config=local.config)
    assert [d.job_id for d in left] == ["crashed-1"]


def test_the_json_api_answers_what_the_pages_show_masked(local, page, seeded):
    # GIVEN a signup dead with its address in its error
    broken().add("json.api@example.org")
    try:
        finished(local, send(local, "board_signup", {"email": "json.api@example.org"}, "json-1"))
    finally:
        broken().discard("json.api@example.org")
    page.goto("/")
    # WHEN the API is asked for the DLQs, one DLQ, the overview and the schedules
    queues = page.request.get("/api/dead-letters").json()
    letters = page.request.get(f"/api/dead-letters/{KEY}").json()
    overview = page.request.get("/api/overview")
    schedules = page.request.get("/api/schedules")
    # THEN each answers JSON; the letter is there, its reason masked, nothing holds the address
    assert {q["key"] for q in queues["queues"]} >= {KEY, "board_flaky"}
    assert letters["queue"]["key"] == KEY and letters["depth"] >= 1
    first = next(i for i in letters["items"] if i["link_id"] == "json-1")
    assert first["reason"] == "cannot reach *****" and first["error_type"] == "PermanentError"
    assert overview.ok and schedules.ok
    assert [j["job"] for j in overview.json()["jobs"]]
    for body in (json.dumps(letters), overview.text(), schedules.text()):
        assert "json.api@example.org" not in body
    # AND the DLQs with no job records (the workflow queue's, the Scheduler's) count all as unrecorded
    for key in ("_workflows", "_scheduler"):
        other = page.request.get(f"/api/dead-letters/{key}").json()
        assert (other["items"], other["recorded"], other["unrecorded"]) == ([], 0, other["depth"])
        assert page.request.get(f"/dead-letters/{key}").ok
    # AND a bad filter is a 400 with one line
    bad = page.request.get(f"/api/dead-letters/{KEY}?older_than=soon")
    assert bad.status == 400 and "not understood" in bad.json()["error"]


def test_pause_and_resume_a_queue_from_the_overview(local, board, page, screenshots):
    spec = next(s for s in local.specs if s.name == "board_flaky")
    page.goto("/")
    row = page.locator('tr[data-queue="board_flaky"]')
    expect(row.locator("[data-paused]")).to_have_attribute("data-paused", "no")
    # WHEN the operator pauses board_flaky's queue
    row.get_by_role("button", name="Pause board_flaky").click()
    # THEN its event sources are off, and the overview says paused
    expect(page.locator("p.notice")).to_contain_text("paused board_flaky")
    assert [m.enabled for m in queue_control.mappings(spec, config=local.config)] == [False]
    expect(page.locator('tr[data-queue="board_flaky"] [data-paused]')).to_have_attribute("data-paused", "yes")
    shot(page, screenshots, "overview-paused")
    # AND a job sent now waits in the queue (nothing receives it, once the poll under way is over)
    assert local.mappings["board_flaky"].holding.wait(25)
    send(local, "board_flaky", {"n": 1}, "flaky-paused")
    assert not wait_until(lambda: get_status("flaky-paused", config=local.config).has_record, 2)
    # AND when its oldest message nears the queue's retention, the overview warns (here: a board
    # that warns 5 days ahead, more than the 4 days' retention, so the pause itself is close enough)
    data = board.app.state.board.data
    data.retention_within = timedelta(days=5)
    try:
        page.goto("/")
        warning = page.locator('tr[data-queue="board_flaky"] [data-retention]')
        expect(warning).to_contain_text("SQS deletes the oldest")
        expect(warning).to_contain_text("resume it before then")
        shot(page, screenshots, "overview-retention-warning")
    finally:
        data.retention_within = timedelta(days=1)
    # WHEN it is resumed THEN the job runs (and dies: board_flaky never works)
    page.locator('tr[data-queue="board_flaky"]').get_by_role("button", name="Resume board_flaky").click()
    expect(page.locator("p.notice")).to_contain_text("resumed board_flaky")
    assert wait_for("flaky-paused", 30, poll_seconds=0.1, config=local.config).state == "dead"


def test_the_overview_counts_finished_jobs_once_for_many_views(local):
    from lambdajobs.board.data import BoardData

    # GIVEN the board's data layer with no cache for AWS answers (the local stack's setting)
    data = BoardData(local.config, local.specs, cache_seconds=0)
    counting: list[int] = []

    def count(params: dict[str, Any], **_: Any) -> None:
        sent = json.loads(params.get("body") or b"{}")  # the Query as it goes out
        if sent.get("Select") == "COUNT" or sent.get("ProjectionExpression"):
            counting.append(1)

    client = local.config.client("dynamodb")
    client.meta.events.register("before-call.dynamodb.Query", count)
    try:
        # WHEN the overview is built, then four more times within the counts' time to live
        data.overview()
        first = len(counting)
        for _ in range(4):
            data.overview()
    finally:
        client.meta.events.unregister("before-call.dynamodb.Query", count)
    # THEN only the first counted (finished counts and the activity chart): not once per view
    assert first > 0 and len(counting) == first


def test_run_now_sends_a_pending_one_time_run_and_deletes_its_schedule(local, page, screenshots):
    # GIVEN a signup scheduled an hour ahead
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    send(local, "board_signup", {"email": "soon@example.net"}, "signup-soon", run_at=later)
    page.goto("/schedules")
    pending = page.locator("tr", has_text="signup-soon")
    expect(pending).to_have_count(1)
    expect(page.locator("p.footnote")).to_contain_text("cannot be moved forward")
    # WHEN the operator runs it now
    pending.get_by_role("button", name="Run signup-soon now").click()
    # THEN the job's page shows it ran (the same job id), and the schedule is gone
    expect(page.locator("p.notice")).to_contain_text("deleted its schedule")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded", timeout=30_000)
    page.goto("/schedules")
    expect(page.locator("tr", has_text="signup-soon")).to_have_count(0)
    _, group, _ = local.config.scheduler_settings()
    assert one_time_schedule_name("board_signup", "signup-soon") not in [
        s["Name"] for s in local.config.client("scheduler").list_schedules(GroupName=group)["Schedules"]
    ]


def test_run_now_whose_schedule_delete_fails_says_the_run_finds_the_job_done(local, board):
    from botocore.exceptions import ClientError

    # GIVEN a pending one-time run, and a Scheduler that refuses the delete
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=2)
    send(local, "board_signup", {"email": "twice@example.net"}, "signup-twice", run_at=later)
    name = one_time_schedule_name("board_signup", "signup-twice")
    scheduler = local.config.client("scheduler")

    def refuse(**_: Any) -> None:
        raise ClientError(
            {"Error": {"Code": "InternalServerException", "Message": "injected"}}, "DeleteSchedule"
        )

    scheduler.meta.events.register("before-call.scheduler.DeleteSchedule", refuse)
    try:
        # WHEN it is run now
        job, job_id, line = board.app.state.board.data.run_once_now(name)
    finally:
        scheduler.meta.events.unregister("before-call.scheduler.DeleteSchedule", refuse)
    # THEN it was sent (it runs once, now), and the line says the schedule stays and finds it done
    assert (job, job_id) == ("board_signup", "signup-twice")
    assert "could not be deleted" in line and "finds the job done" in line
    assert wait_until(lambda: get_status("signup-twice", config=local.config).state == "succeeded", 30)
    _, group, _ = local.config.scheduler_settings()
    assert scheduler.get_schedule(Name=name, GroupName=group)["Name"] == name


def test_a_redrive_that_fails_shows_its_error_on_the_progress_page(local, page):
    from botocore.exceptions import ClientError

    # GIVEN a dead letter, and SQS refusing every send back
    finished(local, send(local, "board_flaky", {"n": 3}, "flaky-refused"))

    def dead_ids() -> list[str | None]:
        return [d.job_id for d in peek_dead_letters(dlq_url(local, "board_flaky"), config=local.config)]

    # (its own letter there: the DLQ may hold an earlier test's, so a depth of 1 is not enough)
    assert wait_until(lambda: "flaky-refused" in dead_ids(), 10)
    depth = dlq_depth(local, "board_flaky")
    sqs = local.config.client("sqs")

    def refuse(**_: Any) -> None:
        raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "SendMessageBatch")

    sqs.meta.events.register("before-call.sqs.SendMessageBatch", refuse)
    try:
        # WHEN the operator redrives it
        page.goto("/dead-letters/board_flaky")
        page.get_by_role("button", name="Redrive all").click()
        # THEN the progress page ends with the error in one line, nothing moved
        expect(page.locator("p.progress")).to_have_attribute("data-done", "yes", timeout=20_000)
        expect(page.locator("p.error")).to_contain_text("AWS refused SendMessageBatch: InternalError")
        expect(page.locator('[data-col="moved"]')).to_have_text("0")
    finally:
        sqs.meta.events.unregister("before-call.sqs.SendMessageBatch", refuse)
    # AND every message is still in the DLQ, visible again at once
    assert dlq_depth(local, "board_flaky") == depth
    assert "flaky-refused" in dead_ids()


def test_a_jobs_levels_each_list_their_own_dead_letters(local, page):
    # GIVEN mail bounced at each priority level (board_mail: high and normal)
    finished(
        local,
        send(
            local, "board_mail", {"to": "hi@example.org", "subject": "bounce"}, "bounce-high", priority="high"
        ),
        send(local, "board_mail", {"to": "lo@example.org", "subject": "bounce"}, "bounce-normal"),
    )
    # WHEN the high level's DLQ page opens THEN it lists the high one alone, with links to each level
    page.goto("/dead-letters/board_mail@high")
    expect(page.locator("tbody.letter td.id a")).to_have_text(["bounce-high"])
    expect(page.locator('[data-level="normal"]')).to_have_attribute("href", "/dead-letters/board_mail")
    # WHEN the operator picks the normal level THEN the normal one alone
    page.locator('[data-level="normal"]').click()
    expect(page.locator("tbody.letter td.id a")).to_have_text(["bounce-normal"])
    expect(page.locator("tbody.letter")).to_contain_text("(normal)")
    assert "@example.org" not in page.content()
