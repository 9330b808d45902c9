"""The operator CLI against moto: queues, status, dead letters (list, show, redrive, purge), cron,
and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lambdajobs.cli import LISTABLE, STATUS_DEAD, STATUS_NO_RECORD, STATUS_TIMED_OUT, app
from lambdajobs.runtime import aws
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_PRIOR_ATTEMPTS, ATTR_REDRIVEN, ATTR_SETTLE
from lambdajobs.testing import TestStack
from tests.functional.conftest import JOBS_PACKAGE
from tests.functional.durable_jobs.steps import WORK
from tests.jobs.messages import Message

ROOT = Path(__file__).resolve().parents[2]
#: The durable test jobs (`approver` waits for signal "approval", `six_steps` runs 4-minute steps
#: in 5-minute invocations), on a stopped clock.
DURABLE_JOBS = "tests.functional.durable_jobs"
START = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def cli(stack):
    runner = CliRunner()

    def run(*args: str, input: str | None = None):
        # wide enough that table cells do not wrap ids and reasons across lines
        return runner.invoke(
            app, ["--stack", stack.stack, "--jobs", JOBS_PACKAGE, *args], input=input, env={"COLUMNS": "250"}
        )

    return run


@pytest.fixture
def durable() -> Iterator[TestStack]:
    """A stack of the durable test jobs on the harness's clock (a step of 4 minutes moves it 4
    minutes), its job index holding every state."""
    with TestStack(DURABLE_JOBS, stack="durable-cli", clock=START, job_index="all") as stack:
        WORK.clock, WORK.ran, WORK.crash_after = stack.clock, [], set()
        try:
            yield stack
        finally:
            WORK.clock = None


def durable_cli(stack: TestStack, *args: str):
    return CliRunner().invoke(
        app, ["--stack", stack.stack, "--jobs", DURABLE_JOBS, *args], env={"COLUMNS": "250"}
    )


def table_lines(output: str) -> list[str]:
    """A rich table's lines, borders dropped and spaces collapsed."""
    return [" ".join(line.replace("│", " ").split()) for line in output.splitlines()]


def one_line_error(result) -> str:
    text = result.stderr if result.stderr else result.output
    assert result.exit_code != 0
    assert "Traceback" not in result.output
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), text
    return lines[0]


def kill_messages(runner, sink, clock, *, transient: list[str], invalid: list[str]) -> None:
    """Send messages that die: `transient` ones fail on every attempt, `invalid` ones at once."""
    sink.flaky = {to: 99 for to in transient}
    for to in transient + invalid:
        enqueue("deliver", Message(to=to, subject="s", body="b"), job_id=f"mail-{to}")
    for _ in range(runner.spec.max_attempts):
        runner.drain()
        clock.shift(runner.spec.backoff.max_seconds + 1)
    assert runner.depth(dlq=True) == len(transient) + len(invalid)


def test_redrive_by_error_type_moves_only_those_and_they_then_succeed(cli, deliver_runner, sink, clock):
    # GIVEN a DLQ with 3 jobs killed by a provider outage and 2 with invalid addresses
    transient = [f"u{i}@example.com" for i in range(3)]
    kill_messages(deliver_runner, sink, clock, transient=transient, invalid=["bad-1", "bad-2"])
    listed = cli("dlq", "list", "deliver")
    assert listed.exit_code == 0 and listed.output.count("TransientError") == 3
    clock.shift(1)  # a peek makes messages visible "now"; moto's frozen clock needs a tick to show them
    # WHEN the provider is back and the operator redrives the transient failures only
    sink.flaky = {}
    result = cli("dlq", "redrive", "deliver", "--error", "TransientError")
    # THEN those 3 go back to the queue, the 2 invalid ones stay in the DLQ
    assert result.exit_code == 0, result.output
    assert "moved 3 of 5" in result.output
    assert deliver_runner.depth(dlq=True) == 2
    clock.shift(1)
    assert {json.loads(m["Body"])["id"] for m in deliver_runner.dlq_messages()} == {
        "mail-bad-1",
        "mail-bad-2",
    }
    # AND they then succeed, body and id intact
    deliver_runner.drain()
    assert sorted(sink.sent) == transient
    assert {get_status(f"mail-{to}").state for to in transient} == {"succeeded"}


