"""Figures of particular runs live only in generated reports (docs/reports/, written by the command that
measured them, with date, commit and machine). The README and the hand-written pages state the model
and the gate ("one write unit per state change", "make bench fails above 1.10"), never what one run
measured: such a sentence is stale after the next commit, and refreshing it by hand was a fifth of
the README's history."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What a run's figure looks like in prose.
RUN_FIGURES = {
    "a test count": re.compile(
        r"\b\d[\d,]*\s+(?:tests?|passed|failed)\b(?! (?:directory|folder|layer))", re.I
    ),
    "a run's duration": re.compile(
        r"\b(?:took|taking|ran in|runs? in|finished in|passed in|in all)\s+(?:about\s+|only\s+)?"
        r"\d+(?:\.\d+)?\s*(?:ms|s|sec|seconds?|min|minutes?)\b",
        re.I,
    ),
    "minutes and seconds": re.compile(r"\b\d+\s*min\s+\d+\s*s\b"),
    "a measured ratio": re.compile(r"\b\d+\.\d+\s*x\b(?! \d)"),
    "a sentence about a particular run": re.compile(
        r"\b(?:the last (?:full )?run|from this run|in this run|figures of (?:the|a) (?:last|full) run|"
        r"as measured here|measured on this machine|from a fresh clone of)\b",
        re.I,
    ),
}


def hand_written() -> list[Path]:
    pages = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md"]
    pages += [
        p
        for p in sorted((ROOT / "docs").rglob("*.md"))
        if "reports" not in p.relative_to(ROOT / "docs").parts
    ]
    return [p for p in pages if p.is_file()]


def figures_in(text: str) -> list[tuple[str, str]]:
    found = []
    for line in text.splitlines():
        for kind, pattern in RUN_FIGURES.items():
            match = pattern.search(line)
            if match:
                found.append((kind, match.group(0)))
    return found


@pytest.mark.parametrize(
    "sentence",
    [
        "`.ci/run` passed: 721 tests in 345 s, 8 min 4 s in all.",
        "three runs took 52 s, 58 s and 63 s",
        "cold start 1.03x the hand-written Powertools worker",
        "docs/RELIABILITY.md is updated from this run",
        "The last full run: every gate passed.",
        "make test ran in 299 s on the CI machine",
    ],
)
def test_a_run_figure_is_found(sentence):
    assert figures_in(sentence), sentence


@pytest.mark.parametrize(
    "sentence",
    [
        "Visibility timeout 0 s to 12 h (default 30 s). Delay 0 to 900 s.",
        "`@job(timeout_seconds=30, max_attempts=5)`",
        "the default ceilings are 10 s, 20 s, 40 s, up to 10 minutes",
        "`make bench` fails when the cold start ratio is above 1.10",
        "one write unit per state change; a retry adds 2",
        "the unit tests (tests/unit) need no network",
    ],
)
def test_a_fact_or_a_gate_is_not_taken_for_a_run_figure(sentence):
    assert figures_in(sentence) == [], sentence


def test_the_readme_and_the_hand_written_pages_report_no_run_figure():
    found = {
        str(page.relative_to(ROOT)): figures
        for page in hand_written()
        if (figures := figures_in(page.read_text(encoding="utf-8")))
    }
    assert found == {}, "move these to a generated report (docs/reports/), or state the model instead"
