"""The soak's report: what one seed found (`SeedReport`), the whole run (`ChaosReport`) and its gates."""

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
    faults: dict[str, Any] = field(default_factory=dict)
    emulator: dict[str, Any] = field(default_factory=dict)

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
    settled: bool = True
    faults: dict[str, Any] = field(default_factory=dict)
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
        report.settled = report.settled and seed.settled
        _add_faults(report.faults, seed.faults)
    report.duplicate_effects = {**duplicates, "total": sum(duplicates.values())}
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
    }
    report.passed = all(g.passed for g in report.gates.values())
    report.per_seed = [s.to_dict() for s in seeds]
    return report
