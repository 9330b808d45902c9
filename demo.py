"""`make demo`: a scripted tour of this project's jobs on the local stack (embedded AWS, no account).

The tour is part of the example app, not of the library: it drives `handlers` (named in
pyproject.toml) through `lambdajobs.local.LocalStack`, as a user's own script would.

1. An email campaign of 240 recipients sent with `enqueue_many`: 5 invalid addresses go to the DLQ at
   once (no retries), 8 recipients hit a flaky provider and are retried with backoff, then succeed.
   The provider's quota (20 a second, `send_email`'s rate limit) holds in every second, and 10 premium
   customers' mail, sent after the whole campaign at `priority="high"`, goes out before the campaign
   is done.
2. 20 campaign messages sent again with the same job ids: deduplicated, no second email.
3. A video transcode, its progress polled and shown.
4. The daily report, fired by the local scheduler: figures to the data bucket, an email with the link.
5. The DLQ, listed with reasons.

Writes build/reports/demo.json and exits non-zero if any outcome differs from what the tour expects.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from handlers import emails, video
from handlers.emails import MAIL_PROVIDER_QUOTA, SendEmail, TransientSendError
from handlers.video import TranscodeVideo
from lambdajobs import enqueue, enqueue_many, get_status, using
from lambdajobs.local import LocalStack
from lambdajobs.ops import peek_dead_letters
from lambdajobs.project import require_jobs_module
from lambdajobs.runtime.records import JobStatus, get_statuses

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
REPORT_FILE = Path("build/reports/demo.json")
LOG_FILE = Path("build/local/demo-worker.log")
TIMEOUT_SECONDS = 100

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


def wait_final(job_ids: list[str], label: str) -> dict[str, JobStatus]:
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(label, total=len(job_ids))
        deadline = time.monotonic() + TIMEOUT_SECONDS
        while True:
            statuses = get_statuses(job_ids)
            done = sum(s.done for s in statuses.values())
            bar.update(task, completed=done)
            if done == len(job_ids) or time.monotonic() > deadline:
                return statuses
            time.sleep(0.5)


def run(local: LocalStack, provider: FlakyProvider) -> dict[str, Any]:
    figures: dict[str, Any] = {}

    console.rule("1. An email campaign")
    ids = [f"spring-sale-{i:03d}" for i in range(RECIPIENTS)]
    payloads = [
        SendEmail(
            to=address(i), subject="Spring sale", body="20% off everything this week.", campaign_id="spring"
        )
        for i in range(RECIPIENTS)
    ]
    sent = enqueue_many("send_email", payloads, job_ids=ids)
    console.print(f"enqueue_many: {len(sent) - len(sent.failed)} of {len(sent)} sent in batches of 10")
    premium_ids = [f"premium-{i:02d}" for i in range(PREMIUM)]
    premium = [
        SendEmail(to=f"vip{i:02d}@example.com", subject="Your order shipped", body="It is on its way.")
        for i in range(PREMIUM)
    ]
    enqueue_many("send_email", premium, job_ids=premium_ids, priority="high")
    console.print(f"then {PREMIUM} premium customers' mail at priority high, after the whole campaign")
    campaign = wait_final(ids + premium_ids, "campaign")
    first_done = {to: t for t, to in sorted(provider.calls, reverse=True)}  # each address's first call
    premium_last = max(first_done[p.to] for p in premium)
    bulk_last = max(t for to, t in first_done.items() if to.startswith("customer"))
    bulk_after = sum(1 for to, t in first_done.items() if to.startswith("customer") and t > premium_last)
    window = MAIL_PROVIDER_QUOTA.period_seconds
    times = sorted(t for t, _ in provider.calls)
    busiest = max(sum(1 for u in times if t <= u < t + window) for t in times)
    figures.update(
        max_sent_in_any_window=busiest,
        rate_limit=MAIL_PROVIDER_QUOTA.describe(),
        high_started_before_bulk_done=premium_last < bulk_last,
        bulk_sent_after_last_premium=bulk_after,
    )
    console.print(
        f"provider quota {MAIL_PROVIDER_QUOTA.describe()}: at most {busiest} calls in any {window} s; "
        f"the last premium mail went out with {bulk_after} campaign mails still to send"
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
    enqueue_many("send_email", [payloads[i] for i in resend], job_ids=[ids[i] for i in resend])
    drained = _wait(lambda: local.health("send_email").depth + local.health("send_email").in_flight == 0)
    after = get_statuses([ids[i] for i in resend])
    # a duplicate that ran again would show one more attempt than after the campaign
    deduplicated = sum(after[j].attempts == campaign[j].attempts for j in after) if drained else 0
    extra = len(provider.delivered) - delivered_before
    console.print(f"re-sent {len(resend)}: {deduplicated} deduplicated, {extra} extra emails")

    console.rule("3. A video transcode")
    video_id = enqueue(
        "transcode_video",
        TranscodeVideo(video_id="launch-keynote", source_uri="s3://media/keynote.mov", duration_seconds=240),
    )
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"), console=console
    ) as bar:
        task = bar.add_task("transcode", total=100)
        deadline = time.monotonic() + TIMEOUT_SECONDS
        status = get_status(video_id)
        while not status.done and time.monotonic() < deadline:
            bar.update(
                task,
                completed=status.progress or 0,
                description=f"transcode ({status.progress_message or status.state})",
            )
            time.sleep(0.2)
            status = get_status(video_id)
        bar.update(task, completed=status.progress or 0, description=f"transcode ({status.state})")
    outputs = (status.result or {}).get("outputs", {})
    console.print(f"transcode {status.state}: {', '.join(outputs) or 'no outputs'}")

    console.rule("4. The daily report, fired by the local scheduler")
    assert local.scheduler is not None
    slot = local.scheduler.next_due["daily_report"]
    report_id = local.scheduler.fire("daily_report", slot)
    console.print(f"fired the {slot:%Y-%m-%d %H:%M %Z} slot now (instead of waiting): job {report_id}")
    report = _wait_done(report_id)
    result = report.result or {}
    report_email_ok = _wait(lambda: "ops@example.com" in provider.delivered)
    console.print(f"report {report.state}: {result.get('report')}; emailed to ops: {report_email_ok}")
    if result:
        console.print(f"figures: {json.dumps(result.get('jobs', {}))}")

    console.rule("5. The dead-letter queue")
    assert local.provisioned is not None
    letters = peek_dead_letters(local.provisioned.queues["send_email"].dlq_url, config=local.config)
    table = Table("job id", "error", "reason", "attempts")
    for letter in sorted(letters, key=lambda d: d.job_id or ""):
        table.add_row(letter.job_id or "?", letter.error_type, letter.reason, letter.attempts)
    console.print(table)

    dlq_ids = {d.job_id for d in letters}
    tracked = {
        **campaign,
        **get_statuses(ids + premium_ids),
        video_id: get_status(video_id),
        report_id: report,
    }
    succeeded = [j for j, s in tracked.items() if s.state == "succeeded"]
    lost = [j for j, s in tracked.items() if s.state != "succeeded" and j not in dlq_ids]
    figures.update(
        enqueued=len(ids) + len(premium_ids) + len(resend) + 1,
        succeeded=len(succeeded),
        dead_lettered=len(dlq_ids),
        retried=len(retried),
        deduplicated=deduplicated,
        extra_emails=extra,
        cron_runs=len(local.scheduler.fired),
        report_emailed=report_email_ok,
        transcode=status.state,
        lost=len(lost),
        lost_ids=lost,
        dead_letter_reasons=sorted({d.reason for d in letters}),
    )
    return figures


def _wait(predicate: Any, timeout: float = TIMEOUT_SECONDS) -> bool:
    from lambdajobs.ops import wait_until

    return wait_until(predicate, timeout)


def _wait_done(job_id: str) -> JobStatus:
    _wait(lambda: get_status(job_id).done)
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
    }


#: The provider's quota holds in every window, and the premium mail did not wait for the campaign: a
#: quarter of it at least was still to send when the last premium mail went out.
BOUNDS = {
    "max_sent_in_any_window": lambda n: n <= MAIL_PROVIDER_QUOTA.count,
    "bulk_sent_after_last_premium": lambda n: n >= RECIPIENTS // 4,
}
BOUND_TEXT = {
    "max_sent_in_any_window": f"<= {MAIL_PROVIDER_QUOTA.count}",
    "bulk_sent_after_last_premium": f">= {RECIPIENTS // 4}",
}


def within_bounds(figures: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Figures that must stay within a bound rather than equal a value."""
    wrong: dict[str, tuple[Any, str]] = {}
    for key, bound in BOUNDS.items():
        value = figures.get(key)
        if not isinstance(value, int) or not bound(value):
            wrong[key] = (value, BOUND_TEXT[key])
    return wrong


