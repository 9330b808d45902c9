"""The kill soak: the jobs of `chaos.kill_jobs` in worker processes of their own, killed as Lambda
kills them (`python -m chaos` runs it after the seeds; `--no-kills` skips it).

It runs the local stack in process mode (`LocalStack(processes=True)`): each job's function runs in
worker processes of its own, from its staged asset, killed at its timeout. Those processes reach AWS
at the stack's moto server on a loopback port; a moto in this process (the seeds' `TestStack`) is
invisible to them, and so are the botocore fault hooks the seeds install (`chaos.faults`): nothing
here hooks botocore. The faults reach the worker processes thus:

- kill: the parent (this process) SIGKILLs the process of one environment that is running an
  invocation right now (`Fleet.kill_running`), every 0.5-1 s (seeded) while the jobs drain, choosing
  with the seeded generator among those running, but those the ledger shows sleeping to a planned
  timeout (that fault is the timeout's) or on their 3rd attempt or later (so that the kills alone do
  not use up a job's 5 attempts: every job must succeed). The invocation fails as a whole and SQS
  redelivers its batch after the visibility timeout (6 x the job's 2 s timeout);
- timeout: the plan carried in each job's payload (`sleep_on`) names the attempts on which it sleeps
  past its timeout; the local stack kills the process at the timeout, as Lambda does;
- transient failure: the payload's plan (`raise_on`) names the attempts that raise (after their
  effect), retried with backoff.

The side effects are counted across processes in a ledger: a file named in the payload, to which
each run appends short JSON lines (one `write` each on an `O_APPEND` descriptor: atomic): `start`
(job id, attempt, pid), `effect`, then (after a little work) `raise` or `done`. A run killed mid-way
has a `start` and no end. After every record is final and the queues are empty (a bounded wait), the
ledger is judged against the records (`chaos.report.KillReport.gates`). An attempt is a receive of
the job's message: a killed batch's records that had not started yet used an attempt each without a
run, so a record's attempts are its started attempts plus those, bounded by the kills and timeouts.

    phases   start (server, staging every function), produce (chunks of jobs while the kills go on),
             settle (every record final, the queues empty), judge (records, DLQs, ledger)

The in-process soak (`chaos.soak`) and its fault hooks stay as they are, for what only they can do
(throttles and crashes at a chosen call, forced redeliveries, workflows).
"""

from __future__ import annotations

import json
import random
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from chaos.kill_jobs.work import TIMEOUT_SECONDS
from chaos.plan import KILL_BATCH, KILL_SINGLE, KillSettings, PlannedKillJob, make_kill_plan
from chaos.report import SHOWN, KillDuplicates, KillReport
from lambdajobs.local.stack import LocalStack, function_name
from lambdajobs.runtime.lifecycle import JobState
from lambdajobs.runtime.producer import enqueue_many
from lambdajobs.runtime.records import JobStatus, get_statuses

JOBS_PACKAGE = "chaos.kill_jobs"
STACK = "kills"
JOBS = (KILL_BATCH, KILL_SINGLE)
LOG_DIR = Path("build/chaos")
TICK_SECONDS = 0.5
#: The kills spare a run on this attempt or later (`Killer._spared`).
SPARE_FROM_ATTEMPT = 3
UNSETTLED_STATES = (JobState.RUNNING, JobState.RETRYING, JobState.WAITING, JobState.PENDING)
FAULTS_REACH = (
    "The jobs run in worker processes of their own (the local stack's process mode, on its moto "
    "server: an in-process moto and botocore fault hooks cannot reach them, and none are used). "
    "Kill: the parent SIGKILLs the process of a running environment (Fleet.kill_running), at seeded "
    "intervals with a seeded choice among those running (but those the ledger shows sleeping to a "
    "planned timeout, or on their 3rd attempt or later). Timeout: the plan in each job's payload "
    "names the attempts that sleep past the job's timeout, and the local stack kills the process at "
    "the timeout, as Lambda does. Transient failure: the payload's plan names the attempts that "
    "raise. Side effects: JSON lines appended (O_APPEND) to a ledger file named in the payload."
)


@dataclass(frozen=True)
class Kill:
    at: float  # seconds since the first send
    function: str
    pid: int


class _NoVictim(Exception):
    """Every running environment is spared (`Killer._spared`): this tick kills none."""


