"""docs/reports/chaos.md, written from a soak's report (`python -m chaos --write-doc`, or `--doc-only`
from the last one): the run's size, then each gate with its figure and what it must be."""

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
        "| gate | figure | must be | passed |",
        "|---|---|---|---|",
    ]
    for name, gate in gates.items():
        mark = "yes" if gate.get("passed") else "**no**"
        lines.append(
            f"| `{name}` | {_cell(gate.get('value'))} | {_cell(gate.get('expected', ''))} | {mark} |"
        )
    return lines


def write(report: dict[str, Any], source: Path) -> Path:
    return write_page("chaos", render(report, source))
