"""The soak's report: what one seed found (`SeedReport`), the whole run (`ChaosReport`) and its gates;
what the kill soak found (`KillReport`, `chaos.kills`) and its gates, added to the run's as `kills.*`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

#: How many ids a report lists per finding (the counts are always complete).
SHOWN = 20


@dataclass
class DuplicateEffects:
    """Side effects beyond the first per job id, each attributed to the fault that caused it: an
    earlier run of the id that did its effect then crashed before its completion write, or whose
    completion write was throttled; anything else is `other` (a real duplicate)."""

    crash_before_completion: int = 0
    completion_write_fault: int = 0
    other: int = 0
    other_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.crash_before_completion + self.completion_write_fault + self.other


@dataclass
class Bound:
    """The expected number of non-poison jobs dead-lettered by the faults alone, and a bound on it."""

    expected: float = 0.0
    bound: int = 0
    per_attempt_failure: float = 0.0
    formula: str = ""


@dataclass
class Mismatch:
    phase: str  # "before_redrive" or "final"
    job_id: str
    where: str  # "dlq" or "completed_and_gone"
    expected: str
    actual: str
    note: str | None = None


@dataclass
class WorkflowCheck:
    """One workflow of a seed (a chord or a chain): how it ended and what its members did.

    `stages[phase]`: per stage, what `get_workflow` counted, before the redrive and after it;
    `count_mismatches`: a stage whose counts differ from its members' records (or whose total differs
    from the members planned). A chord: its callback's effects in the ledger (`callback_effects`), less
    those a crash before its completion explains (`callback_runs`: must be 1), and the `parents` each
    of its runs was told against its members' records before the redrive (`expected_parents`)."""

    workflow_id: str
    kind: str
    members: int
    state: str
    done: bool
    state_before_redrive: str
    reason: str | None = None
    #: From its creation to its end (`get_workflow`'s created_at and ended_at).
    seconds: float | None = None
    stages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    count_mismatches: list[str] = field(default_factory=list)
    callback_job_id: str | None = None
    callback_effects: int = 0
    callback_runs: int = 0
    callback_parents: list[dict[str, int]] = field(default_factory=list)
    expected_parents: dict[str, int] = field(default_factory=dict)
    parent_mismatches: int = 0
    problems: list[str] = field(default_factory=list)


@dataclass
class StepsCheck:
    """The step jobs of a seed (`chaos.step_jobs`): their steps' runs judged against the checkpoint
    writes before each (`chaos.soak.Soak._judge_steps`), and their records against what happened.

    `run_again`: runs of a step whose checkpoint had landed before it started (in the table, or seen
    landing): must be 0, as must `landed_twice` (a step whose checkpoint landed twice ran again).
    `run_again_after_deadline`: such runs that started after their invocation's deadline (Lambda
    would have stopped that invocation first; the emulator cannot): reported, not a gate. `reruns`:
    runs of a step before its checkpoint landed, after its first (at-least-once per step), by the
    cause that ended the run before (`reruns_by_cause`: it raised, or its checkpoint write crashed
    before, was throttled past its tries, was refused, or was stopped at its invocation's deadline:
    `timed_out`); `reruns_unexplained` has none: must be 0.
    `records`: step jobs whose record is not true (`record_mismatches` of them, before the redrive and
    after)."""

    jobs: int = 0
    steps: int = 0
    one_per_invocation: int = 0
    max_attempts: int = 0
    executions: int = 0
    checkpoints_landed: int = 0
    parks_landed: int = 0
    transient: int = 0
    planned_raises: int = 0
    run_again: int = 0
    landed_twice: int = 0
    run_again_ids: list[dict[str, Any]] = field(default_factory=list)
    run_again_after_deadline: int = 0
    reruns: int = 0
    reruns_by_cause: dict[str, int] = field(default_factory=dict)
    reruns_unexplained: int = 0
    reruns_unexplained_ids: list[str] = field(default_factory=list)
    record_mismatches: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    planned_faults: dict[str, int] = field(default_factory=dict)
    fired_faults: dict[str, int] = field(default_factory=dict)
    #: The step jobs' states before the redrive, and how many succeeded in the end.
    states: dict[str, int] = field(default_factory=dict)
    succeeded: int = 0


