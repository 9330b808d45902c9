"""The board's defences, tried as an attacker would in headless Chromium and over plain HTTP: the Host
check on every bind (DNS rebinding), the CSRF token checked together with the request's Origin and
rotating, framing blocked, no URL-fed text in a banner, and DLQ pages that receive nothing.

docs/how-to/board-security.md describes each defence; each test here names the case it covers.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import expect
from starlette.responses import HTMLResponse

from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status, wait_for
from tests.browser.board_server import BoardServer

#: Words an attacker would like the board to say to its operator.
LURE = "Call 555-0100 now: your session expired"


def raw_get(url: str, host: str | None, path: str = "/") -> int:
    """GET `path` of the board at `url` with the Host header `host` (None: no Host header)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)
    try:
        connection.putrequest("GET", path, skip_host=True)
        if host is not None:
            connection.putheader("Host", host)
        connection.endheaders()
        return connection.getresponse().status
    finally:
        connection.close()


def later(local: LocalStack, job_id: str) -> str:
    """A signup due in an hour (a one-time schedule): no record until someone cancels it."""
    at = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    return enqueue("board_signup", {"email": "x@example.net"}, job_id=job_id, run_at=at, config=local.config)


def token_of(page: Any) -> str:
    token = page.locator('input[name="csrf"]').first.get_attribute("value")
    assert token, "the page has no form carrying the token"
    return str(token)


@contextmanager
def attacker_site(html: str) -> Iterator[str]:
    """Another origin serving `html` at its root: a page on 127.0.0.1 at another port (a real server:
    Chromium's local network checks block a page it takes for a public one from reaching loopback,
    which would hide what the board itself does)."""

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        await HTMLResponse(html)(scope, receive, send)

    with BoardServer(serve) as site:
        yield site.url


@pytest.fixture
def served(local: LocalStack, browser: Any) -> Iterator[tuple[Any, Any, Any]]:
    """A board of its own (its token clock can be moved), with a browser page on it: (app, server,
    page)."""
    from lambdajobs.board import create_app

    app = create_app(local.config, local.specs)
    with BoardServer(app) as server:
        context = browser.new_context(base_url=server.url)
        yield app, server, context.new_page()
        context.close()


# -- the Host check ---------------------------------------------------------------------------------


def test_a_foreign_host_name_is_refused_and_loopback_names_are_served(board):
    # GIVEN the board with its defaults (loopback names only)
    port = urlsplit(board.url).port
    # WHEN a rebound DNS name, or a name that only starts like a loopback one, is sent as Host
    # THEN 400; a loopback name (any port, any case) is served
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", None):
        assert raw_get(board.url, host) == 400, host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", "localhost"):
        assert raw_get(board.url, host) == 200, host


def test_there_is_no_way_to_switch_the_host_check_off(local):
    from lambdajobs.board import create_app

    # WHEN a board is asked to serve any host, or a pattern of hosts, or a name with a port
    # THEN it refuses to be created, saying what it takes (before: "*" switched the check off)
    for wildcard in (["*"], ["*.example.com"], ["board.example:8080"], [""]):
        with pytest.raises(ValueError, match="no port and no wildcard"):
            create_app(local.config, local.specs, allowed_hosts=wildcard)


def test_an_allowed_host_name_is_served_and_other_names_still_refused(local):
    from lambdajobs.board import create_app

    # GIVEN a board reached under a name of its own (`--allow-host board.example`)
    with BoardServer(create_app(local.config, local.specs, allowed_hosts=["Board.Example"])) as server:
        port = urlsplit(server.url).port
        # THEN that name and the loopback names are served, any other is refused
        assert raw_get(server.url, f"board.example:{port}") == 200
        assert raw_get(server.url, f"127.0.0.1:{port}") == 200
        assert raw_get(server.url, f"evil.example:{port}") == 400
        assert raw_get(server.url, f"board.example.evil.example:{port}") == 400


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_lambdajobs_board_on_every_address_still_checks_the_host(local):
    from tests.browser.conftest import ROOT
    from tests.dev_process import running_dev

    # GIVEN `lambdajobs board --host 0.0.0.0 --allow-host board.example` (every address: before,
    # any address but loopback switched the check off)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | local.environment()
    port = _free_port()
    command = [sys.executable, "-m", "lambdajobs.cli", "board", "--host", "0.0.0.0", "--port", str(port)]
    with running_dev([*command, "--allow-host", "board.example"], ROOT, env) as board:
        url = f"http://127.0.0.1:{port}"
        assert wait_until(lambda: _answers(url), 20), board.output
        # WHEN a page rebinding its own name to the board asks THEN it is refused
        assert raw_get(url, f"evil.example:{port}") == 400, board.output
        # AND the loopback names, and the name --allow-host gave, are served (a file: the check is
        # the same for every path, and a page's AWS reads are not what this test waits for)
        assert raw_get(url, f"127.0.0.1:{port}", "/static/board.css") == 200
        assert raw_get(url, f"board.example:{port}", "/static/board.css") == 200


