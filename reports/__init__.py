"""Generated report pages (docs/reports/): what every one of them states about its run.

A measured figure of a particular run lives only in a page written by the command that measured it
(`make bench ARGS=--write-doc`, `python -m chaos --write-doc`, `python demo.py --write-doc`,
`python -m reports.tests`), committed and never edited by hand. Each page says when, at which commit
and on what machine it was measured: `run_info()` gathers those, `header()` writes them.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs" / "reports"


def machine() -> dict[str, Any]:
    """CPU count and model, Python and OS of this machine."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model or platform.processor() or "unknown CPU",
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.machine()}",
    }


def commit() -> str:
    """The short commit of HEAD, marked when the library or the example app has uncommitted changes
    (the figures then belong to code no commit holds); empty outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "shared", "handlers"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + (" (runtime modified)" if dirty else "")


def run_info() -> dict[str, Any]:
    """When (UTC), at which commit and on what machine: stored in a run's JSON report."""
    return {
        "at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit(),
        "machine": machine(),
    }


def header(title: str, source: str, command: str, run: dict[str, Any] | None) -> list[str]:
    """A report page's first lines: its title, what wrote it, and the run's date, commit and machine."""
    lines = [
        f"# {title}",
        "",
        f"Generated from `{source}` by `{command}`: do not edit by hand, run the command again.",
        "",
    ]
    if run:
        m = run.get("machine") or {}
        lines += [
            "| run | |",
            "|---|---|",
            f"| date | {run.get('at') or 'unknown'} |",
            f"| commit | {run.get('commit') or 'unknown'} |",
            f"| machine | {m.get('cpus', '?')} CPUs ({m.get('cpu_model', '?')}), "
            f"Python {m.get('python', '?')}, {m.get('system', '?')} |",
            "",
        ]
    else:
        lines += ["The run recorded no date, commit or machine (a report written before they were kept).", ""]
    return lines


def write_page(name: str, lines: list[str]) -> Path:
    """Write docs/reports/<name>.md and return its path."""
    DOCS.mkdir(parents=True, exist_ok=True)
    path = DOCS / f"{name}.md"
    path.write_text("\n".join(lines).rstrip() + "\n")
    return path