@dataclass
class FlowCheck:
    """Flow control in a seed (`chaos.soak.Soak._judge_flow`): cancels, the per-key cap, debounce.

    Cancels: `cancelled_before` bulk jobs cancelled before they ran, `cancelled_running` `chaos_flow`
    jobs cancelled while they reported progress (`cancel_outcomes`: what `cancel` answered). A job
    runs after its cancel when a run of it started after its cancel returned (recorded), or a progress
    report of it called after that returned (the job went on): `ran_after_cancel` (must be 0).
    `stopped_at_check`: running jobs that stopped at a check (their run ended `cancelled`).
    `states_wrong`: flow jobs not in the final state their plan gives (cancelled; superseded, or
    succeeded for a burst's last; succeeded for a keyed job), counted as lost too.

    The cap: each key's runs as the job noted them (start, end, each cut at its invocation's deadline:
    Lambda would have stopped it there), `max_running_per_key` the most in progress at once (must be at
    most `cap`); `overran`: runs that ended past their deadline (reported).

    Debounce: per burst, its enqueues' runs (run starts) and effects less those a crash before their
    completion explains; `bursts_ran_once`: bursts whose last enqueue ran once and no other ran
    (must be all); `burst_seconds_max`: the longest burst's enqueues, first to last (reported);
    `burst_gap_seconds_max`: the longest span of two successive enqueues of a burst, from one's call
    to the next's return (must stay within the window: each enqueue then falls within `seconds` of
    the one before, which is what makes it a burst; a loaded machine may spread a whole burst past
    the window)."""

    cancelled_before: int = 0
    cancelled_running: int = 0
    cancel_outcomes: dict[str, int] = field(default_factory=dict)
    cancel_missed: int = 0
    ran_after_cancel: int = 0
    ran_after_cancel_ids: list[dict[str, Any]] = field(default_factory=list)
    stopped_at_check: int = 0
    progress_refused: int = 0
    states: dict[str, dict[str, int]] = field(default_factory=dict)
    states_wrong: int = 0
    states_wrong_ids: list[dict[str, Any]] = field(default_factory=list)
    keyed_jobs: int = 0
    keys: int = 0
    cap: int = 0
    keyed_runs: int = 0
    max_running_per_key: int = 0
    running_per_key: dict[str, int] = field(default_factory=dict)
    overran: int = 0
    bursts: int = 0
    burst_size: int = 0
    bursts_ran_once: int = 0
    bursts_not_once: list[dict[str, Any]] = field(default_factory=list)
    #: Earlier enqueues of a burst that ran after its last one had run (the key's item was gone).
    superseded_ran_after_last: int = 0
    burst_seconds_max: float = 0.0
    burst_gap_seconds_max: float = 0.0
    debounce_seconds: int = 0


@dataclass
class SeedReport:
    seed: int
    jobs: int
    mutation: str | None = None
    elapsed_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    #: Whether the queues drained and the locks expired within the bounded waits (before judging).
    settled: bool = False
    unsettled: list[str] = field(default_factory=list)
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    duplicate_effects: DuplicateEffects = field(default_factory=DuplicateEffects)
    poison_total: int = 0
    poison_in_dlq: int = 0
    poison_missing_from_dlq: list[str] = field(default_factory=list)
    dlq_messages: int = 0
    dlq_with_reason: int = 0
    dlq_without_reason_ids: list[str] = field(default_factory=list)
    #: Job ids with more than one message in the DLQ (e.g. moved, then the batch failed as a whole and
    #: the message came back and was moved again). Not a gate: a redrive still runs the job once.
    dlq_duplicates: int = 0
    dlq_duplicate_ids: list[str] = field(default_factory=list)
    non_poison_in_dlq: int = 0
    non_poison_in_dlq_ids: list[str] = field(default_factory=list)
    non_poison_in_dlq_bound: Bound = field(default_factory=Bound)
    record_mismatches: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    stuck_records: int = 0
    stuck: list[dict[str, Any]] = field(default_factory=list)
    redriven: int = 0
    redriven_completed: int = 0
    redriven_not_once: list[dict[str, Any]] = field(default_factory=list)
    #: Jobs that died (poison) and ran more than max_attempts times before the redrive: run again after
    #: dying (a re-sent message of a dead job runs it again), with their runs and DLQ messages.
    dead_jobs_run_again: int = 0
    dead_jobs_run_again_ids: list[dict[str, Any]] = field(default_factory=list)
    faults: dict[str, Any] = field(default_factory=dict)
    emulator: dict[str, Any] = field(default_factory=dict)
    workflows: list[WorkflowCheck] = field(default_factory=list)
    steps: StepsCheck = field(default_factory=StepsCheck)
    flow: FlowCheck = field(default_factory=FlowCheck)

    @property
    def dlq_with_reason_pct(self) -> float:
        return 100.0 if not self.dlq_messages else round(100.0 * self.dlq_with_reason / self.dlq_messages, 2)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["dlq_with_reason_pct"] = self.dlq_with_reason_pct
        data["duplicate_effects"]["total"] = self.duplicate_effects.total
        return data


