"""Alarm thresholds, declared with the job (`@job(alarms=Alarms(...))`) and read by CDK."""

from __future__ import annotations

from dataclasses import dataclass

from lambdajobs.runtime.settings import DLQ_RETENTION_SECONDS, QUEUE_RETENTION_SECONDS


@dataclass(frozen=True)
class Alarms:
    """When to page someone about a job. `None` turns one alarm off.

    Defaults: any message in the DLQ; a failed job in the DLQ for over 7 days (the DLQ deletes it 14
    days after its first enqueue, and it may have spent up to 4 of them in the job's queue, while the
    DLQ's age counts from its move: so 10 days in the DLQ at worst); a message waiting over 15 minutes;
    over 1000 messages
    waiting (for 3 minutes); any worker error (an invocation that crashed or timed out) or throttle
    in 5 minutes (throttles use up attempts).
    """

    dlq_messages_above: int | None = 0
    dlq_oldest_message_age_seconds_above: int | None = 7 * 86_400
    oldest_message_age_seconds_above: int | None = 15 * 60
    queue_depth_above: int | None = 1000
    worker_errors_above: int | None = 0
    worker_throttles_above: int | None = 0

    def check(self, job: str) -> str | None:
        for name, value in vars(self).items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                return f"job '{job}': alarms {name}={value!r}; use a whole number >= 0, or None for no alarm."
        latest = DLQ_RETENTION_SECONDS - QUEUE_RETENTION_SECONDS  # a dead letter's worst-case life there
        age = self.dlq_oldest_message_age_seconds_above
        if age is not None and age >= latest:
            return (
                f"job '{job}': alarms dlq_oldest_message_age_seconds_above={age} would fire after the DLQ "
                f"may already have deleted the message (at {latest} s in the DLQ at worst); use less."
            )
        return None
