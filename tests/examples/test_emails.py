"""The example `send_email` job: an invalid address dies at once and is never echoed; a sent email is
logged without its address. A campaign sent as a chord (`send_campaign`): its report runs
once, with the members' counts, and emails one summary, even when it is retried."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from handlers import emails
from handlers.emails import SendEmail
from lambdajobs import enqueue, get_status, get_statuses, get_workflow
from tests.example_fakes import crash_after_enqueue


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


def test_a_sent_email_writes_no_line(stack, clock, worker_logs):
    # GIVEN the default sender (no network)
    log_sender = emails.LogSender()
    previous = emails.set_sender(log_sender)
    try:
        # WHEN an email is sent
        job_id = enqueue("send_email", SendEmail(to="jane.doe@example.com", subject="s", body="b"))
        stack.runner("send_email").poll()
    finally:
        emails.set_sender(previous)
    # THEN the sender got the address, and the job wrote no line (its own "email sent" line is kept
    # until it fails: docs/how-to/logs.md); the provider's id is in its record
    status = get_status(job_id)
    assert status.state == "succeeded" and log_sender.sent == ["jane.doe@example.com"]
    assert len(status.result["provider_id"]) == 32
    lines = [json.loads(line) for line in worker_logs.getvalue().splitlines() if line.startswith('{"level"')]
    assert [line["message"] for line in lines if line.get("correlation_id") == job_id] == []
    assert "jane.doe" not in worker_logs.getvalue()


def campaign(n: int, invalid: set[int]) -> list[str]:
    return [f"c{i:02d}-at-example" if i in invalid else f"c{i:02d}@example.com" for i in range(n)]


def test_a_campaign_chord_reports_once_with_its_members_counts_and_one_summary_email(stack, sender, settle):
    # GIVEN a campaign of 30 recipients, 3 of them invalid, sent as a chord
    workflow_id = emails.send_campaign("nov", campaign(30, {4, 11, 29}), "November news", "Hello")
    # WHEN every mail, the callback and the summary have been delivered
    settle("send_email", "campaign_report")
    # THEN campaign_report ran once, with the members' actual counts
    flow = get_workflow(workflow_id)
    assert (flow.state, flow.callback_job_id) == ("succeeded", "campaign-nov.1.0")
    members = get_statuses([f"campaign-nov.0.{i}" for i in range(30)]).values()
    assert sum(s.state == "succeeded" for s in members) == 27 and sum(s.state == "dead" for s in members) == 3
    report = get_status(flow.callback_job_id)
    assert (report.state, report.attempts) == ("succeeded", 1)
    assert report.result == {"campaign_id": "nov", "sent": 27, "dead": 3}
    # AND marketing got exactly one summary, with those figures
    assert sender.sent.count(emails.MARKETING_ADDRESS) == 1
    assert len(sender.sent) == 27 + 1
    summary = get_status("campaign-nov.1.0.summary")
    assert (summary.state, summary.attempts) == ("succeeded", 1)


def test_a_retried_campaign_report_still_sends_one_summary_email(stack, sender, settle, monkeypatch):
    # GIVEN a campaign whose report crashes once, just after it enqueued the summary email
    with crash_after_enqueue(monkeypatch, crashes=1) as crashing:
        emails.send_campaign("dec", campaign(5, {2}), "December news", "Hello")
        # WHEN everything is delivered: the report is retried and enqueues the summary again
        settle("send_email", "campaign_report")
    # THEN the summary went out once
    assert sender.sent.count(emails.MARKETING_ADDRESS) == 1
    assert get_status("campaign-dec.1.0.summary").attempts == 1
    # AND the report did run twice, and enqueued the summary twice, under one job id
    report = get_status("campaign-dec.1.0")
    assert (report.state, report.attempts) == ("succeeded", 2)
    assert report.result == {"campaign_id": "dec", "sent": 4, "dead": 1}
    assert crashing.job_ids == ["campaign-dec.1.0.summary"] * 2
