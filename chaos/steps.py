"""The step jobs' ledger: what the chaos soak's durable job (`chaos.jobs.chaos_steps`, a job of
checkpointed steps: `ctx.step`) did, step by step.

Each step notes every time it runs (`StepLedger.run_step`), with what was true at that moment: whether
its checkpoint was in the table (read there, consistently, on the soak's own unfaulted client), and
whether the soak had seen its checkpoint write land (`note_checkpoint`, told by the fault injector's
after-call hook on the worker's client). A step whose checkpoint landed must never run again; a step
whose checkpoint did not land may run again (at-least-once per step), and every such re-run must have
a cause the soak saw: the step raised, or its checkpoint write crashed, failed, was refused or was
stopped at its invocation's deadline (Lambda's timeout, which the emulator applies at the next call).

Half the jobs run one step per invocation (`one_per_invocation`: each step declares a budget as long
as an invocation can hold, so the next step never fits and the job continues in a fresh invocation,
parking in between); the others run every step in one invocation. A step raises a transient failure
on a seeded fraction of its runs. When every step is done the job does its own effect, counted in the
soak's ledger as every chaos job's (`chaos.jobs.Ledger.effect`).

This module imports nothing of `chaos.jobs` (which declares the job, and imports it). The ledger is per
process: each seed of the soak runs in a process of its own.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from lambdajobs import JobContext

STEPS = "chaos_steps"
#: A step job's timeout: its queue's visibility timeout is shortened by the soak (`Settings.
#: step_visibility_seconds`), so a crashed invocation comes back within seconds.
STEPS_TIMEOUT_SECONDS = 3
#: More attempts than the bulk's: every step job is planned a fault that uses one (a crash around a
#: checkpoint, a checkpoint write that fails), on top of the soak's random faults.
STEPS_MAX_ATTEMPTS = 8
#: The attribute a step's checkpoint is kept in (`lambdajobs.runtime.job_record.STEP_PREFIX`).
STEP_ATTRIBUTE = "step:{}"


def step_name(n: int) -> str:
    return f"step-{n}"


def step_result(job_id: str, name: str) -> str:
    """What a step returns: the same in every run, so a replay and a re-run are told apart only by
    the ledger, and the job's result is known in advance."""
    return f"{job_id}/{name}"


class StepFault(Exception):
    """An injected transient failure in a step (a flaky dependency): the attempt fails, and is retried."""


@dataclass
class Execution:
    """One run of a step's function."""

    seq: int
    attempt: int
    #: The step's checkpoint was in the table when it started (a consistent read).
    in_table: bool
    #: The soak had seen a write of the step's checkpoint land before it started.
    landed_before: bool
    #: It started after its invocation's deadline: Lambda would have stopped that invocation first
    #: (the emulator cannot), so a run taken over meanwhile may have gone on.
    overran: bool
    raised: bool = False
    #: The thread it ran on: the worker writes a step's checkpoint on the thread that ran the step.
    thread: int = 0
    #: The outcomes of its own checkpoint writes (told on its thread after it started), whenever they
    #: came: one may come after the step ran again elsewhere (its invocation overran and was taken over).
    outcomes: list[str] = field(default_factory=list)


