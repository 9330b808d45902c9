"""The measurements that run in a child process of their own (`python -m bench.phases NAME PARAMS OUT`):
a fresh interpreter per phase, its stdout (both workers' log and metric lines) sent to a file or
/dev/null by the parent, its figures written as JSON to OUT.

- `cpu`: CPU time per record through each handler, DynamoDB stubbed (`common.StubDynamoDB`), and the
  bytes and lines each writes to stdout per job; `_X_AMZN_TRACE_ID` set afresh for each invocation on
  both sides, as Lambda does (Powertools writes it into every line). With the light record mode
  (`bench.plain_job.light`) as a third side when lambdajobs has it.
- `moto`: records per second through each handler on one moto backend, in-process (`TestStack`),
  delivered by the same event source emulator.
- `wru`: DynamoDB write and read units per successful job (`common.WriteUnits`), job index off,
  `finished` and this repository's stack's mode (`repo_job_index_mode`), the light record mode, and
  the hand-written worker's; then (`durable_jobs`) those of a 5-step durable job
  (`bench.durable_job`), its steps in one invocation and one per invocation: per job, by kind of
  write, per step and per continuation (`durable`, also a phase of its own).
- `enqueue`: jobs per second sent by `enqueue_many`, a `send_message` loop, a `send_message_batch`
  loop and Celery's `apply_async`, against one moto server.
- `synth`: the synthesis of a generated app of many jobs (tests/big_app.py: of every 10 jobs, one cron
  job, one with three priority levels, one enqueuing 10 others), and this project's six-job app beside
  it: seconds, and the sizes AWS limits (resources and bytes per template, the largest environment,
  the cloud assembly's size).
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench.common import (
    FAKE_CREDENTIALS,
    REGION,
    Context,
    StubDynamoDB,
    WriteUnits,
    alternate,
    envelope,
    payload,
    sqs_event,
    trace_id,
)
from bench.plain_job import declare, light

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]
BASELINE_TABLE = "bench-idempotency"


@contextmanager
def plain_job() -> Iterator[Any]:
    from lambdajobs.testing import isolated_registry

    with isolated_registry():
        yield declare()


LIGHT_ERRORS: list[str] = []


def _light() -> Any:
    """`bench.plain_job.light()`, or None when lambdajobs has no light record mode or refuses the plain
    job in it (the reason in `LIGHT_ERRORS`: the phase's figures say why the light figures are missing)."""
    try:
        spec = light()
    except Exception as exc:  # a refusal at declaration: the rest of the bench still runs
        LIGHT_ERRORS.append(f"{type(exc).__name__}: {exc}")
        return None
    if spec is None:
        LIGHT_ERRORS.append("@job takes no record_mode (no light record mode in this lambdajobs)")
    return spec


@contextmanager
def light_job() -> Iterator[Any]:
    """The plain job in the light record mode (its spec), or None where lambdajobs has no such mode."""
    from lambdajobs.testing import isolated_registry

    with isolated_registry():
        yield _light()


def repo_job_index_mode() -> str:
    """The job index mode this repository's stack deploys with (infra/app.py): cdk.json's `job_index`
    option, resolved by `job_index_mode` over the jobs package's jobs, as `LambdaJobsStack` does."""
    from bench.common import ROOT
    from lambdajobs.runtime.spec import job_index_mode, load_jobs
    from lambdajobs.testing import isolated_registry

    context = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    with isolated_registry():
        specs = load_jobs("handlers")
        return str(job_index_mode(specs, context.get("job_index") or None))


def _baseline(client: Any) -> Handler:
    """The hand-written worker's handler, its persistence layer on `client`."""
    os.environ.setdefault("IDEMPOTENCY_TABLE", BASELINE_TABLE)
    from bench import powertools_worker

    powertools_worker.persistence.client = client
    return powertools_worker.lambda_handler


def _create_baseline_table(ddb: Any) -> None:
    ddb.create_table(
        TableName=BASELINE_TABLE,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )


# -- CPU per record, DynamoDB stubbed -------------------------------------------------------------------


def cpu(params: dict[str, Any]) -> dict[str, Any]:
    from lambdajobs.runtime.config import QueueAddress, StackConfig
    from lambdajobs.runtime.handler import make_handler
    from lambdajobs.runtime.records import JobRecordStore
    from lambdajobs.runtime.worker import Worker

    rounds, records = int(params["rounds"]), int(params["records"])
    os.environ.update(FAKE_CREDENTIALS)
    with plain_job() as spec:
        lighter = _light()  # in the same registry: the light record mode's job, when lambdajobs has it
        jobs = {"lambdajobs": spec, "powertools": spec}
        if lighter is not None:
            jobs["lambdajobs_light"] = lighter
        arns = {s.name: f"arn:aws:sqs:{REGION}:123456789012:bench-{s.name}" for s in jobs.values()}
        config = StackConfig(
            stack="bench",
            region=REGION,
            table="bench-jobs",
            queues={
                name: QueueAddress(url=f"https://sqs/bench-{name}", arn=arn, dlq_url="https://sqs/dlq")
                for name, arn in arns.items()
            },
            job_index="off",
        )
        stubs = {name: StubDynamoDB() for name in jobs}
        handlers: dict[str, Handler] = {
            name: make_handler(
                Worker(jobs[name].name, config=config, store=JobRecordStore(config, client=stubs[name]))
            )
            for name in jobs
            if name != "powertools"
        }
        handlers["powertools"] = _baseline(stubs["powertools"])
        log_bytes: dict[str, list[float]] = {side: [] for side in handlers}
        log_lines: dict[str, list[float]] = {side: [] for side in handlers}
        metric_lines: dict[str, list[float]] = {side: [] for side in handlers}

        def side(name: str, n: int = records) -> Callable[[], float]:
            job = jobs[name].name

            def run() -> float:
                events = [
                    sqs_event([envelope(job, payload(i)) for i in range(k, min(n, k + 10))], arns[job])
                    for k in range(0, n, 10)
                ]
                traces = [trace_id() for _ in events]  # one per invocation, as Lambda sets it
                sys.stdout.flush()
                before = os.fstat(1).st_size
                started = time.process_time()
                for event, trace in zip(events, traces, strict=True):
                    os.environ["_X_AMZN_TRACE_ID"] = trace
                    response = handlers[name](event, Context())
                    assert not response["batchItemFailures"], response
                spent = time.process_time() - started
                sys.stdout.flush()
                after = os.fstat(1).st_size
                log_bytes[name].append((after - before) / n)
                counted = _lines(before, after)
                if counted is not None:  # stdout a file this process can read back (as the harness runs it)
                    log_lines[name].append(counted[0] / n)
                    metric_lines[name].append(counted[1] / n)
                return spent / n

            return run

        for name in handlers:  # warm: first calls build caches (pydantic, Powertools, jmespath)
            side(name, 20)()
        for values in (*log_bytes.values(), *log_lines.values(), *metric_lines.values()):
            values.clear()
        calls_before = {name: dict(stub.calls) for name, stub in stubs.items()}
        got = alternate(rounds, {name: side(name) for name in handlers})
        total = rounds * records
        calls = {
            name: {k: (v - calls_before[name].get(k, 0)) / total for k, v in stub.calls.items()}
            for name, stub in stubs.items()
        }
    return {
        "cpu_seconds_per_record": got,
        "log_bytes_per_record": log_bytes,
        "log_lines_per_record": log_lines,
        "metric_lines_per_record": metric_lines,
        "dynamodb_calls_per_record": calls,
        "light_missing": LIGHT_ERRORS[-1] if LIGHT_ERRORS else None,
    }


def _lines(start: int, end: int) -> tuple[int, int] | None:
    """(log lines, EMF metric lines) written to stdout between these offsets; None when stdout is not a
    file this process can read back."""
    try:
        written = os.pread(1, end - start, start) if end > start else b""
    except OSError:
        return None
    lines = [line for line in written.splitlines() if line.strip()]
    metrics = sum(1 for line in lines if line.startswith(b'{"_aws"'))
    return len(lines) - metrics, metrics


# -- records per second on moto -------------------------------------------------------------------------


def moto(params: dict[str, Any]) -> dict[str, Any]:
    from lambdajobs.local.emulator import poll_once
    from lambdajobs.runtime.handler import make_handler
    from lambdajobs.runtime.worker import Worker
    from lambdajobs.testing import TestStack

    rounds, records = int(params["rounds"]), int(params["records"])
    with plain_job() as spec, TestStack(specs=[spec], stack="bench", job_index="off") as stack:
        sqs, ddb = stack.client("sqs"), stack.client("dynamodb")
        _create_baseline_table(ddb)
        url = sqs.create_queue(QueueName="bench-powertools", Attributes={"VisibilityTimeout": "180"})[
            "QueueUrl"
        ]
        queue_arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]
        assert stack.provisioned is not None
        own = stack.provisioned.queues[spec.name]
        sides: dict[str, tuple[str, str, Handler]] = {
            "lambdajobs": (
                own.queue_url,
                own.queue_arn,
                make_handler(Worker(spec.name, config=stack.config)),
            ),
            "powertools": (url, queue_arn, _baseline(ddb)),
        }

        def side(name: str, n: int = records) -> Callable[[], float]:
            queue_url, arn, handler = sides[name]

            def run() -> float:
                bodies = [envelope(spec.name, payload(i)) for i in range(n)]
                for k in range(0, n, 10):
                    entries = [{"Id": str(j), "MessageBody": b} for j, b in enumerate(bodies[k : k + 10])]
                    sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)
                started, done = time.perf_counter(), 0
                while done < n:
                    outcome = poll_once(
                        queue_url=queue_url,
                        queue_arn=arn,
                        handler=handler,
                        function_name=f"bench-{name}",
                        timeout_seconds=30,
                        batch_size=10,
                        config=stack.config,
                    )
                    if outcome is None:
                        raise RuntimeError(f"{name}: {n - done} records did not succeed")
                    done += len(outcome.succeeded_ids)
                return done / (time.perf_counter() - started)

            return run

        for name in sides:
            side(name, 20)()
        got = alternate(rounds, {name: side(name) for name in sides})
    return {"records_per_second": got}