class LedgerTail:
    """The ledger as the processes write it, read on from where it was last read: per process, the
    run it started last and whether that run ended (`raise` or `done`)."""

    def __init__(self, path: Path) -> None:
        self.path, self._offset, self._partial = path, 0, b""
        self.current: dict[int, tuple[str, int, bool]] = {}  # pid -> (job id, attempt, ended)

    def update(self) -> None:
        with self.path.open("rb") as f:
            f.seek(self._offset)
            data = self._partial + f.read()
            self._offset = f.tell()
        *lines, self._partial = data.split(b"\n")
        for raw in lines:
            if raw.strip():
                line = json.loads(raw)
                pid, event = int(line["pid"]), line["event"]
                if event == "start":
                    self.current[pid] = (line["job_id"], int(line["attempt"]), False)
                elif event in ("raise", "done") and pid in self.current:
                    job_id, attempt, _ = self.current[pid]
                    self.current[pid] = (job_id, attempt, True)


class Killer:
    """SIGKILLs one running environment of the soak's functions per `kill()`, chosen by `rng` among
    those not spared: a run sleeping to its planned timeout (that fault is the timeout's: a kill would
    pre-empt it), or on its 3rd attempt or later (a job's 5 attempts cover its planned failure and a
    kill or two, with the receives its batch-mates' kills cost it; not kills without end)."""

    def __init__(
        self, stack: LocalStack, rng: random.Random, ledger: Path, plan: dict[str, PlannedKillJob]
    ) -> None:
        assert stack.fleet is not None, "start_workers() first"
        self.fleet = stack.fleet
        self.functions = {function_name(STACK, job) for job in JOBS}
        self.rng = rng
        self.tail, self.plan = LedgerTail(ledger), plan
        self.kills: list[Kill] = []
        self.idle_ticks = 0
        self.spared = 0
        self._chosen: tuple[str, int] | None = None

    def _spared(self, pid: int) -> bool:
        """Whether the run the process is in now is sleeping to its planned timeout, or on its
        `SPARE_FROM_ATTEMPT`th attempt or later (the kills alone must not use up a job's attempts)."""
        found = self.tail.current.get(pid)
        if found is None:
            return False
        job_id, attempt, ended = found
        return not ended and (attempt in self.plan[job_id].sleep_on or attempt >= SPARE_FROM_ATTEMPT)

    def _pick(self, running: list[tuple[str, Any]]) -> tuple[str, Any]:
        ours = sorted((r for r in running if r[0] in self.functions), key=lambda r: r[1].process.pid)
        self.tail.update()
        awake = [r for r in ours if not self._spared(r[1].process.pid)]
        if not awake:
            if ours:
                self.spared += 1
            raise _NoVictim
        chosen = self.rng.choice(awake)
        self._chosen = (chosen[0], chosen[1].process.pid)
        return chosen

    def kill(self, at: float) -> bool:
        self._chosen = None
        try:
            killed = self.fleet.kill_running(pick=self._pick)
        except _NoVictim:
            killed = None
        if killed is None or self._chosen is None:
            self.idle_ticks += 1
            return False
        function, pid = self._chosen
        self.kills.append(Kill(round(at, 2), function, pid))
        return True

    @property
    def pids(self) -> set[int]:
        return {k.pid for k in self.kills}


def _payload(planned: PlannedKillJob, ledger: Path, settings: KillSettings) -> dict[str, Any]:
    return {
        "ledger": str(ledger),
        "work_seconds": settings.work_seconds,
        "sleep_on": list(planned.sleep_on),
        "sleep_seconds": TIMEOUT_SECONDS + settings.oversleep_seconds if planned.sleep_on else 0.0,
        "raise_on": list(planned.raise_on),
    }


