"""The board and the CLI at thousands of jobs: every board page and every CLI read's first page, timed
on a local stack seeded with 5,000 job records and 1,000 dead letters (`bench.board_seed`).

It starts the local stack in this process (threads mode, its workers polling as `lambdajobs dev`'s
do), seeds it, starts `lambdajobs board` as a process of its own on the stack, then, for several
rounds, GETs every board route (the board's routes are read from its app at run time, so pages
added later are measured too; path parameters filled with a seeded job, job id, queue) and runs
every CLI read command (`lambdajobs ...` subprocesses, `--json` where the command has it, the first
page: 50 rows). Round 1 is cold (nothing cached); the figures are the median and the maximum over
every round. It writes build/reports/board_scale.json (date, commit, machine) and with
--write-doc docs/reports/board-scale.md, and exits 1 when any answer took more than the budget (2 s)
or failed.

    python -m bench.board_scale [--quick] [--rounds N] [--write-doc]    (make bench-board)

Measure on an idle machine: the load average before the run is in the report.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.board_seed import DEAD_LETTERS, RECORDS, UNRECORDED, Seeded, seed
from reports import ROOT, header, run_info, write_page

REPORT = ROOT / "build" / "reports" / "board_scale.json"
BUDGET_SECONDS = 2.0
ROUNDS = 5
JOBS = "handlers"
#: The job whose pages are measured (the example's busiest: two priority levels).
JOB = "send_email"
PAGE = 50
#: Recipients of the campaign (a chord) the bench runs, for the workflow pages.
CAMPAIGN = 200
#: Query strings measured besides a route's bare page (the route's path, then the query).
VARIANTS = {
    "/jobs/{job}": ["?state=dead", "?state=succeeded", "?state=retrying"],
    "/api/jobs/{job}": ["?state=dead"],
}


@dataclass
class Timing:
    kind: str  # "page" or "cli"
    name: str  # the route pattern or the command's words
    target: str  # the URL or the command line run
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    @property
    def worst(self) -> float | None:
        return max(self.seconds) if self.seconds else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "median": self.median, "max": self.worst}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def board_routes() -> list[str]:
    """Every GET path of the board, as its app registers them (pages added later included)."""
    from starlette.routing import Route

    from lambdajobs.board import create_app
    from lambdajobs.runtime.config import StackConfig

    app = create_app(StackConfig(stack="routes", endpoint_url="http://127.0.0.1:1"), specs=[])
    return [r.path for r in app.routes if isinstance(r, Route) and "GET" in (r.methods or ())]


def fill(path: str, values: dict[str, str]) -> str | None:
    """The path with its `{name}` / `{name:path}` parameters filled, or None when one has no value."""
    missing = False

    def value(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group(1)
        if name not in values:
            missing = True
            return ""
        return urllib.request.quote(values[name], safe="")

    filled = re.sub(r"\{(\w+)(?::\w+)?\}", value, path)
    return None if missing else filled


def page_targets(values: dict[str, str]) -> list[Timing]:
    found = []
    for path in board_routes():
        url = fill(path, values)
        if url is None:
            names = ", ".join(re.findall(r"\{(\w+)", path))
            found.append(Timing("page", path, "", note=f"not measured: nothing seeded for {names}"))
            continue
        found.append(Timing("page", path, url))
        found += [Timing("page", path + q, url + q) for q in VARIANTS.get(path, [])]
    found.append(Timing("page", "/ (live refresh, HX-Request)", "/", note="hx"))
    return found


def cli_help(env: dict[str, str], *words: str) -> str:
    run = subprocess.run(
        [*lambdajobs(), *words, "--help"], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    return run.stdout + run.stderr


def lambdajobs() -> list[str]:
    script = Path(sys.executable).parent / "lambdajobs"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lambdajobs.cli"]


def cli_targets(env: dict[str, str], values: dict[str, str]) -> list[Timing]:
    """Each CLI read command on its first page, `--json` where it has it (and --limit where it has it)."""
    job, job_id, letter = values["job"], values["job_id"], values.get("letter_id", "")
    workflow = values.get("workflow_id", "")
    candidates: list[list[str]] = [
        ["queues"],
        ["status", job_id],
        ["jobs", job, "--state", "dead"],
        ["jobs", job, "--state", "succeeded"],
        ["dlq", "list", job],
        ["workflow", values["workflow_id"]] if "workflow_id" in values else [],
        ["dlq", "show", job, "--id", letter] if letter else [],
        ["cron", "list"],
    ]
    found = []
    helps: dict[tuple[str, ...], str] = {}
    for words in filter(None, candidates):
        command = tuple(w for w in words[:2] if not w.startswith("-") and w not in (job, job_id, workflow))
        text = helps.setdefault(command, cli_help(env, *command))
        if "No such command" in text or "Usage:" not in text:
            found.append(Timing("cli", " ".join(command), "", note="not measured: no such command"))
            continue
        args = list(words)
        if "--id" in args and "--id" not in text:
            found.append(Timing("cli", " ".join(words[:2]), "", note="not measured: no --id option"))
            continue
        if "--limit" in text:
            args += ["--limit", str(PAGE)]
        note = ""
        if "--json" in text:
            args.append("--json")
        else:
            note = "no --json option: its table"
        found.append(Timing("cli", " ".join(words), " ".join(args), note=note))
    return found


def time_page(base: str, timing: Timing) -> None:
    request = urllib.request.Request(base + timing.target)
    if timing.note == "hx":
        request.add_header("HX-Request", "true")
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        exc.read()
        status = exc.code
    except OSError as exc:
        timing.failures.append(f"{type(exc).__name__}: {exc}")
        return
    timing.seconds.append(time.perf_counter() - started)
    if status >= 500:
        timing.failures.append(f"HTTP {status}")


def time_cli(env: dict[str, str], timing: Timing) -> None:
    import shlex

    started = time.perf_counter()
    run = subprocess.run(
        [*lambdajobs(), *shlex.split(timing.target)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    timing.seconds.append(time.perf_counter() - started)
    # `status` answers with its exit code too: 4 dead, 6 cancelled or superseded
    answers = (0, 4, 6) if timing.target.startswith("status ") else (0,)
    if run.returncode not in answers:
        last = (run.stderr or run.stdout).strip().splitlines()[-1:] or [""]
        timing.failures.append(f"exit {run.returncode}: {last[0][:200]}")


def wait_for_board(base: str, process: subprocess.Popen[str], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"the board exited ({process.returncode}): {process.stdout.read() if process.stdout else ''}"
            )
        try:
            with urllib.request.urlopen(base + "/static/board.css", timeout=2):
                return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the board did not answer within 60 s")


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def run(args: argparse.Namespace) -> dict[str, Any]:
    from lambdajobs.local.stack import LocalStack

    work = Path(tempfile.mkdtemp(prefix="board-scale-"))
    before = load_average()
    stack = LocalStack(JOBS, stack="bench", port=0, log_file=work / "worker.log", wait_seconds=1)
    stack.start()
    board: subprocess.Popen[str] | None = None
    try:
        stack.start_workers(scheduler=False)
        started = time.perf_counter()
        seeded = seed(
            stack.config,
            stack.specs,
            records=args.records,
            dead_letters=args.dead_letters,
            unrecorded=args.unrecorded,
            job_index=stack.provisioned.job_index if stack.provisioned else "finished",
            worker_log=work / "worker.log",
        )
        seed_seconds = time.perf_counter() - started
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("AWS_")}, **stack.environment()}
        env["COLUMNS"] = "200"
        env["LAMBDAJOBS_WORKER_LOG"] = str(work / "worker.log")  # the job pages' logs panel reads it
        port = free_port()
        board = subprocess.Popen(
            [*lambdajobs(), "board", "--port", str(port)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        base = f"http://127.0.0.1:{port}"
        wait_for_board(base, board)
        values = targets(stack, seeded)
        workflow = run_campaign(stack, args.campaign)
        if workflow:
            values["workflow_id"] = workflow
        pages = page_targets(values)
        commands = cli_targets(env, values)
        for _ in range(args.rounds):
            for timing in pages:
                if timing.target:
                    time_page(base, timing)
            for timing in commands:
                if timing.target:
                    time_cli(env, timing)
        return report(args, seeded, seed_seconds, pages + commands, before)
    finally:
        if board is not None:
            board.terminate()
            try:
                board.wait(10)
            except subprocess.TimeoutExpired:
                board.kill()
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)


def run_campaign(stack: Any, recipients: int, timeout_seconds: float = 120) -> str | None:
    """A campaign of the example project (a chord of `send_email` and its `campaign_report`) run by
    the stack's workers before anything is measured, for the workflow pages; None without it."""
    if recipients <= 0:
        return None
    try:
        from handlers.emails import send_campaign
    except ImportError:
        return None
    from lambdajobs.runtime.workflow import get_workflow

    addresses = [f"reader{i}@example.com" for i in range(recipients)]
    workflow_id = send_campaign("bench", addresses, "Bench", "Hello", config=stack.config)
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline and not get_workflow(workflow_id, config=stack.config).done:
        time.sleep(0.5)
    return workflow_id


