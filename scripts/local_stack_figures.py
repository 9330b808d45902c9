"""Figures of an idle `lambdajobs dev` (issue 26, item 4): CPU, SIGTERM, restore.

    .venv/bin/python scripts/local_stack_figures.py                  # measure, print, write the JSON
    .venv/bin/python scripts/local_stack_figures.py --write-doc      # ... and docs/reports/local-stack.md
    .venv/bin/python scripts/local_stack_figures.py --idle-seconds 20 --records 1000   # a quicker look
    .venv/bin/python scripts/local_stack_figures.py --jobs myjobs --cwd ../myproject --stop-budget 35

What it does, in order (Linux only: it reads /proc; no psutil needed):

1. starts `lambdajobs dev --port 0 --fresh --log-file <dir>/worker.log --jobs <jobs>` in `--cwd`, in a
   process group of its own, and reads the endpoint from the `export ...` line it prints;
2. puts `--records` finished job records (state `succeeded`, `JobRecord.to_item`'s shape) into the
   stack's table (the `table` of the manifest parameter `/lambdajobs/<stack>/stack`) with
   BatchWriteItem, and a user parameter `/myapp/feature-flag` = `on` into its SSM;
3. waits `--settle-seconds`, then measures the CPU time of dev's process tree over `--idle-seconds`
   (utime + stime from /proc, as percent of one core), per 10 s, by OS thread name (Python sets
   none before 3.14: see --profile for the Python threads) and how often state.json was written;
4. sends SIGTERM to dev and times the line `stopped.` and the exit of its process tree (SIGKILL to its
   process group after `--kill-after` seconds, reported as such);
5. starts dev again without --fresh on the same log folder (state.json restored) and checks that the
   records and the user parameter are there, then stops it the same way.

It prints a summary and writes build/reports/local_stack.json (`--report`), and with `--write-doc` the
generated page docs/reports/local-stack.md (the `reports` helpers). The exit code is 1 when a budget is
missed: idle CPU >= 5% of a core, the exit after SIGTERM later than the jobs' longest `timeout_seconds`
+ 5 s (or `--stop-budget`), a kill, or a record or the parameter missing after the restart.

`--profile SECONDS` also shows where the time goes, through a sitecustomize in the run's folder on
dev's PYTHONPATH (nothing in the project changes). After the idle window, for SECONDS, a sampler in
dev charges each Python thread's CPU ticks to its name (esm-<function>-<n>, state-saver, scheduler,
MainThread, werkzeug's) and current stack, and each thread that starts and ends meanwhile (werkzeug's
one per connection) to the AWS requests it served (JSON: idle.profile). Every thread's stack is
dumped (faulthandler) 3 s after SIGTERM and 2 s after `stopped.` if it is still running (JSON:
sigterm.stacks; raw in <dir>/dev-1.out). The run's folder is a temporary one, removed at the end
unless `--keep`, `--dir DIR` or `--profile` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "build" / "reports" / "local_stack.json"
CPU_BUDGET_PERCENT = 5.0
STOP_MARGIN_SECONDS = 5.0
USER_PARAMETER = "/myapp/feature-flag"
USER_VALUE = "on"
ID_PREFIX = "figures-"
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
COMMAND = "python scripts/local_stack_figures.py --write-doc"

#: Loaded into dev by `--profile` (a sitecustomize in the run's folder, on PYTHONPATH): SIGUSR1 dumps
#: every thread's stack (faulthandler, into dev's output); SIGUSR2 starts a sampler thread that, every
#: 0.1 s for PROFILE_SECONDS, reads each Python thread's CPU ticks (/proc/self/task/<native id>/stat)
#: and charges what it used since the last sample to its name and its current stack; then it writes
#: PROFILE_OUT (JSON). Its own CPU is left out of what it reports.
SITECUSTOMIZE = """\
import faulthandler, json, os, re, signal, sys, threading, time
from collections import defaultdict

faulthandler.register(signal.SIGUSR1, all_threads=True)
_TICK = 1.0 / os.sysconf("SC_CLK_TCK")
_window = [0]  # the sampler's window number while it runs (0: none)
_ended = defaultdict(lambda: [0, 0.0])  # (thread kind, its requests): [threads, CPU seconds]
_local = threading.local()
_run = threading.Thread.run


def _kind(name):
    return re.sub(r"\\d+", "N", name)