@dataclass
class StepLedger:
    """Every run of every step, and every checkpoint write's outcome, in one order (`seq`). Thread-safe."""

    seed: int = 0
    transient_rate: float = 0.0
    faults_on: bool = False
    #: The soak's own client and table (not the worker's, not faulted): where a step reads whether its
    #: checkpoint is there.
    reader: Any = None
    table: str = ""
    #: (job id, step) -> its runs, in order.
    executions: dict[tuple[str, str], list[Execution]] = field(default_factory=dict)
    #: (job id, step) -> (seq, outcome) of each write of its checkpoint: landed, crashed_before,
    #: crashed_after (it landed, then the invocation crashed), throttled, refused (its condition failed),
    #: timed_out (the invocation's deadline had passed when the write was to start).
    writes: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    #: Job id -> park writes that landed (the record's `suspensions` counts these).
    parks: Counter[str] = field(default_factory=Counter)
    #: Steps that raise on their first run, whatever the seeded draw: (job id, step).
    raise_first: set[tuple[str, str]] = field(default_factory=set)
    #: Runs that raised: drawn at `transient_rate`, and planned (`raise_first`).
    transient: int = 0
    planned_raises: int = 0
    _seq: Any = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def configure(
        self,
        *,
        seed: int,
        transient_rate: float,
        reader: Any,
        table: str,
        raise_first: set[tuple[str, str]] | None = None,
    ) -> None:
        with self._lock:
            self.seed, self.transient_rate, self.faults_on = seed, transient_rate, True
            self.reader, self.table = reader, table
            self.raise_first = set(raise_first or ())
            self.executions.clear()
            self.writes.clear()
            self.parks.clear()
            self.transient = self.planned_raises = 0
            self._seq = itertools.count()

    # -- told by the fault injector (the worker's client) -------------------------------------------

    def note_checkpoint(self, job_id: str, name: str, outcome: str) -> None:
        """A write of the step's checkpoint answered (or was stopped): in the order of everything, and
        as the outcome of the run of that step last started on this thread (the run that wrote it)."""
        thread = threading.get_ident()
        with self._lock:
            self.writes.setdefault((job_id, name), []).append((next(self._seq), outcome))
            mine = [r for r in self.executions.get((job_id, name), []) if r.thread == thread]
            if mine:
                mine[-1].outcomes.append(outcome)

    def note_park(self, job_id: str) -> None:
        with self._lock:
            self.parks[job_id] += 1

    def landed(self, job_id: str, name: str) -> int:
        with self._lock:
            return sum(1 for _, o in self.writes.get((job_id, name), []) if o in LANDED)

    # -- the step -----------------------------------------------------------------------------------

    def _in_table(self, job_id: str, name: str) -> bool:
        item = self.reader.get_item(
            TableName=self.table,
            Key={"id": {"S": job_id}},
            ConsistentRead=True,
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": STEP_ATTRIBUTE.format(name)},
        ).get("Item")
        return bool(item)

    def _draw(self, job_id: str, name: str, run: int) -> float:
        digest = hashlib.sha256(f"{self.seed}:{job_id}:{name}:{run}".encode()).digest()
        return int.from_bytes(digest[:8], "big") / 2**64

    def run_step(self, ctx: JobContext, name: str) -> str:
        job_id = ctx.job_id
        in_table = self._in_table(job_id, name)
        overran = ctx.lambda_context is not None and ctx.remaining_seconds() <= 0
        with self._lock:
            key = (job_id, name)
            landed_before = any(o in LANDED for _, o in self.writes.get(key, []))
            runs = self.executions.setdefault(key, [])
            execution = Execution(
                next(self._seq),
                ctx.attempt,
                in_table,
                landed_before,
                overran,
                thread=threading.get_ident(),
            )
            runs.append(execution)
            planned = self.faults_on and key in self.raise_first
            drawn = self.faults_on and self._draw(job_id, name, len(runs)) < self.transient_rate
            raise_now = planned or drawn
            if planned:
                self.raise_first.discard(key)
                self.planned_raises += 1
            elif drawn:
                self.transient += 1
            execution.raised = raise_now
        if raise_now:
            raise StepFault(f"injected transient failure in {name} (run {len(runs)})")
        return step_result(job_id, name)


#: Checkpoint write outcomes after which the checkpoint is in the table.
LANDED = ("landed", "crashed_after")


def rerun_cause(before: Execution, run: Execution, writes: list[tuple[int, str]]) -> str:
    """Why a step ran again (`run`) after its run `before`, its checkpoint not landed: `raised` (that
    run raised); else the outcome of the last checkpoint write between them that did not land
    (`crashed_before`, `throttled`, `refused`, `timed_out`); else that of the last of `before`'s own
    writes that did not land, told after `run` started (its invocation overran: the job was taken
    over, and its write was stopped at the deadline or refused); else `other`: a re-run the soak
    cannot explain (`before` neither raised nor wrote a checkpoint that failed)."""
    if before.raised:
        return "raised"
    between = [o for seq, o in writes if before.seq < seq < run.seq and o not in LANDED]
    if between:
        return between[-1]
    own = [o for o in before.outcomes if o not in LANDED]
    return own[-1] if own else "other"


steps_ledger = StepLedger()


class StepWork(BaseModel):
    """A step job's payload: how many steps, and whether each needs an invocation of its own."""

    steps: int = 3
    one_per_invocation: bool = False