def test_redrive_dry_run_and_filters_move_nothing_unwanted(cli, deliver_runner, sink, clock):
    kill_messages(deliver_runner, sink, clock, transient=["t@example.com"], invalid=["bad-1"])
    dry = cli("dlq", "redrive", "deliver", "--dry-run")
    assert dry.exit_code == 0 and "would move 2 of 2" in dry.output
    assert deliver_runner.depth(dlq=True) == 2 and deliver_runner.depth() == 0
    clock.shift(1)
    young = cli("dlq", "redrive", "deliver", "--older-than", "30d")
    assert young.exit_code == 0 and "moved 0 of 2" in young.output
    clock.shift(1)
    limited = cli("dlq", "redrive", "deliver", "--limit", "1")
    assert limited.exit_code == 0 and "moved 1 of 2" in limited.output
    assert deliver_runner.depth(dlq=True) == 1 and deliver_runner.depth() == 1


def test_an_interrupted_redrive_loses_nothing(cli, deliver_runner, sink, clock, monkeypatch):
    # GIVEN 25 dead letters, and an SQS client whose second send batch fails mid-redrive
    kill_messages(deliver_runner, sink, clock, transient=[], invalid=[f"bad-{i}" for i in range(25)])
    real = aws.client("sqs")

    class Flaky:
        calls = 0

        def __getattr__(self, name):
            return getattr(real, name)

        def send_message_batch(self, **kwargs):
            Flaky.calls += 1
            if Flaky.calls == 2:
                raise ConnectionResetError("connection reset by peer")
            return real.send_message_batch(**kwargs)

    aws.set_client("sqs", Flaky())
    monkeypatch.setattr(aws, "reset_clients", lambda: None)  # keep the faulty client through the CLI
    result = cli("dlq", "redrive", "deliver")
    # THEN the command fails with one line, and every message is in the queue or back in the DLQ
    assert "ConnectionResetError" in one_line_error(result)
    aws.set_client("sqs", real)
    clock.shift(1)  # released messages are visible from "now": let the frozen clock tick
    in_queue = {json.loads(m["Body"])["id"] for m in _drain_bodies(deliver_runner.queues.queue_url)}
    in_dlq = {json.loads(m["Body"])["id"] for m in _drain_bodies(deliver_runner.queues.dlq_url)}
    assert len(in_queue) == 10 and len(in_dlq) == 15
    assert in_queue | in_dlq == {f"mail-bad-{i}" for i in range(25)}


def _drain_bodies(url: str) -> list[dict]:
    sqs, seen = aws.client("sqs"), {}
    while True:
        got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=600).get(
            "Messages", []
        )
        if not got:
            return list(seen.values())
        seen.update({m["MessageId"]: m for m in got})


def test_purge_asks_first(cli, deliver_runner, sink, clock):
    kill_messages(deliver_runner, sink, clock, transient=[], invalid=["bad-1", "bad-2"])
    declined = cli("dlq", "purge", "deliver", input="n\n")
    assert declined.exit_code == 1 and deliver_runner.depth(dlq=True) == 2
    purged = cli("dlq", "purge", "deliver", "--yes")
    assert purged.exit_code == 0 and "2 messages" in purged.output
    assert deliver_runner.depth(dlq=True) == 0


def test_dlq_show_gives_reason_attempts_and_body(cli, deliver_runner, sink, clock):
    kill_messages(deliver_runner, sink, clock, transient=[], invalid=["bad-1"])
    [letter] = deliver_runner.dlq_messages()
    clock.shift(1)
    shown = cli("dlq", "show", "deliver", letter["MessageId"])
    assert shown.exit_code == 0, shown.output
    assert "PermanentError" in shown.output and "invalid recipient address" in shown.output
    # the body's pii_fields masked as the board masks them: the field, and its value in the id
    assert '"to": "*****"' in shown.output and '"mail-*****"' in shown.output
    assert "bad-1" not in shown.output
    clock.shift(1)  # the show released what it received: visible again "now" once the clock moves
    by_job_id = cli("dlq", "show", "deliver", "--job-id", "mail-bad-1", "--json")
    assert by_job_id.exit_code == 0, by_job_id.output
    assert json.loads(by_job_id.stdout)["body"]["payload"]["to"] == "*****"
    missing = cli("dlq", "show", "deliver", "--id", "no-such-message")
    assert "not in the DLQ" in one_line_error(missing)
    assert "--id MESSAGE_ID or --job-id" in one_line_error(cli("dlq", "show", "deliver"))