# -- write units per job --------------------------------------------------------------------------------


def wru(params: dict[str, Any]) -> dict[str, Any]:
    import boto3

    from lambdajobs.local.emulator import poll_once
    from lambdajobs.runtime.handler import make_handler
    from lambdajobs.runtime.worker import Worker
    from lambdajobs.testing import TestStack

    jobs = int(params["jobs"])
    out: dict[str, Any] = {}

    def drain(queue_url: str, arn: str, handler: Handler, config: Any) -> int:
        done = 0
        while done < jobs:
            outcome = poll_once(
                queue_url=queue_url,
                queue_arn=arn,
                handler=handler,
                function_name="bench",
                timeout_seconds=30,
                batch_size=10,
                config=config,
            )
            if outcome is None:
                break
            done += len(outcome.succeeded_ids)
        assert done == jobs, f"{done} of {jobs} jobs succeeded"
        return done

    def fill(sqs: Any, queue_url: str, job: str) -> None:
        for k in range(0, jobs, 10):
            entries = [
                {"Id": str(j), "MessageBody": envelope(job, payload(k + j))} for j in range(min(10, jobs - k))
            ]
            sqs.send_message_batch(QueueUrl=queue_url, Entries=entries)

    def measured(meter: WriteUnits, done: int) -> dict[str, Any]:
        return {
            "wru_per_job": meter.units / done,
            "write_calls_per_job": sum(meter.calls.values()) / done,
            "write_calls": meter.calls,
            "rru_per_job": meter.read_units / done,
            "read_calls_per_job": sum(meter.read_calls.values()) / done,
            "read_calls": meter.read_calls,
        }

    repo_mode = repo_job_index_mode()
    runs: list[tuple[str, str]] = [("off", "off"), ("finished", "finished")]
    if repo_mode not in ("off", "finished"):
        runs.append((repo_mode, repo_mode))
    runs.append(("light", "off"))
    for label, mode in runs:
        declared = light_job() if label == "light" else plain_job()
        with declared as spec:
            if spec is None:  # no light record mode in lambdajobs (yet)
                out[label] = None
                continue
            with TestStack(specs=[spec], stack=f"wru{label}", job_index=mode) as stack:
                assert stack.provisioned is not None
                sqs, ddb = stack.client("sqs"), stack.client("dynamodb")
                reader = boto3.session.Session().client("dynamodb", region_name=REGION)
                q = stack.provisioned.queues[spec.name]
                fill(sqs, q.queue_url, spec.name)
                meter = WriteUnits(ddb, reader)
                done = drain(
                    q.queue_url,
                    q.queue_arn,
                    make_handler(Worker(spec.name, config=stack.config)),
                    stack.config,
                )
                out[label] = {"job_index": mode, **measured(meter, done)}
                if label == "off":
                    _create_baseline_table(ddb)
                    client = boto3.session.Session().client("dynamodb", region_name=REGION)
                    handler = _baseline(client)
                    url = sqs.create_queue(QueueName="bench-powertools")["QueueUrl"]
                    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"][
                        "QueueArn"
                    ]
                    fill(sqs, url, spec.name)
                    meter = WriteUnits(client, reader)
                    done = drain(url, arn, handler, stack.config)
                    out["powertools"] = measured(meter, done)
    out["repo_stack"] = {"job_index": repo_mode, **(out[repo_mode] or {})}
    out["light_missing"] = LIGHT_ERRORS[-1] if LIGHT_ERRORS else None
    if params.get("durable_jobs"):  # in this process: a phase of its own would import everything again
        out["durable"] = durable({"jobs": params["durable_jobs"]})
    return out


