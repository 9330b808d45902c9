"""The board's job views in headless Chromium against a local stack: a job's page with everything
(payload masked, traceback, attempts, enqueue time, logs), a workflow's page, search by a field, and
the JSON API's answers.

Each test saves a screenshot of the page it checks to build/reports/board/.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from lambdajobs.board import render
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status, wait_for
from lambdajobs.runtime.workflow import chord, get_workflow, group, sig
from tests.browser.board_server import BoardServer

EMAIL = "margaret.hamilton@apollo.example"


@pytest.fixture(scope="module")
def board(local: LocalStack) -> Iterator[BoardServer]:
    """The board, reading the local stack's worker log (`lambdajobs dev` names it with --log-file)."""
    from lambdajobs.board import create_app

    app = create_app(local.config, local.specs)
    app.state.board.worker_log = local.log_file
    with BoardServer(app) as server:
        yield server


def shot(page: Any, screenshots: Any, name: str) -> None:
    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def retried(local: LocalStack) -> str:
    """An order that failed once (its address in the error) and succeeded on its second attempt."""
    job_id = enqueue(
        "board_order",
        {"customer": "cust-0042", "email": EMAIL, "fail_times": 1},
        job_id="order-retried",
        tenant="acme",
        config=local.config,
    )
    status = wait_for(job_id, timeout_seconds=30, poll_seconds=0.1, config=local.config)
    assert (status.state, status.attempts) == ("succeeded", 2), status
    return job_id


def test_a_jobs_page_shows_its_payload_masked_its_attempts_traceback_and_times(
    local, page, retried, screenshots
):
    status = get_status(retried, config=local.config)
    # WHEN the page of an order that failed once, then succeeded, opens
    page.goto(f"/jobs/board_order/{retried}")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")
    # THEN its payload is there, the PII field erased
    payload = page.locator('pre[data-field="payload"]')
    expect(payload).to_contain_text('"customer": "cust-0042"')
    expect(payload).to_contain_text('"email": "*****"')
    # AND both attempts, each with its start, duration and outcome; the first one's error masked
    rows = page.locator("table.attempts tbody tr")
    expect(rows).to_have_count(2)
    first, second = rows.nth(0), rows.nth(1)
    expect(first.locator("td").nth(3)).to_have_text("retrying")
    expect(first.locator("td.reason")).to_have_text("RuntimeError: warehouse cannot reach *****")
    expect(second.locator("td").nth(3)).to_have_text("succeeded")
    expect(first.locator("td.duration")).to_have_text(re.compile(r"^(\d+ ms|\d+\.\d s)$"))
    # AND the last failure's traceback, masked
    traceback = page.locator('pre[data-field="traceback"]')
    expect(traceback).to_contain_text("Traceback")
    expect(traceback).to_contain_text("RuntimeError: warehouse cannot reach *****")
    # AND when it was enqueued (not its first start), its queue wait and run time, tenant and level
    assert status.enqueued_at and status.enqueued_at < (status.history[0].started_at or "")
    expect(page.locator('[data-field="enqueued_at"]')).to_have_text(render.when(status.enqueued_at))
    expect(page.locator('[data-field="queue_wait"]')).to_have_text(re.compile(r"^(\d+ ms|\d+\.\d s)$"))
    expect(page.locator('[data-field="run_time"]')).to_have_text(re.compile(r"^(\d+ ms|\d+\.\d s)$"))
    expect(page.locator('[data-field="tenant"]')).to_have_text("acme")
    expect(page.locator('[data-field="level"]')).to_have_text("normal")
    # AND the address is nowhere in the page
    assert EMAIL not in page.content()
    shot(page, screenshots, "job-everything")


def test_the_logs_panel_loads_after_the_page_with_the_jobs_lines(page, retried, screenshots):
    # WHEN a job's page opens
    page.goto(f"/jobs/board_order/{retried}")
    # THEN its logs panel loads by itself with the job's own lines, from the worker log: the failed
    # first attempt's (written with its failure); the success wrote none (its own lines dropped)
    panel = page.locator("section#logs")
    expect(panel.locator("table.log-lines")).to_be_visible()
    expect(panel).to_contain_text("packing order")
    expect(panel).to_contain_text("cust-0042")  # the line's own field
    expect(panel).not_to_contain_text("order packed")
    expect(panel).not_to_contain_text("job succeeded")
    attempts = panel.locator("tbody tr td.num").all_inner_texts()
    assert set(attempts) == {"1"}, attempts
    assert EMAIL not in page.content()
    shot(page, screenshots, "job-logs")


