"""The Cancel button of a job's page, in headless Chromium against the local stack: a job not run
yet is cancelled from its page (its one-time schedule deleted with it), a finished job offers no
button, and a read-only board shows none and refuses the POST."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from playwright.sync_api import expect

from lambdajobs.local.stack import LocalStack
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status, wait_for
from tests.browser.board_server import BoardServer
from tests.browser.conftest import SCREENSHOTS

CANCEL = "Cancel this job"


def later(local: LocalStack, job_id: str) -> str:
    """A signup scheduled an hour ahead (a one-time schedule): pending, no record yet."""
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    return enqueue(
        "board_signup", {"email": "later@example.net"}, job_id=job_id, run_at=at, config=local.config
    )


def schedules(local: LocalStack) -> list[str]:
    _, group, _ = local.config.scheduler_settings()
    found = local.config.client("scheduler").list_schedules(GroupName=group)["Schedules"]
    return [s["Name"] for s in found]


def test_a_pending_job_cancelled_from_its_page_reads_cancelled(local, page):
    # GIVEN a job that has not run yet (due in an hour), and its page
    job_id = later(local, "signup-cancel")
    scheduled = len(schedules(local))
    page.goto(f"/jobs/board_signup/{job_id}")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "pending")
    # WHEN the operator cancels it from there
    page.get_by_role("button", name=CANCEL).click()
    # THEN the page says what happened and reads cancelled, with no button left
    expect(page.locator("p.notice")).to_have_text(
        f"job '{job_id}' is cancelled: it has not run, and its message is dropped when it arrives."
    )
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "cancelled")
    expect(page.get_by_role("button", name=CANCEL)).to_have_count(0)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "job-cancelled.png"), full_page=True)
    # AND its record says so, and its one-time schedule is gone (the page named the job)
    assert get_status(job_id, config=local.config).state == "cancelled"
    assert len(schedules(local)) == scheduled - 1
    # AND its job's cancelled records list it, its state badge coloured as cancelled
    page.goto("/jobs/board_signup?state=cancelled")
    expect(page.locator('nav.tabs a[aria-current="page"]')).to_have_text("cancelled")
    row = page.locator("tr", has_text=job_id)
    expect(row.locator("span.state")).to_have_class("state state-cancelled")


def test_a_finished_job_has_no_cancel_button(local, page):
    # GIVEN a job that ran to the end
    enqueue("board_mail", {"to": "a@example.com", "subject": "hi"}, job_id="mail-done", config=local.config)
    assert (
        wait_for("mail-done", timeout_seconds=30, poll_seconds=0.1, config=local.config).state == "succeeded"
    )
    # WHEN its page opens THEN it offers no Cancel
    page.goto("/jobs/board_mail/mail-done")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")
    expect(page.get_by_role("button", name=CANCEL)).to_have_count(0)


def test_a_cancel_without_the_token_is_refused_and_changes_nothing(local, page):
    job_id = later(local, "signup-no-token")
    page.goto(f"/jobs/board_signup/{job_id}")
    expect(page.get_by_role("button", name=CANCEL)).to_have_count(1)
    for token in (None, "0" * 64):
        form = {"job": "board_signup", "job_id": job_id, **({"csrf": token} if token else {})}
        response = page.request.post("/cancel", form=form, max_redirects=0)
        assert response.status == 403 and "token" in response.text()
    assert get_status(job_id, config=local.config).has_record is False


def test_a_read_only_board_shows_no_cancel_and_refuses_it(local, browser: Any):
    from lambdajobs.board import create_app

    # GIVEN a job not run yet, and a board started with --read-only
    job_id = later(local, "signup-read-only")
    app = create_app(local.config, local.specs, read_only=True, secret=b"known")
    with BoardServer(app) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        # WHEN its page opens THEN it offers no Cancel
        page.goto(f"/jobs/board_signup/{job_id}")
        expect(page.locator("[data-state]")).to_have_attribute("data-state", "pending")
        expect(page.get_by_role("button", name=CANCEL)).to_have_count(0)
        # AND a POST, even with the token the secret gives, is refused and changes nothing
        form = {"csrf": app.state.board.csrf.token, "job": "board_signup", "job_id": job_id}
        response = page.request.post("/cancel", form=form, max_redirects=0)
        assert response.status == 403 and "read-only" in response.text()
        context.close()
    assert get_status(job_id, config=local.config).has_record is False
