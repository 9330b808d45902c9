"""The example `send_email` job: an invalid address dies at once and is never echoed; the default
(log) sender never logs the address."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from handlers import emails
from handlers.emails import SendEmail
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status


@pytest.fixture
def worker_logs() -> Iterator[io.StringIO]:
    """Everything the worker's Powertools logger writes, as it would reach CloudWatch Logs."""
    import lambdajobs.runtime.worker  # noqa: F401  (creates the logger)

    stream = io.StringIO()
    log_handlers = logging.getLogger("lambdajobs").handlers
    previous = [h.setStream(stream) for h in log_handlers]
    yield stream
    for handler, old in zip(log_handlers, previous, strict=True):
        handler.setStream(old)


def test_redact_address_keeps_only_first_letters_and_the_tld():
    assert emails.redact_address("jane.doe@example.com") == "j***@e***.com"
    assert emails.redact_address("jane.doe@localhost") == "***"


def test_an_invalid_address_is_dead_lettered_at_once_and_never_echoed(stack, sender, clock):
    job_id = enqueue("send_email", SendEmail(to="jane.doe-at-example", subject="s", body="b"))
    runner = stack.runner("send_email")
    runner.poll()
    status = get_status(job_id)
    assert (status.state, status.attempts) == ("dead", 1)
    assert status.error["message"] == "invalid recipient address: expected name@domain.tld"
    [dead] = runner.dlq_messages()
    assert "jane.doe" not in json.dumps(dead["MessageAttributes"])
    assert sender.sent == []


def test_the_log_sender_never_logs_the_address(stack, clock, worker_logs):
    log_sender = emails.LogSender()
    previous = emails.set_sender(log_sender)
    try:
        job_id = enqueue("send_email", SendEmail(to="jane.doe@example.com", subject="s", body="b"))
        stack.runner("send_email").poll()
    finally:
        emails.set_sender(previous)
    assert get_status(job_id).state == "succeeded" and log_sender.sent == ["jane.doe@example.com"]
    logs = worker_logs.getvalue()
    assert "email sent (log sender)" in logs
    assert "jane.doe" not in logs
