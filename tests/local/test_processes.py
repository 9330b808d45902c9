"""The local stack's process mode (`LocalStack(processes=True)`, `lambdajobs dev`'s default): each
function runs in worker processes of its own, from its staged asset, with its synthesized environment,
killed at its timeout, as on Lambda.

One stack for the module (starting it stages every function). The jobs (tests/local/process_jobs)
append a line per run to a file their payload names: the effect counted across processes.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from lambdajobs.local.stack import LocalStack, function_name
from lambdajobs.ops import peek_dead_letters, wait_until
from lambdajobs.runtime.config import using
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE, ATTR_REASON
from lambdajobs.staging import environment as function_env
from lambdajobs.testing import isolated_registry

JOBS = "tests.local.process_jobs"
#: A killed run's message comes back after its visibility timeout (6 x the 1 s timeout): the waits
#: below are bounded well past it.
SETTLE_SECONDS = 40


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    folder = tmp_path_factory.mktemp("processes")
    log = folder / "worker.log"
    with (
        isolated_registry(keep=True),
        LocalStack(JOBS, stack="proc", port=0, log_file=log, processes=True) as stack,
    ):
        stack.start_workers(scheduler=False)
        with using(stack.config):
            yield stack


def runs(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def settled(job_id: str, config) -> object:
    status = None

    def done() -> bool:
        nonlocal status
        status = get_status(job_id, config=config)
        return status.done

    assert wait_until(done, SETTLE_SECONDS), f"job {job_id} did not settle: {status}"
    return status


def test_a_job_runs_in_a_process_of_its_own_that_sees_only_its_asset_and_what_lambda_provides(local):
    job_id = enqueue("probe", {}, config=local.config)
    status = settled(job_id, local.config)
    assert status.state == JobState.SUCCEEDED, status
    seen = status.result
    # its own process, not this one
    assert seen["pid"] != os.getpid()
    # on its path: its asset first, then what Lambda provides; no site-packages, no project folder
    asset, runtime = Path(seen["path"][0]), Path(seen["path"][1])
    # the job's modules only in its asset; the runtime in the runtime layer, as synth stages them
    assert asset.name == "probe" and not (asset / "lambdajobs").exists()
    assert (asset / "tests" / "local" / "process_jobs" / "probe.py").is_file()
    assert (
        runtime.parent.name == "runtime-layer" and (runtime / "lambdajobs" / "runtime" / "entry.py").is_file()
    )
    assert not any("site-packages" in entry for entry in seen["path"]), seen["path"]
    assert str(Path.cwd()) not in seen["path"]
    # it imported its own job module, none of the other jobs', and nothing heavy of this process
    assert "tests.local.process_jobs.probe" in seen["modules"]
    assert not [
        m for m in seen["modules"] if m.split(".")[0] in ("moto", "aws_cdk", "rich", "typer", "jinja2")
    ]
    assert "tests.local.process_jobs.timing" not in seen["modules"]
    # its environment: the synthesized function's (the same code computes it), Lambda's own, the
    # local endpoint; nothing of this process's environment beside them
    env = seen["environment"]
    p = local.provisioned
    expected = function_env.worker(
        local.specs[[s.name for s in local.specs].index("probe")],
        stack="proc",
        table=p.table,
        jobs_package=JOBS,
        modules=["tests.local.process_jobs.probe"],
        place=p.place(),
        scheduler_role_arn=p.scheduler_role_arn,
        bucket=p.bucket,
        job_index=p.job_index,
    )
    assert {k: env.get(k) for k in expected} == expected
    assert env["LAMBDAJOBS_BUCKET"] == p.bucket  # what uses=("bucket",) adds
    assert env["AWS_LAMBDA_FUNCTION_NAME"] == function_name("proc", "probe")
    assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "256"
    assert env["_X_AMZN_TRACE_ID"].startswith("Root=1-")
    assert env["AWS_ENDPOINT_URL"] == local.endpoint
    assert "PYTEST_CURRENT_TEST" not in env and "VIRTUAL_ENV" not in env


def test_a_warm_environment_is_reused(local):
    first = settled(enqueue("probe", {}, config=local.config), local.config).result["pid"]
    second = settled(enqueue("probe", {}, config=local.config), local.config).result["pid"]
    assert first == second
    assert local.fleet.stats(function_name("proc", "probe")).cold_starts == 1


def test_a_job_module_whose_library_is_not_in_its_asset_is_dead_lettered_with_the_init_error(local):
    # GIVEN a job whose module imports jinja2: installed here, never declared for the functions
    job_id = enqueue("render_mail", {"to": "ada@example.com"}, config=local.config)
    # THEN it is dead at once, not run and not retried, with the error naming the module
    status = settled(job_id, local.config)
    assert status.state == JobState.DEAD, status
    assert status.error["type"] == "FunctionInitError"
    assert "tests.local.process_jobs.needs_library" in status.error["message"]
    assert "No module named 'jinja2'" in status.error["message"]
    assert "[tool.lambdajobs] dependencies" in status.error["message"]
    # AND its message is in the DLQ with that reason
    dlq = local.provisioned.queues["render_mail"].dlq_url
    assert wait_until(lambda: len(peek_dead_letters(dlq, config=local.config)) == 1, SETTLE_SECONDS)
    [letter] = peek_dead_letters(dlq, config=local.config)
    attributes = letter.attributes
    assert attributes[ATTR_ERROR_TYPE]["StringValue"] == "FunctionInitError"
    assert "jinja2" in attributes[ATTR_REASON]["StringValue"]
    # AND the stack knows it for the live line
    stats = local.fleet.stats(function_name("proc", "render_mail"))
    assert stats.init_errors >= 1 and "jinja2" in stats.init_error


def test_a_job_killed_at_its_timeout_runs_again_once_its_lock_expired_and_succeeds(local, tmp_path):
    log = tmp_path / "runs.log"
    # GIVEN a job whose first attempt sleeps past its 1 s timeout
    job_id = enqueue("sleepy", {"log": str(log), "sleep": {"1": 30}}, config=local.config)
    # WHEN it has started: its record reads running, attempt 1
    assert wait_until(lambda: any(r["event"] == "start" for r in runs(log)), SETTLE_SECONDS)
    running = get_status(job_id, config=local.config)
    assert running.state == JobState.RUNNING and running.attempts == 1
    # AND a duplicate of its message arrives while the killed run's lock is still live
    queue = local.provisioned.queues["sleepy"]
    body = json.dumps({"job": "sleepy", "id": job_id, "payload": {"log": str(log), "sleep": {"1": 30}}})
    local.config.client("sqs").send_message(QueueUrl=queue.queue_url, MessageBody=body)
    # THEN the run is killed at its timeout (its process with it), and it runs again and succeeds
    status = settled(job_id, local.config)
    assert status.state == JobState.SUCCEEDED, status
    assert status.attempts == 2 and status.result["attempt"] == 2
    stats = local.fleet.stats(function_name("proc", "sleepy"))
    assert stats.timeouts >= 1
    # AND nothing ran twice: attempt 1 started once and never finished, attempt 2 ran once, and the
    # duplicate ran nothing of its own (handed back while the lock was live, a duplicate after)
    time.sleep(3)
    seen = runs(log)
    starts = [r["attempt"] for r in seen if r["event"] == "start"]
    assert sorted(starts) == [1, 2], seen
    assert [r["attempt"] for r in seen if r["event"] == "done"] == [2]
    killed, retried = (r for r in seen if r["event"] == "start")
    assert killed["pid"] != retried["pid"]  # the killed environment was not reused
    assert get_status(job_id, config=local.config).state == JobState.SUCCEEDED


def test_a_job_killed_at_its_timeout_on_its_last_attempt_ends_dead_with_its_reason(local, tmp_path):
    log = tmp_path / "runs.log"
    job_id = enqueue("sleepy_once", {"log": str(log), "sleep": {"1": 30}}, config=local.config)
    status = settled(job_id, local.config)
    assert status.state == JobState.DEAD, status
    assert status.attempts == 1
    # (read before the next receive, the record's lock expired on its last attempt: it reads dead)
    assert status.error["type"] in ("MaxReceiveCountExceeded", "LastAttemptLostError"), status.error
    assert [r["event"] for r in runs(log)] == ["start"]  # killed: never finished, never run again
    dlq = local.provisioned.queues["sleepy_once"].dlq_url
    # the next receive marks the record and moves the message, with the reason: the last attempt
    # ended without an outcome (the kill left none)
    assert wait_until(lambda: len(peek_dead_letters(dlq, config=local.config)) == 1, SETTLE_SECONDS)
    [letter] = peek_dead_letters(dlq, config=local.config)
    assert letter.attributes[ATTR_ERROR_TYPE]["StringValue"] == "LastAttemptLostError"
    final = get_status(job_id, config=local.config)
    assert final.state == JobState.DEAD and final.attempts == 1
    assert final.error["type"] == "LastAttemptLostError", final.error
    assert [r["event"] for r in runs(log)] == ["start"]


def test_a_durable_job_crosses_invocations_sleeps_and_waits_for_a_signal_in_its_own_processes(
    local, tmp_path
):
    # GIVEN a job of 4 steps of 0.9 s whose function times out at 2 s: one step per invocation fits
    # AND its process dies right after the second step's checkpoint (a crash between two steps)
    log = tmp_path / "steps.log"
    job_id = enqueue("durable_steps", {"log": str(log), "crash_after": "s1"}, config=local.config)
    # WHEN it runs: steps, a sleep, then a wait for signal "go"
    status = None

    def waiting() -> bool:
        nonlocal status
        status = get_status(job_id, config=local.config)
        return status.state == JobState.WAITING_SIGNAL

    assert wait_until(waiting, SETTLE_SECONDS), f"job {job_id} did not wait for its signal: {status}"
    assert status.waiting_for == "go" and status.progress == 90.0
    from lambdajobs import signal

    assert signal(job_id, "go", {"n": 7}, config=local.config).woke
    status = settled(job_id, local.config)
    # THEN it succeeded with the signal's data; each step ran once, in invocations of their own,
    # the crash's included (the run after it replayed s0 and s1 from their checkpoints)
    assert status.state == JobState.SUCCEEDED, status
    assert status.result == {"done": ["s0", "s1", "s2", "s3"], "data": {"n": 7}}
    lines = runs(log)
    assert [line["step"] for line in lines] == ["s0", "s1", "s2", "s3"]
    assert (tmp_path / "steps.log.crashed").exists()
    assert status.suspensions >= 4  # continuations, the sleep, the wait
    assert status.attempts == 2  # the crash used one; continuations, sleeps and waits none


def test_a_test_stack_in_process_mode_runs_a_job_from_its_asset_in_its_own_process(tmp_path):
    from lambdajobs.testing import TestStack

    log = tmp_path / "runs.log"
    with isolated_registry(keep=True), TestStack(JOBS, stack="tproc", processes=True) as stack:
        runner = stack.runner("sleepy")
        job_id = stack.enqueue("sleepy", {"log": str(log), "sleep": {"1": 30}})
        # the first attempt is killed at the 1 s timeout: the whole batch fails, the record says running
        delivered = runner.attempt()
        assert delivered is not None and delivered.batch.error is not None
        assert "Task timed out after 1.00 seconds" in delivered.batch.error
        [attempt] = delivered.jobs
        assert attempt.job_id == job_id and attempt.state == JobState.RUNNING
        assert [r["pid"] for r in runs(log)] != [os.getpid()]
        # a job whose library is not in its asset: dead at once with the init error
        mail = stack.enqueue("render_mail", {"to": "ada@example.com"})
        stack.runner("render_mail").drain()
        assert stack.status(mail).error["type"] == "FunctionInitError"


def test_a_stack_whose_folders_are_relative_runs_its_functions(tmp_path, monkeypatch):
    # lambdajobs dev's defaults are relative (build/local/): the processes run in their assets' folders
    monkeypatch.chdir(tmp_path)
    with (
        isolated_registry(keep=True),
        LocalStack(
            JOBS, stack="rel", log_file=Path("build/worker.log"), state_dir=Path("build"), processes=True
        ) as stack,
    ):
        stack.start_workers(scheduler=False)
        status = settled(enqueue("probe", {}, config=stack.config), stack.config)
        assert status.state == JobState.SUCCEEDED, status
        assert Path(status.result["path"][0]).is_absolute()


def test_a_test_stack_with_tracing_on_sets_the_variable_on_every_function_as_synth_does():
    from lambdajobs.local.stack import function_name
    from lambdajobs.runtime.settings import ENV_TRACING
    from lambdajobs.testing import TestStack

    # GIVEN stacks in process mode, traced (as a stack deployed with tracing=True) and not
    with (
        isolated_registry(keep=True),
        TestStack(JOBS, stack="ttrace", processes=True, tracing=True) as traced,
    ):
        assert traced.config.tracing  # its producer and runners' side
        names = [function_name("ttrace", spec.name) for spec in traced.specs] + [
            function_name("ttrace", "workflows")
        ]
        # THEN every job function and the continuer run with LAMBDAJOBS_TRACING=1
        assert all(traced.fleet.function(n).environment.get(ENV_TRACING) == "1" for n in names)
    with isolated_registry(keep=True), TestStack(JOBS, stack="tplain", processes=True) as plain:
        name = function_name("tplain", plain.specs[0].name)
        assert ENV_TRACING not in plain.fleet.function(name).environment
