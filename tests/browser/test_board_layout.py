"""Every board page at a phone's width and a laptop's: nothing wider than a 390 px screen (wide tables
scroll inside themselves, long ids wrap), one column under 768 px, a favicon; a screenshot of each
page at 1280 and 390 px in build/reports/board/layout/ (<page>-1280.png, <page>-390.png).

`PAGES` is the one list of the board's pages: a new page goes there, with what it needs seeded by
`seeded` below.
"""

from __future__ import annotations

from typing import Any

import pytest

from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status, wait_for

#: A job id as long as some are (an order, a time, a customer, a retry), with no space to break at.
LONG_ID = "order-2026-12-02T13:57:00.123Z-customer-7f3a9c2e4b1d4e0f9a8b7c6d5e4f3a2b-invoice-" + "9" * 48
PHONE, LAPTOP = 390, 1280
ORDER = {"customer": "cust-layout", "email": "ada@example.org", "fail_times": 1}

#: (name of the screenshot, path): every page of the board, as `seeded` leaves the stack.
PAGES: list[tuple[str, str]] = [
    ("overview", "/"),
    ("jobs", "/jobs"),
    ("job-list-dead", "/jobs/board_mail?state=dead"),
    ("job-list-succeeded", "/jobs/board_mail?state=succeeded"),
    ("job-dead", f"/jobs/board_mail/{LONG_ID}"),
    ("job-succeeded", "/jobs/board_mail/layout-sent"),
    ("job-waiting-signal", "/jobs/board_approval/layout-approval"),
    ("job-retried", "/jobs/board_order/layout-order"),
    ("workflow", "/workflows/wf-layout"),
    ("job-unknown", "/job/no-such-job"),
    ("logs", f"/logs/{LONG_ID}"),
    ("search", "/search/board_order?field=customer&value=cust-layout"),
    ("search-no-field", "/search/board_mail"),
    ("dead-letters", "/dead-letters"),
    ("dlq", "/dead-letters/board_mail"),
    ("dlq-flaky", "/dead-letters/board_flaky"),
    ("purge", "/dead-letters/board_flaky/purge"),
    ("schedules", "/schedules"),
    ("not-found", "/no/such/page"),
]

#: The elements wider than the screen, deepest first: what a failure names.
OVERFLOWING = """(width) => {
  const right = (e) => e.getBoundingClientRect().right;
  const wide = [...document.querySelectorAll('body *')].filter(e => right(e) > width + 0.5);
  const deepest = wide.filter(e => !wide.some(o => o !== e && e.contains(o)));
  const named = (e) => e.tagName.toLowerCase() + (e.className ? '.' + e.className : '');
  return deepest.slice(0, 8).map(e => `${named(e)} (${Math.round(right(e))} px)`);
}"""


@pytest.fixture(scope="module")
def seeded(local: LocalStack) -> None:
    """A dead job with a long id (its DLQ letter, its error), one sent, one waiting for a signal, an
    order that failed once (payload, attempts, traceback, logs; found by its customer), a workflow,
    a DLQ of board_flaky, and a one-time run an hour ahead."""
    from datetime import UTC, datetime, timedelta

    from lambdajobs.runtime.workflow import chord, get_workflow, group, sig

    config = local.config
    sent = [
        enqueue("board_mail", {"to": "ok@example.com", "subject": "hi"}, job_id="layout-sent", config=config),
        enqueue("board_mail", {"to": "gone@example.com", "subject": "bounce"}, job_id=LONG_ID, config=config),
        enqueue("board_flaky", {"n": 1}, job_id="layout-flaky", config=config),
        enqueue("board_order", ORDER, job_id="layout-order", config=config),
    ]
    members = [sig("board_order", {**ORDER, "fail_times": 0, "customer": f"wf-{i}"}) for i in range(2)]
    wid = chord(group(members), sig("board_order", {**ORDER, "fail_times": 0})).enqueue(
        workflow_id="wf-layout", config=config
    )
    enqueue("board_approval", {}, job_id="layout-approval", config=config)
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    enqueue("board_signup", {"email": "later@example.net"}, job_id="layout-later", run_at=at, config=config)
    states = [wait_for(j, timeout_seconds=30, poll_seconds=0.1, config=config).state for j in sent]
    assert states == ["succeeded", "dead", "dead", "succeeded"], states
    assert wait_until(lambda: get_workflow(wid, config=config).done, 60)
    assert wait_until(lambda: get_status("layout-approval", config=config).state == "waiting_signal", 30)