def _counted_run(self):
    # a thread started and ended within the window: its whole CPU time, and the AWS requests it served
    window, used = _window[0], time.thread_time()
    try:
        _run(self)
    finally:
        if window and window == _window[0]:
            what = sorted(set(getattr(_local, "what", ())))
            key = _kind(self.name) + (": " + ", ".join(what) if what else "")
            _ended[key][0] += 1
            _ended[key][1] += time.thread_time() - used


def _note_requests():
    try:
        from moto.core.responses import BaseResponse
    except ImportError:
        return
    setup = BaseResponse.setup_class

    def setup_class(self, *args, **kwargs):
        out = setup(self, *args, **kwargs)
        try:
            what = f"{type(self).__name__}.{self._get_action()}"
        except Exception:
            what = type(self).__name__
        _local.what = [*getattr(_local, "what", ()), what]
        return out

    BaseResponse.setup_class = setup_class


if os.environ.get("PROFILE_OUT"):
    threading.Thread.run = _counted_run


def _ticks(path):
    try:
        rest = open(path).read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(rest[11]) + int(rest[12])) * _TICK


def _where(frame):
    inner, ours = [], None
    while frame is not None:
        code = frame.f_code
        text = f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}"
        if len(inner) < 2:
            inner.append(text)
        if ours is None and "/lambdajobs/" in code.co_filename:
            ours = text
        frame = frame.f_back
    return " < ".join(inner) + (f" [{ours}]" if ours and ours not in inner else "")


def _sample():
    seconds = float(os.environ.get("PROFILE_SECONDS", "20"))
    me = threading.get_ident()
    start = {}
    for t in threading.enumerate():
        if t.native_id and (c := _ticks(f"/proc/self/task/{t.native_id}/stat")) is not None:
            start[t.ident] = c
    last = dict(start)
    by_name, by_where, names = defaultdict(float), defaultdict(float), {}
    seen_new = 0
    _note_requests()
    _window[0] = 1
    t0, p0 = time.monotonic(), _ticks("/proc/self/stat")
    own0 = time.thread_time()
    while time.monotonic() - t0 < seconds:
        time.sleep(0.1)
        threads = {t.ident: t for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            t = threads.get(ident)
            if ident == me or t is None or not t.native_id:
                continue
            c = _ticks(f"/proc/self/task/{t.native_id}/stat")
            if c is None:
                continue
            if ident not in last:
                seen_new += 1
            used = c - last.get(ident, 0.0)
            last[ident] = c
            names[hex(ident)] = t.name
            if used > 0:
                by_name[_kind(t.name)] += used
                by_where[_kind(t.name) + " | " + _where(frame)] += used
    _window[0] = 0
    wall = time.monotonic() - t0
    total = _ticks("/proc/self/stat") - p0 - (time.thread_time() - own0)
    ended = sorted(_ended.items(), key=lambda kv: -kv[1][1])
    def top(d, n):
        return [[k, round(100 * v / wall, 2)] for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:n]]

    out = {
        "seconds": round(wall, 1),
        "process_percent": round(100 * total / wall, 2),
        "seen_percent": round(100 * sum(by_name.values()) / wall, 2),
        "threads_seen_born": seen_new,
        "threads": len(threads),
        "by_thread": top(by_name, 30),
        "by_stack": top(by_where, 40),
        "ended_in_window": [[k, n, round(100 * c / wall, 2), round(n / wall, 1)] for k, (n, c) in ended[:30]],
        "idents": names,
    }
    with open(os.environ["PROFILE_OUT"], "w") as f:
        json.dump(out, f, indent=1)


if os.environ.get("PROFILE_OUT"):
    def _start(*_):
        threading.Thread(target=_sample, name="figures-sampler", daemon=True).start()

    signal.signal(signal.SIGUSR2, _start)