def test_a_dead_job_can_be_enqueued_again_as_a_new_job(local, page, screenshots):
    # GIVEN an order that failed on every attempt (its payload kept in its record)
    dead = enqueue(
        "board_order",
        {"customer": "cust-dead", "email": EMAIL, "fail_times": 99},
        job_id="order-dead",
        config=local.config,
    )
    assert wait_for(dead, timeout_seconds=60, poll_seconds=0.1, config=local.config).state == "dead"
    page.goto(f"/jobs/board_order/{dead}")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "dead")
    expect(page.locator("table.attempts tbody tr")).to_have_count(3)
    expect(page.get_by_role("button", name="Redrive this job")).to_be_visible()
    # WHEN the operator enqueues it again
    page.get_by_role("button", name="Enqueue again").click()
    # THEN the board opens the new job's page, which says so, under another id with the same payload
    expect(page.locator("p.notice")).to_contain_text("enqueued again as a new job")
    new_id = page.url.rsplit("/", 1)[-1].split("?")[0]
    assert new_id != dead and len(new_id) == 32, page.url
    assert wait_until(lambda: get_status(new_id, config=local.config).state == "dead", 60)
    again = get_status(new_id, config=local.config)
    assert again.payload == {"customer": "cust-dead", "email": EMAIL, "fail_times": 99}
    shot(page, screenshots, "job-enqueued-again")


def test_a_waiting_job_gets_its_signal_from_its_page(local, page):
    enqueue("board_approval", {}, job_id="approval-page", config=local.config)
    assert wait_until(lambda: get_status("approval-page", config=local.config).state == "waiting_signal", 30)
    page.goto("/jobs/board_approval/approval-page")
    form = page.locator("form.signal")
    expect(form.locator('input[name="name"]')).to_have_value("approval")
    form.locator('input[name="data"]').fill('{"approved_by": "ada"}')
    page.wait_for_timeout(2500)  # the page refreshes (every 2 s) while they type: what they typed stays
    expect(form.locator('input[name="data"]')).to_have_value('{"approved_by": "ada"}')
    form.get_by_role("button", name="Send signal").click()
    expect(page.locator("p.notice")).to_contain_text("signal approval sent: it woke the job")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded", timeout=30_000)
    assert get_status("approval-page", config=local.config).result == {"decision": {"approved_by": "ada"}}


def test_search_by_a_field_lists_the_jobs_that_had_that_value(local, page, retried, screenshots):
    # GIVEN two orders of customer cust-7 and one of another
    for job_id, customer in (("order-a", "cust-7"), ("order-b", "cust-7"), ("order-c", "cust-8")):
        enqueue("board_order", {"customer": customer, "email": EMAIL}, job_id=job_id, config=local.config)
    for job_id in ("order-a", "order-b", "order-c"):
        assert (
            wait_for(job_id, timeout_seconds=30, poll_seconds=0.1, config=local.config).state == "succeeded"
        )
    # WHEN the jobs page's search asks for customer cust-7
    page.goto("/jobs")
    search = page.locator('form[aria-label="search by a field"]')
    search.locator('select[name="search"]').select_option("board_order:customer")
    search.locator('input[name="value"]').fill("cust-7")
    search.get_by_role("button", name="Search").click()
    # THEN both of its orders are listed, and no other
    expect(page).to_have_url(re.compile(r"/search/board_order\?field=customer&value=cust-7$"))
    ids = page.locator("td.id a").all_inner_texts()
    assert sorted(ids) == ["order-a", "order-b"], ids
    shot(page, screenshots, "search")
    # AND the tenant is a field too
    page.goto("/search/board_order?field=%40tenant&value=acme")
    assert page.locator("td.id a").all_inner_texts() == [retried]
    # AND a field the job does not declare is refused, naming those it does
    page.goto("/search/board_order?field=email&value=x")
    expect(page.locator("p.error")).to_contain_text("customer, @tenant")


def test_the_job_list_takes_a_time_range_and_says_what_queued_jobs_cannot_be(local, page, retried):
    status = get_status(retried, config=local.config)
    finished = status.finished_at or ""
    # WHEN the succeeded orders are listed from a second before this one finished
    since = finished[:19]
    page.goto(f"/jobs/board_order?state=succeeded&since={since}")
    ids = page.locator("td.id a").all_inner_texts()
    assert retried in ids, ids
    # AND until a second before it finished: it is not there
    page.goto(f"/jobs/board_order?state=succeeded&until={since}")
    assert retried not in page.locator("td.id a").all_inner_texts()
    # AND the page says queued jobs are counted, not listed, with each level's counts
    expect(page.locator('p[data-note="queued"]')).to_contain_text("no record until a worker starts it")
    expect(page.locator('table.queued tr[data-queue="board_order@high"] [data-col="waiting"]')).to_have_text(
        "0"
    )
    expect(page.locator('p[data-note="queued"] a')).to_have_attribute("href", "/schedules")


