"""python -m chaos [--quick] [--seeds 1,2] [--jobs N] [--step-jobs N] [--chord-members N] [--chain-steps N]
[--no-workflows] [--processes N] [--mutation NAME] [--no-kills] [--out PATH] [--write-doc | --doc-only]"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from chaos import doc, kill_settings_for, run, run_kill_soak, settings_for
from chaos.report import ChaosReport, add_kills
from reports import run_info

DEFAULT_OUT = Path("build/reports/chaos.json")


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2 seeds x 250 jobs (make test)")
    parser.add_argument("--seeds", help="comma-separated seeds, e.g. 1,2,3")
    parser.add_argument("--jobs", type=int, help="jobs per seed")
    parser.add_argument("--step-jobs", type=int, help="durable jobs of checkpointed steps per seed (0: none)")
    parser.add_argument("--chord-members", type=int, help="members of each seed's chord (0: no chord)")
    parser.add_argument("--chain-steps", type=int, help="steps of each seed's chain (0: no chain)")
    parser.add_argument("--no-workflows", action="store_true", help="no chord, chain or dead-callback chord")
    parser.add_argument("--processes", type=int, help="seeds run at once (default 2)")
    parser.add_argument("--settle-timeout", type=float, help="bounded wait before judging, seconds")
    parser.add_argument("--mutation", help="a regression to patch in (chaos.mutations.MUTATIONS)")
    parser.add_argument(
        "--no-kills", action="store_true", help="skip the kill soak (skipped with --mutation too)"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the report (default {DEFAULT_OUT})")
    parser.add_argument("--write-doc", action="store_true", help="also write docs/reports/chaos.md")
    parser.add_argument("--doc-only", action="store_true", help="write docs/reports/chaos.md from --out")
    return parser.parse_args(argv)


def summary(report: ChaosReport) -> str:
    d = report.duplicate_effects
    w = report.workflows
    lines = [
        f"chaos: {report.jobs} jobs, seeds {report.seeds}"
        + (f", mutation {report.mutation}" if report.mutation else "")
        + f", {report.elapsed_seconds:.0f} s",
        f"  lost {report.lost}; duplicate effects: crash_before_completion {d['crash_before_completion']}, "
        f"completion_write_fault {d['completion_write_fault']}, other {d['other']}",
        f"  poison in DLQ {report.poison_in_dlq}/{report.poison_total}; DLQ with reason "
        f"{report.dlq_with_reason_pct}% of {report.dlq_messages} ({report.dlq_duplicates} ids twice); "
        "non-poison in DLQ "
        f"{report.non_poison_in_dlq} (bound {report.non_poison_in_dlq_bound['bound']})",
        f"  record mismatches {report.record_mismatches}; stuck records {report.stuck_records}; "
        f"redriven completed {report.redriven_completed}/{report.redriven}",
        f"  workflows: {w.get('chords', 0)} chords, {w.get('chains', 0)} chains, "
        f"{w.get('members', 0)} members; done {w.get('done', 0)}, states {w.get('states', {})}; "
        f"callback effects {w.get('callback_effects', 0)}, runs {w.get('callback_runs', 0)}",
    ]
    s = report.steps
    if s.get("jobs"):
        lines += [
            f"  steps: {s['jobs']} step jobs ({s['one_per_invocation']} one step per invocation), "
            f"{s['steps']} steps, {s['executions']} runs, {s['checkpoints_landed']} checkpoints landed, "
            f"{s['parks_landed']} parks; faults {s['fired_faults']} (planned {s['planned_faults']})",
            f"  steps: run again after their checkpoint landed {s['run_again']} (+{s['landed_twice']} "
            f"landed twice; {s['run_again_after_deadline']} after a deadline); re-runs before it "
            f"{s['reruns']} {s['reruns_by_cause']}; records not true {s['record_mismatches']}; "
            f"succeeded {s['succeeded']}/{s['jobs']}",
        ]
    k = report.kills
    if k:
        kd = k["duplicate_effects"]
        lines += [
            f"  kills: {k['jobs']} jobs in worker processes, seed {k['seed']}, {k['elapsed_seconds']:.0f} s "
            f"{k['phase_seconds']}; {k['kills']} kills ({k['kills_mid_run']} mid-run), {k['timeouts']} "
            f"timeouts, {k['raised']} raises, {k['cold_starts']} cold starts",
            f"  kills: states {k['states']}; runs {k['runs']}, effects {k['effects']}; duplicate effects: "
            f"after_kill {kd['after_kill']}, after_timeout {kd['after_timeout']}, after_raise "
            f"{kd['after_raise']}, other {kd['other']}; attempts never started {k['attempts_never_started']}",
        ]
        if k.get("error"):
            lines.append(f"  kills: the soak failed:\n{k['error']}")
    for name, gate in report.gates.items():
        mark = "ok  " if gate.passed else "FAIL"
        lines.append(f"  {mark} {name}: {gate.value} (expected {gate.expected})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.doc_only:
        data = json.loads(args.out.read_text())
        print(f"  page: {doc.write(data, args.out)} (from {args.out})")
        return 0 if data.get("passed") else 1
    settings = settings_for(
        args.quick,
        seeds=tuple(int(s) for s in args.seeds.split(",")) if args.seeds else None,
        jobs=args.jobs,
        step_jobs=args.step_jobs,
        chord_members=0 if args.no_workflows else args.chord_members,
        chain_steps=0 if args.no_workflows else args.chain_steps,
        dead_callback_members=0 if args.no_workflows else None,
        processes=args.processes,
        settle_timeout_seconds=args.settle_timeout,
    )
    report = run(settings, mutation=args.mutation)
    if not (args.no_kills or args.mutation):
        add_kills(report, run_kill_soak(kill_settings_for(args.quick)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    data = {"run": run_info(), **report.to_dict()}
    args.out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(summary(report))
    print(f"  report: {args.out}")
    if args.write_doc:
        print(f"  page: {doc.write(data, args.out)}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