def _answers(url: str) -> bool:
    try:
        return raw_get(url, urlsplit(url).netloc, "/static/board.css") == 200
    except OSError:
        return False


@pytest.mark.parametrize(
    ("given", "served"),
    [
        ("Board.Example.", "board.example"),
        ("10.0.0.5", "10.0.0.5"),
        ("::1", "[::1]"),
        ("[FE80::0001]", "[fe80::1]"),
    ],
)
def test_allowed_host_names_are_normalised(given, served):
    from lambdajobs.board.security import LOOPBACK_HOSTS, allowed_host_names

    # the loopback names always, then the given name once, as the Host check compares it
    names = allowed_host_names([given, given])
    assert names[: len(LOOPBACK_HOSTS)] == list(LOOPBACK_HOSTS) and names.count(served) == 1, names


@pytest.mark.parametrize(
    "given", ["*", "*.example.com", "board.example:8080", "http://board.example", "", "1.2.3"]
)
def test_allowed_host_names_refuse_wildcards_ports_and_urls(given):
    from lambdajobs.board.security import allowed_host_names

    with pytest.raises(ValueError, match="no port and no wildcard"):
        allowed_host_names([given])


# -- CSRF: the token with the Origin, rotating --------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "origin", "referer", "taken"),
    [
        ("127.0.0.1:8080", "http://127.0.0.1:8080", None, True),
        ("[::1]:8080", "http://[::1]:8080", None, True),
        ("localhost:8080", "http://LOCALHOST:8080", None, True),
        ("board.example", "https://board.example", None, True),  # a TLS proxy sends Host without port
        ("127.0.0.1:8080", None, "http://127.0.0.1:8080/dead-letters/x", True),
        ("127.0.0.1:8080", None, None, True),  # no browser: the token decides
        ("127.0.0.1:8080", "http://evil.example", None, False),
        ("127.0.0.1:8080", "http://127.0.0.1:3000", None, False),
        ("127.0.0.1:8080", "http://localhost:8080", None, False),  # another origin, same machine
        ("127.0.0.1:8080", "null", None, False),
        ("127.0.0.1:8080", "http://127.0.0.1:notaport", None, False),
        ("127.0.0.1:8080", None, "http://evil.example/x", False),
        ("127.0.0.1:8080", "http://evil.example", "http://127.0.0.1:8080/", False),
    ],
)
def test_which_origins_are_the_boards_own(host, origin, referer, taken):
    from lambdajobs.board.security import SameOrigin

    headers = [(b"host", host.encode())]
    headers += [(b"origin", origin.encode())] if origin else []
    headers += [(b"referer", referer.encode())] if referer else []
    assert SameOrigin.same_origin({"type": "http", "headers": headers}) is taken


def test_a_post_from_another_origin_is_refused_even_with_a_valid_token(local, page, board):
    # GIVEN a job due in an hour, and the token the board's page carries
    job_id = later(local, "signup-origin")
    page.goto(f"/jobs/board_signup/{job_id}")
    form = {"csrf": token_of(page), "job": "board_signup", "job_id": job_id}
    port = urlsplit(board.url).port
    other_port = _free_port()
    # WHEN the POST says (Origin, or Referer when there is no Origin) it comes from another site
    for headers in (
        {"Origin": "http://evil.example"},
        {"Origin": "null"},  # a sandboxed frame, or a page with no-referrer
        {"Origin": f"http://127.0.0.1:{other_port}"},  # another service on this machine
        {"Origin": f"http://evil.example:{port}"},
        {"Referer": "http://evil.example/cancel.html"},
        {"Origin": "http://evil.example", "Referer": f"{board.url}/jobs"},  # Origin decides
    ):
        response = page.request.post("/cancel", form=form, headers=headers, max_redirects=0)
        # THEN it is refused, and nothing changed
        assert response.status == 403, (headers, response.status)
        assert "not this board's" in response.text()
    assert get_status(job_id, config=local.config).has_record is False
    # AND the same token from the board's own origin acts (the Origin was what was wrong)
    response = page.request.post("/cancel", form=form, headers={"Origin": board.url}, max_redirects=0)
    assert response.status == 303, response.status
    assert get_status(job_id, config=local.config).state == "cancelled"


