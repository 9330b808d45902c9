"""Cold start: a fresh process imports the function's entry point from its staged asset and handles one
record, against a moto server; lambdajobs' send_email function against the hand-written worker.

The lambdajobs side runs from the asset `stage_function_asset` builds for send_email (what CDK ships:
source only, no `.pyc`), with the environment CDK sets on that function; the hand-written side from a
copy of `bench/powertools_worker.py`. Each process puts its asset first on the path, then the
virtualenv's site-packages (Powertools, pydantic, boto3: on Lambda the layer and the runtime), never
the project's folder; `PYTHONDONTWRITEBYTECODE=1`, so neither side gains from a `.pyc` it would not
ship. Each run gets a new job id (a first delivery, as on a cold start after an enqueue).

The figure is the time from starting the process to the record handled (`process_seconds`: the
interpreter's start included, its exit not, as Lambda does not wait for it), read on one monotonic
clock by the parent before it starts the process and by the child once `lambda_handler` returned; the
sides alternate, one fresh process each per round, `FULL_ROUNDS` rounds in a full run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import BUILD, FAKE_CREDENTIALS, REGION, ROOT, alternate, envelope, payload, sqs_event

#: What runs in the fresh process: time the import of the entry point and the first record. It imports
#: nothing before the entry point but what the interpreter has already loaded (`sys`, `os`, `time`,
#: `gc`: built in or frozen), so neither side gets a module for free; `json` (to read the event) only
#: after the import. The clock is `time.monotonic`: CLOCK_MONOTONIC, one clock for every process of
#: the machine, so the parent's reading before it starts the process and the child's reading once the
#: record is handled measure the whole cold start, the interpreter's own start included.
CHILD = r"""
import time
started = time.monotonic()
import gc, os, sys
loaded = len(sys.modules)
if os.environ.get("BENCH_PAUSE_GC"):  # what lambdajobs' init phase does, written around the import
    gc.disable()
__import__(os.environ["BENCH_ENTRY"])
module = sys.modules[os.environ["BENCH_ENTRY"]]
if os.environ.get("BENCH_PAUSE_GC"):
    gc.freeze()
    gc.enable()
imported = time.monotonic()
imported_modules = len(sys.modules) - loaded
import json

class Context:
    function_name = "bench-cold"
    function_version = "$LATEST"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-cold"
    log_group_name = "/aws/lambda/bench-cold"
    log_stream_name = "bench"
    aws_request_id = os.urandom(16).hex()
    def get_remaining_time_in_millis(self):
        return 30000

with open(os.environ["BENCH_EVENT"]) as f:
    event = json.load(f)