def main() -> int:
    started = time.monotonic()
    provider = FlakyProvider({address(i): n for i, n in FLAKY.items()})
    previous_sender = emails.set_sender(provider)
    previous_encoder = video.set_encoder(video.SimulatedEncoder(seconds_per_minute=0.4))
    console.print(
        "[bold]lambdajobs demo[/bold]: the whole system on an embedded AWS emulator (moto), no account."
    )
    try:
        with LocalStack(require_jobs_module(), stack="demo", port=0, log_file=LOG_FILE) as local:
            console.print(f"local AWS endpoint {local.endpoint}; worker logs in {LOG_FILE}")
            local.start_workers(scheduler=False)  # the tour fires the report slot itself
            with using(local.config):  # this script's enqueue and get_status reach the local stack
                figures = run(local, provider)
    finally:
        emails.set_sender(previous_sender)
        video.set_encoder(previous_encoder)
    figures["seconds"] = round(time.monotonic() - started, 1)
    want = expected()
    mismatches: dict[str, tuple[Any, Any]] = {
        k: (figures.get(k), v) for k, v in want.items() if figures.get(k) != v
    }
    mismatches.update(within_bounds(figures))
    figures["ok"] = not mismatches

    summary = Table("outcome", "value", "expected", title="demo summary")
    for key in ("enqueued", *want, *BOUNDS, "seconds"):
        summary.add_row(key, str(figures.get(key)), str(want.get(key, BOUND_TEXT.get(key, ""))))
    console.print(summary)
    REPORT_FILE.parent.mkdir(parents=True, exist_ok=True)
    REPORT_FILE.write_text(json.dumps(figures, indent=2) + "\n")
    console.print(f"wrote {REPORT_FILE}")
    if mismatches:
        for key, (got, wanted) in mismatches.items():
            console.print(f"[red]unexpected {key}: got {got}, expected {wanted}[/red]")
        return 1
    console.print("[green]every outcome as expected[/green]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