def poisson_quantile(mean: float, probability: float = 0.9999) -> int:
    """The smallest k with P(X <= k) >= probability for X ~ Poisson(mean)."""
    k, term = 0, math.exp(-mean)
    cumulative = term
    while cumulative < probability:
        k += 1
        term *= mean / k
        cumulative += term
    return k


def non_poison_bound(
    *, jobs: int, transient: float, crash: float, throttle_dynamodb: float, max_attempts: int
) -> Bound:
    """A non-poison job reaches the DLQ only when every one of its `max_attempts` receives fails.
    An attempt fails when the run raises (transient), its invocation crashes, or one of its two
    DynamoDB writes (acquire, completion) is throttled; independent per attempt."""
    p = transient + crash + (1 - (1 - throttle_dynamodb) ** 2)
    expected = jobs * p**max_attempts
    return Bound(
        expected=round(expected, 4),
        bound=poisson_quantile(expected),
        per_attempt_failure=round(p, 4),
        formula=(
            "expected = non_poison_jobs * p ** max_attempts, p = transient_rate + crash_rate + "
            "(1 - (1 - throttle_dynamodb_rate) ** 2)  [acquire and completion writes]; "
            f"bound = Poisson(expected) 99.99% quantile; here p = {p:.4f}, max_attempts = {max_attempts}"
        ),
    )


@dataclass
class Gate:
    passed: bool
    value: Any
    expected: str


@dataclass
class ChaosReport:
    jobs: int
    seeds: list[int]
    settings: dict[str, Any]
    mutation: str | None = None
    elapsed_seconds: float = 0.0
    lost: int = 0
    duplicate_effects: dict[str, int] = field(default_factory=dict)
    poison_total: int = 0
    poison_in_dlq: int = 0
    dlq_messages: int = 0
    dlq_with_reason_pct: float = 100.0
    dlq_duplicates: int = 0
    non_poison_in_dlq: int = 0
    non_poison_in_dlq_bound: dict[str, Any] = field(default_factory=dict)
    record_mismatches: int = 0
    stuck_records: int = 0
    redriven: int = 0
    redriven_completed: int = 0
    dead_jobs_run_again: int = 0
    settled: bool = True
    #: Workflows: chords and chains run, done at the end, and what the gates judge.
    workflows: dict[str, Any] = field(default_factory=dict)
    #: Step jobs: the seeds' `StepsCheck`s summed (their lists joined, `SHOWN` at most).
    steps: dict[str, Any] = field(default_factory=dict)
    #: Flow control: the seeds' `FlowCheck`s summed (the cap's figures: the largest).
    flow: dict[str, Any] = field(default_factory=dict)
    faults: dict[str, Any] = field(default_factory=dict)
    #: The kill soak's report (`KillReport.to_dict`; empty: not run); its gates are in `gates` as
    #: `kills.<name>`.
    kills: dict[str, Any] = field(default_factory=dict)
    gates: dict[str, Gate] = field(default_factory=dict)
    passed: bool = False
    per_seed: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def failed_gates(self) -> list[str]:
        return [name for name, gate in self.gates.items() if not gate.passed]