"""


# -- /proc ------------------------------------------------------------------------------------------


def _stat(path: Path) -> tuple[str, list[str]] | None:
    """(comm, the fields after it) of a /proc stat file; None when the process or thread is gone."""
    try:
        text = path.read_text()
    except OSError:
        return None
    head, _, rest = text.rpartition(")")
    return head.partition("(")[2], rest.split()


def _ticks(fields: list[str]) -> int:
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def tree(pid: int) -> list[int]:
    """`pid` and its living descendants."""
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _stat(entry / "stat")):
            children[int(st[1][1])].append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        if Path(f"/proc/{p}").exists():
            found.append(p)
            todo.extend(children.get(p, []))
    return found


def alive(pids: list[int]) -> list[int]:
    """Those of `pids` still running (a zombie counts as gone)."""
    living = []
    for p in pids:
        st = _stat(Path(f"/proc/{p}/stat"))
        if st and st[1][0] != "Z":
            living.append(p)
    return living


def tree_seconds(pid: int) -> float:
    """CPU seconds used so far by `pid` and its descendants (every thread, living or ended)."""
    total = 0
    for p in tree(pid):
        if st := _stat(Path(f"/proc/{p}/stat")):
            total += _ticks(st[1])
    return total / TICKS


def threads(pid: int) -> dict[str, tuple[str, float]]:
    """{"<pid>/<tid>": (thread name, CPU seconds)} of every thread of the tree."""
    out: dict[str, tuple[str, float]] = {}
    for p in tree(pid):
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{p}/task").iterdir():
                if st := _stat(task / "stat"):
                    out[f"{p}/{task.name}"] = (st[0], _ticks(st[1]) / TICKS)
    return out


def thread_use(before: dict[str, tuple[str, float]], after: dict[str, tuple[str, float]], seconds: float):
    """CPU percent of one core by thread name over a window (threads that ended in it are not seen)."""
    by_name: dict[str, float] = defaultdict(float)
    for tid, (name, used) in after.items():
        by_name[name] += used - before.get(tid, (name, 0.0))[1]
    return {n: round(100 * s / seconds, 2) for n, s in sorted(by_name.items(), key=lambda kv: -kv[1]) if s}


# -- dev --------------------------------------------------------------------------------------------


class Dev:
    """One `lambdajobs dev` process: its output lines, timed, and the environment it printed."""

    def __init__(self, argv: list[str], cwd: Path, out: Path, env: dict[str, str]) -> None:
        self.out = out
        self.lines: list[tuple[float, str]] = []
        self.environment: dict[str, str] = {}
        self.ready = threading.Event()
        self.stopped_at: float | None = None
        self.dumps: list[tuple[str, int]] = []
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group (a kill reaches all of it)
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        with self.out.open("w") as copy:
            for line in self.proc.stdout:
                now = time.monotonic()
                copy.write(f"{now - self.started:8.2f} {line}")
                copy.flush()
                self.lines.append((now, line.rstrip("\n")))
                text = line.strip()
                if text.startswith("export ") and not self.environment:
                    pairs = (w.split("=", 1) for w in text.split()[1:] if "=" in w)
                    self.environment = dict(pairs)
                    self.ready.set()
                if text == "stopped." and self.stopped_at is None:
                    self.stopped_at = now
        self.ready.set()  # it ended before (or after) saying where it listens

    def wait_ready(self, timeout: float) -> float:
        if not self.ready.wait(timeout) or "AWS_ENDPOINT_URL" not in self.environment:
            self.kill()
            tail = "\n".join(line for _, line in self.lines[-20:])
            raise SystemExit(f"lambdajobs dev did not print its endpoint within {timeout:.0f} s:\n{tail}")
        return time.monotonic() - self.started

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()

    def terminate(self, kill_after: float, dump_stacks: bool) -> dict[str, Any]:
        """SIGTERM; seconds until `stopped.` and until the process tree exited. With `dump_stacks`,
        the threads' stacks are dumped 3 s after the signal (while it stops) and 2 s after `stopped.`
        (what keeps it from exiting): `self.dumps`, (when, index of dev's next output line)."""
        pids = tree(self.pid)
        sent = time.monotonic()
        os.kill(self.pid, signal.SIGTERM)
        lingering: dict[str, Any] | None = None
        exited_at: float | None = None
        while time.monotonic() - sent < kill_after:
            if self.proc.poll() is not None and not alive(pids):
                exited_at = time.monotonic()
                break
            now = time.monotonic()
            if dump_stacks and not self.dumps and self.stopped_at is None and now - sent > 3:
                self._dump("3 s after SIGTERM")
            if self.stopped_at is not None and lingering is None and now - self.stopped_at > 2:
                # what is still running 2 s after it said "stopped."
                lingering = {"threads": len(threads(self.pid))}
                if dump_stacks:
                    self._dump("2 s after stopped.")
            time.sleep(0.1)
        killed = exited_at is None
        if killed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        self.proc.wait()
        self._reader.join(5)
        return {
            "stopped_seconds": round(self.stopped_at - sent, 2) if self.stopped_at else None,
            "exit_seconds": round(exited_at - sent, 2) if exited_at else None,
            "killed_after_seconds": kill_after if killed else None,
            "returncode": self.proc.returncode,
            "after_stopped": lingering,
        }

    def _dump(self, when: str) -> None:
        self.dumps.append((when, len(self.lines)))
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGUSR1)

    def dumped(self, idents: dict[str, str]) -> dict[str, list[str]]:
        """Each dump's threads: name (as the profile saw it) and innermost frames."""
        out = {}
        ends = [i for _, i in self.dumps[1:]] + [len(self.lines)]
        for (when, start), end in zip(self.dumps, ends, strict=True):
            out[when] = dumped_stacks([line for _, line in self.lines[start:end]], idents)
        return out


