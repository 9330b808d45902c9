"""End to end on the local stack: moto's server, the event source emulator, the deployed handler."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from lambdajobs.local.stack import WORKFLOWS, LocalStack
from lambdajobs.ops import peek_dead_letters, wait_until
from lambdajobs.runtime import Backoff
from lambdajobs.runtime.config import using
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import wait_for
from lambdajobs.runtime.settings import ATTR_ATTEMPTS, ATTR_ERROR_TYPE
from lambdajobs.runtime.spec import job, load_jobs
from lambdajobs.testing import isolated_registry
from tests.dev_process import running_dev
from tests.jobs import messages
from tests.jobs.messages import Message

ROOT = Path(__file__).resolve().parents[2]
JOBS_PACKAGE = "tests.jobs"


class Poison(BaseModel):
    n: int


def always_fails(payload: Poison) -> None:
    raise RuntimeError("this job never works")


@pytest.fixture
def local(tmp_path):
    # the test jobs, and a job that always fails, retried at once (no backoff) so the test does not wait
    with isolated_registry(keep=True):
        poison = job(name="poison", max_attempts=3, backoff=Backoff.fixed(0))(always_fails).spec
        specs = [*load_jobs(JOBS_PACKAGE), poison]
        previous = messages.set_sink(messages.NullSink())
        with LocalStack(
            JOBS_PACKAGE, specs=specs, stack="e2e", port=0, log_file=tmp_path / "worker.log"
        ) as stack:
            stack.start_workers()
            with using(stack.config):  # this test's producer talks to the local stack
                yield stack
        messages.set_sink(previous)


def test_a_job_is_processed_by_the_emulator_and_reads_succeeded(local):
    job_id = enqueue("deliver", Message(to="ada@example.com", subject="Hi", body="Hello"))
    status = wait_for(job_id, timeout_seconds=20, poll_seconds=0.1)
    assert (status.state, status.attempts) == ("succeeded", 1)
    # the emulator settles the batch (deletes the message) right after the handler returns
    assert wait_until(lambda: local.mappings["deliver"].stats.succeeded == 1, 10)
    assert local.health("deliver").depth == 0


def test_a_poison_job_reaches_the_dlq_after_max_attempts_receives(local):
    job_id = enqueue("poison", Poison(n=1))
    status = wait_for(job_id, timeout_seconds=30, poll_seconds=0.1)
    assert (status.state, status.attempts) == ("dead", 3)
    [letter] = peek_dead_letters(local.provisioned.queues["poison"].dlq_url)
    assert letter.job_id == job_id
    assert letter.attribute(ATTR_ATTEMPTS) == "3" and letter.attribute(ATTR_ERROR_TYPE) == "RuntimeError"
    assert local.health("poison").depth == 0


def test_the_local_stack_serves_every_job_it_was_given(local):
    assert set(local.mappings) == {s.name for s in load_jobs(JOBS_PACKAGE)} | {"poison", WORKFLOWS}


def test_the_local_stack_does_not_configure_the_process_through_its_environment(local):
    # GIVEN a running local stack THEN nothing pointed this process's AWS clients at it
    assert "AWS_ENDPOINT_URL" not in os.environ and "LAMBDAJOBS_STACK" not in os.environ
    assert local.config.endpoint_url == local.endpoint


def test_lambdajobs_dev_starts_and_stops_cleanly_on_sigterm(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    command = [
        sys.executable,
        "-m",
        "lambdajobs.cli",
        "dev",
        "--port",
        "0",
        "--log-file",
        str(tmp_path / "w.log"),
    ]
    with running_dev(command, ROOT, env) as dev:
        assert "lambdajobs local stack on http://127.0.0.1:" in dev.output, dev.output
        time.sleep(1)
        code = dev.stop()
    assert code == 0, dev.output
    assert "stopped." in dev.output


def test_lambdajobs_dev_on_a_busy_port_is_one_line():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "lambdajobs.cli", "dev", "--port", str(port)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert (
        out.stderr.strip()
        == f"error: port {port} is in use (another `lambdajobs dev`?); pass --port 0 for any free port."
    )


def test_a_traced_local_stack_tells_its_producers_to_trace_too():
    from lambdajobs.runtime.settings import ENV_TRACING

    assert LocalStack("tests.jobs", tracing=True).environment()[ENV_TRACING] == "1"
    assert ENV_TRACING not in LocalStack("tests.jobs").environment()