def targets(stack: Any, seeded: Seeded) -> dict[str, str]:
    """The values of the routes' path parameters: the measured job, one of its dead jobs, its busiest
    dead-letter queue, one of its dead letters."""
    job_id = seeded.dead_ids.get(JOB) or seeded.sample_ids.get(JOB, "")
    values = {"job": JOB, "job_id": job_id, "key": JOB}
    spec = next(s for s in stack.specs if s.name == JOB)
    if spec.priorities:
        values["key"] = JOB  # the job's own queue (its lowest level), which holds its share of letters
    letter = seeded.letter_ids.get(JOB)
    if letter:
        values["letter_id"] = letter
    return values


def report(
    args: argparse.Namespace, seeded: Seeded, seed_seconds: float, timings: list[Timing], load: list[float]
) -> dict[str, Any]:
    measured = [t for t in timings if t.seconds]
    slow = [t for t in measured if (t.worst or 0) > args.budget]
    failed = [t for t in timings if t.failures]
    return {
        "run": run_info(),
        "load_average_before": load,
        "size": {
            "records": sum(seeded.records.values()),
            "records_by_state": dict(seeded.records),
            "dead_letters": sum(seeded.letters.values()),
            "dead_letters_unrecorded": seeded.unrecorded,
            "seed_seconds": round(seed_seconds, 1),
        },
        "rounds": args.rounds,
        "campaign": args.campaign,
        "budget_seconds": args.budget,
        "timings": [t.to_dict() for t in timings],
        "slow": [t.name for t in slow],
        "failed": [t.name for t in failed],
        "passed": not slow and not failed,
    }


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def table(found: dict[str, Any]) -> list[str]:
    lines = ["| | what | median s | max s | note |", "|---|---|---|---|---|"]
    budget = found["budget_seconds"]
    for t in found["timings"]:
        mark = "over" if (t["max"] or 0) > budget else ("failed" if t["failures"] else "ok")
        if not t["seconds"]:
            mark = "-"
        note = t["note"] if t["note"] != "hx" else "the overview's 5 s refresh"
        if t["failures"]:
            note = (note + "; " if note else "") + t["failures"][0]
        shown = t["target"] or t["name"]
        lines.append(f"| {mark} | `{t['kind']} {shown}` | {_s(t['median'])} | {_s(t['max'])} | {note} |")
    return lines


