"""docs/reports/chaos.md, written from a soak's report (`python -m chaos --write-doc`, or `--doc-only`
from the last one): the run's size, the kill soak's (if it ran: its gates are `kills.*`) and how its
faults reach the worker processes, then each gate with its figure and what it must be."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reports import header, write_page


def _cell(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text.replace("|", "\\|")


def render(report: dict[str, Any], source: Path) -> list[str]:
    gates: dict[str, dict[str, Any]] = report.get("gates", {})
    failed = [name for name, gate in gates.items() if not gate.get("passed")]
    lines = header("Chaos soak", str(source), "python -m chaos --write-doc", report.get("run"))
    size = f"{report.get('jobs')} jobs over seeds {report.get('seeds')}"
    if report.get("mutation"):
        size += f", with the regression `{report['mutation']}` patched in"
    lines += [
        f"The soak ran {size} in {report.get('elapsed_seconds')} s: "
        + ("every gate passed." if not failed else f"**{len(failed)} gates failed** ({', '.join(failed)})."),
        "The reliability page explains the faults injected and what each gate guards.",
        "",
        *_steps(report.get("steps") or {}),
        *_kills(report.get("kills") or {}),
        "| gate | figure | must be | passed |",
        "|---|---|---|---|",
    ]
    for name, gate in gates.items():
        mark = "yes" if gate.get("passed") else "**no**"
        lines.append(
            f"| `{name}` | {_cell(gate.get('value'))} | {_cell(gate.get('expected', ''))} | {mark} |"
        )
    return lines


def _steps(steps: dict[str, Any]) -> list[str]:
    """The step jobs' paragraph (none when the soak ran none)."""
    if not steps.get("jobs"):
        return []
    causes = ", ".join(f"{n} after {cause}" for cause, n in sorted(steps.get("reruns_by_cause", {}).items()))
    faults = ", ".join(f"{point} {n}" for point, n in steps.get("fired_faults", {}).items())
    return [
        f"Among them, {steps['jobs']} durable jobs of checkpointed steps ({steps['one_per_invocation']} "
        f"running one step per invocation, parking between steps): {steps['steps']} steps, "
        f"{steps['executions']} step runs, {steps['checkpoints_landed']} checkpoints landed, "
        f"{steps['parks_landed']} parks; faults planned around their checkpoints and parks ({faults}) "
        f"besides the soak's. Steps run again after their checkpoint landed: {steps['run_again']}"
        f" ({steps.get('run_again_after_deadline', 0)} more after their invocation's deadline, which "
        f"Lambda would have stopped); run again before it (at least once per step): {steps['reruns']}"
        + (f" ({causes})" if causes else "")
        + f"; records not true: {steps['record_mismatches']}. Their gates are the `step*` rows below.",
        "",
    ]


def _kills(kills: dict[str, Any]) -> list[str]:
    """The kill soak's paragraph (none when it did not run: `--no-kills`, or a mutation)."""
    if not kills:
        return []
    if kills.get("error"):
        return [f"The kill soak (seed {kills.get('seed')}) failed before judging: see `kills.error`.", ""]
    d = kills.get("duplicate_effects", {})
    return [
        f"Then the kill soak ran {kills.get('jobs')} jobs (seed {kills.get('seed')}) in worker processes "
        f"of their own, in {kills.get('elapsed_seconds')} s: {kills.get('kills')} running environments "
        f"SIGKILLed ({kills.get('kills_mid_run')} mid-run), {kills.get('timeouts')} invocations killed "
        f"at their timeout, {kills.get('raised')} planned raises; {kills.get('runs')} runs, "
        f"{d.get('total', 0)} effects done again ({d.get('after_kill', 0)} after a kill, "
        f"{d.get('after_timeout', 0)} after a timeout, {d.get('after_raise', 0)} after a raise, "
        f"{d.get('other', 0)} otherwise). Its gates are the `kills.*` rows below.",
        "",
        f"How its faults reach the worker processes: {kills.get('faults_reach', '')}",
        "",
    ]


def write(report: dict[str, Any], source: Path) -> Path:
    return write_page("chaos", render(report, source))
