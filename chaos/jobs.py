"""The chaos soak's jobs package: three jobs whose side effect is counted per job id.

`chaos_work` is the bulk of the soak; `chaos_slow` runs on a queue of its own whose visibility timeout
the soak shortens below the run time, so a second poller receives a message while its first run still
holds the job's lock. Both share one body (`Ledger.run`):

- a transient failure on a seeded tenth of the runs (a plain exception: retried with backoff);
- poison: `poison_raise` raises on every run and `poison_invalid` fails payload validation, both until
  `ledger.fix_poison()` is called (the operator's fix before the DLQ redrive);
- the side effect: one increment of the job id's counter in the ledger, thread-safe, so a job that
  runs twice counts two (duplicates are counted, not hidden); with its place in the order of all
  effects (`order`: a chain's steps must run one after the other) and, for a workflow's member of a
  later stage, the counts of the stage before it saw (`parents`: what a chord's callback was told).

`chaos_flow` is flow control's (`FlowLedger`): capped at `FLOW_KEY_CAP` runs at once per value of its
payload's `key`, each run noting when it started and ended and its invocation's deadline; in its
`progress` mode it reports progress a number of times (the soak cancels it while it does), noting
when each report was made and whether it returned.

The third, `chaos_steps`, is a durable job of checkpointed steps: its steps' runs are noted in a
ledger of their own (`chaos.steps`), and its own effect, once every step is done, in this one.

The ledger is per process: each seed of the soak runs in a process of its own.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator

from chaos.steps import STEPS_MAX_ATTEMPTS, STEPS_TIMEOUT_SECONDS, StepWork, step_name, steps_ledger
from lambdajobs import Backoff, ConcurrencyKey, JobCancelled, JobContext, job

#: The chaos jobs' timeouts: short, so a crashed invocation's lock expires within seconds. The queue's
#: visibility timeout is 6 x the timeout (the spec derives it): a crashed batch returns after 12 s.
WORK_TIMEOUT_SECONDS = 2
SLOW_TIMEOUT_SECONDS = 4
FLOW_TIMEOUT_SECONDS = 3
#: `chaos_flow`'s cap: runs in progress at once per value of its payload's `key`.
FLOW_KEY_CAP = 2
FLOW = "chaos_flow"
#: Scaled backoff: 0 to 1 s after the first failure, then 0 to 2 s (full jitter).
CHAOS_BACKOFF = Backoff(base_seconds=1, max_seconds=2)
MAX_ATTEMPTS = 5

Kind = Literal["normal", "poison_raise", "poison_invalid", "slow", "steps"]


class TransientFault(Exception):
    """An injected transient failure (a flaky dependency): the worker retries it with backoff."""


class PoisonFault(Exception):
    """A poison job's failure: raised on every run until the poison is fixed."""


