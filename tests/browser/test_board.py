"""The board, driven in headless Chromium against a local stack: what an operator sees and does.

Each test saves a screenshot of the page it checks to build/reports/board/.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from playwright.sync_api import expect

from lambdajobs.board import render
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import peek_dead_letters, wait_until
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status, wait_for
from tests.browser.board_server import BoardServer

PII = "grace.hopper@navy.example"


def broken() -> set[str]:
    """The addresses board_signup refuses (its module is loaded by the `local` fixture)."""
    from tests.browser import board_jobs

    return board_jobs.BROKEN


def send(local: LocalStack, job: str, payload: dict[str, Any], job_id: str, **options: Any) -> str:
    return enqueue(job, payload, job_id=job_id, config=local.config, **options)


def finished(local: LocalStack, *job_ids: str) -> list[Any]:
    return [wait_for(j, timeout_seconds=30, poll_seconds=0.1, config=local.config) for j in job_ids]


def dlq_depth(local: LocalStack, key: str) -> int:
    assert local.provisioned is not None
    url = local.provisioned.queues[key].dlq_url
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    attrs = local.config.client("sqs").get_queue_attributes(QueueUrl=url, AttributeNames=names)
    return sum(int(attrs["Attributes"].get(n, 0)) for n in names)


def dead_job_ids(local: LocalStack, key: str) -> list[str | None]:
    assert local.provisioned is not None
    return [d.job_id for d in peek_dead_letters(local.provisioned.queues[key].dlq_url, config=local.config)]


def shot(page: Any, screenshots: Any, name: str) -> None:
    page.screenshot(path=str(screenshots / f"{name}.png"), full_page=True)


@pytest.fixture(scope="module")
def workload(local: LocalStack) -> dict[str, int]:
    """board_mail: 4 sent at normal priority and 1 at high, 2 bounced (dead at once)."""
    ids = [
        send(local, "board_mail", {"to": f"user{i}@example.com", "subject": "hi"}, f"mail-{i}")
        for i in range(4)
    ]
    ids.append(
        send(local, "board_mail", {"to": "vip@example.com", "subject": "hi"}, "mail-vip", priority="high")
    )
    for i in range(2):
        ids.append(
            send(local, "board_mail", {"to": f"gone{i}@example.com", "subject": "bounce"}, f"bounce-{i}")
        )
    states = [s.state for s in finished(local, *ids)]
    assert states.count("succeeded") == 5 and states.count("dead") == 2, states
    return {"succeeded": 5, "dead": 2}


def test_the_overview_shows_the_counts_of_a_known_workload(page, workload, screenshots):
    # GIVEN board_mail ran 5 jobs that succeeded and 2 that died (both at normal priority)
    # WHEN the overview opens
    page.goto("/")
    mail = page.locator('tr[data-queue="board_mail@high"]')  # the job's first line: its highest level
    normal = page.locator('tr[data-queue="board_mail"]')
    # THEN the job's finished counts over the last hour and day are the workload's
    expect(mail.locator('[data-col="succeeded-hour"]')).to_have_text("5")
    expect(mail.locator('[data-col="dead-hour"]')).to_have_text("2")
    expect(mail.locator('[data-col="succeeded-day"]')).to_have_text("5")
    expect(mail.locator('[data-col="dead-day"]')).to_have_text("2")
    # AND each priority level has its own queue line: the dead are in the normal level's DLQ
    expect(normal.locator('[data-col="dlq"]')).to_have_text("2")
    expect(mail.locator('[data-col="dlq"]')).to_have_text("0")
    expect(normal.locator('[data-col="waiting"]')).to_have_text("0")
    # AND the chart of the last hour counts the same runs
    expect(mail.locator("svg")).to_have_attribute("aria-label", "5 succeeded, 2 failed in the last hour")
    assert mail.locator("svg rect.ok").count() >= 1 and mail.locator("svg rect.failed").count() >= 1
    # AND the cron job's next fire time is shown
    expect(page.locator('tr[data-queue="board_digest"] td.fire')).to_contain_text("EST")
    shot(page, screenshots, "overview")

    # WHEN the job's dead records are listed (the job index is on: the `local` fixture's)
    page.get_by_role("link", name="Jobs", exact=True).click()
    shot(page, screenshots, "jobs")
    page.goto("/jobs/board_mail?state=dead")
    # THEN both bounced jobs are there, newest first, with their masked reason
    ids = page.locator("td.id a").all_inner_texts()
    assert sorted(ids) == ["bounce-0", "bounce-1"], ids
    expect(page.locator("td.reason").first).to_contain_text("mailbox ***** is full")
    assert "gone0@example.com" not in page.content()
    shot(page, screenshots, "job-list")


def test_a_dead_jobs_page_shows_its_reason_with_the_pii_value_masked(local, page, screenshots):
    # GIVEN a signup that died with its address (a PII field) in its error and its payload
    broken().add(PII)
    try:
        [status] = finished(local, send(local, "board_signup", {"email": PII}, "signup-1"))
    finally:
        broken().discard(PII)
    assert status.state == "dead"
    # WHEN its page opens
    page.goto("/jobs/board_signup/signup-1")
    # THEN it shows the state and the reason with the address masked (the DLQ message is not received
    # to show a page: its payload comes from the record, H4's tests check its masking)
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "dead")
    expect(page.locator("tr.bad td.reason")).to_have_text("PermanentError: cannot reach *****")
    # AND the address itself is nowhere in the page
    assert PII not in page.content()
    shot(page, screenshots, "job-dead")


def test_redriving_a_dead_job_from_its_page_makes_it_succeed(local, page, screenshots):
    # GIVEN a signup that died while its address was refused, and is accepted again now
    address = "ada.lovelace@analytical.example"
    broken().add(address)
    [status] = finished(local, send(local, "board_signup", {"email": address}, "signup-2"))
    assert status.state == "dead"
    broken().discard(address)
    page.goto("/jobs/board_signup/signup-2")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "dead")
    # WHEN the operator redrives it from its page
    page.get_by_role("button", name="Redrive this job").click()
    # THEN the page says what moved, watches the new run, and shows it succeed (no reload)
    expect(page.locator("p.notice")).to_contain_text("moved 1 message from the DLQ of board_signup")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded", timeout=30_000)
    assert address not in page.content()
    # AND the job's record (the one status reader) says so: a second attempt, from attempt 1
    after = get_status("signup-2", config=local.config)
    assert (after.state, after.attempts, after.result) == ("succeeded", 1, {"welcomed": "free"})
    assert "signup-2" not in dead_job_ids(local, "board_signup")
    shot(page, screenshots, "job-redriven")


def test_a_parked_jobs_page_shows_its_state_wake_up_and_steps(local, page, screenshots):
    from lambdajobs import signal

    # GIVEN a durable job that ran its step and waits for signal "approval" (for 10 minutes at most)
    send(local, "board_approval", {}, "approval-1")
    assert wait_until(lambda: get_status("approval-1", config=local.config).state == "waiting_signal", 30)
    status = get_status("approval-1", config=local.config)
    # WHEN its page opens
    page.goto("/jobs/board_approval/approval-1")
    # THEN it reads as waiting for that signal, with when it wakes, and its step with its duration
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "waiting_signal")
    expect(page.locator("[data-state]")).to_have_text("waiting for signal approval")
    wake = page.locator('[data-field="wake_at"]')
    expect(wake).to_contain_text(f"{render.when(status.wake_at)} (in ")
    expect(wake).to_contain_text("signal approval wakes it sooner")
    draft = page.locator('table.steps tr[data-step="draft"]')
    expect(draft.locator("td.name")).to_have_text("draft")
    expect(draft.locator("td.duration")).to_have_text(re.compile(r"^(\d{3} ms|\d+\.\d s)$"))
    shot(page, screenshots, "job-waiting-signal")
    # AND the signal wakes it: the page follows it to its end (no reload), its step still listed
    assert signal("approval-1", "approval", {"ok": True}, config=local.config).woke
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded", timeout=30_000)
    expect(page.locator('table.steps tr[data-step="draft"]')).to_have_count(1)
    # AND its job's records can be asked for by the new states (this stack's index says what it holds)
    page.goto("/jobs/board_approval?state=waiting_signal")
    expect(page.locator('nav.tabs a[aria-current="page"]')).to_have_text("waiting_signal")
    expect(page.locator("p.info")).to_contain_text("job_index='all'")


def test_the_dead_letters_page_masks_reasons_and_redrives_a_selection(local, page, screenshots):
    # GIVEN two signups dead in their DLQ; one address is accepted again
    keep, fixed = "keep.me.out@example.org", "fixed.now@example.org"
    broken().update({keep, fixed})
    finished(
        local,
        send(local, "board_signup", {"email": keep}, "signup-keep"),
        send(local, "board_signup", {"email": fixed}, "signup-fixed"),
    )
    broken().discard(fixed)
    try:
        # WHEN the DLQ's page lists them (from their dead records: nothing received)
        page.goto("/dead-letters")
        shown = page.locator('tr[data-queue="board_signup"] [data-col="dlq"]')
        expect(shown).to_have_text(str(dlq_depth(local, "board_signup")))
        shot(page, screenshots, "dead-letters")
        page.goto("/dead-letters/board_signup")
        ours = page.locator("tbody.letter").filter(
            has=page.locator('a:text-matches("^signup-(keep|fixed)$")')
        )
        expect(ours).to_have_count(2)
        # THEN reasons are there, masked; the addresses are not in the page at all
        expect(ours.first.locator("td.reason")).to_have_text("cannot reach *****")
        content = page.content()
        assert keep not in content and fixed not in content
        shot(page, screenshots, "dead-letter-queue")
        # WHEN only the fixed one is selected and redriven
        page.locator('tbody.letter:has(a:text-is("signup-fixed")) input[type=checkbox]').check()
        page.get_by_role("button", name="Redrive selected").click()
        # THEN its progress ends with it alone moved; it succeeds; the other one stays
        expect(page.locator("p.progress")).to_have_attribute("data-done", "yes", timeout=20_000)
        expect(page.locator("[data-line]")).to_contain_text("moved 1 message")
        assert wait_until(lambda: get_status("signup-fixed", config=local.config).state == "succeeded", 30)
        assert get_status("signup-keep", config=local.config).state == "dead"
        left = dead_job_ids(local, "board_signup")
        assert "signup-keep" in left and "signup-fixed" not in left, left
    finally:
        broken().discard(keep)


def test_purge_asks_first_naming_the_count_and_cancelling_deletes_nothing(local, page, screenshots):
    # GIVEN three dead letters in board_flaky's DLQ
    finished(local, *(send(local, "board_flaky", {"n": i}, f"flaky-{i}") for i in range(3)))
    assert wait_until(lambda: dlq_depth(local, "board_flaky") == 3, 10)
    page.goto("/dead-letters/board_flaky")
    # WHEN the operator asks to purge
    page.get_by_role("link", name="Purge…").click()
    # THEN the board asks first, naming the count
    expect(page.locator("p.question")).to_have_text(
        "Delete all 3 messages in the DLQ of board_flaky? This cannot be undone."
    )
    shot(page, screenshots, "purge-confirm")
    # WHEN they cancel THEN nothing is deleted
    page.get_by_role("link", name="Cancel").click()
    expect(page).to_have_url(f"{page.url.split('/dead-letters')[0]}/dead-letters/board_flaky")
    assert dlq_depth(local, "board_flaky") == 3
    # WHEN they confirm THEN all three go, and the page says so
    page.get_by_role("link", name="Purge…").click()
    page.get_by_role("button", name="Delete 3 messages").click()
    expect(page.locator("p.notice")).to_have_text("purged the DLQ of board_flaky (3 messages)")
    assert wait_until(lambda: dlq_depth(local, "board_flaky") == 0, 10)


def test_a_post_without_the_token_is_refused_and_changes_nothing(local, page):
    # GIVEN a dead letter in board_flaky's DLQ, and the board's page (its forms carry the token)
    finished(local, send(local, "board_flaky", {"n": 9}, "flaky-csrf"))
    assert wait_until(lambda: dlq_depth(local, "board_flaky") == 1, 10)
    page.goto("/dead-letters/board_flaky")
    token = page.locator('input[name="csrf"]').first.get_attribute("value")
    form = {"expected": "1", "all": "1"}
    # WHEN a POST comes without the token, or with a wrong one
    for sent in (form, {**form, "csrf": "0" * len(token or "")}, {**form, "csrf": ""}):
        for action in ("purge", "redrive", "receive"):
            response = page.request.post(f"/dead-letters/board_flaky/{action}", form=sent, max_redirects=0)
            # THEN it is refused, and nothing changed
            assert response.status == 403, (action, sent, response.status)
            assert "token" in response.text()
    assert dlq_depth(local, "board_flaky") == 1
    assert get_status("flaky-csrf", config=local.config).state == "dead"
    # AND the same POST with the page's token does act (the token is what was missing): the job
    # runs again (and dies again: board_flaky never works)
    before = get_status("flaky-csrf", config=local.config).updated_at or ""
    response = page.request.post(
        "/dead-letters/board_flaky/redrive", form={**form, "csrf": token or ""}, max_redirects=0
    )
    assert response.status == 303, response.status
    page.goto(response.headers["location"])  # the redrive's progress
    expect(page.locator("p.progress")).to_have_attribute("data-done", "yes", timeout=20_000)
    expect(page.locator("[data-line]")).to_contain_text("moved 1 message")
    assert wait_until(lambda: (get_status("flaky-csrf", config=local.config).updated_at or "") > before, 20)


def test_the_schedules_page_shows_cron_jobs_and_pending_runs_and_triggers_one(local, page, screenshots):
    # GIVEN a one-time run a producer scheduled an hour ahead
    later = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    send(local, "board_signup", {"email": "later@example.net"}, "signup-later", run_at=later)
    # WHEN the schedules page opens
    page.goto("/schedules")
    # THEN the cron job shows its expression, time zone and next three fire times
    digest = page.locator('tr[data-job="board_digest"]')
    expect(digest).to_contain_text("cron(0 9 * * ? *)")
    expect(digest).to_contain_text("America/New_York")
    expect(digest.locator("td.when")).to_contain_text("09:00")
    assert digest.locator("td.when").inner_text().count("09:00") == 3
    # AND the pending one-time run, with its time and job id
    pending = page.locator("tr", has_text="signup-later")
    expect(pending).to_contain_text(f"{later:%Y-%m-%d %H:%M:%S}Z")
    expect(pending).to_contain_text("board_signup")
    shot(page, screenshots, "schedules")
    # WHEN the operator triggers the cron job now
    digest.get_by_role("button", name="Trigger now").click()
    # THEN its run (this minute's slot) starts and succeeds, shown on its job page
    expect(page.locator("p.notice")).to_contain_text("sent board_digest@")
    expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded", timeout=30_000)


def test_a_read_only_board_shows_no_actions_and_refuses_them(local, browser):
    from lambdajobs.board import create_app

    # GIVEN a dead letter, and a board started with --read-only
    finished(local, send(local, "board_flaky", {"n": 7}, "flaky-read-only"))
    assert wait_until(lambda: "flaky-read-only" in dead_job_ids(local, "board_flaky"), 10)
    depth = dlq_depth(local, "board_flaky")
    app = create_app(local.config, local.specs, read_only=True, secret=b"known")
    with BoardServer(app) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        # WHEN the DLQ's page opens THEN it lists the messages but offers no action
        page.goto("/dead-letters/board_flaky")
        expect(page.locator("tbody.letter")).to_have_count(depth)
        expect(page.locator(".badge")).to_have_text("read-only")
        assert page.locator('form[method="post"]').count() == 0
        assert page.get_by_role("button", name=re.compile("Redrive|Receive|Purge|Find")).count() == 1
        assert page.locator("a", has_text="Purge").count() == 0
        assert page.locator('input[name="csrf"]').count() == 0
        # AND a POST, even with the token the secret gives, is refused and changes nothing
        token = app.state.board.csrf.token
        for action in ("purge", "redrive", "receive"):
            response = page.request.post(
                f"/dead-letters/board_flaky/{action}",
                form={"csrf": token, "expected": str(depth), "all": "1"},
                max_redirects=0,
            )
            assert response.status == 403 and "read-only" in response.text()
        context.close()
    assert dlq_depth(local, "board_flaky") == depth


def test_a_missing_stack_is_one_line_in_the_page_not_a_traceback(local, browser):
    from lambdajobs.board import create_app
    from lambdajobs.runtime.config import StackConfig

    # GIVEN a board pointed at a stack that is not deployed at that endpoint
    config = StackConfig(
        stack="missing",
        region=local.config.region,
        endpoint_url=local.endpoint,
        access_key_id="local",
        secret_access_key="local",
    )
    with BoardServer(create_app(config, local.specs)) as server:
        context = browser.new_context(base_url=server.url)
        page = context.new_page()
        for path in ("/", "/dead-letters", "/jobs/board_mail", "/jobs/board_mail/mail-1"):
            # WHEN a page opens THEN it says so in one line, and names the fix
            response = page.goto(path)
            assert response is not None and response.status == 502, path
            error = page.locator("p.error")
            expect(error).to_have_count(1)
            expect(error).to_contain_text("stack 'missing' not found")
            assert "Traceback" not in page.content()
        context.close()


def test_with_the_job_index_off_the_jobs_page_says_how_to_turn_it_on(local, page, board, workload):
    from lambdajobs.board import create_app

    # GIVEN the same stack read as one whose job index is off (it indexes dead jobs only), after the
    # workload that ran mail-vip (without `workload`, run alone, mail-vip was never sent: "pending")
    with BoardServer(create_app(local.config.with_resources(job_index="off"), local.specs)) as server:
        # WHEN a job's records by state are asked for
        page.goto(f"{server.url}/jobs/board_mail?state=succeeded")
        # THEN the page says how to turn the index on, and a job is still found by its id
        expect(page.locator("p.info")).to_contain_text("needs the job index")
        expect(page.locator("p.info")).to_contain_text("job_index='finished'")
        page.goto(f"{server.url}/jobs/board_mail/mail-vip")
        expect(page.locator("[data-state]")).to_have_attribute("data-state", "succeeded")


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_lambdajobs_board_serves_the_stack_the_cli_options_name(local, browser):
    import os
    import subprocess
    import sys
    import urllib.request

    from tests.browser.conftest import ROOT
    from tests.dev_process import running_dev

    # GIVEN the local stack's variables, as `lambdajobs dev` prints them (endpoint, stack, jobs)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | local.environment()
    port = _free_port()
    command = [sys.executable, "-m", "lambdajobs.cli", "board", "--port", str(port), "--read-only"]
    # WHEN `lambdajobs board --read-only` starts
    with running_dev(command, ROOT, env) as board:
        url = f"http://127.0.0.1:{port}"
        assert f"stack 'board' on {local.endpoint}, at {url}/ (read-only)" in board.output, board.output
        assert wait_until(lambda: _answers(url), 20), board.output
        context = browser.new_context(base_url=url)
        page = context.new_page()
        # THEN it shows that stack's jobs, read-only
        page.goto("/")
        expect(page.locator('tr[data-queue="board_flaky"] td.name')).to_have_text("board_flaky")
        expect(page.locator(".badge")).to_have_text("read-only")
        # AND it answers only to loopback names (a rebound DNS name is refused)
        request = urllib.request.Request(f"{url}/", headers={"Host": f"attacker.example:{port}"})
        try:
            urllib.request.urlopen(request, timeout=5)
            raise AssertionError("a foreign Host header was served")
        except urllib.error.HTTPError as refused:
            assert refused.code == 400
        context.close()
        assert board.stop() == 0, board.output
        assert "stopped." in board.output
    # AND without its extra it says in one line how to install it
    hide = "import sys; sys.modules['uvicorn'] = None; sys.argv = ['lambdajobs', 'board']; "
    out = subprocess.run(
        [sys.executable, "-c", hide + "from lambdajobs.cli import main; main()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert out.stderr.strip() == "error: lambdajobs board needs uvicorn: pip install 'lambdajobs[board]'"


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/static/board.css", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False