# -- write units of a durable job ------------------------------------------------------------------------


def durable(params: dict[str, Any]) -> dict[str, Any]:
    """A 5-step durable job (`bench.durable_job`): its write units per job, by kind of write, with its
    5 steps in one invocation (`inline`) and one step per invocation (`continuing`: 4 continuations,
    each a park and the next invocation's acquire); per step (its checkpoint's units) and per
    continuation (what the continuing job writes more than the inline one, per continuation)."""
    import boto3

    from bench.durable_job import FORMATS, TIMEOUT_SECONDS, declare
    from lambdajobs.local.emulator import poll_once
    from lambdajobs.runtime.handler import make_handler
    from lambdajobs.runtime.records import get_statuses
    from lambdajobs.runtime.worker import Worker
    from lambdajobs.testing import TestStack, isolated_registry

    jobs = int(params["jobs"])
    out: dict[str, Any] = {"jobs": jobs, "steps": len(FORMATS)}
    with isolated_registry():
        spec = declare()
        with TestStack(specs=[spec], stack="wrudurable", job_index="off") as stack:
            assert stack.provisioned is not None
            sqs, ddb = stack.client("sqs"), stack.client("dynamodb")
            reader = boto3.session.Session().client("dynamodb", region_name=REGION)
            q = stack.provisioned.queues[spec.name]
            handler = make_handler(Worker(spec.name, config=stack.config))
            sent: list[str] = []
            stack.config.client("sqs").meta.events.register(
                "before-call.sqs.SendMessage", lambda **_: sent.append("SendMessage")
            )
            for mode in ("inline", "continuing"):
                ids = [f"{mode}-{i:04d}" for i in range(jobs)]
                for k in range(0, jobs, 10):
                    entries = [
                        {
                            "Id": str(j),
                            "MessageBody": envelope(
                                spec.name, {"video_id": i, "one_per_invocation": mode == "continuing"}, i
                            ),
                        }
                        for j, i in enumerate(ids[k : k + 10])
                    ]
                    sqs.send_message_batch(QueueUrl=q.queue_url, Entries=entries)
                sent.clear()
                meter = WriteUnits(ddb, reader)
                invocations, deadline = 0, time.monotonic() + 120
                while True:  # a continuation's copy is delayed 1 s: wait for it
                    outcome = poll_once(
                        queue_url=q.queue_url,
                        queue_arn=q.queue_arn,
                        handler=handler,
                        function_name="bench-durable",
                        timeout_seconds=TIMEOUT_SECONDS,
                        batch_size=spec.batch_size,  # as its event source would: one job per invocation
                        config=stack.config,
                    )
                    invocations += outcome is not None
                    if outcome is None:
                        statuses = get_statuses(ids, config=stack.config)
                        if all(st.done for st in statuses.values()) or time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
                meter.close()
                statuses = get_statuses(ids, config=stack.config)
                wrong = [
                    i
                    for i, st in statuses.items()
                    if st.state != "succeeded" or len(st.steps) != len(FORMATS)
                ]
                assert not wrong, (
                    f"{mode}: {len(wrong)} jobs did not succeed with {len(FORMATS)} steps: {wrong[:3]}"
                )
                parks = sum(st.suspensions for st in statuses.values())
                out[mode] = {
                    "wru_per_job": meter.units / jobs,
                    "write_calls_per_job": sum(meter.calls.values()) / jobs,
                    "write_calls": meter.calls,
                    "by_kind_per_job": {
                        kind: {"calls": v["calls"] / jobs, "units": v["units"] / jobs}
                        for kind, v in sorted(meter.kinds.items())
                    },
                    "continuations_per_job": parks / jobs,
                    "invocations": invocations,
                    "sqs_sends_per_job": len(sent) / jobs,
                }
    inline, continuing = out["inline"], out["continuing"]
    checkpoints = {k: v for k, v in inline["by_kind_per_job"].items() if k.startswith("checkpoint:")}
    out["wru_per_step"] = sum(v["units"] for v in checkpoints.values()) / len(FORMATS)
    out["wru_per_step_by_step"] = {fmt: checkpoints[f"checkpoint:encode-{fmt}"]["units"] for fmt in FORMATS}
    continuations = continuing["continuations_per_job"]
    out["wru_per_continuation"] = (continuing["wru_per_job"] - inline["wru_per_job"]) / continuations
    out["wru_per_continuation_parts"] = {
        kind: (
            continuing["by_kind_per_job"].get(kind, {}).get("units", 0.0)
            - inline["by_kind_per_job"].get(kind, {}).get("units", 0.0)
        )
        / continuations
        for kind in ("park", "acquire")
    }
    return out


