"""`make demo`: a scripted tour of this project's jobs on the local stack (embedded AWS, no account).

The tour is part of the example app, not of the library: it drives `handlers` (named in
pyproject.toml) through `lambdajobs.local.LocalStack`, as a user's own script would.

Parts 1 to 4 run every job in threads of this process (the demo's mail provider is an object here);
part 5 on a second local stack in process mode, as `lambdajobs dev` runs it: each function in worker
processes of its own, from its staged asset, killed at its timeout, on the real clock.

1. An email campaign of 240 recipients sent as a chord (`send_campaign`): 5 invalid addresses go to
   the DLQ at once (no retries), 8 recipients hit a flaky provider and are retried with backoff, then
   succeed. The provider's quota (20 a second, `send_email`'s rate limit) holds in every second, and
   10 premium customers' mail, sent after the whole campaign at `priority="high"`, goes out before
   the campaign is done. Once every mail has finished, the chord's callback (`campaign_report`) runs
   once and emails marketing one summary with the counts the members' records hold.
2. 20 campaign messages sent again with the same job ids: deduplicated, no second email.
3. The daily report, fired by the local scheduler: figures to the data bucket, an email with the link.
4. The DLQ, listed with reasons.
5. A video published as a chain with a review (`publish_video`): a durable transcode of an hour of
   video, each format a checkpointed step with a budget of a whole invocation, so it continues in a
   fresh invocation between formats (its progress polled and shown); then it waits for signal
   `approval`, parked, until the demo sends it (`lambdajobs.signal`), and publishes; then thumbnails
   from its outputs, then the uploader notified, in that order. `durable_invocations` counts the
   transcode's invocations from its record (its attempts and its suspensions: one fresh invocation
   after each park), `steps_rerun` the runs of its steps (each logs one line with its `step_key` when
   it starts, in the workers' log) beyond the steps checkpointed.

Writes build/reports/demo.json and exits non-zero if any outcome differs from what the tour expects
(1), or if a wait ran out before what it waits for happened (3). A wait has a limit of its own (`WAITS`):
when one runs out, the run says "timed out waiting for <what> after <N> s", first, and the outcomes that
depend on it (`DEPENDS`) are "not measured", not wrong values. `--write-doc` also writes
docs/reports/demo.md from it (`--doc-only`: from the last demo.json, without running the tour).
`--report` and `--log-file` write the JSON and the workers' log elsewhere (scripts/demo_under_load.py
keeps each run's).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from itertools import pairwise
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from handlers import emails, video
from handlers.emails import MAIL_PROVIDER_QUOTA, MARKETING_ADDRESS, SendEmail, TransientSendError
from lambdajobs import (
    WorkflowStatus,
    cancel_workflow,
    enqueue,
    enqueue_many,
    get_status,
    get_workflow,
    signal,
    using,
)
from lambdajobs.local import LocalStack
from lambdajobs.ops import peek_dead_letters
from lambdajobs.project import require_jobs_module
from lambdajobs.runtime.records import JobStatus, get_statuses
from reports import header, run_info, write_page

CAMPAIGN = "spring"
RECIPIENTS = 240
INVALID = {
    17: "customer017-at-example.com",
    58: "customer058@",
    99: "customer 099@example.com",
    150: "",
    201: "@x.io",
}
FLAKY = {
    i: (2 if i in (30, 31) else 1) for i in (5, 30, 31, 77, 120, 160, 199, 230)
}  # failures before success
RESENT = 20
PREMIUM = 10
#: Part 5's video: an hour long, so each format's budget is a whole invocation from 1080p on (the
#: simulated encoder in the functions' processes takes 0.6 s, 1.2 s and 2.4 s for 720p, 1080p and 4k).
VIDEO_ID = "launch-keynote"
VIDEO_SECONDS = 3600
REVIEWER = "editor-7"
#: Part 6: a second campaign, cancelled once half its mail went out; a tenant's backlog of mail, and
#: another tenant's one mail sent after it (the queue is a fair queue: `tenant=` is its message group).
CANCELLED_CAMPAIGN = "autumn"
CANCELLED_RECIPIENTS = 80
BACKLOG = 40
REPORT_FILE = Path("build/reports/demo.json")
LOG_FILE = Path("build/local/demo-worker.log")

#: Every wait of the tour: what it waits for, and at most how long (s). Each limit is several times what
#: the wait takes on a 2-core machine with a busy loop per core beside it (scripts/demo_under_load.py
#: measures them: each wait's longest, in build/reports/demo_under_load.json), so that a limit that runs
#: out means the stack is stuck, not slow; the waits end as soon as what they wait for is done, and an idle
#: tour takes 50 to 65 s (part 5, on its own stack in process mode, about 15 s of it: the transcode's
#: wait about 9 s, 11 under load). The two waits on send_email's queue get its visibility timeout
#: (6 x 30 s) on top (`QUEUE_WAITS`): on a loaded machine messages of mails already sent can stay in
#: flight (a batch that ran past its function's timeout comes back whole) and return only after it, to be
#: deduplicated. The re-send's drain, 1 s idle, then took 125 to 140 s; one limit of 100 s for every wait
#: ran out on it once, reported as "deduplicated: got 0".
WAITS: dict[str, tuple[str, float]] = {
    "campaign": ("the campaign (every mail, then campaign_report; the premium mail)", 180),
    "callback": ("campaign_report, the chord's callback", 120),
    "summary": ("the summary email to marketing", 120),
    "drain": ("send_email's queue to drain after the re-send", 120),
    "report": ("daily_report", 120),
    "report_email": ("the report's email to ops", 120),
    "transcode": ("the transcode to encode every format and wait for its review", 120),
    "approval": ("the approved transcode to publish", 60),
    "chain": ("the video chain (thumbnails, then notify_uploader)", 120),
    "half_sent": ("half of the second campaign's mail to go out", 60),
    "cancelled": ("the cancelled campaign to end", 60),
    "fair": ("the quiet tenant's mail to start", 60),
}
QUEUE_WAITS = ("campaign", "drain")

console = Console()


class FlakyProvider:
    """The demo's mail provider: records deliveries; some recipients time out a few times first."""

    def __init__(self, failures: dict[str, int]) -> None:
        self.failures = dict(failures)
        self.delivered: list[str] = []
        self.timeouts = 0
        self.calls: list[tuple[float, str]] = []  # every call the provider counts against its quota
        self._lock = threading.Lock()

    def send(self, to: str, subject: str, body: str) -> str:
        with self._lock:
            self.calls.append((time.time(), to))
        if self.failures.get(to, 0) > 0:
            self.failures[to] -= 1
            self.timeouts += 1
            raise TransientSendError("provider timed out")
        self.delivered.append(to)
        return f"msg-{len(self.delivered)}"