def _add_faults(total: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict):
            _add_faults(total.setdefault(key, {}), value)
        elif isinstance(value, int | float):
            total[key] = total.get(key, 0) + value


def combine(
    seeds: list[SeedReport], settings: dict[str, Any], mutation: str | None, elapsed: float
) -> ChaosReport:
    """The run's report: the seeds' figures summed, and the gates judged on the sums."""
    report = ChaosReport(
        jobs=sum(s.jobs for s in seeds),
        seeds=[s.seed for s in seeds],
        settings=settings,
        mutation=mutation,
        elapsed_seconds=round(elapsed, 1),
    )
    duplicates = {"crash_before_completion": 0, "completion_write_fault": 0, "other": 0}
    reasons = 0
    expected_non_poison = 0.0
    for seed in seeds:
        report.lost += seed.lost
        for key in duplicates:
            duplicates[key] += getattr(seed.duplicate_effects, key)
        report.poison_total += seed.poison_total
        report.poison_in_dlq += seed.poison_in_dlq
        report.dlq_messages += seed.dlq_messages
        reasons += seed.dlq_with_reason
        report.dlq_duplicates += seed.dlq_duplicates
        report.non_poison_in_dlq += seed.non_poison_in_dlq
        expected_non_poison += seed.non_poison_in_dlq_bound.expected
        report.record_mismatches += seed.record_mismatches
        report.stuck_records += seed.stuck_records
        report.redriven += seed.redriven
        report.redriven_completed += seed.redriven_completed
        report.dead_jobs_run_again += seed.dead_jobs_run_again
        report.settled = report.settled and seed.settled
        _add_faults(report.faults, seed.faults)
    report.duplicate_effects = {**duplicates, "total": sum(duplicates.values())}
    workflows = [w for seed in seeds for w in seed.workflows]
    chords = [w for w in workflows if w.kind == "chord"]
    chains = [w for w in workflows if w.kind == "chain"]
    report.workflows = {
        "chords": len(chords),
        "chains": len(chains),
        "members": sum(w.members for w in workflows),
        "done": sum(1 for w in workflows if w.done),
        "max_seconds": {
            kind: max((w.seconds or 0.0 for w in workflows if w.kind == kind), default=0.0)
            for kind in ("chord", "chain")
        },
        "states": {
            state: sum(1 for w in workflows if w.state == state)
            for state in sorted({w.state for w in workflows})
        },
        "callback_effects": sum(w.callback_effects for w in chords),
        "callback_runs": sum(w.callback_runs for w in chords),
        "callbacks_not_once": [w.workflow_id for w in chords if w.callback_runs != 1],
        "callback_parents": [
            {"workflow": w.workflow_id, "told": w.callback_parents, "records": w.expected_parents}
            for w in chords
        ][:SHOWN],
        "parent_mismatches": sum(w.parent_mismatches for w in chords),
        "count_mismatches": [f"{w.workflow_id} {m}" for w in workflows for m in w.count_mismatches][:SHOWN],
        "chain_problems": [f"{w.workflow_id} {p}" for w in chains for p in w.problems][:SHOWN],
    }
    report.steps = _sum_steps([seed.steps for seed in seeds])
    report.flow = _sum_flow([seed.flow for seed in seeds])
    report.dlq_with_reason_pct = (
        100.0 if not report.dlq_messages else round(100.0 * reasons / report.dlq_messages, 2)
    )
    bound = poisson_quantile(expected_non_poison)
    report.non_poison_in_dlq_bound = {
        "expected": round(expected_non_poison, 4),
        "bound": bound,
        "formula": seeds[0].non_poison_in_dlq_bound.formula if seeds else "",
        "summed_over_seeds": True,
    }
    report.gates = {
        "lost": Gate(report.lost == 0, report.lost, "0"),
        "duplicate_effects.other": Gate(duplicates["other"] == 0, duplicates["other"], "0"),
        "poison_in_dlq": Gate(
            report.poison_in_dlq == report.poison_total,
            report.poison_in_dlq,
            f"== poison_total ({report.poison_total}), before the redrive",
        ),
        "dlq_with_reason_pct": Gate(report.dlq_with_reason_pct == 100.0, report.dlq_with_reason_pct, "100"),
        "record_mismatches": Gate(report.record_mismatches == 0, report.record_mismatches, "0"),
        "stuck_records": Gate(report.stuck_records == 0, report.stuck_records, "0"),
        "redriven_completed": Gate(
            report.redriven_completed == report.redriven,
            report.redriven_completed,
            f"== redriven ({report.redriven}): each exactly once",
        ),
        "non_poison_in_dlq": Gate(report.non_poison_in_dlq <= bound, report.non_poison_in_dlq, f"<= {bound}"),
        "settled": Gate(report.settled, report.settled, "queues drained and locks expired before judging"),
        "dead_jobs_not_run_again": Gate(
            report.dead_jobs_run_again == 0,
            report.dead_jobs_run_again,
            "0: every job that died ran at most max_attempts times before the redrive (none ran again "
            "after dying: a workflow's re-sent stage included)",
        ),
        "workflow_callbacks": Gate(
            all(w.callback_runs == 1 for w in chords),
            report.workflows["callback_runs"],
            f"== chords ({len(chords)}): each chord's callback ran exactly once (its effects, less "
            "those after a crash before its completion write)",
        ),
        "workflow_callback_parents": Gate(
            report.workflows["parent_mismatches"] == 0 and all(w.callback_parents for w in chords),
            report.workflows["parent_mismatches"],
            "0: every callback run was told the succeeded and dead of its members' records (before redrive)",
        ),
        "workflows_done": Gate(
            all(w.done for w in workflows),
            report.workflows["done"],
            f"== workflows ({len(workflows)}): every workflow ended (get_workflow(...).done)",
        ),
        "workflow_stage_counts": Gate(
            not any(w.count_mismatches for w in workflows),
            sum(len(w.count_mismatches) for w in workflows),
            "0: every stage's counts equal its members' records, before and after the redrive",
        ),
        "chain_order": Gate(
            not any(w.problems for w in chains),
            sum(len(w.problems) for w in chains),
            "0: every chain ran its steps in order, each once (effects less crashes before completion)",
        ),
    }
    if report.steps["jobs"]:
        s = report.steps
        report.gates |= {
            "steps_run_after_checkpoint": Gate(
                s["run_again"] + s["landed_twice"] == 0,
                s["run_again"] + s["landed_twice"],
                "0: no step ran again once its checkpoint had landed (in the table when it started, or "
                "seen landing before), and none landed twice",
            ),
            "step_reruns_explained": Gate(
                s["reruns_unexplained"] == 0,
                s["reruns_unexplained"],
                f"0: each of the {s['reruns']} re-runs of a step before its checkpoint landed follows a run "
                "that raised or a checkpoint write that crashed, failed, was refused or was stopped at its "
                "invocation's deadline",
            ),
            "step_records_true": Gate(
                s["record_mismatches"] == 0,
                s["record_mismatches"],
                "0: every step job's record lists the steps checkpointed in its item, which are the "
                "checkpoint writes seen landing, counts the parks that landed, and a success every step "
                "and its result (before the redrive and after it)",
            ),
            "step_jobs_succeeded": Gate(
                s["succeeded"] == s["jobs"],
                s["succeeded"],
                f"== step jobs ({s['jobs']}): every step job succeeded in the end",
            ),
        }
    report.gates |= _flow_gates(report.flow)
    report.passed = all(g.passed for g in report.gates.values())
    report.per_seed = [s.to_dict() for s in seeds]
    return report


