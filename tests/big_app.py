"""A generated jobs package of many jobs, as a large team's app holds them (issue 27): of every 10 jobs,
one cron job, one with three priority levels, one that enqueues 10 others, the rest plain; and the
CDK app of it, synthesized to check every template, environment and policy against AWS's limits.

    package = write_jobs(tmp_path, "many_jobs", 200)
    app, stack = synthesize(package, stack="big", outdir=tmp_path / "cdk.out")
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HEADER = '''"""Generated jobs ({count})."""

from pydantic import BaseModel

from lambdajobs import JobContext, cron, job


class Item(BaseModel):
    n: int
'''

PLAIN = """

@job(timeout_seconds=30, max_attempts=3)
def {name}(payload: Item, ctx: JobContext) -> dict:
    return {{"n": payload.n}}
"""

CRON = """

@cron("cron(0 {hour} * * ? *)", timezone="Europe/Paris", payload={{"n": 1}})
def {name}(payload: Item, ctx: JobContext) -> None:
    pass
"""

LEVELS = """

@job(timeout_seconds=30, priorities={{"urgent": 8, "high": 4, "normal": 2}})
def {name}(payload: Item, ctx: JobContext) -> dict:
    return {{"n": payload.n}}
"""

FANOUT = """

@job(timeout_seconds=30, enqueues={targets!r})
def {name}(payload: Item, ctx: JobContext) -> dict:
    return {{"n": payload.n}}
"""


def kinds(count: int) -> dict[str, str]:
    """Each job's kind: of every 10 jobs, one `cron`, one `levels`, one `fanout`, the rest `plain`."""
    out = {}
    for i in range(count):
        kind = {0: "cron", 1: "levels", 2: "fanout"}.get(i % 10, "plain")
        out[f"job_{i:03d}"] = kind
    return out


def write_jobs(root: Path, package: str, count: int) -> str:
    """A jobs package of `count` jobs in `root` (one module per 25 jobs), importable once `root` is on
    sys.path (`synthesize` puts it there)."""
    folder = root / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    names = list(kinds(count).items())
    plain = [name for name, kind in names if kind == "plain"]
    for start in range(0, count, 25):
        body = [HEADER.format(count=count)]
        for index, (name, kind) in enumerate(names[start : start + 25], start):
            if kind == "cron":
                body.append(CRON.format(name=name, hour=index % 24))
            elif kind == "levels":
                body.append(LEVELS.format(name=name))
            elif kind == "fanout":
                targets = tuple(plain[(index + k) % len(plain)] for k in range(min(10, len(plain))))
                body.append(FANOUT.format(name=name, targets=targets))
            else:
                body.append(PLAIN.format(name=name))
        (folder / f"jobs_{start // 25:02d}.py").write_text("".join(body))
    return package


def synthesize(root: Path, package: str, *, stack: str, outdir: Path, stacks_file: Path) -> tuple[Any, Any]:
    """(cloud assembly, LambdaJobsStack) of the package in `root`, in a registry of its own, with
    cdk-nag's checks on (`lambdajobs.cdk.nag_errors(assembly)` reads them)."""
    from aws_cdk import App

    from lambdajobs.cdk import LambdaJobsStack, check_with_cdk_nag
    from lambdajobs.testing import isolated_registry

    sys.path.insert(0, str(root))
    try:
        with isolated_registry():
            app = App(outdir=str(outdir))
            built = LambdaJobsStack(app, stack, jobs=package, stacks_file=stacks_file)
            check_with_cdk_nag(app, built.lambdajobs)
            return app.synth(), built
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
            del sys.modules[name]


def templates(assembly: Any) -> dict[str, dict[str, Any]]:
    """Every template the synth wrote (the root's and each nested stack's), by file name."""
    import json

    folder = Path(assembly.directory)
    return {path.name: json.loads(path.read_text()) for path in sorted(folder.glob("*.template.json"))}