def dev_argv(args: argparse.Namespace, log_file: Path, fresh: bool) -> list[str]:
    script = Path(sys.executable).parent / "lambdajobs"
    command = [str(script)] if script.exists() else [shutil.which("lambdajobs") or "lambdajobs"]
    command += ["dev", "--port", "0", "--stack", args.stack, "--log-file", str(log_file)]
    if args.jobs:
        command += ["--jobs", args.jobs]
    return [*command, "--fresh"] if fresh else command


def dev_env(run_dir: Path, profile: float) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "200"
    if profile:
        site = run_dir / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        env["PROFILE_OUT"] = str(run_dir / "profile.json")
        env["PROFILE_SECONDS"] = str(profile)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return env


# -- the stack's AWS --------------------------------------------------------------------------------


def client(dev: Dev, service: str) -> Any:
    import boto3

    e = dev.environment
    return boto3.client(
        service,
        endpoint_url=e["AWS_ENDPOINT_URL"],
        region_name=e.get("AWS_DEFAULT_REGION", "us-east-1"),
        aws_access_key_id=e.get("AWS_ACCESS_KEY_ID", "local"),
        aws_secret_access_key=e.get("AWS_SECRET_ACCESS_KEY", "local"),
    )


def table_name(dev: Dev, stack: str) -> str:
    value = client(dev, "ssm").get_parameter(Name=f"/lambdajobs/{stack}/stack")["Parameter"]["Value"]
    return str(json.loads(value)["table"])


def records(specs: list[Any], n: int) -> list[dict[str, Any]]:
    """`n` finished job records, as the worker leaves them (JobRecord's codec)."""
    from lambdajobs.runtime.job_record import JobRecord, JobState

    names = [s.name for s in specs] or ["job"]
    attempts = {s.name: s.max_attempts for s in specs}
    start = datetime.now(UTC) - timedelta(hours=1)
    expiration = int(time.time()) + 7 * 86400
    items = []
    for i in range(n):
        at = (start + timedelta(milliseconds=500 * i)).isoformat(timespec="milliseconds")
        at = at.replace("+00:00", "Z")
        job = names[i % len(names)]
        record = JobRecord(
            job_id=f"{ID_PREFIX}{i:05d}",
            job=job,
            state=JobState.SUCCEEDED,
            attempts=1,
            max_attempts=attempts.get(job, 5),
            created_at=at,
            started_at=at,
            finished_at=at,
            updated_at=at,
            result=json.dumps({"ok": True, "n": i}),
            expiration=expiration,
        )
        items.append(record.to_item())
    return items