def address(i: int) -> str:
    return INVALID.get(i, f"customer{i:03d}@example.com")


class Waits:
    """The tour's waits (`WAITS`): each one's outcome, how long it took, and whether it timed out."""

    def __init__(self, visibility_timeout: float = 0) -> None:
        self.outcomes: dict[str, dict[str, Any]] = {}
        self.visibility_timeout = visibility_timeout  # send_email's queue's, added to `QUEUE_WAITS`

    def until(
        self, key: str, predicate: Callable[[], bool], interval: float = 0.25, needs: tuple[str, ...] = ()
    ) -> bool:
        """Until `predicate()` holds or `WAITS[key]`'s limit runs out (then one last look); skipped, False,
        when a wait in `needs` did not succeed (what this one waits for comes after it)."""
        what, limit = WAITS[key]
        limit += self.visibility_timeout if key in QUEUE_WAITS else 0
        missed = [k for k in needs if not self.outcomes.get(k, {}).get("ok")]
        if missed:
            self.outcomes[key] = {"what": what, "limit": limit, "ok": False, "skipped": missed}
            return False
        started = time.monotonic()
        deadline = started + limit
        ok = bool(predicate())
        while not ok and time.monotonic() < deadline:
            time.sleep(interval)
            ok = bool(predicate())
        seconds = round(time.monotonic() - started, 1)
        self.outcomes[key] = {"what": what, "limit": limit, "ok": ok, "seconds": seconds}
        if not ok:
            console.print(f"[red]{timed_out_line(key, limit)}[/red]")
        return ok

    def timed_out(self) -> list[str]:
        """The waits whose limit ran out ("timed out waiting for <what> after <N> s")."""
        return [
            timed_out_line(k, o["limit"]) for k, o in self.outcomes.items() if not o["ok"] and "seconds" in o
        ]


def timed_out_line(key: str, limit: float) -> str:
    return f"timed out waiting for {WAITS[key][0]} after {limit:.0f} s"  # the limit it had