def test_a_cross_site_form_in_a_real_browser_is_refused_even_with_a_leaked_token(local, page, board):
    # GIVEN a job due in an hour, and a page on another site holding a valid token (leaked)
    job_id = later(local, "signup-cross-site")
    page.goto(f"/jobs/board_signup/{job_id}")
    token = token_of(page)
    attack = (
        f'<form method="post" action="{board.url}/cancel">'
        f'<input name="csrf" value="{token}"><input name="job" value="board_signup">'
        f'<input name="job_id" value="{job_id}"><button>win a prize</button></form>'
    )
    with attacker_site(attack) as attacker:
        page.goto(attacker)
        # WHEN the operator's browser submits it (the browser sends the attacker's Origin)
        with page.expect_response(f"{board.url}/cancel") as answer:
            page.get_by_role("button", name="win a prize").click()
    # THEN the board refuses it and the job is not cancelled
    assert answer.value.status == 403
    assert answer.value.request.headers["origin"] == attacker
    assert get_status(job_id, config=local.config).has_record is False


def test_the_boards_own_form_sends_its_origin_and_is_taken(local, page, board):
    # GIVEN a job due in an hour, on its page
    job_id = later(local, "signup-own-form")
    page.goto(f"/jobs/board_signup/{job_id}")
    sent: list[dict[str, str]] = []
    page.on("request", lambda r: sent.append(r.headers) if r.method == "POST" else None)
    # WHEN the operator presses the board's own Cancel button
    page.get_by_role("button", name="Cancel this job").click()
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "cancelled")
    # THEN the browser said where it came from (the board's Referrer-Policy keeps the real Origin;
    # under no-referrer it would be "null" and refused), and the board took it
    assert [h.get("origin") for h in sent] == [board.url], sent


def test_the_token_rotates_and_the_previous_windows_token_is_still_taken(local, served):
    app, server, page = served
    csrf = app.state.board.csrf
    now = csrf.clock()
    hour = csrf.WINDOW_SECONDS
    job_ids = [later(local, f"signup-rotate-{i}") for i in range(3)]
    # GIVEN the token of a page opened now
    page.goto(f"/jobs/board_signup/{job_ids[0]}")
    first = token_of(page)

    def cancel(job_id: str, token: str) -> Any:
        form = {"csrf": token, "job": "board_signup", "job_id": job_id}
        return page.request.post("/cancel", form=form, headers={"Origin": server.url}, max_redirects=0)

    try:
        # WHEN the next window begins THEN pages carry a new token, and the old one is still taken
        csrf.clock = lambda: now + hour
        page.goto(f"/jobs/board_signup/{job_ids[1]}")
        second = token_of(page)
        assert second != first
        assert cancel(job_ids[0], first).status == 303
        # WHEN one more window has passed THEN the first token is refused (stale), the second taken
        csrf.clock = lambda: now + 2 * hour
        refused = cancel(job_ids[2], first)
        assert refused.status == 403 and "token" in refused.text()
        assert get_status(job_ids[2], config=local.config).has_record is False
        assert cancel(job_ids[1], second).status == 303
    finally:
        csrf.clock = lambda: now
    assert [get_status(j, config=local.config).state for j in job_ids[:2]] == ["cancelled", "cancelled"]


def test_a_post_without_or_with_a_wrong_token_from_the_board_itself_is_refused(local, page, board):
    # GIVEN a job due in an hour; the POST comes from the board's own origin
    job_id = later(local, "signup-no-token")
    page.goto(f"/jobs/board_signup/{job_id}")
    good = token_of(page)
    for token in (None, "", "0" * len(good), good[:-1], good + "0"):
        form = {"job": "board_signup", "job_id": job_id, **({"csrf": token} if token is not None else {})}
        response = page.request.post("/cancel", form=form, headers={"Origin": board.url}, max_redirects=0)
        # THEN it is refused, and nothing changed
        assert response.status == 403 and "token" in response.text(), (token, response.status)
    assert get_status(job_id, config=local.config).has_record is False


