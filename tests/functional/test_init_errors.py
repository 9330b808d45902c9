"""A job module its function cannot import (`FunctionInitError`): the cold start does not fail, every
record is dead-lettered with the error as its reason and its job's record reads dead; nothing runs."""

from __future__ import annotations

import pytest

from lambdajobs.runtime.errors import FunctionInitError
from lambdajobs.runtime.handler import from_environment, load_job
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import ATTR_ERROR_TYPE, ATTR_REASON, ENV_JOB, ENV_JOBS, ENV_MODULES
from lambdajobs.runtime.worker import Worker
from tests.functional.test_worker import message, receive_all


def test_a_missing_library_is_an_init_error_naming_the_module_and_the_fix(stack):
    with pytest.raises(FunctionInitError) as raised:
        load_job(stack.config, "deliver", "tests.jobs.messages,json.no_such_module")
    text = str(raised.value)
    assert "could not import its job module json.no_such_module" in text
    assert "ModuleNotFoundError" in text


def test_modules_that_do_not_declare_the_job_are_an_init_error(stack):
    with pytest.raises(FunctionInitError, match="do not declare job 'nope'"):
        load_job(stack.config, "nope", "tests.jobs.messages")


def test_a_cold_start_whose_module_fails_starts_a_handler_that_keeps_the_error():
    env = {ENV_JOB: "deliver", ENV_JOBS: "tests.jobs", ENV_MODULES: "tests.jobs.not_a_module"}
    handler = from_environment(env)
    assert isinstance(handler.init_error, FunctionInitError)  # type: ignore[attr-defined]
    assert "tests.jobs.not_a_module" in str(handler.init_error)  # type: ignore[attr-defined]


def test_every_record_is_dead_lettered_with_the_init_error_and_its_record_reads_dead(stack, sink):
    # GIVEN a function whose job module could not be imported
    error = FunctionInitError("the function of job 'deliver' could not import its job module x: boom.")
    runner = stack.runner("deliver", worker=Worker("deliver", config=stack.config, init_error=error))
    ids = [enqueue("deliver", message(f"user{i}@example.com")) for i in range(3)]
    # WHEN its event source delivers them
    outcome = runner.poll()
    # THEN nothing ran, the batch succeeded (the originals are deleted) ...
    assert sink.sent == []
    assert outcome.failed_ids == [] and runner.depth() == 0
    # ... each message is in the DLQ with the error as its reason, and each job's record reads dead
    letters = receive_all(stack.provisioned.queues["deliver"].dlq_url)
    assert len(letters) == 3
    for letter in letters:
        attributes = letter["MessageAttributes"]
        assert attributes[ATTR_ERROR_TYPE]["StringValue"] == "FunctionInitError"
        assert "could not import its job module x" in attributes[ATTR_REASON]["StringValue"]
    for job_id in ids:
        status = get_status(job_id)
        assert status.state == "dead" and status.error["type"] == "FunctionInitError"


def test_an_envelope_of_another_job_is_dead_lettered_without_a_record(stack, sink):
    error = FunctionInitError("boom")
    runner = stack.runner("deliver", worker=Worker("deliver", config=stack.config, init_error=error))
    queue = stack.provisioned.queues["deliver"].queue_url
    stack.client("sqs").send_message(QueueUrl=queue, MessageBody="not an envelope")
    runner.poll()
    [letter] = receive_all(stack.provisioned.queues["deliver"].dlq_url)
    assert letter["MessageAttributes"][ATTR_ERROR_TYPE]["StringValue"] == "FunctionInitError"


def test_a_client_that_cannot_be_made_at_init_does_not_fail_the_init(monkeypatch):
    from lambdajobs.runtime import aws
    from lambdajobs.runtime.handler import warm

    # GIVEN a function whose DynamoDB client cannot be made at its init (boto3 finds no region)
    env = {ENV_JOB: "deliver", ENV_JOBS: "tests.jobs", ENV_MODULES: "tests.jobs.messages"}
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    aws.reset_clients()
    handler = from_environment(env)
    # WHEN its init phase makes the first record's client
    warm(handler)  # does not raise
    # THEN no client was kept: the first record makes it, and reports what went wrong
    assert ("dynamodb", handler.worker.store.config.connection) not in aws._clients  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="region"):
        handler.worker.store.client  # type: ignore[attr-defined]  # noqa: B018
    aws.reset_clients()