def test_queues_enqueue_and_status(cli, deliver_runner, sink, clock):
    # The CLI is given only the stack's name: it finds the queues through the stack's manifest.
    sent = cli(
        "enqueue",
        "deliver",
        '{"to": "ada@example.com", "subject": "Hi", "body": "Hello"}',
        "--id",
        "cli-1",
    )
    assert sent.exit_code == 0 and sent.output.strip() == "cli-1"
    pending = cli("status", "cli-1")  # nothing is written at enqueue: no record yet
    assert pending.exit_code == STATUS_NO_RECORD and "pending" in pending.output, pending.output
    deliver_runner.drain()
    status = cli("status", "cli-1")
    assert status.exit_code == 0 and "succeeded" in status.output and "provider_id" in status.output
    queues = cli("queues")
    assert queues.exit_code == 0
    for job in ("deliver", "encode", "digest"):
        assert job in queues.output


def test_status_exit_codes_tell_a_script_how_the_job_is(cli, deliver_runner, sink, clock):
    # GIVEN a job that died at once (an invalid address), one that succeeded, one not started
    kill_messages(deliver_runner, sink, clock, transient=[], invalid=["bad-1"])
    enqueue("deliver", Message(to="ada@example.com", subject="s", body="b"), job_id="fine-1")
    deliver_runner.drain()
    enqueue("deliver", Message(to="bob@example.com", subject="s", body="b"), job_id="later-1")
    # WHEN a script asks for each, with and without --wait
    dead, dead_waited = cli("status", "mail-bad-1"), cli("status", "mail-bad-1", "--wait", "5")
    fine, fine_waited = cli("status", "fine-1"), cli("status", "fine-1", "--wait", "5")
    unknown, waited_out = cli("status", "no-such-id"), cli("status", "later-1", "--wait", "0.2")
    # THEN the exit code says it, and the table is shown all the same
    assert (dead.exit_code, dead_waited.exit_code) == (STATUS_DEAD, STATUS_DEAD), dead.output
    assert "dead" in dead.output and "PermanentError" in dead.output
    assert (fine.exit_code, fine_waited.exit_code) == (0, 0) and "succeeded" in fine_waited.output
    assert unknown.exit_code == STATUS_NO_RECORD and "no record" in unknown.output
    assert waited_out.exit_code == STATUS_TIMED_OUT and "pending" in waited_out.stdout
    assert waited_out.stderr.strip() == "error: job 'later-1' is still pending after 0.2 s (--wait)."
    # AND --help lists the codes
    shown = CliRunner().invoke(app, ["status", "--help"], env={"COLUMNS": "200"}).output
    assert all(f"{code} " in shown for code in range(6)), shown


def test_status_shows_an_error_as_written_never_as_markup(cli, stack, sink):
    from lambdajobs.runtime.errors import FunctionInitError
    from lambdajobs.runtime.worker import Worker

    # GIVEN a job dead with an error whose text has brackets (the init error names [tool.lambdajobs])
    error = FunctionInitError("declare it in [tool.lambdajobs] dependencies; [/red] [bold]x[/bold]")
    enqueue("deliver", Message(to="ada@example.com", subject="s", body="b"), job_id="init-1")
    stack.runner("deliver", worker=Worker("deliver", config=stack.config, init_error=error)).drain()
    # THEN status prints it as it is
    shown = cli("status", "init-1")
    assert shown.exit_code == STATUS_DEAD, shown.output
    text = " ".join(shown.output.split())
    assert "[tool.lambdajobs] dependencies; [/red] [bold]x[/bold]" in text, shown.output


def test_signal_wakes_a_waiting_job_with_its_data_and_a_finished_job_refuses_it(durable):
    # GIVEN a job parked in ctx.wait_for_signal("approval")
    runner = durable.runner("approver")
    job_id = durable.enqueue("approver", {"timeout_seconds": 3600})
    runner.attempt()
    assert durable.status(job_id).state == "waiting_signal"
    # WHEN the operator sends the signal with its data
    sent = durable_cli(durable, "signal", job_id, "approval", "--data", '{"approved": true, "by": "ada"}')
    # THEN the command says it woke the job, and the job goes on with that data
    assert sent.exit_code == 0, sent.output
    assert sent.output.strip() == (
        f"woke job {job_id}: it was waiting for signal approval, and continues with its data."
    )
    runner.attempt()
    status = durable.status(job_id)
    assert status.state == "succeeded", status
    assert status.result == {"decision": {"approved": True, "by": "ada"}}
    # AND the finished job refuses another signal in one line, with a non-zero exit
    refused = one_line_error(durable_cli(durable, "signal", job_id, "approval", "--data", "false"))
    assert f"job '{job_id}' has finished (succeeded); signal 'approval' is refused" in refused


