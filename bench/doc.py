"""docs/reports/benchmarks.md, written from bench.json (`python -m bench --write-doc`, or `--doc-only`): the
method, the figures of the run against the targets, and what a missed target needs."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from bench.common import ROOT
from bench.harness import FULL, ROWS

DOC = ROOT / "docs" / "reports" / "benchmarks.md"

#: The method (static text; `{cold}` etc. are the run's sizes) and the analysis of missed targets:
#: markdown beside this module. In the analysis, a block between `<!-- if missed: KEY -->` and
#: `<!-- end -->` is kept only when that target is missed in the run, `<!-- if met: KEY -->` only
#: when it is met, `<!-- if above: KEY VALUE -->` only when the figure is above VALUE.
METHOD = Path(__file__).with_name("doc_method.md")
ANALYSIS = Path(__file__).with_name("doc_analysis.md")


def _fmt(value: Any) -> str:
    return "n/a" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def render(figures: dict[str, Any], analysis: str = "") -> str:
    run, d = figures["run"], figures["details"]
    machine = run["machine"]
    sizes = run.get("sizes") or FULL
    out = [
        "# Benchmarks",
        "",
        "Is lambdajobs as cheap and as fast as the worker a Powertools user writes by hand?",
        f"This page is generated from `build/reports/bench.json` (`make bench ARGS=--write-doc`); the "
        f"figures below are from the run of {run['at']} on {machine['cpus']} CPUs ({machine['cpu_model']},"
        f" Python {machine['python']}, {machine['system']}), commit {run['commit'] or 'unknown'}: "
        f"`make bench` took {run['seconds']:.0f} s.",
        "",
        "## Figures against the targets",
        "",
        "| figure | value | target |",
        "|---|---|---|",
    ]
    for label, key in [*ROWS, *((key, key) for key in figures["targets"] if key not in {k for _, k in ROWS})]:
        target = figures["targets"].get(key)
        goal = ""
        if target:
            goal = f"{target['target']}: **{'met' if target['met'] else 'missed'}**"
            if "interval_90" in target:
                low, high = target["interval_90"]
                goal += f" (90% interval {_fmt(low)} to **{_fmt(high)}**)"
        out.append(f"| {label} (`{key}`) | {_fmt(figures.get(key))} | {goal} |")
    failed = [key for key, t in figures["targets"].items() if not t["met"]]
    out += [
        "",
        f"Targets met: {len(figures['targets']) - len(failed)} of {len(figures['targets'])}"
        + (f"; missed: {', '.join(f'`{k}`' for k in failed)}." if failed else ".")
        + (" (A `--quick` run: sizes too small to mean anything; not enforced.)" if run.get("quick") else ""),
    ]
    out += [
        "",
        "Medians, with [min, max] over the alternated runs:",
        "",
        "| | lambdajobs | hand-written Powertools worker |",
        "|---|---|---|",
    ]

    def cell(group: str, name: str, unit: str, digits: int) -> str:
        s = d[group][name]
        unit = f" {unit}" if unit else ""
        return f"{s['median']:.{digits}f}{unit} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"

    p = d["cold_start_parts_seconds"]
    inside = d.get("cold_start_in_process_seconds", {})

    def part(name: str) -> str:
        return f"{p[name]['median']:.3f} s" if name in p else "n/a"

    logs = d.get("log_lines_per_job", {})

    def lines(name: str) -> str:
        got = logs.get(name)
        return f"{_fmt(got['log'])} log, {_fmt(got['metric'])} metric" if got else "n/a"

    out += [
        f"| cold start: process start to first record handled | "
        f"{cell('cold_start_seconds', 'lambdajobs', 's', 3)} | "
        f"{cell('cold_start_seconds', 'powertools', 's', 3)} |",
        f"| the hand-written worker pausing its collector as lambdajobs does | | "
        f"{cell('cold_start_seconds', 'powertools_paused_gc', 's', 3)} |",
        f"| inside the process: import + first record | "
        f"{cell('cold_start_in_process_seconds', 'lambdajobs', 's', 3) if inside else 'n/a'} | "
        f"{cell('cold_start_in_process_seconds', 'powertools', 's', 3) if inside else 'n/a'} |",
        f"| of which the import | {part('lambdajobs_import_seconds')} | "
        f"{part('powertools_import_seconds')} |",
        f"| of which the first record | {part('lambdajobs_handle_seconds')} | "
        f"{part('powertools_handle_seconds')} |",
        f"| CPU per record, DynamoDB stubbed | {cell('worker_cpu_ms_per_record', 'lambdajobs', 'ms', 3)} | "
        f"{cell('worker_cpu_ms_per_record', 'powertools', 'ms', 3)} |",
        f"| records per second on moto | {cell('moto_records_per_second', 'lambdajobs', '', 0)} | "
        f"{cell('moto_records_per_second', 'powertools', '', 0)} |",
        f"| log + metric bytes per job | {figures['log_bytes_per_job']['lambdajobs']:g} | "
        f"{figures['log_bytes_per_job']['powertools']:g} |",
        f"| lines per job (JSON log lines, EMF metric lines) | {lines('lambdajobs')} | "
        f"{lines('powertools')} |",
        f"| DynamoDB write units per job | {figures['dynamodb_wru_per_job']:g} "
        f"({figures['dynamodb_wru_per_job_job_index_finished']:g} with the job index on `finished`; "
        f"{_fmt(figures.get('dynamodb_wru_per_job_light'))} in the light record mode) | "
        f"{figures['dynamodb_wru_per_job_powertools']:g} |",
        "",
        "Producers, jobs per second to one moto server (median [min, max]):",
        "",
        "| producer | jobs/s |",
        "|---|---|",
    ]
    for name, s in d["enqueue_jobs_per_second"].items():
        out.append(f"| {name} | {s['median']:.0f} [{s['min']:.0f}, {s['max']:.0f}] |")
    if d.get("light_mode_missing"):
        out += ["", f"The light record mode was not measured: {d['light_mode_missing']}"]
    if figures.get("enqueue_many_speedup_vs_celery") is None:
        out += ["", f"Celery was not measured: {d.get('enqueue_many_speedup_vs_celery_missing')}"]
    out += _durable(d.get("dynamodb_writes_durable"))
    a = figures["cost_assumptions"]
    out += [
        "",
        "## Cost per million jobs",
        "",
        "USD per million successful plain jobs, us-east-1 on-demand prices: DynamoDB "
        f"${a['prices_usd']['dynamodb_per_million_wru']} per million write units and "
        f"${a['prices_usd'].get('dynamodb_per_million_rru', 0.125)} per million read units, SQS "
        f"${a['prices_usd']['sqs_per_million_requests']} per million requests, Lambda "
        f"${a['prices_usd']['lambda_per_million_requests']} per million requests + "
        f"${a['prices_usd']['lambda_per_gb_second_arm64']} per GB-second (arm64), CloudWatch Logs "
        f"${a['prices_usd']['cloudwatch_logs_per_gb_ingested']} per GB ingested (in the last column only).",
        "",
        "| design | DynamoDB | SQS | Lambda | total | CloudWatch Logs | total with logs |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {
        "lambdajobs": "lambdajobs, default stack",
        "lambdajobs_repo_stack": "lambdajobs, this repository's stack "
        f"(job index `{figures.get('repo_stack_job_index', '?')}`)",
        "lambdajobs_light": "lambdajobs, light record mode",
        "lambdajobs_job_index_finished": "lambdajobs, job index `finished`",
        "powertools": "hand-written Powertools worker",
        "naive": "naive: one send per job, batch size 1",
    }
    for key, c in figures["usd_per_million_jobs"].items():
        out.append(
            f"| {names.get(key, key)} | {c['dynamodb']:.3f} | {c['sqs']:.3f} | {c['lambda']:.3f} | "
            f"**{c['total']:.2f}** | {c['cloudwatch_logs']:.3f} | {c['total_with_logs']:.2f} |"
        )
    durations = ", ".join(f"{k} {v} ms" for k, v in a["duration_ms_per_job"].items())
    calls = a.get("dynamodb_calls_per_job", {})
    if calls:
        durations += "; DynamoDB calls per job: " + ", ".join(
            f"{k} {v['writes']:g} writes + {v['reads']:g} reads" for k, v in calls.items()
        )
    sqs = ", ".join(f"{k} {v:g}" for k, v in a["sqs_requests_per_job"].items())
    out += [
        "",
        f"Assumptions: {a['memory_mb']} MB functions (send_email's); duration per job = "
        f"{a['duration_model']} ({durations}); SQS requests per job ({sqs}): {a['sqs_model']}; "
        f"{a['dynamodb']}; logs: {a['logs']}.",
        "",
    ]
    if analysis:
        out += [analysis.rstrip(), ""]
    out += [
        METHOD.read_text()
        .format(
            cold=sizes["cold"],
            cpu_rounds=sizes["cpu"][0],
            moto_rounds=sizes["moto"][0],
            enq_rounds=sizes["enqueue"][0],
        )
        .rstrip(),
        "",
    ]
    return "\n".join(out)


def _durable(durable: dict[str, Any] | None) -> list[str]:
    """The durable job's writes (`bench.phases.durable`): per job by kind of write, in both modes."""
    if not durable:
        return []
    inline, continuing = durable["inline"], durable["continuing"]
    out = [
        "",
        "## Write units of a durable job",
        "",
        f"A job of {durable['steps']} checkpointed steps (`bench/durable_job.py`: a video encoded in 5 "
        f"formats, each step returning an ~80-byte summary), {durable['jobs']} jobs per mode on the "
        "default stack: its steps in one invocation, and one step per invocation (each step's budget "
        "as long as an invocation holds, so the job continues in a fresh invocation before each step "
        f"but its first: {continuing['continuations_per_job']:g} continuations). Write units per job, "
        "by kind of write (calls, units):",
        "",
        "| write | steps in one invocation | one step per invocation |",
        "|---|---|---|",
    ]
    order = [
        "acquire",
        *(f"checkpoint:encode-{s}" for s in durable["wru_per_step_by_step"]),
        "park",
        "complete",
    ]
    found = set(inline["by_kind_per_job"]) | set(continuing["by_kind_per_job"])
    kinds = [k for k in order if k in found] + sorted(found - set(order))

    def cell(mode: dict[str, Any], kind: str) -> str:
        got = mode["by_kind_per_job"].get(kind)
        if not got:
            return ""
        return f"{got['calls']:g} call{'' if got['calls'] == 1 else 's'}, {got['units']:g} WRU"

    out += [f"| {kind} | {cell(inline, kind)} | {cell(continuing, kind)} |" for kind in kinds]
    out += [
        f"| **total** | **{inline['wru_per_job']:g} WRU** | **{continuing['wru_per_job']:g} WRU** |",
        "",
        f"Per step (its checkpoint, one UpdateItem on the job's record): {durable['wru_per_step']:g} WRU "
        f"({', '.join(f'{k} {v:g}' for k, v in durable['wru_per_step_by_step'].items())}); a checkpoint "
        "costs 1 unit per KB of the record as it grows. Per continuation (what the job writes more when "
        f"its steps run one per invocation, per continuation): {durable['wru_per_continuation']:g} WRU "
        f"({', '.join(f'{k} {v:g}' for k, v in durable['wru_per_continuation_parts'].items())}), and "
        f"{continuing['sqs_sends_per_job'] / max(1.0, continuing['continuations_per_job']):g} SQS send "
        "(the copy that continues it, delayed 1 s).",
    ]
    return out


def analysis(figures: dict[str, Any]) -> str:
    """The analysis text, keeping the blocks that apply to this run's targets."""
    kept: list[str] = []
    keep = True
    for line in ANALYSIS.read_text().splitlines():
        found = re.fullmatch(r"<!-- if (met|missed|above): (\w+)(?: ([\d.]+))? -->", line.strip())
        if found and found.group(1) == "above":
            value = figures.get(found.group(2))
            keep = value is not None and value > float(found.group(3))
        elif found:
            met = figures["targets"][found.group(2)]["met"]
            keep = bool(met) == (found.group(1) == "met")
        elif line.strip() == "<!-- end -->":
            keep = True
        elif keep:
            kept.append(line)
    return "\n".join(kept)


def write_doc(figures: dict[str, Any]) -> Path:
    DOC.write_text(render(figures, analysis(figures)))
    return DOC
