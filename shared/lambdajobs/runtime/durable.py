"""Durable jobs: checkpointed steps, durable sleeps, signals, and jobs longer than an invocation.

A job becomes durable by using its context: `ctx.step(name, fn, *args, **kwargs)` runs `fn` once and
checkpoints its JSON result on the job's record (`step:<name>`); a later attempt or continuation of
the same job id gets the checkpoint back instead of running it again. `ctx.sleep(seconds)` and
`ctx.wait_for_signal(name, timeout_seconds)` park the job: the invocation ends, the record reads
`sleeping` or `waiting_signal` with its wake-up, and a copy of the message (SQS delay up to 15
minutes, a one-time EventBridge Scheduler schedule beyond) continues it then, using no attempt.
When the time left in an invocation will not fit the next step, the job continues the same way in a
fresh invocation, after 1 s.

How a parked job resumes, and why duplicates cannot wake it:

1. the run raises `Suspend` (a `BaseException`: a job's `except Exception` does not swallow it) out of
   the job function; Powertools leaves the lock alone, and the worker decides `Park`;
2. the executor sends the copy first (or creates the schedule), then parks the record under the run's
   lock (`lifecycle.suspend`). A record that reads parked therefore always has its copy on the way;
3. a run may take a parked record only once its wake-up is due (`JobRecord.may_start`), and only for
   the attempt it was parked in or a later one. Any other message of the job meets a record that
   refuses it and is dropped as a duplicate; the copy that carries the wake-up (`ATTR_RESUME`) and
   arrives early by a clock's difference is handed back until the wake-up instead;
4. if the park write fails, the record keeps the run's lock until the invocation's deadline: the copy
   waits for the lock and takes it over, and the job replays to where it was.

A crash between a step's effect and its checkpoint runs that step again, once, in the next attempt:
steps are at least once, and `ctx.step_key` (job id and step name) is the key to make an external
call idempotent. Steps are checkpointed on the record itself (no other item, no query): each costs one
UpdateItem, whose write units grow with the record (1 per KB), so a step's result is kept small
(`MAX_STEP_BYTES`; keep large data in the stack's bucket and return its key).

This module runs in the Lambda asset: it imports nothing heavy at import time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime.context import LockLost, Suspend  # defined there: the worker catches them
from lambdajobs.runtime.errors import MaxDurationError, SignalTimeoutError, StepError
from lambdajobs.runtime.job_record import JobRecord, JobState

if TYPE_CHECKING:
    from lambdajobs.runtime.config import StackConfig

#: A step's result as checkpointed (JSON text) is at most this large; the checkpoints of one job
#: together at most `MAX_STEPS_BYTES` (a DynamoDB item holds 400 KB, with the record's other fields).
MAX_STEP_BYTES = 32 * 1024
MAX_STEPS_BYTES = 256 * 1024
MAX_STEP_NAME = 100
#: A signal's data (JSON text) is at most this large.
MAX_SIGNAL_BYTES = 32 * 1024
#: A message body kept on the record of a job waiting for a signal (the signal's wake-up sends it).
MAX_RESUME_BODY_BYTES = 64 * 1024
#: The longest wait SQS can delay a message; a wake-up further away is a one-time schedule.
MAX_SQS_DELAY_SECONDS = 900
#: A continuation (the next step will not fit the invocation) resumes after this long: never before
#: the run that parked it has released its lock.
CONTINUE_DELAY_MS = 1000
#: Names lambdajobs gives to sleeps and signal waits start with this (a step's name may not).
RESERVED = "~"


@dataclass(frozen=True)
class StepInfo:
    """A step done, as `get_status` shows it: its name, how long it ran (ms) and when it ended."""

    name: str
    duration_ms: int | None
    finished_at: str | None


def steps_of(record: JobRecord) -> list[StepInfo]:
    """The job's steps done (not its sleeps and signal waits), in the order they ended."""
    found = [
        StepInfo(name, _int(value.get("ms")), _str(value.get("at")))
        for name, value in (record.steps or {}).items()
        if not name.startswith(RESERVED) and "r" in value
    ]
    return sorted(found, key=lambda s: (s.finished_at or "", s.name))


def _int(value: Any) -> int | None:
    return int(value) if value is not None else None


def _str(value: Any) -> str | None:
    return str(value) if value is not None else None


