"""`lambdajobs dev` on a restart: the same port again at once, the state it restores and saves, and a
live line that tells succeeded, retrying and dead jobs apart."""

from __future__ import annotations

import io
import json
import os
import socket
import sys
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from lambdajobs.cli import _dev_table, _port_free
from lambdajobs.local import persist
from lambdajobs.local.stack import LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime import Backoff, PermanentError
from lambdajobs.runtime.cancellation import cancel
from lambdajobs.runtime.config import using
from lambdajobs.runtime.envelope import encode
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry
from tests.dev_process import running_dev

ROOT = Path(__file__).resolve().parents[2]


class Order(BaseModel):
    n: int


def fine(payload: Order) -> int:
    return payload.n


def flaky(payload: Order) -> None:
    raise TimeoutError("the provider timed out")  # retried (after a backoff far beyond the test)


def doomed(payload: Order) -> None:
    raise PermanentError("this order can never be sent")  # to the DLQ at once, by the worker itself


def _rows(local: LocalStack) -> dict[str, dict[str, str]]:
    """The live line as a person reads it: row name -> column -> text."""
    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(_dev_table(local))
    lines = [line for line in out.getvalue().splitlines() if line[:1] in "┃│"]  # the header, the rows
    header, *body = ([cell.strip() for cell in line[1:-1].replace("┃", "│").split("│")] for line in lines)
    return {row[0]: dict(zip(header, row, strict=True)) for row in body}


def test_the_live_line_counts_a_job_the_worker_dead_lettered_as_dead_not_ok(tmp_path):
    with isolated_registry():
        specs = [
            job(name="fine")(fine).spec,
            job(name="flaky", max_attempts=3, backoff=Backoff.fixed(600))(flaky).spec,
            job(name="doomed")(doomed).spec,
        ]
        with LocalStack(specs=specs, stack="live", port=0, log_file=tmp_path / "worker.log") as local:
            local.start_workers()
            # GIVEN two jobs that succeed, one that fails and will be retried, one that fails for good
            with using(local.config):
                enqueue("fine", Order(n=1))
                enqueue("fine", Order(n=2))
                dropped = enqueue("fine", Order(n=5), delay_seconds=1)
                assert cancel(dropped).outcome == "cancelled"  # before it arrives: never runs
                enqueue("flaky", Order(n=3))
                dead = enqueue("doomed", Order(n=4))
            # WHEN the worker has settled them
            assert wait_until(lambda: get_status(dead, config=local.config).state == "dead", 20, 0.1)
            assert wait_until(
                lambda: local.outcomes.counts().get("flaky", {}).get(JobState.RETRYING) == 1, 20
            )
            assert wait_until(
                lambda: local.outcomes.counts().get("fine", {}).get(JobState.SUCCEEDED) == 2, 20
            )
            assert wait_until(
                lambda: local.outcomes.counts().get("fine", {}).get(JobState.CANCELLED) == 1, 20
            )
            # THEN the live line says so: the dead-lettered one is dead, not ok
            rows = _rows(local)
            assert {k: rows["doomed"][k] for k in ("DLQ", "ok", "retrying", "dead")} == {
                "DLQ": "1",
                "ok": "0",
                "retrying": "0",
                "dead": "1",
            }
            assert (rows["flaky"]["ok"], rows["flaky"]["retrying"], rows["flaky"]["dead"]) == ("0", "1", "0")
            assert (rows["fine"]["ok"], rows["fine"]["retrying"], rows["fine"]["dead"]) == ("2", "0", "0")
            assert rows["fine"]["cancelled"] == "1" and rows["doomed"]["cancelled"] == "0"
            assert rows["(workflows)"]["ok"] == "-"
            # (the event source cannot tell: the worker answered success for the record it moved itself)
            assert local.mappings["doomed"].stats.succeeded == 1


def _request_the_server_closes(port: int) -> None:
    """One HTTP request whose connection the server closes first: its side of it (the port) then
    waits in TIME_WAIT, as after a `lambdajobs dev` served boto3 clients and the CLI."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET /moto-api/ HTTP/1.1\r\nHost: local\r\nConnection: close\r\n\r\n")
        while connection.recv(65536):
            pass


def _bound_without_reuse(port: int) -> bool:
    with socket.socket() as plain:
        try:
            plain.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_the_port_of_a_stack_just_stopped_is_free_at_once(tmp_path):
    with socket.socket() as pick:
        pick.bind(("127.0.0.1", 0))
        port = pick.getsockname()[1]
    with isolated_registry():
        # GIVEN a stack that served a few requests on a port, then stopped
        with LocalStack(specs=[], stack="port", port=port) as local:
            for _ in range(3):
                _request_the_server_closes(port)
        # (the condition users hit: a bind without address reuse is refused for a minute)
        assert not _bound_without_reuse(port), "no TIME_WAIT on the port: this test would prove nothing"
        # WHEN it starts again on that port at once THEN the port check and the server both accept it
        assert _port_free(port)
        with LocalStack(specs=[], stack="port", port=port) as again:
            assert again.endpoint == f"http://127.0.0.1:{port}" == local.endpoint
    # a port something listens on is still busy
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert not _port_free(busy.getsockname()[1])


def test_lambdajobs_dev_restores_its_state_and_saves_it_on_sigterm(tmp_path):
    # GIVEN a state saved next to the worker log, holding a delayed job (as a stop leaves it)
    body = encode("deliver", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}, "kept-1")
    message = {
        "id": "5b1f2f4e-0000-4000-8000-000000000001",
        "body": body,
        "receive_count": 0,
        "delay_ms": 900_000,
    }
    state = {
        "format": persist.FORMAT,
        "version": persist.VERSION,
        "stack": "local",
        "saved_at": "2026-01-01T00:00:00Z",
    }
    # (under the queue name of an earlier lambdajobs, `<stack>-<job>`: restored to `<stack>_<job>`)
    (tmp_path / "state.json").write_text(json.dumps({**state, "queues": {"local-deliver": [message]}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    command = [sys.executable, "-m", "lambdajobs.cli", "--jobs", "tests.jobs", "dev", "--port", "0"]
    # WHEN lambdajobs dev starts with its log there, and is stopped
    with running_dev([*command, "--log-file", str(tmp_path / "worker.log")], ROOT, env) as dev:
        assert dev.stop() == 0, dev.output
    # THEN it said what it restored, and saved it again on SIGTERM, still delayed
    held = "1 message (1 delayed), 0 table items, 0 objects, 0 one-time schedules, 0 SSM parameters"
    assert f"Restored {held} from {tmp_path / 'state.json'} (saved 2026-01-01T00:00:00Z)." in dev.output, (
        dev.output
    )
    assert f"Saved {held} to {tmp_path / 'state.json'}." in dev.output
    [saved] = json.loads((tmp_path / "state.json").read_text())["queues"]["local_deliver"]
    assert saved["id"] == message["id"] and 800_000 < saved["delay_ms"] <= 900_000