def test_a_read_only_board_refuses_every_post_route(local, browser):
    from lambdajobs.board import create_app

    # GIVEN a read-only board, and a POST with the token and its own Origin to each of its actions
    app = create_app(local.config, local.specs, read_only=True)
    posts = [r for r in app.routes if "POST" in (getattr(r, "methods", None) or ())]
    assert len(posts) >= 4, posts
    with BoardServer(app) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        form = {"csrf": app.state.board.csrf.token, "all": "1", "expected": "1", "job": "board_digest"}
        for route in posts:
            path = route.path.replace("{key}", "board_flaky").replace("{job}", "board_digest")
            path = path.replace("{job_id:path}", "x").replace("{name}", "x").replace("{task}", "x")
            response = page.request.post(path, form=form, headers={"Origin": server.url}, max_redirects=0)
            # THEN each is refused
            assert response.status == 403, (path, response.status)
        context.close()


def test_no_page_can_be_framed(page, board):
    # GIVEN a page on another origin that frames the board, to trick a click on Purge
    attack = f'<iframe id="board" src="{board.url}/dead-letters" width="800" height="600"></iframe>'
    # WHEN it loads
    with attacker_site(attack) as attacker, page.expect_response(f"{board.url}/dead-letters") as framed:
        page.goto(attacker)
    # THEN the board says no framing (both headers) and the browser shows none of it
    headers = framed.value.headers
    assert headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    page.wait_for_timeout(300)
    [shown] = [f for f in page.frames if f != page.main_frame]
    assert shown.locator("header.top").count() == 0
    assert "Dead letters" not in shown.content()


# -- banners ------------------------------------------------------------------------------------------


PAGES_WITH_BANNERS = [
    "/",
    "/jobs",
    "/jobs/board_mail?state=dead",
    "/jobs/board_mail/mail-1",
    "/dead-letters",
    "/dead-letters/board_flaky",
    "/schedules",
]


@pytest.mark.parametrize("path", PAGES_WITH_BANNERS)
def test_a_notice_in_the_url_shows_nothing(page, path):
    # WHEN a link from elsewhere puts its own words in ?notice=
    joiner = "&" if "?" in path else "?"
    page.goto(f"{path}{joiner}notice={quote(LURE)}")
    # THEN the page shows no notice, and the words are nowhere in what it shows
    expect(page.locator("p.notice")).to_have_count(0)
    assert "555-0100" not in page.locator("body").inner_text()


#: URLs whose every part comes from a link: none may put its words in an error or notice banner.
URL_FED = {
    "unknown path": f"/{quote(LURE)}",
    "unknown job's list": f"/jobs/{quote(LURE)}",
    "unknown state": f"/jobs/board_mail?state={quote(LURE)}",
    "unknown job's record": f"/jobs/{quote(LURE)}/x",
    "unknown DLQ": f"/dead-letters/{quote(LURE)}",
    "unknown DLQ's purge": f"/dead-letters/{quote(LURE)}/purge",
    "unknown time range": f"/jobs/board_mail?state=dead&since={quote(LURE)}",
    "unknown search field": f"/search/board_mail?field={quote(LURE)}&value=x",
    "search time range": f"/search/board_mail?field=to&value=x&until={quote(LURE)}",
    "DLQ filter age": f"/dead-letters/board_flaky?older_than={quote(LURE)}",
    "DLQ filter error type": f"/dead-letters/board_flaky?error={quote(LURE)}",
    "error= in the URL": f"/?error={quote(LURE)}",
    "message= in the URL": f"/jobs?message={quote(LURE)}",
}


@pytest.mark.parametrize("path", list(URL_FED.values()), ids=list(URL_FED))
def test_no_banner_repeats_words_from_the_url(page, path):
    # WHEN a link names something that does not exist with words of its own
    page.goto(path)
    # THEN no banner (error, alert, notice) repeats those words as the board's own
    banners = page.locator('.error, .notice, [role="alert"], [role="status"]').all_inner_texts()
    assert not [b for b in banners if "555-0100" in b], banners


# -- viewing dead letters receives nothing --------------------------------------------------------------


