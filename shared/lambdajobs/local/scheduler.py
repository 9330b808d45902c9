"""EventBridge Scheduler, emulated for the local stack (moto stores schedules but never fires them).

Cron jobs fire at their next fire times in their time zone (`Schedule.next_fire_times`), sending the
same envelope Scheduler would, with the slot's time where Scheduler puts
`<aws.scheduler.scheduled-time>`. One-time `at(...)` schedules created by `enqueue(run_at=...)` fire
when due, send their input to their target queue, and are deleted (ActionAfterCompletion DELETE).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.spec import JobSpec

_AT = re.compile(r"^at\((\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\)$")


def slot_text(moment: datetime) -> str:
    """A scheduled time as Scheduler writes it: `2026-11-30T14:00:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class LocalScheduler:
    def __init__(
        self,
        specs: Iterable[JobSpec],
        *,
        queue_urls: dict[str, str],
        one_time_group: str | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        config: StackConfig | None = None,
    ) -> None:
        self.config = config or StackConfig()
        self.specs = [s for s in specs if s.schedule is not None]
        self.queue_urls = queue_urls
        self.one_time_group = one_time_group
        self.clock = clock
        start = clock()
        self.next_due: dict[str, datetime] = {}
        for spec in self.specs:
            assert spec.schedule is not None
            upcoming = spec.schedule.next_fire_times(1, start)
            if upcoming:
                self.next_due[spec.name] = upcoming[0]
        self.fired: list[tuple[str, str]] = []  # (job, slot) of every cron run sent
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def fire(self, job: str, slot: datetime) -> str:
        """Send the envelope of one slot of a cron job to its queue, as Scheduler does."""
        spec = next(s for s in self.specs if s.name == job)
        text = slot_text(slot)
        body = json.dumps(spec.scheduled_envelope(text), separators=(",", ":"))
        self.config.client("sqs").send_message(QueueUrl=self.queue_urls[job], MessageBody=body)
        self.fired.append((job, text))
        return f"{job}@{text}"

    def run_due(self, now: datetime | None = None) -> list[str]:
        """Fire everything due at `now` (default: the clock); returns the job ids sent."""
        now = now or self.clock()
        sent = []
        for spec in self.specs:
            assert spec.schedule is not None
            while spec.name in self.next_due and self.next_due[spec.name] <= now:
                slot = self.next_due[spec.name]
                sent.append(self.fire(spec.name, slot))
                later = spec.schedule.next_fire_times(1, slot)
                if later:
                    self.next_due[spec.name] = later[0]
                else:
                    del self.next_due[spec.name]
        sent += self._run_one_time(now)
        return sent

    def _run_one_time(self, now: datetime) -> list[str]:
        if not self.one_time_group:
            return []
        scheduler, sqs = self.config.client("scheduler"), self.config.client("sqs")
        sent = []
        listed = scheduler.list_schedules(GroupName=self.one_time_group).get("Schedules", [])
        for item in listed:
            schedule = scheduler.get_schedule(Name=item["Name"], GroupName=self.one_time_group)
            match = _AT.match(schedule["ScheduleExpression"])
            if not match:
                continue
            due = datetime.fromisoformat(match[1]).replace(tzinfo=UTC)  # our producer writes UTC
            if due > now:
                continue
            target = schedule["Target"]
            queue = target["Arn"].rsplit(":", 1)[-1]
            url = sqs.get_queue_url(QueueName=queue)["QueueUrl"]
            group = (target.get("SqsParameters") or {}).get("MessageGroupId")  # a fair queue's tenant
            sqs.send_message(
                QueueUrl=url, MessageBody=target["Input"], **({"MessageGroupId": group} if group else {})
            )
            if schedule.get("ActionAfterCompletion") == "DELETE":
                scheduler.delete_schedule(Name=item["Name"], GroupName=self.one_time_group)
            sent.append(json.loads(target["Input"]).get("id", item["Name"]))
        return sent

    def start(self, interval_seconds: float = 1.0) -> None:
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(interval_seconds,), name="scheduler", daemon=True
        )
        self._thread.start()

    def _loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.run_due()
            except Exception:  # keep firing later slots even if one send failed
                logging.getLogger("lambdajobs.local").exception("local scheduler: firing failed; retrying")

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()
            self._thread = None