# -- enqueueing --------------------------------------------------------------------------------------------


def enqueue(params: dict[str, Any]) -> dict[str, Any]:
    import boto3

    from handlers.emails import SendEmail
    from lambdajobs.runtime.config import QueueAddress, StackConfig
    from lambdajobs.runtime.producer import enqueue_many

    rounds, jobs, endpoint = int(params["rounds"]), int(params["jobs"]), str(params["endpoint"])
    os.environ.update(FAKE_CREDENTIALS)
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    sqs = boto3.session.Session().client("sqs", region_name=REGION, endpoint_url=endpoint)
    payloads = [payload(i) for i in range(jobs)]
    counted: list[int] = []

    def new_queue(prefix: str) -> tuple[str, str]:
        url = sqs.create_queue(QueueName=f"{prefix}-{uuid.uuid4().hex[:12]}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        return url, arn

    def body(p: dict[str, Any]) -> str:  # what a hand-written producer sends: validated, with a job id
        return json.dumps({"id": uuid.uuid4().hex, "payload": SendEmail.model_validate(p).model_dump()})

    with plain_job() as spec:
        base = StackConfig(stack="bench", region=REGION, endpoint_url=endpoint)
        base.client("sqs").meta.events.register("before-call.sqs", lambda **_: counted.append(1))

        def with_enqueue_many() -> float:
            url, arn = new_queue("bench-many")
            config = base.with_resources(queues={spec.name: QueueAddress(url=url, arn=arn, dlq_url=url)})
            counted.clear()
            started = time.perf_counter()
            results = enqueue_many(spec.name, payloads, config=config)
            spent = time.perf_counter() - started
            assert results.ok and len(counted) >= 1
            calls_per_job.append(len(counted) / jobs)
            sqs.delete_queue(QueueUrl=url)
            return jobs / spent

        def with_send_loop() -> float:
            url, _ = new_queue("bench-loop")
            started = time.perf_counter()
            for p in payloads:
                sqs.send_message(QueueUrl=url, MessageBody=body(p))
            spent = time.perf_counter() - started
            sqs.delete_queue(QueueUrl=url)
            return jobs / spent

        def with_batch_loop() -> float:
            url, _ = new_queue("bench-batch")
            started = time.perf_counter()
            for k in range(0, jobs, 10):
                entries = [{"Id": str(j), "MessageBody": body(p)} for j, p in enumerate(payloads[k : k + 10])]
                response = sqs.send_message_batch(QueueUrl=url, Entries=entries)
                assert not response.get("Failed")
            spent = time.perf_counter() - started
            sqs.delete_queue(QueueUrl=url)
            return jobs / spent

        calls_per_job: list[float] = []
        sides: dict[str, Callable[[], float]] = {
            "enqueue_many": with_enqueue_many,
            "send_loop": with_send_loop,
            "batch_loop": with_batch_loop,
        }
        celery_error = None
        try:
            sides["celery"] = _celery(endpoint, payloads, sqs, SendEmail)
        except Exception as exc:  # not installed, or its SQS transport does not run here
            celery_error = f"{type(exc).__name__}: {exc}"
        for run in sides.values():  # warm: clients, connections, pydantic
            run()
        calls_per_job.clear()
        got = alternate(rounds, sides)
    return {"jobs_per_second": got, "sqs_calls_per_enqueued_job": calls_per_job, "celery_error": celery_error}


def _celery(endpoint: str, payloads: list[dict[str, Any]], sqs: Any, model: Any) -> Callable[[], float]:
    """Celery's `apply_async` on its SQS transport (kombu), against the same server."""
    from celery import Celery

    host = endpoint.removeprefix("http://")
    app = Celery("bench", broker=f"sqs://testing:testing@{host}")
    app.conf.broker_transport_options = {"region": REGION, "is_secure": False}
    app.conf.broker_connection_retry_on_startup = False

    @app.task(name="send_email")
    def send_email(to: str, subject: str, body: str, campaign_id: str | None = None) -> None:
        return None

    def run() -> float:
        name = f"bench-celery-{uuid.uuid4().hex[:12]}"
        send_email.apply_async(kwargs=payloads[0], queue=name)  # declares the queue (not timed)
        started = time.perf_counter()
        for p in payloads:
            send_email.apply_async(kwargs=model.model_validate(p).model_dump(), queue=name)
        spent = time.perf_counter() - started
        url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
        depth = int(
            sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
                "Attributes"
            ]["ApproximateNumberOfMessages"]
        )
        assert depth == len(payloads) + 1, f"celery sent {depth - 1} of {len(payloads)}"
        sqs.delete_queue(QueueUrl=url)
        return len(payloads) / spent

    run.__name__ = "celery"
    return run