def receive_count(local: LocalStack, key: str, job_id: str) -> int:
    """The ApproximateReceiveCount of `job_id`'s message in `key`'s DLQ (this read adds one; the
    message is made visible again at once)."""
    assert local.provisioned is not None
    sqs = local.config.client("sqs")
    url = local.provisioned.queues[key].dlq_url
    seen: list[dict[str, Any]] = []
    try:
        for _ in range(5):
            got = sqs.receive_message(
                QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"]
            ).get("Messages", [])
            seen.extend(got)
            for message in got:
                if _job_id_of(message["Body"]) == job_id:
                    return int(message["Attributes"]["ApproximateReceiveCount"])
            if not got:
                break
    finally:
        for message in seen:
            sqs.change_message_visibility(
                QueueUrl=url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
            )
    raise AssertionError(f"{job_id} is not in the DLQ of {key}")


def _job_id_of(body: str) -> str | None:
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found.get("id") if isinstance(found, dict) else None


@pytest.fixture(scope="module")
def dead_letter(local: LocalStack) -> str:
    job_id = enqueue("board_flaky", {"n": 1}, job_id="flaky-viewed", config=local.config)
    assert wait_for(job_id, 30, poll_seconds=0.1, config=local.config).state == "dead"
    assert wait_until(lambda: _in_dlq(local, job_id), 10)
    return job_id


def _in_dlq(local: LocalStack, job_id: str) -> bool:
    try:
        receive_count(local, "board_flaky", job_id)
    except AssertionError:
        return False
    return True


@pytest.mark.parametrize("read_only", [False, True], ids=["board", "read-only board"])
def test_viewing_a_dlq_five_times_leaves_its_receive_counts_as_they_were(
    local, browser, dead_letter, read_only
):
    from lambdajobs.board import create_app

    # GIVEN a dead letter, its receive count read once (that read adds one)
    before = receive_count(local, "board_flaky", dead_letter)
    with BoardServer(create_app(local.config, local.specs, read_only=read_only)) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        # WHEN the DLQ's pages are opened five times (as five cross-site GETs could)
        for _ in range(5):
            page.goto("/dead-letters")
            page.goto("/dead-letters/board_flaky")
            expect(page.locator("main")).to_contain_text(dead_letter)
        context.close()
    # THEN no view received the message: its count went up by our one read only
    assert receive_count(local, "board_flaky", dead_letter) == before + 1


def test_viewing_a_dead_jobs_page_five_times_leaves_its_receive_count_as_it_was(local, page, dead_letter):
    # GIVEN a dead letter, its receive count read once (that read adds one)
    before = receive_count(local, "board_flaky", dead_letter)
    # WHEN the dead job's page is opened five times
    for _ in range(5):
        page.goto(f"/jobs/board_flaky/{dead_letter}")
        expect(page.locator("[data-state]")).to_have_attribute("data-state", "dead")
    # THEN no view received its message
    assert receive_count(local, "board_flaky", dead_letter) == before + 1


def test_an_action_on_a_job_whose_id_holds_control_characters_names_the_real_id(local, page):
    # GIVEN a dead job whose id holds an escape sequence (a producer's choice, not the operator's)
    job_id = "esc-\x1b[31mRED\x1b[0m-end"
    enqueue("board_flaky", {"n": 2}, job_id=job_id, config=local.config)
    assert wait_for(job_id, 30, poll_seconds=0.1, config=local.config).state == "dead"
    assert wait_until(lambda: _in_dlq(local, job_id), 10)
    # WHEN its page and its DLQ's page are shown
    page.goto(f"/jobs/board_flaky/{quote(job_id, safe='')}")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "dead")
    # THEN what is read shows the escape written out, not the byte ...
    shown = page.locator("main").inner_text()
    assert "esc-\\x1b[31mRED" in shown and "\x1b" not in shown
    # ... AND what the forms send back is the real id, so an action acts on this job
    for value in page.locator('input[name="job_id"]').evaluate_all("els => els.map(e => e.value)"):
        assert value == job_id
    page.goto("/dead-letters/board_flaky")
    picks = page.locator('input[name="pick"]').evaluate_all("els => els.map(e => e.value)")
    assert job_id in picks
    with page.expect_navigation():
        page.locator('button[name="redrive_job"]').evaluate_all(
            "(els, id) => els.find(e => e.value === id).click()", job_id
        )
    assert wait_until(lambda: _redriven(local, job_id), 30)


def _redriven(local: LocalStack, job_id: str) -> bool:
    """The job ran again after the redrive (board_flaky dies again: it is back with a new attempt)."""
    return len(get_status(job_id, config=local.config).history) > 1
