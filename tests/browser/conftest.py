"""The board in a real browser: one local stack (moto server, emulated event sources) per module,
with the test-only jobs of `tests.browser.board_jobs`, the board served from a thread, and Debian's
headless Chromium driven by Playwright (its own browser downloads are never used:
`executable_path` is the system's).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lambdajobs.local.stack import LocalStack
from lambdajobs.runtime.spec import load_jobs
from lambdajobs.testing import isolated_registry
from tests.browser.board_server import BoardServer
from tests.conftest import FAKE_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]
JOBS = "tests.browser.board_jobs"
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


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    """A local stack of the board's test jobs, workers running (the cron never fires in a test:
    09:00 New York is far, and "trigger now" sends its own run)."""
    with pytest.MonkeyPatch.context() as env:
        for key, value in FAKE_AWS_ENV.items():
            env.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL"):
            env.delenv(key, raising=False)
        with isolated_registry():  # the jobs are declared here only: no other test sees them
            log = tmp_path_factory.mktemp("board") / "worker.log"
            env.setenv("LAMBDAJOBS_WORKER_LOG", str(log))  # the board's logs panel reads it
            specs = load_jobs(JOBS)
            # the job index on, for the jobs pages (listing by state) and the chart: job_stats no
            # longer turns it on (issue 31)
            with LocalStack(JOBS, specs=specs, stack="board", log_file=log, job_index="finished") as stack:
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
def screenshots(request: pytest.FixtureRequest) -> Path:
    """The module's own folder of build/reports/board/ (test_board_layout.py: layout/), emptied when
    the module starts: a module clears its own old shots only, never another's (with -n 2 two
    modules write side by side)."""
    module = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_board").lstrip("_")
    folder = SCREENSHOTS / (module or "board")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser: Any, board: BoardServer) -> Iterator[Any]:
    context = browser.new_context(base_url=board.url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(15_000)
    opened = context.new_page()
    yield opened
    context.close()
