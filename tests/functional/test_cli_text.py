"""Untrusted text in the CLI: job ids, error messages and bodies come from producers and jobs, so
every command prints them as text (never rich markup) with control characters shown as escapes
(`lambdajobs.text.visible`): an id cannot break a listing, restyle itself or drive the terminal."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from typer.testing import CliRunner

from lambdajobs import PermanentError
from lambdajobs.cli import STATUS_DEAD, app
from lambdajobs.runtime.producer import enqueue
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE
from tests.jobs import messages
from tests.jobs.messages import Message

UNBALANCED = "[/]unbalanced"
STYLED = "[bold green]refund-approved[/bold green]"
#: SGR colours, an OSC window title and a BEL: what an attacker would send a terminal.
ESCAPES = "esc-\x1b[31mRED\x1b[0m-\x1b]0;pwned\x07-end"
ESCAPES_SHOWN = "esc-\\x1b[31mRED\\x1b[0m-\\x1b]0;pwned\\x07-end"
ERROR_MARKUP = "provider said [/red] and [bold]no[/bold]"


class MarkupSink:
    """Fails every send with an error whose text is rich markup (and a control character)."""

    def send(self, to: str, subject: str, body: str) -> str:
        raise PermanentError(ERROR_MARKUP + " \x1b[2J")


@pytest.fixture
def texts() -> Iterator[TestStack]:
    """A stack (its index holding finished jobs) whose `deliver` jobs, with hostile ids, are dead
    with a hostile error."""
    previous = messages.set_sink(MarkupSink())
    try:
        with TestStack(JOBS_PACKAGE, stack="texts", job_index="finished") as stack:
            for job_id in (UNBALANCED, STYLED, ESCAPES):
                enqueue("deliver", Message(to="ada@example.com", subject="s", body="b"), job_id=job_id)
            runner = stack.runner("deliver")
            runner.drain()
            assert runner.depth(dlq=True) == 3
            yield stack
    finally:
        messages.set_sink(previous)


def run(stack: TestStack, *args: str):
    return CliRunner().invoke(
        app, ["--stack", stack.stack, "--jobs", JOBS_PACKAGE, *args], env={"COLUMNS": "250"}
    )


def assert_shown_as_text(output: str) -> None:
    """Every hostile text of `texts` printed as written, and no control character reached the output."""
    assert "\x1b" not in output and "\x07" not in output, repr(output)
    flat = "".join(output.split())  # a cell may wrap: compare without white space
    for expected in (UNBALANCED, STYLED, ESCAPES_SHOWN):
        assert "".join(expected.split()) in flat, (expected, output)


@pytest.mark.parametrize("limit", ["1", "3", "50"])
def test_jobs_lists_ids_and_errors_that_look_like_markup_at_any_limit(texts, limit):
    listed = run(texts, "jobs", "deliver", "--state", "dead", "--limit", limit)
    assert listed.exit_code == 0, listed.output
    assert "MarkupError" not in listed.output
    assert listed.output.count("PermanentError") == min(int(limit), 3)
    assert "[/red]" in listed.output and "[bold]no[/bold]" in listed.output


def test_jobs_shows_every_hostile_id_as_written(texts):
    listed = run(texts, "jobs", "deliver", "--state", "dead")
    assert listed.exit_code == 0, listed.output
    assert_shown_as_text(listed.output)
    assert "\\x1b[2J" in listed.output  # the error's own control character, escaped


@pytest.mark.parametrize("job_id", [UNBALANCED, STYLED, ESCAPES])
def test_status_prints_the_id_and_error_as_text(texts, job_id):
    shown = run(texts, "status", job_id)
    assert shown.exit_code == STATUS_DEAD, shown.output
    assert "\x1b" not in shown.output and "\x07" not in shown.output, repr(shown.output)
    flat = "".join(shown.output.split())
    expected = ESCAPES_SHOWN if job_id == ESCAPES else job_id
    assert "".join(expected.split()) in flat, shown.output
    assert "[/red]" in shown.output and "\\x1b[2J" in shown.output


def test_dlq_list_shows_hostile_ids_and_reasons_as_text(texts):
    listed = run(texts, "dlq", "list", "deliver")
    assert listed.exit_code == 0, listed.output
    assert_shown_as_text(listed.output)
    assert "[/red]" in listed.output


def test_dlq_show_shows_a_hostile_id_as_text(texts):
    sqs = texts.client("sqs")
    url = texts.provisioned.queues["deliver"].dlq_url
    letters = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]
    for letter in letters:
        shown = run(texts, "dlq", "show", "deliver", letter["MessageId"])
        assert shown.exit_code == 0, shown.output
        assert "\x1b" not in shown.output and "\x07" not in shown.output, repr(shown.output)
        assert "[/red]" in shown.output
    flat = "".join(
        "".join(run(texts, "dlq", "show", "deliver", m["MessageId"]).output.split()) for m in letters
    )
    assert "".join(UNBALANCED.split()) in flat and "".join(STYLED.split()) in flat
    assert "esc-\\x1b[31mRED" in flat or "esc-\\u001b[31mRED" in flat


def test_enqueue_prints_the_id_it_was_given_as_written(texts):
    sent = run(texts, "enqueue", "deliver", '{"to": "a@b.co", "subject": "s", "body": "b"}', "--id", STYLED)
    assert sent.exit_code == 0, sent.output
    assert sent.output.strip() == STYLED


def test_workflow_with_a_markup_id_is_shown_as_written(texts):
    from lambdajobs.runtime.workflow import group, sig

    wid = group([sig("deliver", {"to": "a@b.co", "subject": "s", "body": "b"})]).enqueue(
        workflow_id="[/]flow"
    )
    shown = run(texts, "workflow", wid)
    assert shown.exit_code == 0, shown.output
    assert "workflow [/]flow" in shown.output


def test_an_error_line_with_control_characters_is_escaped(texts):
    failed = run(texts, "workflow", "nope-\x1b]0;title\x07")
    assert failed.exit_code == 1
    assert "\x1b" not in failed.output and "nope-\\x1b]0;title\\x07" in failed.output


def test_json_output_carries_no_control_character(texts):
    listed = run(texts, "jobs", "deliver", "--state", "dead", "--json")
    assert listed.exit_code == 0, listed.output
    assert "\x1b" not in listed.stdout
    ids = {item["job_id"] for item in json.loads(listed.stdout)["states"][0]["items"]}
    assert ids == {UNBALANCED, STYLED, ESCAPES}


def test_every_table_title_cell_and_caption_is_text():
    """What `lambdajobs dev`'s live table and every other table go through: the CLI's console."""
    import io

    from rich.table import Table

    from lambdajobs.cli import TextConsole, as_text, styled

    buffer = io.StringIO()
    table = Table(title=f"stack {UNBALANCED}")
    table.add_column("job")
    table.add_row(STYLED)
    table.add_row(ESCAPES)
    table.add_row(as_text(("ok", "green"), " ", ERROR_MARKUP, " :red_circle:"))
    table.caption = styled(f"init: {ERROR_MARKUP} \x1b]0;x\x07")
    TextConsole(file=buffer, width=250).print(table)
    shown = buffer.getvalue()
    assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
    for expected in (
        f"stack {UNBALANCED}",
        STYLED,
        ESCAPES_SHOWN,
        ERROR_MARKUP,
        ":red_circle:",
        "\\x1b]0;x\\x07",
    ):
        assert expected in shown, (expected, shown)