def _flow_gates(f: dict[str, Any]) -> dict[str, Gate]:
    """Flow control's gates (none when the soak ran no flow jobs); its jobs' final states are in
    `lost`."""
    gates: dict[str, Gate] = {}
    if f.get("cancelled_before") or f.get("cancelled_running"):
        gates["cancelled_not_run"] = Gate(
            f["ran_after_cancel"] == 0,
            f["ran_after_cancel"],
            "0: no cancelled job started a run, or went on past a progress report, after its cancel was "
            "recorded (the job's own run log against the time cancel returned)",
        )
    if f.get("keyed_jobs"):
        gates["key_cap"] = Gate(
            f["max_running_per_key"] <= f["cap"],
            f["max_running_per_key"],
            f"<= {f['cap']}: runs of one key in progress at once (each run from its start to its end, "
            "cut at its invocation's deadline)",
        )
    if f.get("bursts"):
        gates["debounce_bursts_once"] = Gate(
            f["bursts_ran_once"] == f["bursts"],
            f["bursts_ran_once"],
            f"== bursts ({f['bursts']}): of each debounced burst exactly the last enqueue ran, once; the "
            "others superseded",
        )
    return gates


def _sum_flow(checks: list[FlowCheck]) -> dict[str, Any]:
    """The seeds' flow checks summed: counts added, lists joined (`SHOWN`), the cap's and the bursts'
    largest figures kept, per-state counts merged per flow."""
    total: dict[str, Any] = {}
    largest = (
        "max_running_per_key",
        "burst_seconds_max",
        "burst_gap_seconds_max",
        "cap",
        "burst_size",
        "debounce_seconds",
    )
    for check in checks:
        for key, value in asdict(check).items():
            if isinstance(value, list):
                total[key] = (total.get(key, []) + value)[:SHOWN]
            elif key == "states":
                for flow, states in value.items():
                    merged = total.setdefault(key, {}).setdefault(flow, {})
                    for state, n in states.items():
                        merged[state] = merged.get(state, 0) + n
            elif key == "running_per_key":
                merged = total.setdefault(key, {})
                for name, n in value.items():
                    merged[name] = max(merged.get(name, 0), n)
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                for name, n in value.items():
                    merged[name] = merged.get(name, 0) + n
            elif key in largest:
                total[key] = max(total.get(key, 0), value)
            else:
                total[key] = total.get(key, 0) + value
    return total