def load(dev: Dev, table: str, items: list[dict[str, Any]]) -> float:
    ddb = client(dev, "dynamodb")
    started = time.monotonic()
    for i in range(0, len(items), 25):
        request = {table: [{"PutRequest": {"Item": item}} for item in items[i : i + 25]]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
    client(dev, "ssm").put_parameter(Name=USER_PARAMETER, Value=USER_VALUE, Type="String", Overwrite=True)
    return time.monotonic() - started


def restored(dev: Dev, table: str) -> dict[str, Any]:
    ddb = client(dev, "dynamodb")
    count, total = 0, 0
    for page in ddb.get_paginator("scan").paginate(TableName=table, ProjectionExpression="id"):
        total += len(page["Items"])
        count += sum(1 for item in page["Items"] if item["id"].get("S", "").startswith(ID_PREFIX))
    try:
        value = client(dev, "ssm").get_parameter(Name=USER_PARAMETER)["Parameter"]["Value"]
    except Exception as exc:  # ParameterNotFound: the finding, not an error of this script
        value = None
        print(f"  {USER_PARAMETER}: {type(exc).__name__}: {exc}")
    return {"records": count, "table_items": total, "parameter": value}


# -- the measurement --------------------------------------------------------------------------------


def idle(dev: Dev, seconds: float, state_file: Path) -> dict[str, Any]:
    """CPU of dev's tree over `seconds`, its threads' shares, per-10-s slices, state.json writes."""
    t0, cpu0, th0 = time.monotonic(), tree_seconds(dev.pid), threads(dev.pid)
    slices, last_t, last_cpu = [], t0, cpu0
    mtimes: set[float] = set()
    first_mtime = state_file.stat().st_mtime if state_file.exists() else None
    while (now := time.monotonic()) - t0 < seconds:
        time.sleep(min(1.0, seconds - (now - t0)))
        if state_file.exists():
            mtimes.add(state_file.stat().st_mtime)
        if time.monotonic() - last_t >= 10:
            cpu = tree_seconds(dev.pid)
            slices.append(round(100 * (cpu - last_cpu) / (time.monotonic() - last_t), 1))
            last_t, last_cpu = time.monotonic(), cpu
    wall = time.monotonic() - t0
    cpu = tree_seconds(dev.pid) - cpu0
    writes = len(mtimes - {first_mtime})
    return {
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 2),
        "cpu_percent": round(100 * cpu / wall, 1),
        "per_10s_percent": slices,
        "threads_percent": thread_use(th0, threads(dev.pid), wall),
        "state_writes": writes,
        "state_bytes": state_file.stat().st_size if state_file.exists() else None,
    }


def profile(dev: Dev, out: Path, seconds: float) -> dict[str, Any] | None:
    """Start the sampler in dev (SIGUSR2) and read what it found."""
    out.unlink(missing_ok=True)
    os.kill(dev.pid, signal.SIGUSR2)
    deadline = time.monotonic() + seconds + 30
    while time.monotonic() < deadline:
        time.sleep(0.5)
        with contextlib.suppress(OSError, ValueError):
            data: dict[str, Any] = json.loads(out.read_text())
            return data
    return None


def dumped_stacks(lines: list[str], idents: dict[str, str]) -> list[str]:
    """A faulthandler dump in dev's output: per thread, its name (when the profile saw it) and its
    innermost frames."""
    found = []
    for i, line in enumerate(lines):
        if header := re.match(r"(?:Current )?[Tt]hread (0x[0-9a-f]+)", line.strip()):
            frames = [f.strip() for f in lines[i + 1 : i + 4] if f.strip().startswith("File")]
            where = " < ".join(f.split("/")[-1].replace('", line ', ":") for f in frames)
            ident = hex(int(header.group(1), 16))
            found.append(f"{idents.get(ident, ident)}: {where}")
    return found


def stop_budget(args: argparse.Namespace) -> tuple[float, str]:
    if args.stop_budget is not None:
        return args.stop_budget, "--stop-budget"
    specs = job_specs(args)
    longest = max((s.timeout_seconds for s in specs), default=0)
    which = max(specs, key=lambda s: s.timeout_seconds).name if specs else "none"
    return longest + STOP_MARGIN_SECONDS, f"longest timeout_seconds ({which}: {longest} s) + 5 s"


_specs: list[Any] | None = None


def job_specs(args: argparse.Namespace) -> list[Any]:
    global _specs
    if _specs is None:
        sys.path.insert(0, str(args.cwd))
        from lambdajobs.runtime.spec import load_jobs

        _specs = load_jobs(args.jobs) if args.jobs else []
    return _specs


