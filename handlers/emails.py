"""Email campaign jobs: one `send_email` job per recipient, and `campaign_report` once they are done.

The mail provider accepts at most 20 messages a second from this account (its quota), whoever sends
them: every worker of `send_email` shares one rate limiter, so a campaign of any size never gets
"rate limit exceeded". Premium customers' mail goes at `priority="high"`: its own queue with twice
the concurrency, and it does not wait behind a campaign's backlog for the limiter either.

`send_campaign` sends a campaign as a chord: every recipient's `send_email`, then `campaign_report`
once all of them have finished (delivered or dead), which emails one summary to marketing.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from typing import Protocol

from pydantic import BaseModel, Field

from lambdajobs import (
    ConcurrencyKey,
    JobContext,
    PermanentError,
    RateLimit,
    StackConfig,
    chord,
    enqueue,
    group,
    job,
    sig,
)

# Deliberately simple: one '@', a dot in the domain, no spaces. Real deliverability is the sender's job.
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SendEmail(BaseModel):
    to: str = Field(description="recipient address")
    subject: str = Field(max_length=998)
    body: str
    campaign_id: str | None = None


class TransientSendError(Exception):
    """The mail provider failed in a way that may pass (timeout, throttling, 5xx): retry."""


class Sender(Protocol):
    def send(self, to: str, subject: str, body: str) -> str:
        """Send one message; return the provider's message id. Raise TransientSendError to retry."""
        ...


def redact_address(address: str) -> str:
    """j***@e***.com: enough to tell messages apart in logs, not enough to identify anyone."""
    local, _, domain = address.partition("@")
    host, _, tld = domain.rpartition(".")
    return f"{local[:1]}***@{host[:1]}***.{tld}" if host else "***"


class LogSender:
    """The default sender: no network. It keeps the addresses it was given and returns a made-up
    provider id; `send_email` logs one redacted line per message, whichever sender is plugged in
    (written if the job fails: a success writes no line)."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, to: str, subject: str, body: str) -> str:
        self.sent.append(to)
        return uuid.uuid4().hex


_sender: Sender = LogSender()


def set_sender(sender: Sender) -> Sender:
    """Plug in a real sender (SES, an HTTP API); returns the previous one."""
    global _sender
    previous, _sender = _sender, sender
    return previous


def get_sender() -> Sender:
    return _sender


#: The provider's sending quota (per account: every job that sends mail shares it by name).
MAIL_PROVIDER_QUOTA = RateLimit("mail_provider", 20, per="second")
#: A campaign holds at most this many of the provider's connections at once, so one campaign never
#: takes them all from other campaigns and transactional mail (mail outside a campaign is not capped).
CAMPAIGN_CONNECTIONS = ConcurrencyKey("campaign_id", 4)


@job(
    timeout_seconds=30,
    max_attempts=5,
    max_concurrency=10,
    pii_fields=("to",),
    rate_limit=MAIL_PROVIDER_QUOTA,
    concurrency_key=CAMPAIGN_CONNECTIONS,
    priorities=("high", "normal"),
    # an operator finds a campaign's mails by its id: `lambdajobs search send_email campaign_id c-1`
    searchable=("campaign_id",),
)
def send_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
    if not _ADDRESS.match(payload.to):
        # Never echo the address: it is personal data, and this message lands in the DLQ reason.
        raise PermanentError("invalid recipient address: expected name@domain.tld")
    provider_id = get_sender().send(payload.to, payload.subject, payload.body)
    ctx.logger.info("email sent", extra={"to": redact_address(payload.to), "provider_id": provider_id})
    return {"provider_id": provider_id}


#: Who gets a campaign's summary when the caller names no one.
MARKETING_ADDRESS = "marketing@example.com"


class CampaignReport(BaseModel):
    campaign_id: str = Field(min_length=1, max_length=100)
    notify: str = Field(default=MARKETING_ADDRESS, description="who gets the summary email")


def campaign_workflow_id(campaign_id: str) -> str:
    """One workflow per campaign: sending the same campaign again sends nothing twice."""
    return f"campaign-{campaign_id}"


@job(timeout_seconds=30, max_attempts=3, pii_fields=("notify",), enqueues=("send_email",))
def campaign_report(payload: CampaignReport, ctx: JobContext) -> dict[str, object]:
    """A campaign chord's callback: runs once every recipient's `send_email` has finished, and emails
    one summary. Its counts come with the message (`ctx.workflow.parents`): nothing to read."""
    if ctx.workflow is None or ctx.workflow.parents is None:
        raise PermanentError(
            "campaign_report is a campaign's callback: send the campaign with send_campaign()"
        )
    parents = ctx.workflow.parents
    sent, dead = parents.succeeded, parents.dead
    summary = SendEmail(
        to=payload.notify,
        subject=f"Campaign {payload.campaign_id}: {sent} sent, {dead} not delivered",
        body=f"Campaign {payload.campaign_id} is done: {sent} of {parents.total} emails sent, "
        f"{dead} could not be delivered (see the send_email DLQ for the reasons).",
    )
    # The summary's job id is derived from this job's own: a retry of this callback (or a duplicate
    # delivery of it) enqueues the same job id again, and send_email runs a job id once.
    enqueue("send_email", summary, job_id=f"{ctx.job_id}.summary")
    ctx.logger.info(
        "campaign summary enqueued", extra={"campaign_id": payload.campaign_id, "sent": sent, "dead": dead}
    )
    return {"campaign_id": payload.campaign_id, "sent": sent, "dead": dead}


def send_campaign(
    campaign_id: str,
    recipients: Iterable[str],
    subject: str,
    body: str,
    *,
    notify: str = MARKETING_ADDRESS,
    config: StackConfig | None = None,
) -> str:
    """Send one email per recipient, then one summary to `notify` once they have all finished; return
    the workflow id (`campaign-<campaign_id>`; follow it with `get_workflow`). Each recipient's job id
    is `campaign-<campaign_id>.0.<index>`, the report's `campaign-<campaign_id>.1.0`. Sending the same
    campaign again sends nothing twice.

    Raises:
        PayloadValidationError: a payload that does not fit (a subject over 998 characters), before
            anything is sent.
        WorkflowError: no recipients, or the campaign id is taken by another campaign.

    Example:
        >>> send_campaign("spring", ["ada@example.com", "bob@example.com"], "Spring sale", "20% off")
        'campaign-spring'
    """
    mails = group(
        sig("send_email", SendEmail(to=to, subject=subject, body=body, campaign_id=campaign_id))
        for to in recipients
    )
    report = sig("campaign_report", CampaignReport(campaign_id=campaign_id, notify=notify))
    return chord(mails, report).enqueue(workflow_id=campaign_workflow_id(campaign_id), config=config)