def _sum_steps(checks: list[StepsCheck]) -> dict[str, Any]:
    """The seeds' step checks summed: counts added, dicts of counts merged, lists joined (`SHOWN`)."""
    total: dict[str, Any] = {}
    for check in checks:
        for key, value in asdict(check).items():
            if isinstance(value, list):
                total[key] = (total.get(key, []) + value)[:SHOWN]
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                for name, n in value.items():
                    merged[name] = merged.get(name, 0) + n
            elif key == "max_attempts":
                total[key] = value
            else:
                total[key] = total.get(key, 0) + value
    total.setdefault("jobs", 0)
    return total


# -- the kill soak (chaos.kills) --------------------------------------------------------------------


@dataclass
class KillDuplicates:
    """Side effects beyond the first per job id in the kill soak, each attributed to how the earlier
    run that did it ended: its process SIGKILLed by the soak (before its completion write, after its
    `done` line or before it), its process gone without a `done` and not killed by the soak (the
    local stack killed it at the job's timeout), or a planned raise after the effect (retried by
    design). Anything else is `other`: a run that finished (`done`) in a process nobody killed, and
    ran again."""

    after_kill: int = 0
    after_timeout: int = 0
    after_raise: int = 0
    other: int = 0
    other_ids: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.after_kill + self.after_timeout + self.after_raise + self.other