def measure(args: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    log_file = run_dir / "worker.log"
    state_file = log_file.parent / "state.json"
    env = dev_env(run_dir, args.profile)
    specs = job_specs(args)
    budget, budget_why = stop_budget(args)

    print(f"[1/5] lambdajobs dev --fresh (jobs {args.jobs}, folder {run_dir})")
    dev = Dev(dev_argv(args, log_file, fresh=True), args.cwd, run_dir / "dev-1.out", env)
    ready = dev.wait_ready(args.start_timeout)
    print(f"      ready after {ready:.1f} s on {dev.environment['AWS_ENDPOINT_URL']}")
    try:
        table = table_name(dev, args.stack)
        print(f"[2/5] {args.records} records into {table}, {USER_PARAMETER}={USER_VALUE}")
        loaded = load(dev, table, records(specs, args.records))
        print(f"      loaded in {loaded:.1f} s; settling {args.settle_seconds:.0f} s")
        time.sleep(args.settle_seconds)
        print(f"[3/5] idle CPU over {args.idle_seconds:.0f} s")
        cpu = idle(dev, args.idle_seconds, state_file)
        print(f"      {cpu['cpu_percent']}% of a core")
        if args.profile:
            print(f"      profiling {args.profile:.0f} s more (--profile)")
            cpu["profile"] = profile(dev, run_dir / "profile.json", args.profile)
    except BaseException:
        dev.kill()
        raise
    print("[4/5] SIGTERM")
    stop = dev.terminate(args.kill_after, bool(args.profile))
    if dev.dumps:
        stop["stacks"] = dev.dumped((cpu.get("profile") or {}).get("idents", {}))
    print(f"      stopped. after {stop['stopped_seconds']} s, exited after {stop['exit_seconds']} s")

    print("[5/5] restart without --fresh")
    again = Dev(dev_argv(args, log_file, fresh=False), args.cwd, run_dir / "dev-2.out", env)
    try:
        restart_ready = again.wait_ready(args.start_timeout)
        found = restored(again, table_name(again, args.stack))
    except BaseException:
        again.kill()
        raise
    second_stop = again.terminate(args.kill_after, False)
    print(f"      ready after {restart_ready:.1f} s: {found}")

    return {
        "jobs": args.jobs,
        "stack": args.stack,
        "records": args.records,
        "settle_seconds": args.settle_seconds,
        "start_seconds": round(ready, 1),
        "load_seconds": round(loaded, 1),
        "idle": cpu,
        "sigterm": stop,
        "stop_budget_seconds": budget,
        "stop_budget_from": budget_why,
        "restart": {"start_seconds": round(restart_ready, 1), **found, "sigterm": second_stop},
        "notes": [f"dev output: {run_dir}/dev-1.out, dev-2.out"] if args.keep else [],
    }


def verdicts(data: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """(what, met, figure) for each budget."""
    cpu = data["idle"]["cpu_percent"]
    stop, budget = data["sigterm"], data["stop_budget_seconds"]
    exit_s = stop["exit_seconds"]
    exit_text = f"{exit_s} s" if exit_s is not None else f"killed after {stop['killed_after_seconds']} s"
    r = data["restart"]
    return [
        (f"idle CPU < {CPU_BUDGET_PERCENT:g}% of a core", cpu < CPU_BUDGET_PERCENT, f"{cpu}%"),
        (f"exit after SIGTERM <= {budget:g} s", exit_s is not None and exit_s <= budget, exit_text),
        (
            f"{data['records']} records restored",
            r["records"] == data["records"],
            f"{r['records']} of {data['records']}",
        ),
        (f"{USER_PARAMETER} restored", r["parameter"] == USER_VALUE, repr(r["parameter"])),
    ]


def _counted(items: list[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[re.sub(r"\d+", "N", item)] += 1
    return sorted(counts.items(), key=lambda kv: -kv[1])


def profile_lines(profile: dict[str, Any] | None, by_os_name: dict[str, float]) -> list[str]:
    """The idle section's tables: the sampler's (`--profile`) when it ran, else the OS thread names."""
    if not profile:
        return ["", "| thread (OS name) | % of a core |", "|---|---|"] + [
            f"| `{name}` | {pct} |" for name, pct in by_os_name.items()
        ]
    lines = [
        "",
        f"Sampled for {profile['seconds']} s after the window (`--profile`): {profile['process_percent']}% "
        f"of a core, of which {profile['seen_percent']}% in threads alive at a sample and the rest in "
        f"threads that started and ended between samples ({profile['threads']} threads at the end).",
        "",
        "| thread | % of a core |",
        "|---|---|",
    ]
    lines += [f"| `{name}` | {pct} |" for name, pct in profile["by_thread"][:12]]
    lines += [
        "",
        "Threads that started and ended in the sample (werkzeug's, one per connection), by the requests "
        "they served:",
        "",
        "| thread: the requests it served | threads | per second | % of a core |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{k}` | {n} | {rate} | {pct} |" for k, n, pct, rate in profile["ended_in_window"][:10]]
    return lines


def render(data: dict[str, Any]) -> list[str]:
    from reports import header

    idle_, stop = data["idle"], data["sigterm"]
    lines = header(
        "Local stack (`lambdajobs dev`)", "build/reports/local_stack.json", COMMAND, data.get("run")
    )
    lines += [
        f"`lambdajobs dev --jobs {data['jobs']}` holding {data['records']} finished job records and a user "
        f"SSM parameter, idle for {idle_['seconds']:.0f} s after {data['settle_seconds']:.0f} s of "
        f"settling; then SIGTERM, then a restart on the saved state. The stop budget is "
        f"{data['stop_budget_from']}.",
        "",
        "| budget | met | measured |",
        "|---|---|---|",
    ]
    lines += [f"| {what} | {'yes' if ok else '**no**'} | {fig} |" for what, ok, fig in verdicts(data)]
    lines += [
        "",
        "## Idle",
        "",
        f"{idle_['cpu_seconds']} CPU seconds in {idle_['seconds']} s ({idle_['cpu_percent']}% of one core); "
        f"by 10 s: {', '.join(f'{p}%' for p in idle_['per_10s_percent'])}. state.json "
        f"({idle_['state_bytes']} bytes) was written {idle_['state_writes']} times in the window.",
    ]
    lines += profile_lines(idle_.get("profile"), idle_["threads_percent"])
    after = stop.get("after_stopped") or {}
    lines += [
        "",
        "## SIGTERM",
        "",
        f"`stopped.` after {stop['stopped_seconds']} s; the process exited after {stop['exit_seconds']} s"
        + (f" (killed after {stop['killed_after_seconds']} s)" if stop["killed_after_seconds"] else "")
        + (f"; {after['threads']} threads were left 2 s after `stopped.`" if after else "")
        + ".",
    ]
    for when, stacks in (stop.get("stacks") or {}).items():
        lines += ["", f"Threads {when} (busiest frames first seen):", ""]
        lines += [f"- `{n}` x {k}" for k, n in _counted(stacks)]
    r = data["restart"]
    lines += [
        "",
        "## Restart",
        "",
        f"Ready after {r['start_seconds']} s (the first start: {data['start_seconds']} s); "
        f"{r['records']} of the records and {r['table_items']} items in the table; "
        f"`{USER_PARAMETER}` = {r['parameter']!r}.",
    ]
    return lines


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--jobs", default="handlers", help="the jobs package (default: handlers)")
    p.add_argument("--cwd", type=Path, default=ROOT, help="where dev runs (default: this repository)")
    p.add_argument("--stack", default="local")
    p.add_argument("--records", type=int, default=5000)
    p.add_argument("--settle-seconds", type=float, default=15.0)
    p.add_argument("--idle-seconds", type=float, default=60.0)
    p.add_argument("--stop-budget", type=float, help="seconds (default: the longest job timeout + 5)")
    p.add_argument("--kill-after", type=float, default=120.0, help="SIGKILL when not gone after this")
    p.add_argument("--start-timeout", type=float, default=120.0)
    p.add_argument("--dir", type=Path, help="the run's folder (kept; default: a temporary one)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder (dev output, state)")
    p.add_argument(
        "--profile",
        type=float,
        default=0,
        metavar="SECONDS",
        help="after the idle window, sample which threads and stacks use the CPU for SECONDS; "
        "dump the stacks 2 s after `stopped.`",
    )
    p.add_argument("--report", type=Path, default=REPORT)
    p.add_argument("--write-doc", action="store_true", help="also write docs/reports/local-stack.md")
    args = p.parse_args(argv)
    args.cwd = args.cwd.resolve()
    args.keep = args.keep or args.dir is not None or bool(args.profile)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if not Path("/proc/self/stat").exists():
        print("this script reads /proc: Linux only", file=sys.stderr)
        return 2
    run_dir = args.dir.resolve() if args.dir else Path(tempfile.mkdtemp(prefix="local-stack-figures-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    try:
        data = measure(args, run_dir)
    finally:
        if not args.keep:
            shutil.rmtree(run_dir, ignore_errors=True)
    sys.path.insert(0, str(ROOT))
    from reports import run_info, write_page

    data["run"] = run_info()
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(json.dumps(data, indent=2) + "\n")
    print()
    checks = verdicts(data)
    for what, ok, figure in checks:
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {figure}")
    print(f"wrote {args.report}")
    if args.write_doc:
        print(f"wrote {write_page('local-stack', render(data))}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