def test_a_workflows_page_shows_its_stages_members_and_callback(local, page, screenshots):
    # GIVEN a chord of two orders and a callback order
    members = [sig("board_order", {"customer": f"wf-{i}", "email": EMAIL}) for i in range(2)]
    wid = chord(group(members), sig("board_order", {"customer": "wf-done", "email": EMAIL})).enqueue(
        workflow_id="wf-orders", config=local.config
    )
    assert wait_until(lambda: get_workflow(wid, config=local.config).done, 60)
    status = get_workflow(wid, config=local.config)
    assert status.callback_job_id
    # WHEN its page opens
    page.goto(f"/workflows/{wid}")
    # THEN it shows its state, each stage's counts, its members by state, and the callback linked
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")
    expect(page.locator('tr[data-stage="0"] td').nth(2)).to_have_text("2")
    expect(page.locator('[data-stage-members="0"]')).to_contain_text("succeeded (2)")
    expect(page.locator('[data-field="callback"] a')).to_have_text(status.callback_job_id)
    # AND a member's page links back to it
    page.locator('[data-stage-members="0"] a').first.click()
    expect(page.locator('[data-field="workflow"] a')).to_have_text(wid)
    page.locator('[data-field="workflow"] a').click()
    expect(page).to_have_url(re.compile(f"/workflows/{wid}$"))
    shot(page, screenshots, "workflow")
    # AND its JSON twin answers the same
    answer = page.request.get(f"/api/workflows/{wid}").json()
    assert (answer["state"], answer["kind"], answer["callback_job_id"]) == (
        "succeeded",
        "chord",
        status.callback_job_id,
    )
    assert [len(s["members"]["succeeded"]) for s in answer["stages"]] == [2, 1]


def test_the_json_api_answers_what_the_pages_show_masked_the_same(local, page, retried):
    api = page.request
    # a job: everything its page shows, masked
    job = api.get(f"/api/job/{retried}").json()
    assert job["state"] == "succeeded" and job["tenant"] == "acme" and job["level"] == "normal"
    assert job["payload"] == {"customer": "cust-0042", "email": "*****", "fail_times": 1}
    assert [a["outcome"] for a in job["attempt_rows"]] == ["retrying", "succeeded"]
    assert "RuntimeError: warehouse cannot reach *****" in job["traceback"]
    assert job["enqueued_at"] and job["queue_wait_seconds"] is not None
    assert "status" not in job
    # the jobs page: what each job can be listed and searched by
    specs = {j["job"]: j for j in api.get("/api/jobs").json()["jobs"]}
    assert specs["board_order"]["searchable"] == ["customer", "@tenant"]
    # a job's list by state and time; a search; a workflow's page
    listed = api.get("/api/jobs/board_order?state=succeeded").json()
    assert retried in [i["link_id"] for i in listed["items"]]
    found = api.get("/api/search/board_order?field=%40tenant&value=acme").json()
    assert [i["link_id"] for i in found["items"]] == [retried]
    logs = api.get(f"/api/logs/{retried}?job=board_order").json()
    assert logs["status"] == "complete" and "packing order" in [line["message"] for line in logs["lines"]]
    # nothing of the address anywhere in the answers
    for path in (f"/api/job/{retried}", "/api/jobs/board_order?state=succeeded", f"/api/logs/{retried}"):
        assert EMAIL not in api.get(path).text()
    # errors: one JSON object with the page's status code
    for path, code in (
        ("/api/search/board_order?field=email&value=x", 400),
        ("/api/jobs/board_order?state=nope", 404),
        ("/api/jobs/no_such_job?state=dead", 404),
        ("/api/jobs/board_order?state=dead&since=yesterday", 400),
        ("/api/workflows/no-such-workflow", 404),
    ):
        answer = api.get(path)
        assert answer.status == code, (path, answer.status, answer.text())
        assert set(answer.json()) == {"error"} and answer.json()["error"], path


WORDS = "Call +1-555-0100 now"


@pytest.mark.parametrize(
    "path",
    [
        f"/jobs/board_order?state={WORDS}",
        f"/jobs/{WORDS}",
        f"/search/board_order?field={WORDS}&value=x",
        f"/search/{WORDS}?field=customer&value=x",
        f"/jobs/board_order?state=dead&since={WORDS}",
    ],
)
def test_an_error_about_a_link_never_repeats_its_words(page, path):
    # WHEN a link carries words of its own where the board expects a state, job, field or time
    response = page.goto(path)
    # THEN the page refuses it in the board's own words
    assert response is not None and response.status in (400, 404)
    expect(page.locator("p.error")).to_be_visible()
    assert "555-0100" not in page.locator("main").inner_text()


def test_an_id_holding_a_pii_value_is_shown_masked_and_linked_as_it_is(local, page):
    # GIVEN an order whose id holds its address (ids should not: the docs say so), failed once
    job_id = f"order-for-{EMAIL}"
    enqueue(
        "board_order",
        {"customer": "cust-pii-id", "email": EMAIL, "fail_times": 1},
        job_id=job_id,
        config=local.config,
    )
    assert wait_for(job_id, timeout_seconds=30, poll_seconds=0.1, config=local.config).state == "succeeded"
    # WHEN it is found by its customer
    page.goto("/search/board_order?field=customer&value=cust-pii-id")
    # THEN its id is shown masked, and its link is the id as it is
    link = page.locator("td.id a")
    expect(link).to_have_text("order-for-*****")
    link.click()
    expect(page.locator("h1 span.id")).to_have_text("order-for-*****")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")
    assert EMAIL not in page.locator("main").inner_text()
    # AND the API names it the same: masked, with the id as it is to link
    [item] = page.request.get("/api/search/board_order?field=customer&value=cust-pii-id").json()["items"]
    assert (item["job_id"], item["link_id"]) == ("order-for-*****", job_id)