def open_at(browser: Any, url: str, width: int) -> Any:
    context = browser.new_context(base_url=url, viewport={"width": width, "height": 900})
    context.set_default_timeout(15_000)
    return context.new_page()


@pytest.mark.parametrize(("name", "path"), PAGES, ids=[name for name, _ in PAGES])
def test_every_page_fits_a_phone_and_is_shot_at_both_widths(browser, board, seeded, screenshots, name, path):
    for width in (LAPTOP, PHONE):
        page = open_at(browser, board.url, width)
        try:
            # WHEN the page opens at this width
            response = page.goto(path)
            assert response is not None, path
            assert response.status < 500, (path, response.status, page.locator(".error").all_inner_texts())
            page.wait_for_timeout(200)  # what the page loads after itself (htmx) has landed
            # THEN (on a phone) it is no wider than the screen
            if width == PHONE:
                wide = page.evaluate("document.documentElement.scrollWidth")
                assert wide <= PHONE, (
                    f"{path} is {wide} px wide at {PHONE} px: {page.evaluate(OVERFLOWING, PHONE)}"
                )
            page.screenshot(path=str(screenshots / f"{name}-{width}.png"), full_page=True)
        finally:
            page.context.close()


def test_under_768_px_the_header_is_one_column(browser, board):
    # WHEN the overview opens on a phone
    page = open_at(browser, board.url, PHONE)
    try:
        page.goto("/")
        # THEN the header's parts stand one under the other, each starting at the same left edge
        boxes = [page.locator(f"header.top {part}").bounding_box() for part in (".brand", "nav", ".search")]
        assert all(boxes), boxes
        lefts = {round(b["x"]) for b in boxes if b}
        tops = [b["y"] for b in boxes if b]
        assert len(lefts) == 1 and tops == sorted(tops) and len(set(tops)) == 3, boxes
        # AND the search box takes the column's whole width
        search, header = page.locator("header.top .search").bounding_box(), page.locator("header.top")
        inner = header.evaluate("h => h.clientWidth - parseFloat(getComputedStyle(h).paddingLeft) * 2")
        assert search and search["width"] >= inner - 1, (search, inner)
    finally:
        page.context.close()
    # AND at a laptop's width they stand in one row
    page = open_at(browser, board.url, LAPTOP)
    try:
        page.goto("/")
        tops = {round(page.locator(f"header.top {p}").bounding_box()["y"]) for p in ("nav", ".search")}
        assert len(tops) == 1, tops
    finally:
        page.context.close()


def test_every_page_has_a_favicon_and_no_page_asks_for_something_missing(browser, board, seeded):
    page = open_at(browser, board.url, LAPTOP)
    missing: list[str] = []
    page.on("response", lambda r: missing.append(r.url) if r.status == 404 else None)
    try:
        for _, path in PAGES:
            if path in ("/no/such/page", "/job/no-such-job"):
                continue
            page.goto(path)
            # THEN it names its icon, and the icon is there (an SVG: the CSP's img-src 'self')
            icon = page.locator('link[rel="icon"]').get_attribute("href")
            assert icon, path
            answer = page.request.get(icon)
            assert answer.status == 200 and answer.headers["content-type"].startswith("image/svg+xml")
        assert missing == [], missing
    finally:
        page.context.close()