response = module.lambda_handler(event, Context())
handled = time.monotonic()  # the parent reads the same clock before starting the process
import resource
used = resource.getrusage(resource.RUSAGE_SELF)  # CPU from the process's start to the record handled
root, asset = os.environ["BENCH_ROOT"], os.environ["BENCH_ASSET"]
outside = sorted(
    name for name, m in list(sys.modules.items())
    if (getattr(m, "__file__", None) or "").startswith(root)
    and not (getattr(m, "__file__", None) or "").startswith((asset, sys.prefix))
)
print(json.dumps({
    "import_seconds": imported - started,
    "handle_seconds": handled - imported,
    "handled_at": handled,
    "cpu_seconds": used.ru_utime + used.ru_stime,
    "modules": len(sys.modules) - loaded,
    "imported_modules": imported_modules,
    "failures": response.get("batchItemFailures"),
    "outside_asset": outside,
}), file=sys.stderr)
"""


#: The plain job as a user's jobs package would hold it: send_email's payload, work and options (PII
#: field, 5 attempts, 30 s), without its rate limit and priority levels, which the hand-written worker
#: does not have either. Written to build/bench/plainsrc/benchjobs/ and staged like any jobs package.
PLAIN_PACKAGE = "benchjobs"
PLAIN_JOB = "plain_email"
PLAIN_MODULE = r'''"""A plain job: send_email's work without a rate limit (the bench's cold start)."""

from __future__ import annotations

import re
import uuid

from pydantic import BaseModel, Field

from lambdajobs import JobContext, PermanentError, job

ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


class SendEmail(BaseModel):
    to: str = Field(min_length=3, max_length=320)
    subject: str = Field(max_length=998)
    body: str = Field(max_length=100_000)
    campaign_id: str | None = Field(default=None, max_length=64)


@job(timeout_seconds=30, max_attempts=5, pii_fields=("to",))
def plain_email(payload: SendEmail, ctx: JobContext) -> dict[str, str]:
    if not ADDRESS.match(payload.to):
        raise PermanentError("invalid recipient address: expected name@domain.tld")
    message_id = uuid.uuid4().hex
    local, _, domain = payload.to.partition("@")
    masked = local[:1] + "***@" + domain
    ctx.logger.info("email sent (log sender)", extra={"to": masked, "provider_id": message_id})
    return {"provider_id": message_id}
'''


def _stage_plain() -> tuple[Any, Path]:
    """The plain job's package under build/bench/, staged as CDK stages a function: (its spec, asset)."""
    from lambdajobs.runtime.spec import load_jobs
    from lambdajobs.staging.asset import stage_function_asset
    from lambdajobs.testing import isolated_registry

    source = BUILD / "plainsrc"
    shutil.rmtree(source, ignore_errors=True)
    (source / PLAIN_PACKAGE).mkdir(parents=True)
    (source / PLAIN_PACKAGE / "__init__.py").write_text('"""The bench\'s plain job."""\n')
    (source / PLAIN_PACKAGE / "plain.py").write_text(PLAIN_MODULE)
    sys.path.insert(0, str(source))
    try:
        with isolated_registry():
            [spec] = load_jobs(PLAIN_PACKAGE)
            asset = stage_function_asset(
                BUILD / PLAIN_JOB, jobs_package=PLAIN_PACKAGE, modules=[f"{PLAIN_PACKAGE}.plain"]
            )
    finally:
        sys.path.remove(str(source))
    return spec, asset


def _site_packages() -> list[str]:
    import sysconfig

    return [sysconfig.get_paths()["purelib"]]