def wait_campaign(waits: Waits, workflow_id: str, premium_ids: list[str]) -> WorkflowStatus:
    """Until the campaign's chord is done (every mail finished, then its report) and the premium
    mail too; its bar counts the chord's finished members and the premium mails."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("campaign", total=RECIPIENTS + 1 + len(premium_ids))
        last: list[WorkflowStatus] = []

        def done() -> bool:
            flow = get_workflow(workflow_id)
            last[:] = [flow]
            premium_done = sum(s.done for s in get_statuses(premium_ids).values())
            finished = sum(stage.succeeded + stage.dead for stage in flow.stages)
            bar.update(task, completed=finished + premium_done)
            return flow.done and premium_done == len(premium_ids)

        waits.until("campaign", done, interval=0.5)
        return last[0]


def run(local: LocalStack, provider: FlakyProvider, waits: Waits, tally: Tally) -> dict[str, Any]:
    """Parts 1 to 4, on the stack whose jobs run in threads of this process."""
    figures: dict[str, Any] = {}

    console.rule("1. An email campaign, sent as a chord")
    subject, body = "Spring sale", "20% off everything this week."
    workflow_id = emails.send_campaign(CAMPAIGN, [address(i) for i in range(RECIPIENTS)], subject, body)
    ids = [f"{workflow_id}.0.{i}" for i in range(RECIPIENTS)]  # a member's job id: <workflow>.<stage>.<index>
    payloads = [
        SendEmail(to=address(i), subject=subject, body=body, campaign_id=CAMPAIGN) for i in range(RECIPIENTS)
    ]
    console.print(f"send_campaign: workflow {workflow_id}, {RECIPIENTS} mails, then campaign_report once")
    premium_ids = [f"premium-{i:02d}" for i in range(PREMIUM)]
    premium = [
        SendEmail(to=f"vip{i:02d}@example.com", subject="Your order shipped", body="It is on its way.")
        for i in range(PREMIUM)
    ]
    enqueue_many("send_email", premium, job_ids=premium_ids, priority="high")
    console.print(f"then {PREMIUM} premium customers' mail at priority high, after the whole campaign")
    flow = wait_campaign(waits, workflow_id, premium_ids)
    campaign = get_statuses(ids + premium_ids)
    # The callback's summary email: its job id is derived from the callback's, so it is sent once.
    callback_id = flow.callback_job_id or f"{workflow_id}.1.0"
    summary_id = f"{callback_id}.summary"
    callback = _wait_done(waits, "callback", callback_id, needs=("campaign",))
    summary = _wait_done(waits, "summary", summary_id, needs=("callback",))
    reported = callback.result or {}
    members = [campaign[j] for j in ids]
    figures.update(
        campaign_workflow=flow.state,
        # the runs of campaign_report: its record's attempts (a duplicate delivery does not run it)
        workflow_callbacks=callback.attempts,
        summary_emails=provider.delivered.count(MARKETING_ADDRESS),
        campaign_summary={"sent": reported.get("sent"), "dead": reported.get("dead")},
        campaign_members={
            "sent": sum(s.state == "succeeded" for s in members),
            "dead": sum(s.state == "dead" for s in members),
        },
        # the campaign's mails in progress at once, from their records' start and end times
        max_running_per_key=max_running(members),
    )
    console.print(
        f"chord {flow.state}: campaign_report ran {callback.attempts} time(s) and reported "
        f"{reported.get('sent')} sent, {reported.get('dead')} dead; summary email {summary.state}, "
        f"delivered {figures['summary_emails']} time(s)"
    )
    first_done = {to: t for t, to in sorted(provider.calls, reverse=True)}  # each address's first call
    window = MAIL_PROVIDER_QUOTA.period_seconds
    times = sorted(t for t, _ in provider.calls)
    # the busiest window of the calls made so far: more calls can only make it busier
    busiest = max((sum(1 for u in times if t <= u < t + window) for t in times), default=0)
    bulk = {to: t for to, t in first_done.items() if to.startswith("customer")}
    premium_calls = [first_done[p.to] for p in premium if p.to in first_done]
    premium_last = max(premium_calls) if len(premium_calls) == len(premium) else None  # all of them went
    figures.update(
        max_sent_in_any_window=busiest,
        rate_limit=MAIL_PROVIDER_QUOTA.describe(),
        high_started_before_bulk_done=None
        if premium_last is None
        else premium_last < max(bulk.values(), default=0.0),
        bulk_sent_after_last_premium=None
        if premium_last is None
        else sum(1 for t in bulk.values() if t > premium_last),
    )
    console.print(
        f"provider quota {MAIL_PROVIDER_QUOTA.describe()}: at most {busiest} calls in any {window} s; "
        f"the last premium mail went out with {figures['bulk_sent_after_last_premium']} campaign mails "
        "still to send"
    )
    retried = sorted(j for j, s in campaign.items() if s.state == "succeeded" and s.attempts > 1)
    console.print(
        f"succeeded {sum(s.state == 'succeeded' for s in campaign.values())}, "
        f"dead {sum(s.state == 'dead' for s in campaign.values())}, "
        f"retried then succeeded {len(retried)} (provider timeouts: {provider.timeouts})"
    )

    console.rule("2. The same messages sent again")
    delivered_before = len(provider.delivered)
    resend = [i for i in range(RECIPIENTS) if i not in INVALID][:RESENT]
    deduplicated: int | None = None
    extra: int | None = None
    if waits.outcomes["campaign"]["ok"]:  # re-sent while the campaign still runs, they would prove nothing
        enqueue_many("send_email", [payloads[i] for i in resend], job_ids=[ids[i] for i in resend])

        def drained() -> bool:
            health = local.health("send_email")
            return health.depth + health.in_flight == 0

        waits.until("drain", drained)
        after = get_statuses([ids[i] for i in resend])
        # a duplicate that ran again would show one more attempt than after the campaign (and keeps it:
        # a count below RESENT is wrong even when the queue did not drain in time, `SETTLED_WRONG`)
        deduplicated = sum(after[j].attempts == campaign[j].attempts for j in after)
        extra = len(provider.delivered) - delivered_before
        console.print(f"re-sent {len(resend)}: {deduplicated} deduplicated, {extra} extra emails")
    else:
        resend = []
        console.print("not re-sent: the campaign did not finish in time")

    console.rule("3. The daily report, fired by the local scheduler")
    assert local.scheduler is not None
    slot = local.scheduler.next_due["daily_report"]
    report_id = local.scheduler.fire("daily_report", slot)
    console.print(f"fired the {slot:%Y-%m-%d %H:%M %Z} slot now (instead of waiting): job {report_id}")
    report = _wait_done(waits, "report", report_id)
    result = report.result or {}
    report_email_ok = waits.until(
        "report_email", lambda: "ops@example.com" in provider.delivered, needs=("report",)
    )
    console.print(f"report {report.state}: {result.get('report')}; emailed to ops: {report_email_ok}")
    if result:
        console.print(f"figures: {json.dumps(result.get('jobs', {}))}")

    console.rule("4. The dead-letter queue")
    assert local.provisioned is not None
    letters = peek_dead_letters(local.provisioned.queues["send_email"].dlq_url, config=local.config)
    table = Table("job id", "error", "reason", "attempts")
    for letter in sorted(letters, key=lambda d: d.job_id or ""):
        table.add_row(letter.job_id or "?", letter.error_type, letter.reason, letter.attempts)
    console.print(table)

    tally.dlq_ids |= {d.job_id for d in letters if d.job_id}
    tally.tracked.update({**campaign, **get_statuses(ids + premium_ids), report_id: report})
    tally.sent_by_workflows.update(get_statuses([callback_id, summary_id]))
    tally.enqueued += len(ids) + len(premium_ids) + len(resend) + 1
    tally.reasons |= {d.reason for d in letters}
    figures.update(run_flow_control(provider, waits))
    figures.update(
        retried=len(retried),
        deduplicated=deduplicated,
        extra_emails=extra,
        cron_runs=len(local.scheduler.fired),
        report_emailed=report_email_ok,
    )
    return figures


def run_flow_control(provider: FlakyProvider, waits: Waits) -> dict[str, Any]:
    """Part 6: a campaign cancelled halfway (`cancel_workflow`), and a quiet tenant's mail behind a
    noisy tenant's backlog."""
    console.rule("6. A campaign cancelled halfway; a quiet tenant behind a noisy one")
    recipients = [f"autumn{i:03d}@example.com" for i in range(CANCELLED_RECIPIENTS)]
    workflow_id = emails.send_campaign(CANCELLED_CAMPAIGN, recipients, "Autumn sale", "Leaves are falling.")
    wanted = set(recipients)

    def sent() -> int:
        return sum(1 for to in provider.delivered if to in wanted)

    waits.until("half_sent", lambda: sent() >= CANCELLED_RECIPIENTS // 2, interval=0.05)
    cancelled = cancel_workflow(workflow_id)
    recorded = time.time()  # every member's cancel is recorded by now
    console.print(
        f"cancel_workflow({workflow_id!r}) with {sent()} of {CANCELLED_RECIPIENTS} sent: "
        f"{cancelled.cancelled} cancelled, {cancelled.requested} asked to stop, {cancelled.finished} finished"
    )
    waits.until("cancelled", lambda: get_workflow(workflow_id).done, needs=("half_sent",))
    flow = get_workflow(workflow_id)
    stopped = {m.job_id for m in cancelled.members if m.outcome == "cancelled"}
    members = get_statuses([m.job_id for m in cancelled.members])
    # a job cancelled before it ran that ran after its cancel was recorded: its mail (the provider's
    # calls) after that time, or, for the callback, any run at all
    late = {to for t, to in provider.calls if t > recorded}
    by_id = {f"{workflow_id}.0.{i}": to for i, to in enumerate(recipients)}
    ran = sum(
        1 for j in stopped if (j in by_id and by_id[j] in late) or (j not in by_id and members[j].attempts)
    )
    states = dict(sorted(Counter(s.state for s in members.values()).items()))
    console.print(
        f"campaign {flow.state}: members {states}; {sent()} mails sent in all; "
        f"cancelled jobs that ran after their cancel: {ran}"
    )

    enqueue_many(
        "send_email",
        [
            SendEmail(to=f"bulk{i:03d}@example.com", subject="Newsletter", body="News.")
            for i in range(BACKLOG)
        ],
        tenant="bulk-sender",
    )
    enqueued = time.time()
    quiet = enqueue(
        "send_email", SendEmail(to="help@example.com", subject="Your ticket", body="Answered."), tenant="acme"
    )
    waits.until("fair", lambda: get_status(quiet).started_at is not None, interval=0.05)
    started = get_status(quiet).started_at
    latency = (
        round(datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() - enqueued, 2)
        if started
        else None
    )
    console.print(
        f"tenant bulk-sender: {BACKLOG} mails; then tenant acme's one mail started {latency} s after its "
        "enqueue"
    )
    return {
        "cancelled_ran": ran,
        "cancelled_campaign": {"workflow_done": flow.done, "members": states},
        "fair_queue_latency_seconds": latency,
    }


@dataclass
class Tally:
    """The jobs the tour follows, across its two stacks: their statuses, and the DLQs' job ids."""

    tracked: dict[str, JobStatus] = field(default_factory=dict)
    #: Jobs that workflows sent (callbacks, a chain's later steps): lost too if they neither
    #: succeeded nor reached a DLQ.
    sent_by_workflows: dict[str, JobStatus] = field(default_factory=dict)
    dlq_ids: set[str] = field(default_factory=set)
    reasons: set[str] = field(default_factory=set)
    enqueued: int = 0

    def figures(self) -> dict[str, Any]:
        succeeded = [j for j, s in self.tracked.items() if s.state == "succeeded"]
        everything = {**self.tracked, **self.sent_by_workflows}
        lost = [j for j, s in everything.items() if s.state != "succeeded" and j not in self.dlq_ids]
        return {
            "enqueued": self.enqueued,
            "succeeded": len(succeeded),
            "dead_lettered": len(self.dlq_ids),
            "lost": len(lost),
            "lost_ids": lost,
            "dead_letter_reasons": sorted(self.reasons),
        }


def run_video(
    local: LocalStack, waits: Waits, tally: Tally, log_file: Path, log_offset: int
) -> dict[str, Any]:
    """Part 5, on a stack in process mode: the durable transcode, its review, then the rest of its chain."""
    console.rule("5. A video published as a chain: a durable transcode, a review, thumbnails, notify")
    console.print(
        "on a second local stack in process mode: each function in worker processes of its own, "
        "killed at its timeout, on the real clock"
    )
    video_flow_id = video.publish_video(
        VIDEO_ID,
        "s3://media/keynote.mov",
        uploader_id="user-1042",
        duration_seconds=VIDEO_SECONDS,
        review_timeout_seconds=video.REVIEW_TIMEOUT_SECONDS,
    )
    steps = [f"{video_flow_id}.{step}.0" for step in range(3)]
    video_id = steps[0]
    budgets = ", ".join(f"{f} {video.format_budget(f, VIDEO_SECONDS):.0f} s" for f in video.ALL_FORMATS)
    console.print(
        f"transcode_video {video_id}: an hour of video, each format a step (budgets {budgets}; "
        f"timeout {video.TIMEOUT_SECONDS} s), then a review of at most "
        f"{video.REVIEW_TIMEOUT_SECONDS // 3600} h"
    )
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), console=console
    ) as bar:
        task = bar.add_task("transcode", total=100)
        polled = [get_status(video_id)]

        def reviewing() -> bool:
            status = polled[0] = get_status(video_id)
            parked = status.state in ("sleeping", "waiting_signal")
            what = status.described_state if parked else status.progress_message or status.state
            # its invocations so far: its first, one after each park (one per attempt after a retry)
            invocations = status.attempts + status.suspensions - parked
            bar.update(
                task,
                completed=status.progress or 0,
                description=f"transcode ({what}; invocations: {invocations})",
            )
            return status.done or status.state == "waiting_signal"

        waits.until("transcode", reviewing, interval=0.2)
        status = polled[0]
    parked = status.state == "waiting_signal"
    console.print(
        f"transcode {status.described_state}: {', '.join(s.name for s in status.steps) or 'no step'} done in "
        f"{status.attempts + status.suspensions - 1} invocation(s); its timeout wakes it at {status.wake_at}"
    )
    woke = None
    if parked:
        review = {"approved": True, "reviewer": REVIEWER, "note": "ship it"}
        woke = signal(video_id, video.APPROVAL, review).woke
        console.print(f"signal({video_id!r}, {video.APPROVAL!r}, {review}): woke it: {woke}")
    status = _wait_done(waits, "approval", video_id, needs=("transcode",))
    result = status.result or {}
    durations = ", ".join(f"{s.name} {(s.duration_ms or 0) / 1000:.1f} s" for s in status.steps)
    invocations = status.attempts + status.suspensions
    executions = step_runs(log_file, log_offset, video_id)
    console.print(
        f"transcode {status.state}: published {result.get('published')}; steps {durations}; "
        f"{invocations} invocations ({status.attempts} attempt(s), {status.suspensions} parks: "
        f"continuations and the review); {executions} step runs for {len(status.steps)} steps"
    )
    waits.until("chain", lambda: get_workflow(video_flow_id).done, needs=("approval",))
    video_flow = get_workflow(video_flow_id)
    chain_steps = sorted(get_statuses(steps).values(), key=lambda s: s.started_at or "~")
    told = get_status(steps[2]).result or {}
    console.print(f"chain {video_flow.state}: {' -> '.join(s.job or '?' for s in chain_steps)}")
    console.print(f"notify_uploader would send: {told.get('message')!r}")

    assert local.provisioned is not None
    for job in ("transcode_video", "make_thumbnails", "notify_uploader"):
        letters = peek_dead_letters(local.provisioned.queues[job].dlq_url, config=local.config)
        tally.dlq_ids |= {d.job_id for d in letters if d.job_id}
        tally.reasons |= {d.reason for d in letters}
    tally.tracked[video_id] = status
    tally.sent_by_workflows.update(get_statuses(steps[1:]))
    tally.enqueued += 1
    return {
        "transcode": status.state,
        "chain_example": {
            "state": video_flow.state,
            "steps": [s.job or "?" for s in chain_steps],  # "?": a step not started
            # each step started only once the one before had finished
            "sequential": all(
                a.finished_at is not None and b.started_at is not None and a.finished_at <= b.started_at
                for a, b in pairwise(chain_steps)
            ),
        },
        "approval_example": {
            "waiting_for": polled[0].waiting_for,  # what the job read when the demo signalled it
            "signal_woke": woke,
            "published": result.get("published"),
        },
        # the first run, one fresh invocation after each park (continuations, the review's wake-up),
        # one per retry: from the job's record
        "durable_invocations": invocations,
        "durable_steps": [s.name for s in status.steps],
        # the steps' runs (each logs its step_key when it starts) beyond the steps checkpointed
        "steps_rerun": executions - len(status.steps),
    }