class KillSoak:
    def __init__(self, seed: int, settings: KillSettings) -> None:
        self.seed, self.settings = seed, settings
        self.plan = make_kill_plan(seed, settings)
        self.ids = [p.job_id for p in self.plan]
        self.folder = (LOG_DIR / f"kills-seed{seed}").resolve()
        self.ledger = self.folder / "ledger.jsonl"
        self.report = KillReport(seed=seed, jobs=len(self.plan), settings=settings.to_dict())
        self.report.faults_reach = FAULTS_REACH
        self.report.planned = {
            "timeouts": sum(1 for p in self.plan if p.sleep_on),
            "raises": sum(1 for p in self.plan if p.raise_on),
            "kills_at_most": settings.kills,
            KILL_BATCH: sum(1 for p in self.plan if p.job == KILL_BATCH),
            KILL_SINGLE: sum(1 for p in self.plan if p.job == KILL_SINGLE),
        }
        self.statuses: dict[str, JobStatus] = {}

    def run(self) -> KillReport:
        started = time.monotonic()
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        self.ledger.touch()
        mark = started
        phases: dict[str, float] = {}

        def phase(name: str) -> None:
            nonlocal mark
            now = time.monotonic()
            phases[name] = round(now - mark, 1)
            mark = now

        stack = LocalStack(
            jobs=JOBS_PACKAGE, stack=STACK, port=0, log_file=self.folder / "worker.log", processes=True
        )
        with stack:
            stack.start_workers(scheduler=False)
            phase("start")
            rng = random.Random(f"kills:{self.seed}:timing")
            killer = Killer(stack, rng, self.ledger, {p.job_id: p for p in self.plan})
            self._produce_and_kill(stack, killer)
            phase("produce")
            self._settle(stack)
            phase("settle")
            self._judge_stack(stack)
        phase("stop")
        self._judge_ledger(killer)
        phase("judge")
        self.report.phase_seconds = phases
        self.report.elapsed_seconds = round(time.monotonic() - started, 1)
        return self.report

    # -- produce, kill, settle ----------------------------------------------------------------------

    def _send(self, stack: LocalStack, chunk: list[PlannedKillJob]) -> None:
        for job in JOBS:
            mine = [p for p in chunk if p.job == job]
            if mine:
                payloads = [_payload(p, self.ledger, self.settings) for p in mine]
                results = enqueue_many(job, payloads, job_ids=[p.job_id for p in mine], config=stack.config)
                if results.failed:
                    raise RuntimeError(f"enqueue_many({job}) failed: {results.failed}")

    def _all_final(self, stack: LocalStack) -> bool:
        self.statuses = get_statuses(self.ids, config=stack.config)
        return all(s.done for s in self.statuses.values())

    def _produce_and_kill(self, stack: LocalStack, killer: Killer) -> None:
        """Send the jobs in chunks; meanwhile kill a running environment every 0.5-1 s (seeded), until
        `kills` kills, the kill window closes, or every job is final."""
        s, rng = self.settings, killer.rng
        first = time.monotonic()
        next_send, next_kill, next_check = first, first + rng.uniform(*s.kill_interval_seconds), first
        sent = 0
        while True:
            now = time.monotonic()
            if sent < len(self.plan) and now >= next_send:
                self._send(stack, self.plan[sent : sent + s.chunk])
                sent += s.chunk
                next_send += s.chunk_interval_seconds
            killing = len(killer.kills) < s.kills and now - first < s.kill_window_seconds
            if killing and now >= next_kill:
                killer.kill(now - first)
                next_kill = time.monotonic() + rng.uniform(*s.kill_interval_seconds)
            if sent >= len(self.plan):
                if not killing:
                    break
                if now >= next_check:
                    next_check = now + 1.0
                    if self._all_final(stack):
                        break
            wake = min(next_kill, next_send if sent < len(self.plan) else next_kill)
            time.sleep(min(0.25, max(0.01, wake - time.monotonic())))
        self.report.kills = len(killer.kills)
        self.report.kill_ticks_idle = killer.idle_ticks
        self.report.kill_ticks_spared = killer.spared
        self.report.kills_by_function = dict(Counter(k.function for k in killer.kills))

    def _unsettled(self, stack: LocalStack) -> list[str]:
        found = []
        if not self._all_final(stack):
            states = Counter(str(s.state) for s in self.statuses.values() if not s.done)
            found.append(f"records not final: {dict(states)}")
        for job in JOBS:
            health = stack.health(job)
            if health.depth or health.in_flight or health.delayed:
                found.append(f"{job}: {health.depth} visible, {health.in_flight} in flight")
        return found

    def _settle(self, stack: LocalStack) -> None:
        deadline = time.monotonic() + self.settings.settle_timeout_seconds
        unsettled = self._unsettled(stack)
        while unsettled and time.monotonic() < deadline:
            time.sleep(TICK_SECONDS)
            unsettled = self._unsettled(stack)
        self.report.settled, self.report.unsettled = not unsettled, unsettled

    # -- judge --------------------------------------------------------------------------------------

    def _judge_stack(self, stack: LocalStack) -> None:
        r = self.report
        self.statuses = get_statuses(self.ids, config=stack.config)
        r.states = dict(Counter(str(s.state) for s in self.statuses.values()))
        lost = [j for j, s in self.statuses.items() if s.state != JobState.SUCCEEDED]
        r.lost, r.lost_ids = len(lost), lost[:SHOWN]
        stuck = [s for s in self.statuses.values() if s.state in UNSETTLED_STATES]
        r.stuck_records = len(stuck)
        r.stuck = [{"job_id": s.job_id, "state": str(s.state), "attempts": s.attempts} for s in stuck][:SHOWN]
        r.dlq_messages = sum(stack.health(job).dlq_depth for job in JOBS)
        assert stack.fleet is not None
        batch_sizes = {spec.name: spec.batch_size for spec in stack.specs}
        for job in JOBS:
            name = function_name(STACK, job)
            stats = stack.fleet.stats(name)
            r.functions[job] = {**asdict(stats), "kills": r.kills_by_function.get(name, 0)}
            r.timeouts += stats.timeouts
            r.crashes += stats.crashes
            r.cold_starts += stats.cold_starts
            r.attempts_never_started_bound += batch_sizes[job] * (stats.timeouts + r.functions[job]["kills"])

    def _judge_ledger(self, killer: Killer) -> None:
        r = self.report
        lines = [json.loads(line) for line in self.ledger.read_text().splitlines() if line.strip()]
        # runs in the order they started: (job id, attempt, pid) -> the events it wrote
        runs: dict[tuple[str, int, int], list[str]] = {}
        starts: Counter[tuple[str, int]] = Counter()
        for line in lines:
            key = (line["job_id"], int(line["attempt"]), int(line["pid"]))
            runs.setdefault(key, []).append(line["event"])
            if line["event"] == "start":
                starts[key[:2]] += 1
        r.runs = sum(starts.values())
        r.effects = sum(events.count("effect") for events in runs.values())
        r.raised = sum(events.count("raise") for events in runs.values())
        twice = sorted(f"{job_id}#{attempt}" for (job_id, attempt), n in starts.items() if n > 1)
        r.attempts_started_twice, r.attempts_started_twice_ids = len(twice), twice[:SHOWN]
        planned = {p.job_id: p for p in self.plan}
        sleeps = [
            events for (job_id, attempt, _), events in runs.items() if attempt in planned[job_id].sleep_on
        ]
        r.planned_timeouts_started = len(sleeps)
        r.planned_timeouts_finished = sum(1 for events in sleeps if "done" in events)
        # a process runs one record at a time: the run a kill hit is the last its process started
        last_run_of: dict[int, tuple[str, int, int]] = {key[2]: key for key in runs}
        hit = {last_run_of[pid] for pid in killer.pids if pid in last_run_of}
        r.kills_mid_run = sum(1 for key in hit if not {"done", "raise"} & set(runs[key]))
        by_job: dict[str, list[tuple[int, int, list[str]]]] = defaultdict(list)
        for (job_id, attempt, pid), events in runs.items():
            by_job[job_id].append((attempt, pid, events))
        self._judge_attempts(by_job)
        r.duplicate_effects = _duplicates(runs, hit)

    def _judge_attempts(self, by_job: dict[str, list[tuple[int, int, list[str]]]]) -> None:
        r = self.report
        mismatches: list[dict[str, Any]] = []
        for job_id in self.ids:
            status = self.statuses[job_id]
            started = sorted({attempt for attempt, _, events in by_job.get(job_id, []) if "start" in events})
            result = status.result.get("attempt") if isinstance(status.result, dict) else None
            highest = started[-1] if started else 0
            gaps = status.attempts - len(started)
            r.attempts_never_started += max(0, gaps)
            if status.state == JobState.SUCCEEDED and (
                highest != status.attempts or result != status.attempts or gaps < 0
            ):
                mismatches.append(
                    {"job_id": job_id, "attempts": status.attempts, "started": started, "result": result}
                )
        r.record_attempt_mismatches, r.record_attempt_mismatch_ids = len(mismatches), mismatches[:SHOWN]


def _duplicates(
    runs: dict[tuple[str, int, int], list[str]], hit: set[tuple[str, int, int]]
) -> KillDuplicates:
    """Each effect beyond a job's first, attributed to how the earlier run that did it ended: `runs`
    in the order they started, `hit` the runs the soak's kills hit."""
    found = KillDuplicates()
    effects: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for key, events in runs.items():
        if "effect" in events:
            effects[key[0]].append(key)
    for job_id, keys in effects.items():
        for key in keys[:-1]:  # every run that did its effect, and a later run did it again
            events = runs[key]
            if key in hit:
                found.after_kill += 1
            elif "raise" in events:
                found.after_raise += 1
            elif "done" not in events:
                found.after_timeout += 1
            else:
                found.other += 1
                if len(found.other_ids) < SHOWN:
                    found.other_ids.append(job_id)
    return found


def run_kills(seed: int, settings: KillSettings) -> dict[str, Any]:
    """One kill soak in this process; its report (`KillReport.to_dict`, with its gates)."""
    return KillSoak(seed, settings).run().to_dict()
