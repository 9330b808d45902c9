"""The board in a real browser: one local stack (moto server, emulated event sources) per module,
with test-only jobs, the board served from a thread, and Debian's headless Chromium driven by
Playwright (its own browser downloads are never used: `executable_path` is the system's).

Jobs, declared in an isolated registry so no other test sees them:
- `board_mail` (priorities high/normal, `pii_fields=("to",)`, `uses=("job_stats",)`: the stack's job
  index is on): fails permanently, naming the address in its error, when the subject is "bounce";
- `board_signup` (`pii_fields=("email",)`): fails permanently while its address is in `BROKEN`;
- `board_flaky`: always fails permanently (the DLQ the purge tests empty);
- `board_digest`: a cron job (the schedules page, "trigger now").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs import PermanentError
from lambdajobs.local.stack import LocalStack
from lambdajobs.runtime.spec import cron, isolated_registry, job
from tests.browser.board_server import BoardServer
from tests.conftest import FAKE_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "reports" / "board"
CHROMIUM = os.environ.get("LAMBDAJOBS_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
#: Addresses `board_signup` refuses (a test puts one in, then takes it out to redrive).
BROKEN: set[str] = set()


class Mail(BaseModel):
    to: str
    subject: str


class Signup(BaseModel):
    email: str
    plan: str = "free"


class Nothing(BaseModel):
    n: int = 0


def board_mail(payload: Mail) -> dict[str, str]:
    if payload.subject == "bounce":
        # names the address on purpose: the worker must mask it in the record and the DLQ reason
        raise PermanentError(f"mailbox {payload.to} is full")
    return {"sent": payload.subject}


def board_signup(payload: Signup) -> dict[str, str]:
    if payload.email in BROKEN:
        raise PermanentError(f"cannot reach {payload.email}")
    return {"welcomed": payload.plan}


def board_flaky(payload: Nothing) -> None:
    raise PermanentError("this job never works")


def board_digest(payload: Nothing) -> dict[str, int]:
    return {"sent": payload.n}


def _specs() -> list[Any]:
    return [
        job(name="board_mail", pii_fields=("to",), priorities=("high", "normal"), uses=("job_stats",))(
            board_mail
        ).spec,
        job(name="board_signup", pii_fields=("email",))(board_signup).spec,
        job(name="board_flaky", max_attempts=2)(board_flaky).spec,
        cron("cron(0 9 * * ? *)", timezone="America/New_York", name="board_digest")(board_digest).spec,
    ]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A local stack of the board's test jobs, workers running (the cron never fires in a test:
    09:00 New York is far, and "trigger now" sends its own run)."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in FAKE_AWS_ENV.items():
            env.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
            env.delenv(key, raising=False)
        with isolated_registry():
            log = tmp_path_factory.mktemp("board") / "worker.log"
            with LocalStack(specs=_specs(), stack="board", log_file=log) as stack:
                stack.start_workers()
                yield stack


@pytest.fixture(scope="module")
def board(local: LocalStack) -> Iterator[BoardServer]:
    from lambdajobs.board import create_app

    with BoardServer(create_app(local.config, local.specs)) as server:
        yield server


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def screenshots() -> Path:
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS


@pytest.fixture
def page(browser: Any, board: BoardServer) -> Iterator[Any]:
    context = browser.new_context(base_url=board.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    opened = context.new_page()
    yield opened
    context.close()