def synth(params: dict[str, Any]) -> dict[str, Any]:
    import subprocess
    import tempfile
    from pathlib import Path

    from lambdajobs.cdk.job_worker import environment_size
    from tests.big_app import synthesize, templates, write_jobs

    def measure(build: Callable[[Path], Any], folder: Path) -> dict[str, Any]:
        started = time.perf_counter()
        assembly = build(folder)
        seconds = time.perf_counter() - started
        found = templates(assembly)
        environments = [
            environment_size({k: v if isinstance(v, str) else "${Token[T.1]}" for k, v in variables.items()})
            for t in found.values()
            for r in t["Resources"].values()
            if r["Type"] == "AWS::Lambda::Function"
            for variables in [r["Properties"]["Environment"]["Variables"]]
        ]
        out = Path(assembly.directory)
        from lambdajobs.cdk import nag_errors

        # cfn-lint on every template (W3005: a DependsOn CDK writes that a GetAtt implies)
        lint = subprocess.run(
            [str(Path(sys.executable).parent / "cfn-lint"), "--ignore-checks", "W3005", "--"]
            + [str(out / name) for name in found],
            capture_output=True,
            text=True,
            check=False,
        )
        return {
            "nag_errors": len(nag_errors(assembly)),
            "cfn_lint_findings": len([line for line in lint.stdout.splitlines() if line.strip()]),
            "seconds": round(seconds, 2),
            "templates": len(found),
            "max_resources": max(len(t["Resources"]) for t in found.values()),
            "max_template_bytes": max(len(json.dumps(t, separators=(",", ":"))) for t in found.values()),
            "max_environment_characters": max(environments),
            "assembly_mb": round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 2**20, 1),
        }

    root = Path(tempfile.mkdtemp(prefix="bench-synth-"))
    package = write_jobs(root, "bench_many_jobs", params["jobs"])
    many = measure(
        lambda folder: synthesize(
            root, package, stack="bench", outdir=folder / "out", stacks_file=folder / "stacks.json"
        )[0],
        root / "many",
    )

    def this_project(folder: Path) -> Any:
        from infra.app import build_app

        os.environ["LAMBDAJOBS_STACKS_FILE"] = str(folder / "stacks.json")
        app, _ = build_app(outdir=str(folder / "out"))
        return app.synth()

    (root / "many").mkdir(exist_ok=True)
    (root / "project").mkdir()
    project = measure(this_project, root / "project")
    return {"jobs": params["jobs"], "many": many, "project": project}


PHASES = {"cpu": cpu, "moto": moto, "wru": wru, "durable": durable, "enqueue": enqueue, "synth": synth}

if __name__ == "__main__":
    name, raw, out = sys.argv[1:4]
    figures = PHASES[name](json.loads(raw))
    with open(out, "w") as f:
        json.dump(figures, f, indent=1)