def test_a_signal_for_a_job_not_waiting_yet_is_kept_for_its_wait(durable):
    # WHEN a signal goes to a job that has not started
    kept = durable_cli(durable, "signal", "early-1", "approval", "--data", '{"approved": true}')
    # THEN the command says it is kept, and why the job was not woken
    assert kept.exit_code == 0, kept.output
    assert kept.output.startswith("kept signal approval for job early-1: it has not started")
    # AND its status reads as no run's record yet (exit 3), saying a signal waits for it
    status = durable_cli(durable, "status", "early-1")
    assert status.exit_code == 3 and "signals" in status.output, status.output
    # AND the job, once it runs, gets the data at its wait
    durable.enqueue("approver", {}, job_id="early-1")
    durable.runner("approver").attempt()
    assert durable.status("early-1").result == {"decision": {"approved": True}}


@pytest.mark.parametrize(
    "args,expected",
    [
        (("--data", "{approved: yes}"), "malformed --data JSON"),
        (("--data", "[1,"), "--data '{\"approved\": true}'"),
    ],
)
def test_signal_with_bad_data_is_one_line_saying_what_to_pass(durable, args, expected):
    assert expected in one_line_error(durable_cli(durable, "signal", "some-job", "approval", *args))
    assert durable.status("some-job").has_record is False  # nothing was sent


def test_a_bad_signal_name_is_one_line(durable):
    assert "signal name" in one_line_error(durable_cli(durable, "signal", "some-job", "x" * 101))


def test_status_of_a_parked_job_shows_its_state_wake_up_and_steps(durable):
    # GIVEN a job of 4-minute steps in 5-minute invocations, sleeping after its first step until a
    # fresh invocation continues it; and a job waiting for a signal
    job_id = durable.enqueue("six_steps", {})
    durable.runner("six_steps").attempt()
    waiting = durable.enqueue("approver", {"timeout_seconds": 3600})
    durable.runner("approver").attempt()
    # WHEN the operator asks for their status
    sleeping, signal_wait = durable_cli(durable, "status", job_id), durable_cli(durable, "status", waiting)
    # THEN each shows its state as people read it, when it continues, and the steps done with their
    # durations
    assert sleeping.exit_code == 0, sleeping.output
    lines = table_lines(sleeping.output)
    assert "state sleeping" in lines, sleeping.output
    assert "wake_at 2030-01-01T09:04:01.000Z (in 1s)" in lines
    assert "suspensions 1 (sleeps, signal waits, continuations)" in lines
    assert "steps (1 done)" in lines
    assert "1 encode-1 4m 00s 2030-01-01T09:04:00.000Z" in lines
    assert signal_wait.exit_code == 0, signal_wait.output
    lines = table_lines(signal_wait.output)
    assert "state waiting for signal approval" in lines, signal_wait.output
    assert "wake_at 2030-01-01T10:04:00.000Z (in 60m)" in lines
    assert "1 draft 0 ms 2030-01-01T09:04:00.000Z" in lines
    # AND --wait, run out, says what the job still is
    waited = durable_cli(durable, "status", waiting, "--wait", "0.1")
    assert waited.exit_code == STATUS_TIMED_OUT
    assert f"'{waiting}' is still waiting for signal approval after 0.1 s" in one_line_error(waited)


def test_jobs_lists_sleeping_and_waiting_jobs_with_their_wake_up(durable):
    sleeper = durable.enqueue("six_steps", {})
    durable.runner("six_steps").attempt()
    waiter = durable.enqueue("approver", {"timeout_seconds": 3600})
    durable.runner("approver").attempt()
    sleeping = durable_cli(durable, "jobs", "six_steps", "--state", "sleeping")
    assert sleeping.exit_code == 0, sleeping.output
    assert f"{sleeper} 1 2030-01-01T09:00:00.000Z sleeping, wakes 2030-01-01T09:04:01.000Z" in table_lines(
        sleeping.output
    ), sleeping.output
    waiting = durable_cli(durable, "jobs", "approver", "--state", "waiting_signal")
    assert waiting.exit_code == 0, waiting.output
    expected = (
        f"{waiter} 1 2030-01-01T09:04:00.000Z waiting for signal approval, wakes 2030-01-01T10:04:00.000Z"
    )
    assert expected in table_lines(waiting.output), waiting.output
    # AND every state lists them under their own heading (the index holds them all here)
    every = durable_cli(durable, "jobs", "approver")
    assert "approver: sleeping" in every.output and "approver: waiting_signal" in every.output


