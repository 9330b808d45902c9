"""`lambdajobs cancel` against moto: a job not run yet, a running one, a finished one, a workflow's
members, and one-line errors for bad input; its exit codes tell a script what happened."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from lambdajobs import JobContext, chain, sig
from lambdajobs.cli import CANCEL_FINISHED, app
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE

MAIL = {"to": "ada@example.com", "subject": "s", "body": "b"}


class Parts(BaseModel):
    parts: int = 5


def run(stack: TestStack, *args: str):
    return CliRunner().invoke(
        app, ["--stack", stack.stack, "--jobs", JOBS_PACKAGE, *args], env={"COLUMNS": "250"}
    )


def one_line_error(result, code: int = 1) -> str:
    text = result.stderr if result.stderr else result.output
    assert result.exit_code == code, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), text
    return lines[0]


def test_a_job_not_run_yet_is_cancelled_and_its_message_is_dropped(stack, sink):
    # GIVEN a job enqueued and not run yet
    job_id = stack.enqueue("deliver", MAIL, job_id="mail-1")
    # WHEN the operator cancels it
    result = run(stack, "cancel", job_id)
    # THEN the command says so and exits 0, and its record reads cancelled
    assert result.exit_code == 0, result.output
    assert (
        result.output.strip()
        == f"job '{job_id}' is cancelled: it has not run, and its message is dropped when it arrives."
    )
    assert stack.status(job_id).state == "cancelled"
    # AND its message, when it arrives, runs nothing
    stack.runner("deliver").drain()
    assert sink.sent == [] and stack.status(job_id).state == "cancelled"
    # AND a second cancel changes nothing: exit 3, saying it had finished
    again = run(stack, "cancel", job_id)
    assert again.exit_code == CANCEL_FINISHED == 3
    assert "has already finished (cancelled); nothing was changed." in again.output


def test_a_finished_job_is_left_as_it_is_with_exit_3(stack, sink):
    job_id = stack.enqueue("deliver", MAIL, job_id="mail-done")
    stack.runner("deliver").drain()
    assert stack.status(job_id).state == "succeeded"
    result = run(stack, "cancel", job_id)
    assert result.exit_code == CANCEL_FINISHED, result.output
    assert f"job '{job_id}' has already finished (succeeded)" in result.output
    assert stack.status(job_id).state == "succeeded"


def test_a_running_job_is_asked_to_stop_and_stops_at_its_next_check(stack, declare):
    # GIVEN a job that reports progress, cancelled by the operator while it runs
    answers = []

    def long(payload: Parts, ctx: JobContext) -> dict:
        for n in range(payload.parts):
            if n == 2:
                answers.append(run(stack, "cancel", ctx.job_id))
            ctx.progress(n * 20)
        return {"done": True}

    runner = declare(long, name="long", max_attempts=3)
    job_id = stack.enqueue("long", {})
    runner.drain()
    # THEN the command said it is asked to stop (exit 0), and the job ended cancelled at its check
    [answer] = answers
    assert answer.exit_code == 0, answer.output
    assert "is running: it is asked to stop" in answer.output
    status = stack.status(job_id)
    assert (status.state, status.progress) == ("cancelled", 20.0)


def test_with_the_job_named_a_run_at_jobs_schedule_is_deleted_too(stack):
    at = datetime.now(UTC) + timedelta(hours=2)
    job_id = stack.enqueue("deliver", MAIL, run_at=at, job_id="mail-later")
    scheduler = stack.client("scheduler")
    group = stack.provisioned.one_time_group
    assert len(scheduler.list_schedules(GroupName=group)["Schedules"]) == 1
    result = run(stack, "cancel", job_id, "--job", "deliver")
    assert result.exit_code == 0, result.output
    assert "deleted its one-time schedule" in result.output
    assert scheduler.list_schedules(GroupName=group)["Schedules"] == []


def test_an_id_is_printed_as_written_never_read_as_markup(stack):
    job_id = "[bold]order[/bold]-1"
    result = run(stack, "cancel", job_id)
    assert result.exit_code == 0, result.output
    assert f"job '{job_id}' is cancelled" in result.output


def test_a_workflow_is_cancelled_member_by_member_and_counted(stack):
    # GIVEN a chain of three steps, none run yet
    wid = chain(*(sig("step", {"name": n}) for n in "abc")).enqueue(workflow_id="wf-1", config=stack.config)
    # WHEN the operator cancels the workflow
    result = run(stack, "cancel", "--workflow", wid)
    # THEN every member is cancelled, and the counts say so
    assert result.exit_code == 0, result.output
    assert (
        result.output.strip()
        == "workflow wf-1: 3 cancelled, 0 asked to stop, 0 already finished (of 3 members)."
    )
    assert {stack.status(f"{wid}.{stage}.0").state for stage in range(3)} == {"cancelled"}
    # AND again: nothing left to cancel, exit 3
    again = run(stack, "cancel", "--workflow", wid)
    assert again.exit_code == CANCEL_FINISHED, again.output
    assert "0 cancelled, 0 asked to stop, 3 already finished" in again.output


@pytest.mark.parametrize(
    ("args", "expected", "code"),
    [
        (("cancel",), "name the job to cancel", 2),  # usage errors: 2, as the help says
        (("cancel", "mail-1", "--job", "nope"), "nope", 1),
        (("cancel", "--workflow", "wf-unknown"), "no workflow 'wf-unknown'", 1),
        (("cancel", "mail-1", "--workflow", "wf-1"), "pass no JOB_ID or --job", 2),
    ],
)
def test_bad_input_is_one_line_and_cancels_nothing(stack, args, expected, code):
    line = one_line_error(run(stack, *args), code)
    assert expected in line
    assert stack.status("mail-1").has_record is False


def test_status_of_a_cancelled_job_exits_6_even_with_wait(stack):
    assert run(stack, "cancel", "mail-9").exit_code == 0
    for args in (("status", "mail-9"), ("status", "mail-9", "--wait", "1")):
        result = run(stack, *args)
        assert result.exit_code == 6, (args, result.output)
        assert "cancelled" in result.output


def test_enqueue_takes_a_tenant_and_a_debounce(stack):
    from lambdajobs.runtime.config import resolve

    first = run(
        stack,
        "enqueue",
        "deliver",
        '{"to": "ada@example.com", "subject": "s", "body": "b"}',
        "--tenant",
        "acme",
        "--debounce",
        "ada",
        "--debounce-seconds",
        "1",
    )
    assert first.exit_code == 0, first.output
    sqs = resolve(stack.config).client("sqs")
    got = sqs.receive_message(
        QueueUrl=stack.runner("deliver").queues.queue_url,
        MessageSystemAttributeNames=["All"],
        WaitTimeSeconds=2,
    )["Messages"][0]
    assert got["Attributes"]["MessageGroupId"] == "acme"
    assert '"debounce":{"key":"ada"' in got["Body"]
    bad = run(stack, "enqueue", "deliver", "{}", "--debounce", "ada", "--debounce-seconds", "0")
    assert bad.exit_code == 1 and "out of range" in (bad.stderr or bad.output)