@dataclass
class Ledger:
    """Side effects and runs per job id, and the switches the soak flips. Thread-safe."""

    seed: int = 0
    transient_rate: float = 0.0
    faults_on: bool = False
    poison_fixed: bool = False
    effects: Counter[str] = field(default_factory=Counter)
    runs: Counter[str] = field(default_factory=Counter)
    transient: Counter[str] = field(default_factory=Counter)
    #: Effects counted since `mark_redrive()`, per job id.
    effects_after_redrive: Counter[str] = field(default_factory=Counter)
    #: Effects done after the invocation's deadline (Lambda would have killed that invocation first;
    #: the emulator cannot): reported, so a slow machine shows in the report.
    overruns: Counter[str] = field(default_factory=Counter)
    redrive_marked: bool = False
    #: Job ids whose function is running right now, with how many runs (slow jobs: seen twice).
    running: Counter[str] = field(default_factory=Counter)
    #: Per job id, each effect's number in the order of all effects of the seed (1, 2, ...).
    order: dict[str, list[int]] = field(default_factory=dict)
    #: Per workflow member of a later stage, `ctx.workflow.parents` of each run that did its effect.
    parents: dict[str, list[dict[str, int]]] = field(default_factory=dict)
    #: Per job id, when each run of its function started (epoch seconds).
    started: dict[str, list[float]] = field(default_factory=dict)
    effects_done: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def configure(self, *, seed: int, transient_rate: float) -> None:
        with self._lock:
            self.seed, self.transient_rate = seed, transient_rate
            self.faults_on, self.poison_fixed, self.redrive_marked = True, False, False
            counters = (self.effects, self.runs, self.transient, self.effects_after_redrive, self.overruns)
            for counter in counters:
                counter.clear()
            self.running.clear()
            self.started.clear()
            self.order.clear()
            self.parents.clear()
            self.effects_done = 0

    def fix_poison(self) -> None:
        self.poison_fixed = True

    def mark_redrive(self) -> None:
        with self._lock:
            self.redrive_marked = True

    def is_running(self, job_id: str) -> bool:
        with self._lock:
            return self.running[job_id] > 0

    def _draw(self, job_id: str, run: int) -> float:
        """A number in [0, 1) fixed by (seed, job id, run): the same seed fails the same runs."""
        digest = hashlib.sha256(f"{self.seed}:{job_id}:{run}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def run(self, payload: Work, ctx: JobContext) -> dict[str, Any]:
        job_id = ctx.job_id
        with self._lock:
            self.runs[job_id] += 1
            run = self.runs[job_id]
            self.running[job_id] += 1
            self.started.setdefault(job_id, []).append(time.time())
        try:
            if self.faults_on and self._draw(job_id, run) < self.transient_rate:
                with self._lock:
                    self.transient[job_id] += 1
                raise TransientFault(f"injected transient failure (run {run})")
            if payload.kind == "poison_raise" and not self.poison_fixed:
                raise PoisonFault("poison: fails on every attempt until fixed")
            if payload.sleep_ms:
                time.sleep(payload.sleep_ms / 1000)
            return {"effects": self.effect(ctx)}
        finally:
            with self._lock:
                self.running[job_id] -= 1

    def effect(self, ctx: JobContext) -> int:
        """The job's side effect: one more for its job id (returned: its count so far)."""
        job_id = ctx.job_id
        overran = ctx.lambda_context is not None and ctx.remaining_seconds() <= 0
        parents = ctx.workflow.parents if ctx.workflow is not None else None
        with self._lock:
            self.effects[job_id] += 1
            self.effects_done += 1
            self.order.setdefault(job_id, []).append(self.effects_done)
            if parents is not None:
                self.parents.setdefault(job_id, []).append(parents.model_dump())
            self.overruns[job_id] += overran
            if self.redrive_marked:
                self.effects_after_redrive[job_id] += 1
            return self.effects[job_id]


ledger = Ledger()


class Work(BaseModel):
    """A chaos job's payload. `poison_invalid` does not validate until the poison is fixed."""

    kind: Kind = "normal"
    sleep_ms: int = 0

    @model_validator(mode="after")
    def _poison_is_invalid_until_fixed(self) -> Work:
        if self.kind == "poison_invalid" and not ledger.poison_fixed:
            raise ValueError("poison: this payload is invalid until the poison is fixed")
        return self


@job(
    timeout_seconds=WORK_TIMEOUT_SECONDS,
    max_attempts=MAX_ATTEMPTS,
    # moto spends about 50 ms of CPU per record (two conditional UpdateItems): batches of 5 stay well
    # within the 2 s timeout even with several soaks sharing two cores.
    batch_size=5,
    max_concurrency=2,
    backoff=CHAOS_BACKOFF,
)
def chaos_work(payload: Work, ctx: JobContext) -> dict[str, Any]:
    return ledger.run(payload, ctx)


@job(
    timeout_seconds=SLOW_TIMEOUT_SECONDS,
    max_attempts=MAX_ATTEMPTS,
    batch_size=1,
    max_concurrency=3,
    backoff=CHAOS_BACKOFF,
)
def chaos_slow(payload: Work, ctx: JobContext) -> dict[str, Any]:
    return ledger.run(payload, ctx)


class FlowWork(BaseModel):
    """`chaos_flow`'s payload: its concurrency key, and in `progress` mode its reports."""

    key: str = ""
    mode: Literal["keyed", "progress"] = "keyed"
    work_ms: int = Field(default=0, ge=0)
    parts: int = Field(default=0, ge=0)


@dataclass
class FlowRun:
    """One run of `chaos_flow`, as it noted itself (epoch seconds): its key, its start and end, its
    invocation's deadline, and how it ended (`returned`, `raised`, `cancelled`)."""

    job_id: str
    key: str
    attempt: int
    start: float
    deadline: float
    end: float | None = None
    ended: str = ""


@dataclass
class ProgressCall:
    """One `ctx.progress` of a run of `chaos_flow` in progress mode: when it was called, when it
    returned or raised, and whether it returned (the job went on)."""

    job_id: str
    called: float
    ended: float
    returned: bool


@dataclass
class FlowLedger:
    """Every run of `chaos_flow` and every progress report, per process (a seed's). Thread-safe."""

    runs: list[FlowRun] = field(default_factory=list)
    progress: list[ProgressCall] = field(default_factory=list)
    #: Job ids whose function runs right now, with the progress reports their run made so far.
    reports: Counter[str] = field(default_factory=Counter)
    running: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def clear(self) -> None:
        with self._lock:
            self.runs.clear()
            self.progress.clear()
            self.reports.clear()
            self.running.clear()

    def reported(self, job_id: str) -> int:
        """The progress reports the job's run in progress made (0: none running)."""
        with self._lock:
            return self.reports[job_id] if self.running[job_id] else 0

    def run(self, payload: FlowWork, ctx: JobContext) -> dict[str, Any]:
        now = time.time()
        left = ctx.remaining_seconds() if ctx.lambda_context is not None else FLOW_TIMEOUT_SECONDS
        run = FlowRun(ctx.job_id, payload.key, ctx.attempt, now, now + left)
        with self._lock:
            self.runs.append(run)
            self.running[ctx.job_id] += 1
            self.reports[ctx.job_id] = 0
        run.ended = "raised"
        try:
            if payload.mode == "progress":
                self._report(payload, ctx)
            elif payload.work_ms:
                time.sleep(payload.work_ms / 1000)
            result = ledger.run(Work(), ctx)
            run.ended = "returned"
            return result
        except JobCancelled:
            run.ended = "cancelled"
            raise
        finally:
            run.end = time.time()
            with self._lock:
                self.running[ctx.job_id] -= 1

    def _report(self, payload: FlowWork, ctx: JobContext) -> None:
        for n in range(payload.parts):
            time.sleep(payload.work_ms / 1000)
            called = time.time()
            returned = False
            try:
                ctx.progress(100 * (n + 1) / payload.parts, f"part {n + 1}")
                returned = True
            finally:
                with self._lock:
                    self.progress.append(ProgressCall(ctx.job_id, called, time.time(), returned))
                    self.reports[ctx.job_id] += returned


flow_ledger = FlowLedger()


@job(
    timeout_seconds=FLOW_TIMEOUT_SECONDS,
    max_attempts=MAX_ATTEMPTS,
    batch_size=1,
    # one more than the cap: a key's runs meet its cap
    max_concurrency=FLOW_KEY_CAP + 1,
    backoff=CHAOS_BACKOFF,
    concurrency_key=ConcurrencyKey("key", FLOW_KEY_CAP),
)
def chaos_flow(payload: FlowWork, ctx: JobContext) -> dict[str, Any]:
    return flow_ledger.run(payload, ctx)


def _budget() -> float:
    """The longest step budget an invocation of `chaos_steps` holds (its timeout less the worker's
    margin): with it, a step starts only in an invocation that has run no step yet."""
    from lambdajobs.runtime.worker import deadline_margin_ms

    return (STEPS_TIMEOUT_SECONDS * 1000 - deadline_margin_ms(chaos_steps.spec)) / 1000


@job(
    timeout_seconds=STEPS_TIMEOUT_SECONDS,
    max_attempts=STEPS_MAX_ATTEMPTS,
    batch_size=2,
    max_concurrency=2,
    backoff=CHAOS_BACKOFF,
)
def chaos_steps(payload: StepWork, ctx: JobContext) -> dict[str, Any]:
    """A durable job (`chaos.steps`): its steps, then its own effect, once every step is done."""
    budget = _budget() if payload.one_per_invocation else None
    results = [
        ctx.step(step_name(n), steps_ledger.run_step, ctx, step_name(n), budget_seconds=budget)
        for n in range(1, payload.steps + 1)
    ]
    ledger.effect(ctx)
    return {"results": results}
