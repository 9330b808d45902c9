"""`make bench`: speed and cost of the runtime, as ratios against a baseline measured beside them.

1. Cold start: a new process importing the Lambda entry point, against a baseline process importing
   what any Powertools SQS worker needs (batch, idempotency, logger, metrics) and creating one boto3
   client. The ratio is what lambdajobs adds to a cold start.
2. Throughput: records per second through the real handler on moto (in-process), against the same
   emulator delivering to a handler that does nothing. The ratio is the pipeline's cost per record
   (decode, validate, acquire/complete the job record, delete), over the floor of SQS calls alone.
3. Cost: DynamoDB writes per successful job, counted through botocore events.

Writes build/reports/bench.json. Numbers vary between machines; the ratios are what to compare.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this project's jobs package (handlers), as from the project's folder
REPORT = ROOT / "build" / "reports" / "bench.json"
RUNS = 7
RECORDS = 300

BASELINE_IMPORT = (
    "from aws_lambda_powertools import Logger, Metrics\n"
    "from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response\n"
    "from aws_lambda_powertools.utilities.idempotency import IdempotencyConfig, idempotent_function\n"
    "import boto3; boto3.client('dynamodb', region_name='us-east-1')\n"
)
ENTRY_IMPORT = (
    "import lambdajobs.runtime.entry\nimport boto3; boto3.client('dynamodb', region_name='us-east-1')\n"
)
#: The environment CDK gives the send_email function (its job, and the job modules it ships).
ENTRY_ENV = {
    "LAMBDAJOBS_JOB": "send_email",
    "LAMBDAJOBS_JOBS": "handlers",
    "LAMBDAJOBS_MODULES": "handlers.emails",
}


def cold_start(code: str, extra_env: dict[str, str] | None = None) -> float:
    times = []
    env = {
        **os.environ,
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONDONTWRITEBYTECODE": "1",
        **(extra_env or {}),
    }
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def throughput() -> dict[str, float]:
    from moto import mock_aws

    for key, value in {
        "AWS_ACCESS_KEY_ID": "b",
        "AWS_SECRET_ACCESS_KEY": "b",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        os.environ[key] = value
    import logging

    from handlers import emails
    from handlers.emails import SendEmail
    from lambdajobs.runtime.spec import isolated_registry, job, load_jobs
    from lambdajobs.runtime.worker import logger  # its Logger sets its level: quiet it after

    logging.getLogger(logger.name).setLevel(logging.WARNING)
    emails.set_sender(type("Quiet", (), {"send": lambda self, to, subject, body: "id"})())

    def bench_email(payload: Any) -> dict[str, str]:
        return {"provider_id": emails.get_sender().send(payload.to, payload.subject, payload.body)}

    # A plain job: send_email's payload and work, without its rate limit (20 a second would set the
    # pace instead of the worker) and priority levels.
    bench_email.__annotations__ = {"payload": SendEmail, "return": dict}
    load_jobs("handlers")
    with isolated_registry(keep=True):
        spec = job(timeout_seconds=30)(bench_email).spec
        return _throughput(spec, mock_aws, SendEmail)


def _throughput(spec: Any, mock_aws: Any, SendEmail: Any) -> dict[str, float]:
    from lambdajobs.local.emulator import EventSourceMapping
    from lambdajobs.local.provision import provision
    from lambdajobs.runtime import aws
    from lambdajobs.runtime.config import StackConfig
    from lambdajobs.runtime.producer import enqueue_many
    from lambdajobs.runtime.worker import Worker

    results: dict[str, float] = {}
    for label, make_handler in (("baseline", lambda: lambda event, context: None), ("lambdajobs", None)):
        with mock_aws():
            aws.reset_clients()
            stack = provision([spec], stack="bench")
            config = stack.config(StackConfig(stack="bench", jobs="handlers"))
            worker = Worker(spec.name, config=config, emit_metrics=False)
            handler = make_handler() if make_handler else worker.handle
            writes: list[str] = []
            aws.client("dynamodb").meta.events.register(
                "before-call.dynamodb", lambda model, _writes=writes, **_: _writes.append(model.name)
            )
            payloads = [SendEmail(to=f"u{i}@example.com", subject="s", body="b") for i in range(RECORDS)]
            enqueue_many(spec.name, payloads, config=config)
            q = stack.queues[spec.name]
            esm = EventSourceMapping(
                queue_url=q.queue_url,
                queue_arn=q.queue_arn,
                handler=handler,
                function_name="bench",
                timeout_seconds=30,
                wait_seconds=0,
            )
            start, done = time.perf_counter(), 0
            while done < RECORDS:
                outcome = esm.poll_once()
                if outcome is None:
                    break
                done += len(outcome.succeeded_ids)
            results[f"{label}_records_per_second"] = done / (time.perf_counter() - start)
            if label == "lambdajobs":
                write_ops = [
                    w for w in writes if w in ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
                ]
                results["dynamodb_writes_per_job"] = len(write_ops) / max(done, 1)
        aws.reset_clients()
    return results


def main() -> int:
    baseline = cold_start(BASELINE_IMPORT)
    entry = cold_start(ENTRY_IMPORT, ENTRY_ENV)
    figures: dict[str, float] = {
        "cold_start_baseline_seconds": round(baseline, 3),
        "cold_start_lambdajobs_seconds": round(entry, 3),
        "cold_start_ratio": round(entry / baseline, 2),
    }
    speed = throughput()
    figures.update({k: round(v, 2) for k, v in speed.items()})
    figures["throughput_ratio"] = round(
        speed["lambdajobs_records_per_second"] / speed["baseline_records_per_second"], 2
    )
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(figures, indent=2) + "\n")
    width = max(map(len, figures))
    for key, value in figures.items():
        print(f"{key:<{width}}  {value}")
    print(f"wrote {REPORT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