@dataclass
class KillReport:
    seed: int
    jobs: int
    settings: dict[str, Any] = field(default_factory=dict)
    elapsed_seconds: float = 0.0
    phase_seconds: dict[str, float] = field(default_factory=dict)
    #: How the faults reach the worker processes (`chaos.kills.FAULTS_REACH`).
    faults_reach: str = ""
    #: What the plan asked for: jobs timing out and raising on attempt 1, kills at most.
    planned: dict[str, int] = field(default_factory=dict)
    #: The soak's SIGKILLs of running environments; ticks that killed none (not counted): none of
    #: the soak's was running, or (`kill_ticks_spared`) each was spared (`chaos.kills.Killer`).
    kills: int = 0
    kill_ticks_idle: int = 0
    kill_ticks_spared: int = 0
    kills_by_function: dict[str, int] = field(default_factory=dict)
    #: Killed processes whose last run started and never ended (no `done`, no `raise`): mid-run.
    kills_mid_run: int = 0
    #: The local stack's figures over the jobs' functions (`Fleet.stats`), and per function.
    timeouts: int = 0
    crashes: int = 0
    cold_starts: int = 0
    functions: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: From the ledger: runs started, effects, planned raises, planned timeouts that started, and of
    #: those the runs that slept to their end (`done`): not killed at their timeout.
    runs: int = 0
    effects: int = 0
    raised: int = 0
    planned_timeouts_started: int = 0
    planned_timeouts_finished: int = 0
    #: Whether every record was final and the queues empty within the bounded wait.
    settled: bool = False
    unsettled: list[str] = field(default_factory=list)
    states: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    lost_ids: list[str] = field(default_factory=list)
    #: (job id, attempt) pairs started more than once: the record's fence let an attempt run twice.
    attempts_started_twice: int = 0
    attempts_started_twice_ids: list[str] = field(default_factory=list)
    #: An attempt is a receive of the job's message (`lambdajobs.runtime.delivery.attempt_of`): jobs
    #: whose record's attempts differ from their highest started attempt or from the attempt their
    #: result names (a succeeded job's last attempt is the one that ran to its end).
    record_attempt_mismatches: int = 0
    record_attempt_mismatch_ids: list[dict[str, Any]] = field(default_factory=list)
    #: Attempts the records count that never started a run: receives of a batch whose invocation was
    #: killed (by the soak, or at its timeout) before the record's turn came. At most, per function,
    #: its batch size x (its kills + its timeouts): `attempts_never_started_bound`.
    attempts_never_started: int = 0
    attempts_never_started_bound: int = 0
    duplicate_effects: KillDuplicates = field(default_factory=KillDuplicates)
    stuck_records: int = 0
    stuck: list[dict[str, Any]] = field(default_factory=list)
    dlq_messages: int = 0
    #: When the soak itself failed (an exception): the traceback's last lines.
    error: str | None = None

    def gates(self) -> dict[str, Gate]:
        bound = self.attempts_never_started_bound
        return {
            "lost": Gate(self.lost == 0 and self.error is None, self.lost, "0: every job succeeded"),
            "attempts_started_twice": Gate(
                self.attempts_started_twice == 0,
                self.attempts_started_twice,
                "0: no attempt number of a job started twice (the record's fence)",
            ),
            "record_attempts": Gate(
                self.record_attempt_mismatches == 0 and self.error is None,
                self.record_attempt_mismatches,
                "0: each record's attempts == its highest started attempt == its result's attempt "
                "(== its distinct started attempts + those never started)",
            ),
            "attempts_never_started": Gate(
                self.attempts_never_started <= bound,
                self.attempts_never_started,
                f"<= {bound}: per function, batch size x (kills + timeouts): receives of a killed "
                "batch's records that had not started",
            ),
            "duplicate_effects.other": Gate(
                self.duplicate_effects.other == 0,
                self.duplicate_effects.other,
                "0: an effect done again only after a kill, a timeout or a planned raise hit the run",
            ),
            "stuck_records": Gate(self.stuck_records == 0, self.stuck_records, "0 (running, retrying, ...)"),
            "dlq_empty": Gate(self.dlq_messages == 0, self.dlq_messages, "0"),
            "settled": Gate(
                self.settled, self.settled, "every record final and the queues empty within the wait"
            ),
            "kills_happened": Gate(
                self.kills >= 1, self.kills, ">= 1 running environment SIGKILLed by the soak"
            ),
            "timeouts_happened": Gate(
                self.timeouts >= 1, self.timeouts, ">= 1 invocation killed at its timeout"
            ),
            "planned_timeouts_killed": Gate(
                self.planned_timeouts_finished == 0,
                self.planned_timeouts_finished,
                f"0 of the {self.planned_timeouts_started} runs sleeping past their timeout ran to their end",
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["duplicate_effects"]["total"] = self.duplicate_effects.total
        data["gates"] = {name: asdict(gate) for name, gate in self.gates().items()}
        data["passed"] = all(gate.passed for gate in self.gates().values())
        return data


def add_kills(report: ChaosReport, kills: dict[str, Any]) -> None:
    """The kill soak's report into the run's: under `kills`, and its gates as `kills.<name>`."""
    report.kills = kills
    for name, gate in kills.get("gates", {}).items():
        report.gates[f"kills.{name}"] = Gate(gate["passed"], gate["value"], gate["expected"])
    report.passed = all(g.passed for g in report.gates.values())
