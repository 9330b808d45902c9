"""The CLI's reads for issue 30: `search`, `jobs --since/--until`, `--json` on every read command
(one document on stdout, no rich formatting), and the small fixes: range checks as one-line usage
errors, a purge without a terminal, `board --allow-host`, `--version`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from lambdajobs.cli import STATUS_DEAD, app
from lambdajobs.runtime.producer import enqueue
from lambdajobs.testing import TestStack, isolated_registry
from tests.functional.conftest import JOBS_PACKAGE
from tests.jobs.messages import Message


class Order(BaseModel):
    customer_id: str
    email: str
    total: int


@pytest.fixture
def indexed(sink) -> Iterator[TestStack]:
    """A stack whose index holds every state, with a job `order` searchable by customer and tenant."""
    from lambdajobs.runtime.spec import job

    with isolated_registry(keep=True):

        @job(name="order", searchable=("customer_id", "@tenant"), pii_fields=("email",))
        def order(payload: Order) -> int:
            return payload.total

        with TestStack(JOBS_PACKAGE, stack="reads", job_index="all") as stack:
            stack.add_job(order.spec)
            yield stack


def run(stack: TestStack, *args: str, input: str | None = None):
    return CliRunner().invoke(
        app, ["--stack", stack.stack, "--jobs", JOBS_PACKAGE, *args], input=input, env={"COLUMNS": "200"}
    )


def one_line_error(result, code: int | None = None) -> str:
    assert result.exit_code != 0 and (code is None or result.exit_code == code), result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


def test_search_finds_a_jobs_jobs_by_a_searchable_field_newest_first_and_pages(indexed, clock):
    # GIVEN three orders of two customers, run
    for n, customer in enumerate(["c-1", "c-2", "c-1"]):
        enqueue("order", {"customer_id": customer, "email": f"u{n}@example.com", "total": n}, job_id=f"o-{n}")
        clock.shift(1)
    indexed.runner("order").drain()
    # WHEN the operator searches one customer's
    found = run(indexed, "search", "order", "customer_id", "c-1")
    # THEN both of theirs are listed, newest first, with their state
    assert found.exit_code == 0, found.output
    assert found.output.index("o-2") < found.output.index("o-0") and "o-1" not in found.output
    assert "succeeded" in found.output and "2 found" in found.output
    # AND --json gives the same as one document
    document = json.loads(run(indexed, "search", "order", "customer_id", "c-1", "--json").stdout)
    assert [i["job_id"] for i in document["items"]] == ["o-2", "o-0"] and document["cursor"] is None
    # AND a page of one prints the command for the next
    first = run(indexed, "search", "order", "customer_id", "c-1", "--limit", "1")
    [more] = [line for line in first.output.splitlines() if "more: " in line]
    rest = run(indexed, *more.split("more: lambdajobs ")[1].split())
    assert rest.exit_code == 0 and "o-0" in rest.output and "o-2" not in rest.output, rest.output
    # AND a field the job does not declare searchable is one line naming those it does
    line = one_line_error(run(indexed, "search", "order", "total", "1"))
    assert "customer_id" in line and "@tenant" in line


def test_jobs_lists_a_time_range(indexed, sink, clock):
    enqueue("deliver", Message(to="a@example.com", subject="s", body="b"), job_id="early")
    indexed.runner("deliver").drain()
    clock.shift(timedelta(hours=2))
    enqueue("deliver", Message(to="b@example.com", subject="s", body="b"), job_id="late")
    indexed.runner("deliver").drain()
    clock.shift(1)
    recent = run(indexed, "jobs", "deliver", "--state", "succeeded", "--since", "1h")
    assert recent.exit_code == 0, recent.output
    assert "late" in recent.output and "early" not in recent.output
    older = run(indexed, "jobs", "deliver", "--state", "succeeded", "--until", "1h", "--json")
    assert [i["job_id"] for i in json.loads(older.stdout)["states"][0]["items"]] == ["early"]
    assert "--since" in one_line_error(run(indexed, "jobs", "deliver", "--since", "yesterday"), 2)


def test_status_json_is_one_document_with_the_payload_masked_and_the_exit_code_kept(indexed, sink):
    enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id="dead-json")
    indexed.runner("deliver").drain()
    shown = run(indexed, "status", "dead-json", "--json")
    assert shown.exit_code == STATUS_DEAD
    document = json.loads(shown.stdout)  # the whole of stdout: one document, no table
    assert document["state"] == "dead" and document["described_state"] == "dead"
    assert document["error"]["type"] == "PermanentError"
    assert document["payload"]["to"] == "*****" and "bad-address" not in shown.stdout
    assert [a["outcome"] for a in document["attempt_rows"]] == ["dead"]
    # AND the table shows the payload masked too
    table = run(indexed, "status", "dead-json")
    assert '"to": "*****"' in table.output and "bad-address" not in table.output


def test_every_read_command_prints_one_json_document(indexed, sink):
    from lambdajobs.runtime.workflow import group, sig

    enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id="dead-1")
    indexed.runner("deliver").drain()
    group([sig("deliver", {"to": "a@b.co", "subject": "s", "body": "b"})]).enqueue(workflow_id="wf-json")
    for args, check in [
        (("queues",), lambda d: {j["job"] for j in d["jobs"]} >= {"deliver", "digest"}),
        (("jobs", "deliver", "--state", "dead"), lambda d: d["states"][0]["items"][0]["job_id"] == "dead-1"),
        (("workflow", "wf-json"), lambda d: d["state"] == "running" and d["stages"][0]["total"] == 1),
        (("cron", "list"), lambda d: d["jobs"][0]["job"] == "digest" and len(d["jobs"][0]["next"]) == 3),
        (
            ("dlq", "list", "deliver"),
            lambda d: (
                d["queues"][0]["recorded"] == 1
                and d["queues"][0]["items"][0]["job_id"] == "dead-1"
                and d["queues"][0]["items"][0]["payload"]["to"] == "*****"
            ),
        ),
        (("dlq", "show", "deliver", "--job-id", "dead-1"), lambda d: d["body"]["payload"]["to"] == "*****"),
    ]:
        result = run(indexed, *args, "--json")
        assert result.exit_code == 0, (args, result.output)
        assert check(json.loads(result.stdout)), (args, result.stdout)
        assert "\x1b" not in result.stdout and "┃" not in result.stdout


def test_dlq_list_reads_the_records_and_changes_no_receive_count(indexed, sink):
    for i in range(3):
        enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id=f"dead-{i}")
    indexed.runner("deliver").drain()
    sqs, url = indexed.client("sqs"), indexed.provisioned.queues["deliver"].dlq_url
    listed = run(indexed, "dlq", "list", "deliver", "--limit", "2")
    assert listed.exit_code == 0, listed.output
    assert "3 in the DLQ: 3 recorded, 0 unrecorded" in listed.output
    assert "dead-2" in listed.output and "dead-0" not in listed.output
    [more] = [line for line in listed.output.splitlines() if line.startswith("more: ")]
    assert "--limit 2" in more  # the next page keeps the page size (and the filters: below)
    rest = run(indexed, *more.split("more: lambdajobs ")[1].split())
    assert "dead-0" in rest.output and "dead-2" not in rest.output, rest.output
    kind = json.loads(run(indexed, "dlq", "list", "deliver", "--json").stdout)["queues"][0]["items"][0]
    filtered = run(indexed, "dlq", "list", "deliver", "--error", kind["error_type"], "--limit", "2")
    [more] = [line for line in filtered.output.splitlines() if line.startswith("more: ")]
    assert f"--error {kind['error_type']}" in more and "--limit 2" in more
    # no message was received: each one's receive count is still 1 (the worker's)
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in got} == {"1"}
    # AND filters: an error type none has lists nothing
    none = run(indexed, "dlq", "list", "deliver", "--error", "TransientError", "--json")
    assert json.loads(none.stdout)["queues"][0]["items"] == []


def test_dlq_redrive_one_message_by_job_id(indexed, sink, clock):
    for i in range(3):
        enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id=f"dead-{i}")
    runner = indexed.runner("deliver")
    runner.drain()
    moved = run(indexed, "dlq", "redrive", "deliver", "--job-id", "dead-1")
    assert moved.exit_code == 0, moved.output
    assert "moved 1 message from the DLQ of deliver back to its queue" in moved.output
    clock.shift(1)
    assert runner.depth() == 1 and runner.depth(dlq=True) == 3 - 1
    clock.shift(1)
    missing = run(indexed, "dlq", "redrive", "deliver", "--id", "no-such-message")
    assert "not in the DLQ" in one_line_error(missing)
    both = run(indexed, "dlq", "redrive", "deliver", "--id", "x", "--job-id", "y")
    assert "not both" in one_line_error(both, 2)


@pytest.mark.parametrize(
    "args,expected",
    [
        (("jobs", "deliver", "--limit", "-1"), "--limit -1 is out of range: pass 1 to 1000."),
        (("dlq", "list", "deliver", "--limit", "0"), "--limit 0 is out of range: pass 1 to 100."),
        (("dlq", "redrive", "deliver", "--limit", "-3"), "--limit -3 is out of range: pass 1 or more."),
        (("search", "order", "customer_id", "c", "--limit", "-5"), "--limit -5 is out of range"),
        (("cron", "list", "--count", "-1"), "--count -1 is out of range"),
        (("status", "x", "--wait", "-1"), "--wait -1 is out of range: pass 0 or more."),
        (
            ("enqueue", "deliver", '{"to": "a@b.co", "subject": "s", "body": "b"}', "--delay", "-5"),
            "--delay -5",
        ),
        (("board", "--port", "99999"), "--port 99999 is out of range: pass 1 to 65535."),
        (("dev", "--port", "99999"), "--port 99999 is out of range: pass 0 to 65535."),
    ],
)
def test_out_of_range_numbers_are_one_line_usage_errors(indexed, args, expected):
    line = one_line_error(run(indexed, *args), 2)
    assert expected in line and "None" not in line


def test_a_purge_without_a_terminal_says_to_pass_yes(indexed, sink):
    enqueue("deliver", Message(to="bad-address", subject="s", body="b"), job_id="dead-1")
    indexed.runner("deliver").drain()
    refused = run(indexed, "dlq", "purge", "deliver")  # no input: stdin is closed
    assert one_line_error(refused) == "error: refusing to purge without a terminal: pass --yes."
    assert indexed.runner("deliver").depth(dlq=True) == 1
    # AND after a purge the listing no longer shows the purged letters' records
    assert run(indexed, "dlq", "purge", "deliver", "--yes").exit_code == 0
    listed = json.loads(run(indexed, "dlq", "list", "deliver", "--json").stdout)
    assert listed["queues"][0]["items"] == [] and listed["queues"][0]["recorded"] == 0
    # AND an empty DLQ is nothing to ask about, terminal or not
    empty = run(indexed, "dlq", "purge", "deliver")
    assert empty.exit_code == 0 and "holds no message: nothing to purge." in empty.output


def test_version():
    shown = CliRunner().invoke(app, ["--version"])
    assert shown.exit_code == 0 and shown.output.startswith("lambdajobs ")


@pytest.fixture
def served(monkeypatch):
    """`lambdajobs board` up to serving: what it passes to create_app, and no server started."""
    import signal

    import uvicorn

    import lambdajobs.board as board_module

    made: dict = {}
    real = board_module.create_app

    def create_app(config, specs, **options):
        made.update(options)
        return real(config, specs, **options)

    monkeypatch.setattr(board_module, "create_app", create_app)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: made.setdefault("served", True))
    monkeypatch.setattr(signal, "signal", lambda *a: None)
    return made


def free_port() -> str:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return str(probe.getsockname()[1])


def test_board_on_another_host_needs_an_allowed_host_name(indexed, served):
    port = free_port()
    line = one_line_error(run(indexed, "board", "--host", "0.0.0.0", "--port", port), 2)
    assert "--allow-host" in line and "served" not in served
    assert "wildcard" in one_line_error(run(indexed, "board", "--allow-host", "*", "--port", port), 2)
    started = run(indexed, "board", "--host", "0.0.0.0", "--port", port, "--allow-host", "Board.Example.com")
    assert started.exit_code == 0, started.output
    assert served["allowed_hosts"] == ["127.0.0.1", "localhost", "[::1]", "board.example.com"]
    assert "*" not in served["allowed_hosts"] and served["served"]


def test_whoami_json(indexed):
    shown = run(indexed, "--region", "us-east-1", "whoami", "--json")
    assert shown.exit_code == 0, shown.output
    assert set(json.loads(shown.stdout)) == {"account", "arn", "region"}


def test_json_errors_stay_one_line_on_stderr_with_the_same_exit_codes(indexed):
    unknown = run(indexed, "workflow", "nope", "--json")
    assert "no workflow 'nope'" in one_line_error(unknown, 1) and unknown.stdout == ""
    missing = run(indexed, "status", "never-enqueued", "--json")
    assert missing.exit_code == 3 and json.loads(missing.stdout)["has_record"] is False
    bad_job = run(indexed, "jobs", "nope", "--json")
    assert "unknown job 'nope'" in one_line_error(bad_job, 1) and bad_job.stdout == ""


@pytest.mark.parametrize("state", ["queued", "pending", "waiting"])
def test_jobs_says_plainly_why_queued_and_waiting_jobs_are_not_listed(indexed, state):
    line = one_line_error(run(indexed, "jobs", "deliver", "--state", state))
    assert "lambdajobs queues" in line and "lambdajobs status JOB_ID" in line