def iso_ms(epoch_ms: int) -> str:
    return (
        datetime.fromtimestamp(epoch_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


def _as_json(value: Any, what: str, limit: int, *, strict: bool = False) -> str:
    """`value` as JSON text: a step's result as a job's result is (datetimes, decimals and the like
    become strings), or `strict`ly (a signal's data: anything but JSON is refused)."""
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    try:
        text = json.dumps(value, default=None if strict else str, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise StepError(f"{what} is not JSON ({exc}); return plain data (dict, list, str, numbers).") from exc
    size = len(text.encode())
    if size > limit:
        raise StepError(
            f"{what} is {size} bytes as JSON, above the {limit}-byte limit of a checkpoint; keep large "
            "data in the stack's bucket (uses=('bucket',)) and return its key."
        )
    return text


@dataclass
class Durable:
    """A run's durable state: the checkpoints it found when it took the job's lock, and the steps it
    has run. One per run (`JobContext.durable`); its ports are the record store's.

    `acquired()` returns the record as the run's acquire wrote it (checkpoints included) and the run's
    lock, read on the run's own thread (`capture`, before the job function is called: a job may call
    its steps from threads of its own); `write(name, value, lock)` checkpoints under that lock (False:
    the lock was lost). `fresh_invocation`: the run is the first of its invocation, so a step that
    does not fit the time left would fit no better in another.
    """

    job_id: str
    job: str
    timeout_seconds: int
    max_duration_seconds: int
    margin_ms: float
    remaining_ms: Callable[[], float]
    acquired: Callable[[], tuple[dict[str, Any] | None, int | None]] = field(repr=False)
    write: Callable[[str, dict[str, Any], int | None], bool] = field(repr=False)
    fresh_invocation: bool = True
    clock: Callable[[], float] = time.time
    #: Names of steps, sleeps and waits met in this run (a name twice is an error).
    seen: set[str] = field(default_factory=set)
    #: Steps run (not replayed) in this invocation, and the duration of the last step met (ms).
    ran_here: int = 0
    last_ms: float = 0.0
    replayed: int = 0
    _record: JobRecord | None = None
    _item: dict[str, Any] | None = None
    _lock: int | None = None
    _captured: bool = False
    _loaded: bool = False
    _guard: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: The step running now (`JobContext.step_key`).
    current: str | None = None

    # -- what the record holds ----------------------------------------------------------------------

    def capture(self) -> None:
        """Take the item and the lock this run's acquire took, on the run's own thread (the store
        keeps them per thread): called before the job function runs. The item is decoded only when a
        step, sleep or wait needs it (a job that uses none pays nothing)."""
        self._item, self._lock = self.acquired()
        self._captured = True

    def record(self) -> JobRecord:
        if not self._loaded:
            if not self._captured:
                self.capture()
            self._record = JobRecord.from_item(self._item) if self._item else JobRecord(self.job_id)
            self._loaded = True
        assert self._record is not None
        return self._record

    def checkpoint(self, name: str) -> dict[str, Any] | None:
        return (self.record().steps or {}).get(name)

    def _keep(self, name: str, value: dict[str, Any]) -> None:
        from dataclasses import replace

        with self._guard:  # steps may run on threads of the job's own
            record = self.record()
            self._record = replace(record, steps={**(record.steps or {}), name: value})

    def _checkpoint(self, name: str, value: dict[str, Any]) -> None:
        from lambdajobs.runtime.context import JobCancelled
        from lambdajobs.runtime.lifecycle import CancelRequested

        self.record()
        try:
            landed = self.write(name, value, self._lock)
        except CancelRequested:  # the run is asked to stop: at this step, after its effect
            raise JobCancelled(f"job '{self.job_id}' was cancelled (at step '{name}')") from None
        if not landed:
            # another delivery took the job over (this invocation was taken for dead): stop here; the
            # run that holds the lock goes on from the checkpoints
            raise LockLost(f"the checkpoint of '{name}' was refused: another delivery holds the job now")
        self._keep(name, value)

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _started_ms(self) -> int:
        created = self.record().created_at
        if not created:
            return self._now_ms()
        return int(datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp() * 1000)

    def _check_duration(self, what: str) -> None:
        elapsed = (self._now_ms() - self._started_ms()) / 1000
        if elapsed > self.max_duration_seconds:
            raise MaxDurationError(
                f"job '{self.job_id}' has run for {elapsed:.0f} s, above its max_duration_seconds of "
                f"{self.max_duration_seconds} s, before {what}; raise max_duration_seconds in @job(...)."
            )

    def _name(self, name: Any, kind: str) -> str:
        if not isinstance(name, str) or not name or len(name) > MAX_STEP_NAME:
            raise StepError(
                f"a {kind} name is a non-empty string of at most {MAX_STEP_NAME} characters, got {name!r}"
            )
        return name

    def _once(self, key: str, shown: str) -> None:
        with self._guard:
            if key in self.seen:
                raise StepError(
                    f"job '{self.job_id}' used {shown} twice in one run; give each step, sleep and "
                    "signal wait its own name (a checkpoint is found by its name)."
                )
            self.seen.add(key)

    # -- steps --------------------------------------------------------------------------------------

    def step(
        self,
        name: str,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        budget: float | None,
    ) -> Any:
        name = self._name(name, "step")
        if name.startswith(RESERVED):
            raise StepError(f"step name {name!r}: names starting with {RESERVED!r} are lambdajobs' own")
        self._once(name, f"step '{name}'")
        done = self.checkpoint(name)
        if done is not None and "r" in done:
            self.replayed += 1
            self.last_ms = float(done.get("ms") or 0)
            return json.loads(str(done["r"]))
        self._check_duration(f"step '{name}'")
        usable_ms = self.timeout_seconds * 1000 - self.margin_ms
        if budget is not None:
            if isinstance(budget, bool) or not isinstance(budget, int | float) or budget <= 0:
                raise StepError(f"step '{name}': budget_seconds must be a positive number, got {budget!r}")
            if budget * 1000 > usable_ms:
                raise StepError(
                    f"step '{name}' needs {budget:g} s, but an invocation of job '{self.job}' has "
                    f"{usable_ms / 1000:g} s (timeout_seconds={self.timeout_seconds}, less its margin): it "
                    "would never fit any invocation; split the step, or raise timeout_seconds."
                )
        needed_ms = budget * 1000 if budget is not None else self.last_ms
        # A step that does not fit the time left waits for a fresh invocation, unless this is one
        # already and nothing ran in it yet: it would fit no better elsewhere.
        first_here = self.fresh_invocation and not self.ran_here
        if not first_here and self.remaining_ms() - self.margin_ms < needed_ms:
            raise Suspend(
                JobState.SLEEPING,
                self._now_ms() + CONTINUE_DELAY_MS,
                f"continues in a fresh invocation: step '{name}' needs {needed_ms / 1000:.1f} s",
            )
        started = self.clock()
        self.current = name
        try:
            value = fn(*args, **kwargs)
        finally:
            self.current = None
        elapsed_ms = int((self.clock() - started) * 1000)
        text = _as_json(value, f"step '{name}' of job '{self.job}': its result", MAX_STEP_BYTES)
        total = sum(len(str(v.get("r", ""))) for v in (self.record().steps or {}).values()) + len(text)
        if total > MAX_STEPS_BYTES:
            raise StepError(
                f"job '{self.job_id}': its step results come to {total} bytes, above {MAX_STEPS_BYTES} "
                "in all; keep large data in the stack's bucket and return its key."
            )
        self._checkpoint(name, {"r": text, "ms": elapsed_ms, "at": iso_ms(self._now_ms())})
        self.ran_here += 1
        self.last_ms = float(elapsed_ms)
        return json.loads(text)

    # -- sleeps -------------------------------------------------------------------------------------

    def sleep(self, seconds: float, name: str | None) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
            raise StepError(f"ctx.sleep({seconds!r}): give a number of seconds above 0")
        key = RESERVED + "sleep:" + (self._name(name, "sleep") if name is not None else str(self._sleeps()))
        self._once(key, f"sleep '{name}'" if name else "a sleep")
        done = self.checkpoint(key)
        if done is None:
            self._check_duration("a sleep")
            wake = self._now_ms() + int(seconds * 1000)
            limit = self._started_ms() + self.max_duration_seconds * 1000
            if wake > limit:
                raise StepError(
                    f"job '{self.job_id}': a sleep of {seconds:g} s would end after the job's "
                    f"max_duration_seconds ({self.max_duration_seconds} s from its first start); sleep less, "
                    "or raise max_duration_seconds."
                )
            self._checkpoint(key, {"wake": wake, "at": iso_ms(self._now_ms())})
        else:
            wake = int(done["wake"])
        if self._now_ms() < wake:
            raise Suspend(JobState.SLEEPING, wake, f"sleeping until {iso_ms(wake)}")
        self.last_ms = 0.0

    def _sleeps(self) -> int:
        return sum(1 for k in self.seen if k.startswith(RESERVED + "sleep:")) + 1

    # -- signals ------------------------------------------------------------------------------------

    def wait_for_signal(self, name: str, timeout_seconds: float) -> Any:
        name = self._name(name, "signal")
        if (
            isinstance(timeout_seconds, bool)
            or not isinstance(timeout_seconds, int | float)
            or timeout_seconds <= 0
        ):
            raise StepError(
                f"wait_for_signal('{name}', {timeout_seconds!r}): give a timeout in seconds above 0"
            )
        key = RESERVED + "signal:" + name
        self._once(key, f"signal '{name}'")
        done = self.checkpoint(key)
        if done is not None:
            return self._outcome(name, done)
        sent = (self.record().signals or {}).get(name)
        if sent is not None:
            self._checkpoint(key, {"r": sent, "at": iso_ms(self._now_ms())})
            self.last_ms = 0.0
            return json.loads(sent)
        wait_key = RESERVED + "wait:" + name
        deadline = self.checkpoint(wait_key)
        if deadline is None:
            self._check_duration(f"waiting for signal '{name}'")
            until = self._now_ms() + int(timeout_seconds * 1000)
            until = min(until, self._started_ms() + self.max_duration_seconds * 1000)
            self._checkpoint(wait_key, {"until": until, "at": iso_ms(self._now_ms())})
        else:
            until = int(deadline["until"])
        if self._now_ms() < until:
            raise Suspend(JobState.WAITING_SIGNAL, until, f"waiting for signal '{name}'", signal=name)
        self._checkpoint(key, {"timeout": True, "at": iso_ms(self._now_ms())})
        return self._outcome(name, {"timeout": True})

    def _outcome(self, name: str, done: dict[str, Any]) -> Any:
        self.last_ms = 0.0
        if done.get("timeout"):
            raise SignalTimeoutError(
                f"job '{self.job_id}': no signal '{name}' came before the wait's timeout"
            )
        return json.loads(str(done["r"]))


# -- wake-ups beyond SQS's delay: one-time schedules ------------------------------------------------


def wake_schedule_name(job: str, job_id: str, wake_ms: int) -> str:
    """A wake-up's one-time schedule: `<wake_schedule_prefix(job)><hash of the job id and wake-up>`
    (64 characters at most, of Scheduler's alphabet). Never a producer's `run_at` schedule name (those
    have no `-w`: the hash is hex), so the worker's permission is its own job's `<job>-w*` schedules
    only."""
    digest = hashlib.sha256(f"{job_id}\n{wake_ms}".encode()).hexdigest()[:24]
    return f"{wake_schedule_prefix(job)}{digest}"


def wake_schedule_prefix(job: str) -> str:
    """The start of every wake-up schedule's name of `job` (the worker's permission names it): the
    name itself, or for a name above 36 characters its first 27 and a hash of the whole name, so two
    jobs never share a prefix."""
    if len(job) <= 36:
        return f"{job}-w"
    return f"{job[:27]}{hashlib.sha256(job.encode()).hexdigest()[:8]}-w"


def schedule_wake(
    config: StackConfig,
    job: str,
    job_id: str,
    body: str,
    wake_ms: int,
    level: str | None,
    tenant: str | None = None,
) -> None:
    """A one-time schedule that sends `body` to the job's queue (its priority level's) at `wake_ms`
    and deletes itself. The same wake-up scheduled again (a retried park) is not scheduled twice."""
    role_arn, group, dlq_arn = config.scheduler_settings()
    scheduler = config.client("scheduler")
    at = datetime.fromtimestamp(-(-wake_ms // 1000), UTC)  # whole seconds, never before the wake-up
    # the same wake-up scheduled again (a park tried again) is there already: nothing to do
    with contextlib.suppress(scheduler.exceptions.ConflictException):
        scheduler.create_schedule(
            Name=wake_schedule_name(job, job_id, wake_ms),
            GroupName=group,
            ScheduleExpression=f"at({at:%Y-%m-%dT%H:%M:%S})",
            ScheduleExpressionTimezone="UTC",
            FlexibleTimeWindow={"Mode": "OFF"},
            ActionAfterCompletion="DELETE",
            Description=f"lambdajobs: wake job {job} id {job_id}"[:512],
            Target={
                "Arn": config.queue_arn(job, level),
                "RoleArn": role_arn,
                "Input": body,
                "RetryPolicy": {"MaximumRetryAttempts": 185, "MaximumEventAgeInSeconds": 86400},
                "DeadLetterConfig": {"Arn": dlq_arn},
                # the job's fair-queue tenant, kept by the message that continues it
                **({"SqsParameters": {"MessageGroupId": tenant}} if tenant else {}),
            },
        )


def resumed_body(body: str, wake_ms: int, prior_attempts: int) -> str:
    """The body a schedule sends to continue a job: the envelope with `resume` (its wake-up and the
    attempts before this one), since Scheduler cannot set message attributes."""
    from lambdajobs.runtime.envelope import parse_body

    envelope = parse_body(body)
    envelope["resume"] = {"wake": wake_ms, "prior_attempts": prior_attempts}
    return json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)


# -- signals, from anywhere ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SignalResult:
    """What `signal` did: `woke` the job (it was waiting for this signal), or kept the signal for
    when it waits (`woke` False: it has not reached its wait, or has not started)."""

    job_id: str
    name: str
    woke: bool


def signal(job_id: str, name: str, data: Any = None, *, config: StackConfig | None = None) -> SignalResult:
    """Deliver signal `name` with `data` (JSON, at most 32 KB) to a durable job waiting in
    `ctx.wait_for_signal(name, ...)`, which returns `data`. A job that is not waiting yet (even one
    not started: nothing is written at enqueue) gets it when it waits; the signal is kept for the
    record's time to live. The same signal sent again with the same data changes nothing.

    Raises:
        SignalRefusedError: the job has finished, or already has this signal with other data.
        JobIdError: `job_id` is empty or not a string.
        StepError: a bad name, or data that is not JSON or too large.

    Example:
        >>> signal("publish-42", "approval", {"approved_by": "ada"})
        SignalResult(job_id='publish-42', name='approval', woke=True)
    """
    from lambdajobs.runtime import config as configuration
    from lambdajobs.runtime import lifecycle
    from lambdajobs.runtime.errors import JobIdError
    from lambdajobs.runtime.records import JobRecordStore

    if not isinstance(job_id, str) or not job_id:
        raise JobIdError(f"job_id must be a non-empty string, got {job_id!r}")
    if not isinstance(name, str) or not name or len(name) > MAX_STEP_NAME:
        raise StepError(
            f"a signal name is a non-empty string of at most {MAX_STEP_NAME} characters, got {name!r}"
        )
    text = _as_json(data, f"signal '{name}': its data", MAX_SIGNAL_BYTES, strict=True)
    cfg = configuration.resolve(config)
    store = JobRecordStore(cfg)
    record = lifecycle.deliver_signal(
        store.client, store.table, job_id, name, text, ttl_seconds=cfg.record_ttl_seconds
    )
    waiting = record.known_state is JobState.WAITING_SIGNAL and record.waiting_for == name
    if not waiting or not record.resume_body or not record.resume_queue:
        return SignalResult(job_id, name, woke=False)  # it finds the signal when it waits, or at its timeout
    wake = lifecycle.wake(store.client, store.table, job_id, name)
    if wake is None:
        return SignalResult(job_id, name, woke=False)  # it woke meanwhile (its timeout): it finds the data

    # If this send fails, the job still gets the signal at its wait's timeout (it is kept); sending it
    # again (the same data) sends the wake-up again: a second copy of a wake-up is a duplicate, dropped.
    try:
        _send_wake_up(cfg, record, wake)
    except Exception as exc:
        import logging

        logging.getLogger(__name__).warning(
            "signal %s for job %s is kept, but its wake-up could not be sent (%s): the job gets it at "
            "its wait's timeout, or send the signal again",
            name,
            job_id,
            str(exc)[:300],
        )
        return SignalResult(job_id, name, woke=False)
    return SignalResult(job_id, name, woke=True)


def _send_wake_up(cfg: StackConfig, record: JobRecord, wake: int) -> None:
    from lambdajobs.runtime.settings import ATTR_PRIOR_ATTEMPTS, ATTR_RESUME

    assert record.resume_queue is not None and record.resume_body is not None
    cfg.client("sqs").send_message(
        QueueUrl=record.resume_queue,
        MessageBody=record.resume_body,
        MessageAttributes={
            ATTR_PRIOR_ATTEMPTS: {"DataType": "Number", "StringValue": str(max(0, record.attempts - 1))},
            ATTR_RESUME: {"DataType": "Number", "StringValue": str(wake)},
        },
        **({"MessageGroupId": record.resume_group} if record.resume_group else {}),
    )