def step_runs(log_file: Path, offset: int, job_id: str) -> int:
    """How many times the steps of `job_id` ran: the workers' log lines (from `offset`: this run's part
    of the file) whose `step_key` is one of the job's."""
    runs = 0
    with log_file.open("rb") as log:
        log.seek(offset)
        for raw in log:
            try:
                line = json.loads(raw)
            except ValueError:
                continue  # not a log record (a process's own output)
            if isinstance(line, dict) and str(line.get("step_key") or "").startswith(f"{job_id}:"):
                runs += 1
    return runs


def max_running(statuses: list[JobStatus]) -> int:
    """The most of these jobs in progress at once, from their records' start and end times."""
    spans = sorted(
        (datetime.fromisoformat(s.started_at), datetime.fromisoformat(s.finished_at))
        for s in statuses
        if s.started_at and s.finished_at
    )
    return max((sum(1 for a, b in spans if a <= start < b) for start, _ in spans), default=0)


def _wait_done(waits: Waits, key: str, job_id: str, needs: tuple[str, ...] = ()) -> JobStatus:
    waits.until(key, lambda: get_status(job_id).done, needs=needs)
    return get_status(job_id)


def expected() -> dict[str, Any]:
    return {
        "succeeded": RECIPIENTS - len(INVALID) + PREMIUM + 2,  # the campaign, the transcode, the report
        "dead_lettered": len(INVALID),
        "retried": len(FLAKY),
        "deduplicated": RESENT,
        "extra_emails": 0,
        "cron_runs": 1,
        "report_emailed": True,
        "transcode": "succeeded",
        "lost": 0,
        "high_started_before_bulk_done": True,
        "campaign_workflow": "succeeded",
        "workflow_callbacks": 1,
        "summary_emails": 1,
        "campaign_summary": {"sent": RECIPIENTS - len(INVALID), "dead": len(INVALID)},
        "chain_example": {
            "state": "succeeded",
            "steps": ["transcode_video", "make_thumbnails", "notify_uploader"],
            "sequential": True,
        },
        "approval_example": {"waiting_for": video.APPROVAL, "signal_woke": True, "published": True},
        "steps_rerun": 0,
        "cancelled_ran": 0,
    }