def prepare(endpoint: str) -> dict[str, Any]:
    """Stage the assets (the plain job's, send_email's, the baseline's), provision the jobs' resources
    and the baseline's table on the server; return what each side's process needs."""
    from bench.phases import BASELINE_TABLE
    from lambdajobs.local.provision import provision
    from lambdajobs.runtime import aws
    from lambdajobs.runtime.config import StackConfig
    from lambdajobs.runtime.settings import ENV_JOB, ENV_MODULES
    from lambdajobs.runtime.spec import load_jobs
    from lambdajobs.staging.asset import modules_for, stage_function_asset

    os.environ.update(FAKE_CREDENTIALS)
    specs = {s.name: s for s in load_jobs("handlers")}
    spec = specs["send_email"]
    modules = modules_for(spec, specs)
    asset = stage_function_asset(BUILD / "send_email", jobs_package="handlers", modules=modules)
    baseline = BUILD / "powertools"
    shutil.rmtree(baseline, ignore_errors=True)
    baseline.mkdir(parents=True)
    shutil.copy2(ROOT / "bench" / "powertools_worker.py", baseline / "powertools_worker.py")

    plain, plain_asset = _stage_plain()

    aws.reset_clients()
    config = StackConfig(stack="benchcold", region=REGION, endpoint_url=endpoint, jobs="handlers")
    provisioned = provision([spec, plain], stack="benchcold", config=config, job_index="off")
    config.client("dynamodb").create_table(
        TableName=BASELINE_TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    aws.reset_clients()
    common = {
        "PATH": os.environ.get("PATH", ""),
        "LANG": "C.UTF-8",
        **FAKE_CREDENTIALS,
        "AWS_ENDPOINT_URL": endpoint,
        "PYTHONDONTWRITEBYTECODE": "1",
        "BENCH_ROOT": str(ROOT),
    }
    # The environment CDK sets on send_email's function (cdk/job_worker.py), the default stack's index.
    lambdajobs_env = {
        **common,
        **provisioned.environment(jobs="handlers"),
        ENV_JOB: spec.name,
        ENV_MODULES: ",".join(modules),
        "LAMBDAJOBS_JOB_INDEX": "off",
        "POWERTOOLS_SERVICE_NAME": "lambdajobs",
        "POWERTOOLS_METRICS_NAMESPACE": "LambdaJobs",
        "PYTHONPATH": os.pathsep.join([str(asset), *_site_packages()]),
        "BENCH_ENTRY": "lambdajobs.runtime.entry",
        "BENCH_ASSET": str(asset),
    }
    # The plain job's function: its own jobs package and asset, the same stack.
    plain_env = {
        **lambdajobs_env,
        **provisioned.environment(jobs=PLAIN_PACKAGE),
        ENV_JOB: plain.name,
        ENV_MODULES: f"{PLAIN_PACKAGE}.plain",
        "LAMBDAJOBS_JOB_INDEX": "off",
        "PYTHONPATH": os.pathsep.join([str(plain_asset), *_site_packages()]),
        "BENCH_ASSET": str(plain_asset),
    }
    baseline_env = {
        **common,
        "IDEMPOTENCY_TABLE": BASELINE_TABLE,
        "PYTHONPATH": os.pathsep.join([str(baseline), *_site_packages()]),
        "BENCH_ENTRY": "powertools_worker",
        "BENCH_ASSET": str(baseline),
    }
    queue_arn = provisioned.queues[spec.name].queue_arn
    return {
        # the headline: the same work as the hand-written worker (no rate limit on either side)
        "lambdajobs": (plain_env, provisioned.queues[plain.name].queue_arn, plain.name),
        # send_email as deployed: its rate limit adds a record read and a limiter write to the first record
        "send_email": (lambdajobs_env, queue_arn, spec.name),
        "powertools": (baseline_env, f"arn:aws:sqs:{REGION}:123456789012:bench-powertools", spec.name),
        # the same hand-written worker with its collector paused during its imports and their objects
        # frozen, as lambdajobs' init phase does (lambdajobs.runtime.startup): what is left of the gap
        "powertools_paused_gc": (
            {**baseline_env, "BENCH_PAUSE_GC": "1"},
            f"arn:aws:sqs:{REGION}:123456789012:bench-powertools",
            spec.name,
        ),
        "asset_kb": round(sum(p.stat().st_size for p in asset.rglob("*") if p.is_file()) / 1024, 1),
        "asset_files": sum(1 for p in asset.rglob("*") if p.is_file()),
        "asset_pyc": sum(1 for _ in asset.rglob("*.pyc")),
        "modules": modules,
    }


def one_run(env: dict[str, str], queue_arn: str, job: str) -> dict[str, float]:
    """One fresh process: import + one record. Returns its timings, and the time from starting the
    process to the record handled (the interpreter's start included, its exit not: Lambda does not wait
    for a process to exit)."""
    event_path = BUILD / f"event-{uuid.uuid4().hex}.json"
    event_path.write_text(json.dumps(sqs_event([envelope(job, payload(0))], queue_arn)))
    try:
        spawned = time.monotonic()  # the child reads the same clock once its record is handled
        done = subprocess.run(
            [sys.executable, "-P", "-c", CHILD],
            env={**env, "BENCH_EVENT": str(event_path)},
            cwd=BUILD,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        event_path.unlink(missing_ok=True)
    if done.returncode != 0:
        raise RuntimeError(f"cold start process failed: {done.stderr[-3000:]}")
    result = json.loads(done.stderr.strip().splitlines()[-1])
    if result["failures"]:
        raise RuntimeError(f"cold start record failed: {result['failures']}: {done.stderr[-3000:]}")
    if result["outside_asset"]:
        raise RuntimeError(f"modules imported from outside the asset: {result['outside_asset']}")
    return {
        "import_seconds": result["import_seconds"],
        "handle_seconds": result["handle_seconds"],
        "seconds": result["import_seconds"] + result["handle_seconds"],
        "process_seconds": result["handled_at"] - spawned,
        "cpu_seconds": result["cpu_seconds"],
        "modules": result["modules"],
        "imported_modules": result["imported_modules"],
    }


#: The same child, ending its process the moment its record is handled: what `instructions` counts.
COUNTED_CHILD = CHILD.replace("handled = time.monotonic()", "os._exit(0)\nhandled = time.monotonic()", 1)
assert COUNTED_CHILD != CHILD


#: Count instructions only: no cache simulation, no output file.
VALGRIND_ARGS = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null")


def instructions(env: dict[str, str], queue_arn: str, job: str) -> int | None:
    """The instructions one fresh process executes from its start to its first record handled, counted
    by valgrind (cachegrind without its cache simulation): the same on a loaded machine as on an idle
    one, where the times move by a few percent. None when valgrind is not installed."""
    if shutil.which("valgrind") is None:
        return None
    event_path = BUILD / f"event-{uuid.uuid4().hex}.json"
    event_path.write_text(json.dumps(sqs_event([envelope(job, payload(0))], queue_arn)))
    try:
        done = subprocess.run(
            [*VALGRIND_ARGS, sys.executable, "-P", "-c", COUNTED_CHILD],
            env={**env, "BENCH_EVENT": str(event_path)},
            cwd=BUILD,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        event_path.unlink(missing_ok=True)
    found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise RuntimeError(f"cold start under valgrind failed: {done.stderr[-3000:]}")
    return int(found[1].replace(",", ""))


#: Rounds of a full run (`make bench`): issue 31 asks for the median of at least 25 alternated rounds.
FULL_ROUNDS = 25


def measure(endpoint: str, rounds: int, *, count_instructions: bool = False) -> dict[str, Any]:
    """`rounds` alternated rounds (each round one fresh process per side, the order rotating), after a
    first run of each side that is not counted.

    Returns `runs` (per side, in round order, one dict per process: `import_seconds` and
    `handle_seconds` inside the process, `seconds` their sum, `process_seconds` from starting the
    process to the record handled, `cpu_seconds` the CPU time the process used until then (user +
    system: what the machine's other load changes least), `modules` and `imported_modules` the
    modules it loaded in all and by the import); `process_seconds` and `cpu_seconds` (per side, the
    lists of the same, in round order: index i of two sides is one round, for a paired interval);
    `modules_loaded` (per side, the modules its last process loaded); `rounds`; and the asset's
    size, files, `.pyc` count and job modules. With `count_instructions`, `instructions`: per side
    (the plain job and both hand-written workers), the instructions of one more process from its
    start to its record handled (`instructions`; None without valgrind).
    """
    prepared = prepare(endpoint)
    runs: dict[str, list[dict[str, float]]] = {
        "lambdajobs": [],
        "send_email": [],
        "powertools": [],
        "powertools_paused_gc": [],
    }

    def side(name: str) -> Any:
        def run() -> float:
            got = one_run(*prepared[name])
            runs[name].append(got)
            return got["process_seconds"]

        return run

    for name in runs:  # a first run of each: the OS's file cache, the server's first requests
        one_run(*prepared[name])
    alternate(rounds, {name: side(name) for name in runs})
    counted = (
        {name: instructions(*prepared[name]) for name in ("lambdajobs", "powertools", "powertools_paused_gc")}
        if count_instructions
        else {}
    )
    return {
        "instructions": counted,
        "runs": runs,
        "process_seconds": {name: [r["process_seconds"] for r in got] for name, got in runs.items()},
        "cpu_seconds": {name: [r["cpu_seconds"] for r in got] for name, got in runs.items()},
        "modules_loaded": {name: got[-1]["modules"] for name, got in runs.items() if got},
        "rounds": rounds,
        "asset_kb": prepared["asset_kb"],
        "asset_files": prepared["asset_files"],
        "asset_pyc": prepared["asset_pyc"],
        "modules": prepared["modules"],
    }
