"""The board's pages and actions under the principal the template intends for operators (its
OperatorPolicy): every page reads what it shows without a refusal, and a redrive from the page works."""

from __future__ import annotations

import re
import time
import urllib.parse
import urllib.request

from handlers.emails import SendEmail
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.records import get_status
from tests.browser.board_server import BoardServer


def refusals(text: str) -> list[str]:
    return re.findall(r"AWS refused [A-Za-z]+: [A-Za-z.]+", text)


def test_the_operator_reads_every_page_and_redrives_from_the_board(deployment):
    from lambdajobs.board import create_app

    # GIVEN a dead email, a pending run_at job, and the board as the operator would start it
    dead = deployment.stack.enqueue("send_email", SendEmail(to="not-an-address", subject="s", body="b"))
    deployment.runner("send_email").drain()
    with deployment.acting_as(deployment.operator):
        config = StackConfig(stack=deployment.stack.stack, jobs=deployment.stack.jobs)
        app = create_app(config, secret=b"k", native_moves=False)
        board = BoardServer(app).__enter__()
        client = Client(board.url)
        # WHEN the operator opens each page
        for path, expected in (
            ("/", "send_email"),
            ("/jobs/send_email?state=dead", dead),
            (f"/job/{dead}", "PermanentError"),
            ("/dead-letters", "send_email"),
            ("/dead-letters/send_email", dead),
            ("/schedules", "daily_report"),
        ):
            page = client.get(path)
            # THEN it shows what it should, and no call of it was refused
            assert page.status_code == 200, (path, page.text[:500])
            assert expected in page.text, path
            assert refusals(page.text) == [], (path, refusals(page.text))
        # AND a redrive of that letter from its page goes through (found, sent back, deleted), in the
        # background: its progress page answers, and the message is back in its queue
        listing = client.get("/dead-letters/send_email").text
        token = re.search(r'name="csrf" value="([^"]+)"', listing)
        letter = re.search(r'name="redrive_job" value="([^"]+)"', listing)
        assert token and letter
        done = client.post("/dead-letters/send_email/redrive", {"csrf": token[1], "redrive_job": letter[1]})
        assert done.status_code == 200 and refusals(done.text) == [], refusals(done.text)
        deadline = time.monotonic() + 30
        while deployment.runner("send_email").depth() == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
        board.__exit__()
    assert deployment.runner("send_email").depth() == 1
    assert get_status(dead, config=deployment.stack.config).state == "dead"


class Page:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code, self.text = status_code, text


class Client:
    """GET and POST (a form; redirects followed) against the served board."""

    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str) -> Page:
        with urllib.request.urlopen(self.base + path, timeout=30) as response:
            return Page(response.status, response.read().decode())

    def post(self, path: str, form: dict[str, str]) -> Page:
        body = urllib.parse.urlencode(form).encode()
        with urllib.request.urlopen(
            urllib.request.Request(self.base + path, data=body), timeout=30
        ) as response:
            return Page(response.status, response.read().decode())