#: Why an outcome matters, printed when it is not as expected.
WHY = {
    "workflow_callbacks": "the chord's callback (campaign_report) must run exactly once",
    "summary_emails": "marketing must get exactly one summary email, even if the callback is retried",
    "campaign_summary": "campaign_report must report the campaign's outcomes",
    "campaign_summary_matches_records": "what campaign_report reported must be the members' own "
    "outcomes (their job records)",
    "approval_example": "the transcode must wait for signal approval, be woken by it, and publish",
    "steps_rerun": "a durable job's step that finished and was checkpointed must never run again",
    "durable_invocations": "an hour of video must be encoded across invocations, a format in each",
}


def consistent(figures: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Figures that must agree with each other: the callback's counts and the members' records."""
    reported, recorded = figures.get("campaign_summary"), figures.get("campaign_members")
    return {} if reported == recorded else {"campaign_summary_matches_records": (reported, recorded)}


#: The provider's quota holds in every window, and the premium mail did not wait for the campaign: at
#: least one campaign mail in 24 was still to send when the last premium mail went out. (Typically 85 to
#: 155 of the 240 were; the 10 premium mails arrive in one batch, whose records a worker runs one after
#: another, each waiting up to a second for its slot, so on a loaded 2-core machine the last one went
#: out with as few as 20 left: a quarter, the earlier bound, failed about one run in five.)
#: The transcode of an hour of video runs in at least 3 invocations: a format in each (its budget is a
#: whole invocation from 1080p on), then one more after its review's signal (`durable_invocations`).
BOUNDS = {
    "max_sent_in_any_window": lambda n: n <= MAIL_PROVIDER_QUOTA.count,
    "bulk_sent_after_last_premium": lambda n: n >= RECIPIENTS // 24,
    "durable_invocations": lambda n: n >= 3,
    # the campaign's mails in progress at once: its concurrency key's cap holds
    "max_running_per_key": lambda n: 1 <= n <= emails.CAMPAIGN_CONNECTIONS.limit,
    # measured, not judged: the fair queue's delay of a quiet tenant behind a noisy one's backlog
    "fair_queue_latency_seconds": lambda n: n >= 0,
}
BOUND_TEXT = {
    "max_sent_in_any_window": f"<= {MAIL_PROVIDER_QUOTA.count}",
    "bulk_sent_after_last_premium": f">= {RECIPIENTS // 24}",
    "durable_invocations": ">= 3",
    "max_running_per_key": f"1 to {emails.CAMPAIGN_CONNECTIONS.limit}",
    "fair_queue_latency_seconds": "a number of seconds",
}


#: The waits (`WAITS`) each outcome depends on: when one of them timed out (or was skipped after one that
#: did), the outcome is "not measured", not a wrong value. `max_sent_in_any_window` and `cron_runs`
#: depend on none: the calls made so far, and the slots fired.
DEPENDS: dict[str, tuple[str, ...]] = {
    "succeeded": ("campaign", "transcode", "report"),
    "dead_lettered": ("campaign",),
    "retried": ("campaign",),
    "deduplicated": ("campaign", "drain"),
    "extra_emails": ("campaign", "drain"),
    "report_emailed": ("report", "report_email"),
    "transcode": ("transcode", "approval"),
    "lost": ("campaign", "callback", "summary", "transcode", "approval", "chain", "report"),
    "high_started_before_bulk_done": ("campaign",),
    "campaign_workflow": ("campaign",),
    "workflow_callbacks": ("campaign", "callback"),
    "summary_emails": ("campaign", "callback", "summary"),
    "campaign_summary": ("campaign", "callback"),
    "campaign_summary_matches_records": ("campaign", "callback"),
    "chain_example": ("transcode", "approval", "chain"),
    "bulk_sent_after_last_premium": ("campaign",),
    "max_running_per_key": ("campaign",),
    "approval_example": ("transcode", "approval"),
    "durable_invocations": ("transcode", "approval"),
    "steps_rerun": ("transcode", "approval"),
    "cancelled_ran": ("half_sent", "cancelled"),
    "fair_queue_latency_seconds": ("fair",),
}

#: Outcomes a later look can only move further from the expected value (a duplicate that ran, an email
#: sent, stays so): one already past it is wrong even when a wait it depends on timed out.
SETTLED_WRONG: dict[str, Callable[[Any], bool]] = {
    "deduplicated": lambda n: isinstance(n, int) and n < RESENT,
    "extra_emails": lambda n: isinstance(n, int) and n > 0,
    "workflow_callbacks": lambda n: isinstance(n, int) and n > 1,
    "summary_emails": lambda n: isinstance(n, int) and n > 1,
    "steps_rerun": lambda n: isinstance(n, int) and n > 0,
    "cancelled_ran": lambda n: isinstance(n, int) and n > 0,
}


def within_bounds(figures: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Figures that must stay within a bound rather than equal a value."""
    wrong: dict[str, tuple[Any, str]] = {}
    for key, bound in BOUNDS.items():
        value = figures.get(key)
        if not isinstance(value, int | float) or isinstance(value, bool) or not bound(value):
            wrong[key] = (value, BOUND_TEXT[key])
    return wrong


def judge(figures: dict[str, Any]) -> tuple[dict[str, tuple[Any, Any]], dict[str, str]]:
    """The outcomes not as expected, and those not measured (what a timed-out wait of theirs says)."""
    want = expected()
    wrong: dict[str, tuple[Any, Any]] = {
        k: (figures.get(k), v) for k, v in want.items() if figures.get(k) != v
    }
    wrong.update(within_bounds(figures))
    wrong.update(consistent(figures))
    waits: dict[str, dict[str, Any]] = figures.get("waits") or {}  # none in a report written before them
    not_measured: dict[str, str] = {}
    for key in (*want, *BOUNDS, "campaign_summary_matches_records"):
        missed = [w for w in DEPENDS.get(key, ()) if w in waits and not waits[w]["ok"]]
        if not missed or SETTLED_WRONG.get(key, lambda _: False)(figures.get(key)):
            continue
        cause = missed[0]
        while "skipped" in waits[cause]:  # skipped after another that timed out: that one is the cause
            cause = waits[cause]["skipped"][0]
        not_measured[key] = timed_out_line(cause, waits[cause]["limit"])
        wrong.pop(key, None)
    return wrong, not_measured


def render(figures: dict[str, Any]) -> list[str]:
    """docs/reports/demo.md: the run's outcomes against what the tour expects."""
    want = expected()
    timed_out = figures.get("timed_out", [])
    not_measured = figures.get("not_measured", {})
    verdict = (
        "every outcome as expected"
        if figures.get("ok")
        else "a wait timed out"
        if timed_out and not figures.get("wrong")
        else "some outcomes NOT as expected"
    )
    lines = header("Demo run", str(REPORT_FILE), "python demo.py --write-doc", figures.get("run"))
    lines += [
        f"The tour ({verdict}) took {figures.get('seconds')} s. The tutorial's demo page says what each "
        "outcome means.",
        "",
    ]
    lines += [f"- **{line}**" for line in timed_out] + ([""] if timed_out else [])
    lines += ["| outcome | value | expected |", "|---|---|---|"]
    for key in ("enqueued", *want, *BOUNDS):
        wanted = want.get(key, BOUND_TEXT.get(key, ""))
        value = f"not measured: {not_measured[key]}" if key in not_measured else _cell(figures.get(key))
        lines.append(f"| `{key}` | {value} | {_cell(wanted)} |")
    return lines


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text.replace("|", "\\|")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python demo.py", description="the scripted tour (make demo)")
    parser.add_argument("--write-doc", action="store_true", help="also write docs/reports/demo.md")
    parser.add_argument("--doc-only", action="store_true", help="write the page from the last demo.json")
    parser.add_argument("--report", type=Path, default=REPORT_FILE, help=f"the JSON to write ({REPORT_FILE})")
    parser.add_argument("--log-file", type=Path, default=LOG_FILE, help=f"the workers' log ({LOG_FILE})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.doc_only:
        figures = json.loads(args.report.read_text())
        console.print(f"wrote {write_page('demo', render(figures))} from {args.report}")
        return 0 if figures.get("ok") else 1
    started = time.monotonic()
    provider = FlakyProvider({address(i): n for i, n in FLAKY.items()})
    previous_sender = emails.set_sender(provider)
    console.print(
        "[bold]lambdajobs demo[/bold]: the whole system on an embedded AWS emulator (moto), no account."
    )
    tally = Tally()
    jobs = require_jobs_module()
    try:
        with LocalStack(jobs, stack="demo", port=0, log_file=args.log_file) as local:
            console.print(f"local AWS endpoint {local.endpoint}; worker logs in {args.log_file}")
            local.start_workers(scheduler=False)  # the tour fires the report slot itself
            waits = Waits(next(s for s in local.specs if s.name == "send_email").visibility_timeout_seconds)
            with using(local.config):  # this script's enqueue and get_status reach the local stack
                figures = run(local, provider, waits, tally)
    finally:
        emails.set_sender(previous_sender)
    # One stack at a time: moto keeps its state per process, and a stack starts by resetting it.
    args.log_file.parent.mkdir(parents=True, exist_ok=True)
    log_offset = args.log_file.stat().st_size if args.log_file.exists() else 0
    with LocalStack(jobs, stack="demo", port=0, log_file=args.log_file, processes=True) as local:
        local.start_workers(scheduler=False)
        with using(local.config):
            figures.update(run_video(local, waits, tally, args.log_file, log_offset))
    figures.update(tally.figures())
    figures["seconds"] = round(time.monotonic() - started, 1)
    figures["waits"] = waits.outcomes
    figures["timed_out"] = waits.timed_out()
    mismatches, not_measured = judge(figures)
    figures["not_measured"] = not_measured
    figures["wrong"] = [
        f"unexpected {key}: got {got}, expected {wanted}" + (f" ({WHY[key]})" if key in WHY else "")
        for key, (got, wanted) in mismatches.items()
    ]
    figures["ok"] = not mismatches and not figures["timed_out"]
    figures["run"] = run_info()

    want = expected()
    summary = Table("outcome", "value", "expected", title="demo summary")
    for key in ("enqueued", *want, *BOUNDS, "seconds"):
        value = "not measured (a wait timed out)" if key in not_measured else str(figures.get(key))
        summary.add_row(key, value, str(want.get(key, BOUND_TEXT.get(key, ""))))
    console.print(summary)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(figures, indent=2) + "\n")
    console.print(f"wrote {args.report}")
    if args.write_doc:
        console.print(f"wrote {write_page('demo', render(figures))}")
    # a timed-out wait first: the outcomes it leaves unmeasured follow, then the ones measured wrong
    for line in figures["timed_out"]:
        console.print(f"[red]{line}[/red]")
    for key, line in not_measured.items():
        console.print(f"[yellow]not measured: {key}: {line}[/yellow]")
    for line in figures["wrong"]:
        console.print(f"[red]{line}[/red]")
    if mismatches:
        return 1
    if figures["timed_out"]:
        return 3
    console.print("[green]every outcome as expected[/green]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