def summary(found: dict[str, Any]) -> str:
    size = found["size"]
    measured = [t for t in found["timings"] if t["seconds"]]
    worst = max(measured, key=lambda t: t["max"], default=None)
    verdict = (
        "every answer within the budget"
        if found["passed"]
        else f"over the budget: {found['slow']}; failed: {found['failed']}"
    )
    worst_text = (
        f"; the slowest, `{worst['kind']} {worst['target']}`, took {worst['max']:.2f} s" if worst else ""
    )
    return (
        f"{size['records']} job records and {size['dead_letters']} dead letters "
        f"({size['dead_letters_unrecorded']} with no record), {found['rounds']} rounds, budget "
        f"{found['budget_seconds']} s: {verdict}{worst_text}."
    )


def write_doc(found: dict[str, Any]) -> Path:
    lines = header(
        "Board and CLI at thousands of jobs",
        "build/reports/board_scale.json",
        "python -m bench.board_scale --write-doc",
        found["run"],
    )
    size = found["size"]
    lines += [
        summary(found),
        "",
        f"Load average before the run: {found['load_average_before']}. Seeded in {size['seed_seconds']} s "
        f"(records by state: {size['records_by_state']}).",
        "",
        "What was measured: the local stack (moto server and the workers, threads mode) in the bench's "
        "process, seeded directly by `bench.board_seed`; `lambdajobs board` as a process of its own; each "
        "CLI command a `lambdajobs` process (its Python start included), `--json` and `--limit 50` where "
        "the command has them. Every GET route the board registers is measured (path parameters: the "
        f"job `{JOB}`, one of its dead jobs, its queue, and a campaign of {found.get('campaign', 0)} "
        "recipients, a chord the workers ran before the rounds, for the workflow pages). Round 1 is "
        "cold (nothing cached).",
        "",
        *table(found),
        "",
    ]
    return write_page("board-scale", lines)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.board_scale", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=RECORDS)
    parser.add_argument("--dead-letters", type=int, default=DEAD_LETTERS)
    parser.add_argument("--unrecorded", type=int, default=UNRECORDED)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    parser.add_argument("--campaign", type=int, default=CAMPAIGN, help="recipients of the workflow measured")
    parser.add_argument("--budget", type=float, default=BUDGET_SECONDS)
    parser.add_argument("--quick", action="store_true", help="a small seed, 1 round (the test's size)")
    parser.add_argument("--out", type=Path, default=REPORT)
    parser.add_argument("--write-doc", action="store_true", help="also write docs/reports/board-scale.md")
    args = parser.parse_args(argv)
    if args.quick:
        args.records, args.dead_letters, args.unrecorded, args.rounds, args.campaign = 120, 30, 5, 1, 5
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    found = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=2) + "\n")
    print("\n".join(table(found)))
    print(summary(found))
    print(f"report: {args.out}")
    if args.write_doc:
        print(f"page: {write_doc(found)}")
    return 0 if found["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