def test_cron_list_and_trigger(cli, stack, clock):
    listed = cli("cron", "list")
    assert listed.exit_code == 0 and "digest" in listed.output and "America/New_York" in listed.output
    # the clock reads 12:00 UTC = 07:00 in New York: the next run is today at 09:00 EST (14:00Z)
    assert "2026-11-29 09:00 EST (14:00Z), 2026-11-30 09:00 EST (14:00Z)" in listed.output
    triggered = cli("cron", "trigger", "digest")
    assert triggered.exit_code == 0 and triggered.output.strip() == "digest@2026-11-29T12:00:00Z"
    body = json.loads(
        aws.client("sqs").receive_message(QueueUrl=stack.provisioned.queues["digest"].queue_url)["Messages"][
            0
        ]["Body"]
    )
    assert body["id"] == "digest@2026-11-29T12:00:00Z" and body["payload"]["recipients"]
    assert "not a cron job" in one_line_error(cli("cron", "trigger", "deliver"))


@pytest.mark.parametrize(
    "args,expected",
    [
        (("enqueue", "nope", "{}"), "unknown job 'nope'"),
        (("enqueue", "deliver", "{not json"), "malformed payload JSON"),
        (("enqueue", "deliver", "[1, 2]"), "must be a JSON object"),
        (("enqueue", "deliver", '{"to": 1}'), "invalid Message payload"),
        (
            (
                "enqueue",
                "deliver",
                '{"to": "a@b.co", "subject": "s", "body": "b"}',
                "--run-at",
                "tomorrow",
            ),
            "ISO 8601",
        ),
        (("dlq", "list", "nope"), "unknown job 'nope'"),
        (("dlq", "redrive", "deliver", "--older-than", "a while"), "duration"),
    ],
)
def test_bad_input_is_one_line(cli, args, expected):
    assert expected in one_line_error(cli(*args))


def test_unknown_stack_is_one_line(stack):
    result = CliRunner().invoke(app, ["--stack", "no-such-stack", "queues"])
    assert "stack 'no-such-stack' not found" in one_line_error(result)


def test_no_credentials_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_CONFIG_FILE=str(tmp_path / "none"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL="http://127.0.0.1:9",  # never real AWS, even if credentials turned up
    )
    out = subprocess.run(
        [sys.executable, "-m", "lambdajobs.cli", "--jobs", JOBS_PACKAGE, "queues"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().startswith("error: no AWS credentials found"), out.stderr


def test_redrive_splits_large_messages_across_batches(cli, deliver_runner, clock):
    # GIVEN two dead letters of 600 KB each: together above SendMessageBatch's 1 MiB
    sqs = aws.client("sqs")
    for i in range(2):
        body = json.dumps(
            {
                "v": 1,
                "job": "deliver",
                "id": f"big-{i}",
                "payload": {"to": "a@b.co", "subject": "s", "body": "x" * 600_000},
            }
        )
        sqs.send_message(QueueUrl=deliver_runner.queues.dlq_url, MessageBody=body)
    # WHEN they are redriven THEN both move, in two batches
    result = cli("dlq", "redrive", "deliver")
    assert result.exit_code == 0, result.output
    assert "moved 2 of 2" in result.output
    assert deliver_runner.depth() == 2 and deliver_runner.depth(dlq=True) == 0


def test_a_body_nested_too_deeply_is_dead_lettered_with_its_reason_and_listed(cli, deliver_runner, clock):
    # GIVEN a message whose body is JSON nested 10,000 deep (json.loads raises RecursionError)
    body = "[" * 10_000 + "]" * 10_000
    aws.client("sqs").send_message(QueueUrl=deliver_runner.queues.queue_url, MessageBody=body)
    # WHEN it is delivered THEN it goes to the DLQ at once (no retries), with the reason
    outcome = deliver_runner.poll()
    assert outcome.failed_ids == [] and deliver_runner.depth() == 0
    [dead] = deliver_runner.dlq_messages()
    assert dead["MessageAttributes"]["lambdajobs.error_type"]["StringValue"] == "EnvelopeError"
    assert "nested too deeply" in dead["MessageAttributes"]["lambdajobs.reason"]["StringValue"]
    # AND the operator's list counts it as unrecorded (no job id, no record), and receiving shows it
    # with that reason instead of crashing on it
    counted = cli("dlq", "list", "deliver")
    assert counted.exit_code == 0 and "1 unrecorded" in counted.output, counted.output
    listed = cli("dlq", "list", "deliver", "--receive")
    assert listed.exit_code == 0, listed.output
    assert "EnvelopeError" in listed.output and "nested too deeply" in listed.output
    clock.shift(1)  # the list made them visible again "now": moto shows them once the clock moves
    shown = cli("dlq", "show", "deliver", dead["MessageId"])
    assert shown.exit_code == 0, shown.output
    assert "nested too deeply" in shown.output


def test_a_redriven_copy_starts_again_without_the_workers_hand_back_attributes(
    cli, deliver_runner, sink, clock
):
    # GIVEN a handed-back copy that SQS itself moved to the DLQ (the worker drops these attributes when
    # it dead-letters; SQS redrive keeps them): it carries attempts used and an outcome to record
    body = json.dumps({"v": 1, "job": "deliver", "id": "copy-1", "payload": message_payload()})
    attributes = {
        ATTR_PRIOR_ATTEMPTS: {"DataType": "Number", "StringValue": "5"},
        ATTR_SETTLE: {"DataType": "String", "StringValue": '{"action": "dead_letter", "job_id": "copy-1"}'},
        "tenant": {"DataType": "String", "StringValue": "acme"},
    }
    aws.client("sqs").send_message(
        QueueUrl=deliver_runner.queues.dlq_url, MessageBody=body, MessageAttributes=attributes
    )
    # WHEN the operator redrives it
    assert cli("dlq", "redrive", "deliver").exit_code == 0
    clock.shift(1)
    [moved] = aws.client("sqs").receive_message(
        QueueUrl=deliver_runner.queues.queue_url, MessageAttributeNames=["All"], VisibilityTimeout=0
    )["Messages"]
    # THEN it arrives as a fresh job (its own attributes kept, marked a redrive: SQS, not the worker,
    # put it in the DLQ, so it carries no reason), and runs
    assert set(moved["MessageAttributes"]) == {"tenant", ATTR_REDRIVEN}
    deliver_runner.drain()
    assert get_status("copy-1").state == "succeeded" and sink.sent == ["ada@example.com"]


def message_payload() -> dict:
    return {"to": "ada@example.com", "subject": "s", "body": "b"}


def test_workflow_shows_state_progress_and_stages_and_an_unknown_id_is_one_line(cli, stack, sink):
    from lambdajobs.runtime.workflow import chord, group, sig

    # GIVEN a chord of three mails (one to a bad address) whose members have run, callback not yet
    mails = [sig("deliver", {"to": to, "subject": "s", "body": "b"}) for to in ("a@x.io", "bad", "c@x.io")]
    wid = chord(group(mails), sig("summarize", {"label": "cli"})).enqueue(workflow_id="cli-flow")
    stack.runner("deliver").drain()
    stack.continuer().drain()
    # WHEN an operator looks at it
    result = cli("workflow", wid)
    # THEN they see its state, its progress, the callback's job id, and each stage's members by state
    assert result.exit_code == 0, result.output
    lines = [" ".join(line.replace("│", " ").split()) for line in result.output.splitlines()]
    assert "state running" in lines and "progress 75.0%" in lines
    assert "callback_job_id cli-flow.1.0" in lines
    assert "0 deliver x3 3 0 0 2 1 yes" in lines
    assert "1 summarize x1 1 1 0 0 0 yes" in lines
    # AND an unknown id is one line saying so
    assert "no workflow 'nope'" in one_line_error(cli("workflow", "nope"))


def test_a_notice_in_the_workflow_dlq_is_listed_and_redriven_and_the_workflow_goes_on(cli, stack, sink):
    from lambdajobs.runtime.workflow import chord, group, sig

    # GIVEN a chord whose members finished, and whose notice SQS moved to the workflow DLQ
    mail = sig("deliver", {"to": "a@x.io", "subject": "s", "body": "b"})
    wid = chord(group([mail]), sig("summarize", {"label": "stuck"})).enqueue(workflow_id="stuck-flow")
    stack.runner("deliver").drain()
    sqs, provisioned = stack.client("sqs"), stack.provisioned
    [notice] = sqs.receive_message(QueueUrl=provisioned.workflow_queue_url)["Messages"]
    sqs.send_message(QueueUrl=provisioned.workflow_dlq_url, MessageBody=notice["Body"])
    sqs.delete_message(QueueUrl=provisioned.workflow_queue_url, ReceiptHandle=notice["ReceiptHandle"])
    # WHEN an operator lists and redrives the workflow DLQ
    listed = cli("dlq", "list", "workflows")
    assert listed.exit_code == 0 and "1 shown" in listed.output, listed.output
    assert "moved by SQS redrive" in listed.output
    redriven = cli("dlq", "redrive", "workflows")
    assert redriven.exit_code == 0 and "moved 1 of 1" in redriven.output, redriven.output
    # THEN the continuer gets the notice and the callback is sent
    stack.continuer().drain()
    assert stack.runner("summarize").depth() == 1
    assert stack.workflow(wid).callback_job_id == "stuck-flow.1.0"


def narrow(stack, *args: str, input: str | None = None):
    """The CLI in an 80-column terminal."""
    return CliRunner().invoke(
        app, ["--stack", stack.stack, "--jobs", JOBS_PACKAGE, *args], input=input, env={"COLUMNS": "80"}
    )


def test_dlq_list_keeps_ids_whole_at_80_columns(stack, deliver_runner, sink, clock):
    job_ids = [f"order-2026-11-29-{i:04d}-{'x' * 40}" for i in range(2)]
    for job_id in job_ids:
        enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id=job_id)
    deliver_runner.drain()
    message_ids = [m["MessageId"] for m in deliver_runner.dlq_messages()]
    clock.shift(1)
    listed = narrow(stack, "dlq", "list", "deliver")
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    for job_id in job_ids:  # each on one line, whole, first on it: a double-click copies it
        assert [line for line in lines if line.startswith(job_id)], listed.output
    assert listed.output.count("invalid recipient address") == 2
    # AND the copied id is what `dlq show --job-id` takes
    assert narrow(stack, "dlq", "show", "deliver", "--job-id", job_ids[0]).exit_code == 0
    clock.shift(1)
    # AND the received listing puts each message id first, whole, for `dlq show --id`
    received = narrow(stack, "dlq", "list", "deliver", "--receive")
    assert received.exit_code == 0, received.output
    for message_id in message_ids:
        assert [line for line in received.output.splitlines() if line.startswith(message_id)]
    clock.shift(1)
    assert narrow(stack, "dlq", "show", "deliver", "--id", message_ids[0]).exit_code == 0


def test_queues_counts_dlq_messages_in_flight_and_jobs_done_in_the_last_hour(sink, clock, monkeypatch):
    import functools

    import lambdajobs.ops as ops
    from lambdajobs.testing import TestStack

    # counted from the job index, as on the local stack (the in-process stack has no endpoint, so it
    # would read CloudWatch metrics, which moto does not fill from the worker's EMF lines)
    monkeypatch.setattr(ops, "job_counts", functools.partial(ops.job_counts, source="records"))
    with TestStack(JOBS_PACKAGE, stack="counted", job_index="finished") as stack:
        runner = stack.runner("deliver")
        for to in ("a@example.com", "b@example.com", "bad-1", "bad-2"):
            enqueue("deliver", Message(to=to, subject="s", body="b"))
        runner.drain()
        # someone is looking at the DLQ: its messages are hidden, still there
        aws.client("sqs").receive_message(QueueUrl=runner.queues.dlq_url, MaxNumberOfMessages=10)
        clock.shift(1)  # the stopped clock: the jobs finished an instant before "now", not at it
        shown = CliRunner().invoke(
            app, ["--stack", "counted", "--jobs", JOBS_PACKAGE, "queues"], env={"COLUMNS": "200"}
        )
        assert shown.exit_code == 0, shown.output
        [row] = [line.split() for line in shown.output.splitlines() if line.strip().startswith("deliver")]
        # job, waiting, in flight, delayed, DLQ ("2 (2 hidden)"), ok 1h, dead 1h, oldest, health
        assert row[:5] == ["deliver", "0", "0", "0", "2"] and "(2 hidden)" in " ".join(row)
        assert row[-4:-2] == ["2", "2"] and row[-1] == "failing"


def test_queues_shows_the_counters_when_counting_is_refused(stack, monkeypatch):
    # an operator role without cloudwatch:GetMetricData (a policy from before it was granted)
    from botocore.exceptions import ClientError

    import lambdajobs.ops as ops

    def refuse(*args, **kwargs):
        raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no"}}, "GetMetricData")

    monkeypatch.setattr(ops, "job_counts", refuse)
    shown = narrow(stack, "queues")
    assert shown.exit_code == 0, shown.output
    assert "deliver" in shown.output and "AWS refused GetMetricData: AccessDenied" in shown.output


def test_queues_fits_80_columns_with_a_long_queue_label(stack, declare, monkeypatch):
    import lambdajobs.cli as cli_module

    # a label as long as this project's "send_email (normal)": headers stay whole, rows on one line
    @declare(name="send_newsletter", priorities=("urgent", "normal"))
    def send_newsletter(payload: Message) -> None:
        pass

    from lambdajobs.local.provision import publish_manifest

    publish_manifest(stack.provisioned, "send_newsletter", stack.config)  # as a deployed stack has it
    monkeypatch.setattr(cli_module, "_all_jobs", lambda: [send_newsletter.spec])
    shown = narrow(stack, "queues")
    assert shown.exit_code == 0, shown.output
    lines = shown.output.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert any("send_newsletter" in line for line in lines), shown.output
    header = " ".join(lines[:5])
    for word in ("waiting", "flight", "delayed", "oldest", "health"):
        assert word in header.split(), (word, header)


def test_queues_without_a_count_source_says_how_to_get_one(stack, monkeypatch):
    import lambdajobs.ops as ops

    monkeypatch.setattr(ops, "job_counts", lambda *a, **k: None)  # the local stack without the index
    shown = narrow(stack, "queues")
    assert shown.exit_code == 0 and "job_index='finished'" in shown.output


def test_jobs_lists_records_by_state_newest_first_and_pages(sink):
    from lambdajobs.testing import TestStack

    with TestStack(JOBS_PACKAGE, stack="listed", job_index="finished") as stack:
        runner = stack.runner("deliver")
        for i in range(3):
            enqueue("deliver", Message(to=f"u{i}@example.com", subject="s", body="b"), job_id=f"ok-{i}")
            runner.drain()
        enqueue("deliver", Message(to="bad", subject="s", body="b"), job_id="dead-1")
        runner.drain()

        def run(*args: str):
            return CliRunner().invoke(
                app, ["--stack", "listed", "--jobs", JOBS_PACKAGE, "jobs", *args], env={"COLUMNS": "200"}
            )

        every = run("deliver")
        assert every.exit_code == 0, every.output
        assert "deliver: retrying" in every.output and "deliver: dead" in every.output
        assert "dead-1" in every.output and "PermanentError" in every.output
        first = run("deliver", "--state", "succeeded", "--limit", "2")
        assert first.output.index("ok-2") < first.output.index("ok-1") and "ok-0" not in first.output
        [more] = [line for line in first.output.splitlines() if line.startswith("more: ")]
        rest = run(*more.split()[3:])  # the command it printed, as typed
        assert rest.exit_code == 0 and "ok-0" in rest.output and "ok-2" not in rest.output
        running = run("deliver", "--state", "running")
        assert "job_index='all'" in one_line_error(running)
        # the new states are named, and are listed where the index holds them only
        assert "job_index='all'" in one_line_error(run("deliver", "--state", "sleeping"))
        assert "job_index='all'" in one_line_error(run("deliver", "--state", "waiting_signal"))


def test_jobs_takes_every_state_the_job_index_can_hold():
    from lambdajobs.runtime.job_record import INDEXED_STATES, JobIndex, JobState

    assert list(LISTABLE) == [s.value for s in JobState if s in INDEXED_STATES[JobIndex.ALL]]


def test_jobs_with_the_index_off_lists_dead_jobs_and_says_how_to_list_more(cli):
    # mode off indexes dead records only (the DLQ listing reads them): those are listed
    listed = cli("jobs", "deliver")
    assert listed.exit_code == 0 and "deliver: dead" in listed.output, listed.output
    assert "deliver: succeeded" not in listed.output
    line = one_line_error(cli("jobs", "deliver", "--state", "succeeded"))
    assert "job index" in line and "job_index='finished'" in line and "write unit" in line
    assert "not a state" in one_line_error(cli("jobs", "deliver", "--state", "happy"))


def test_help_texts_have_no_artefacts():
    from lambdajobs.cli import help_text

    # a docstring's first paragraph is one line in the command list; brackets are shown as written
    assert help_text("One thing\n    and another.\n\n    More.") == "One thing and another.\n\nMore."
    group_names = {"dlq", "cron"}
    pages = [[], *([name] for name in group_names)]
    for command in app.registered_commands:
        pages.append([command.name or command.callback.__name__])
    for group in app.registered_groups:
        pages += [
            [group.name, c.name or c.callback.__name__] for c in group.typer_instance.registered_commands
        ]
    for page in pages:
        shown = CliRunner().invoke(app, [*page, "--help"], env={"COLUMNS": "80"})
        assert shown.exit_code == 0, (page, shown.output)
        assert "<bool>" not in shown.output, page  # flags take no value
        assert "Usage: lambdajobs" in shown.output, page
        assert "default:  " not in shown.output, page  # nothing eaten as markup
    root = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "80"}).output
    assert "[tool.lambdajobs]" in root and "lambdajobs[board]" in root
