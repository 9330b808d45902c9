"""A plain job's cold start, its first record included, loads none of the runtime modules only rare
paths need (durable jobs, workflows, producers, rate limits, tracing, the light mode, the status
readers), defines none of the rare-path code split out of the modules it does load, and builds none of
the envelope's models: each is CPU a cold start spends before its record is handled (bench.coldstart)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Runtime modules a plain job's success never needs.
RARE = {
    "lambdajobs.runtime.durable",
    "lambdajobs.runtime.workflow",
    "lambdajobs.runtime.workflow_item",
    "lambdajobs.runtime.producer",
    "lambdajobs.runtime.ratelimit",
    "lambdajobs.runtime.keyslots",
    "lambdajobs.runtime.debounce",
    "lambdajobs.runtime.cancellation",
    "lambdajobs.runtime.schedule",
    "lambdajobs.runtime.search",
    "lambdajobs.runtime.tracing",
    "lambdajobs.runtime.light",
    "lambdajobs.runtime.continuer",
    # the status readers (get_status, list_jobs, count_finished, ...), split out of records
    "lambdajobs.runtime.status",
    # the lifecycle's transitions other than acquire and success (fail, cancel, park, ...)
    "lambdajobs.runtime.transitions",
    # what only some declarations need (rare options' checks, loading a whole jobs package, ...)
    "lambdajobs.runtime.declarations",
    # where resources are when the environment does not say (the naming rule, the SSM manifest)
    "lambdajobs.runtime.manifest",
    # every decision but a success carried out: hand-backs, retries, dead letters, parks, cancels
    "lambdajobs.runtime.handbacks",
    # what a producer asks of a spec (level_for, job_id), the naming rule, values beyond str and int
    "lambdajobs.runtime.routing",
    "lambdajobs.runtime.naming",
    "lambdajobs.runtime.wire",
    # value types defined only when a job's option uses them (a default is made on first read)
    "lambdajobs.runtime.alarms",
    "lambdajobs.runtime.backoff",
    # the worker's, context's, log buffer's, PII masking's, envelope's, delivery's and gates' rare paths
    "lambdajobs.runtime.worker_rare",
    "lambdajobs.runtime.context_rare",
    "lambdajobs.runtime.logbuffer_rare",
    "lambdajobs.runtime.pii_rare",
    "lambdajobs.runtime.envelope_rare",
    "lambdajobs.runtime.delivery_rare",
    "lambdajobs.runtime.gates_rare",
    "lambdajobs.runtime.decisions_rare",
    # the record type and the store's writes other than an acquire's and a success's
    "lambdajobs.runtime.store_ops",
    "lambdajobs.runtime.record_type",
    "lambdajobs.runtime.failures",
    "lambdajobs.runtime.record_writes",
}

#: Code of success-path modules that only rare paths run, split into modules of its own (the names
#: stay importable from where they were, loaded on first use): a plain job's cold start must not have
#: compiled them, so none is defined in its module's namespace.
RARE_NAMES = {
    # the status readers, in lambdajobs.runtime.status
    "lambdajobs.runtime.records": [
        "JobStatus",
        "Attempt",
        "JobPage",
        "get_status",
        "list_jobs",
        "count_finished",
        # what a failed attempt's write keeps, in lambdajobs.runtime.failures
        "failure_details",
        "stored_fields",
        "stored_payload",
    ],
    # the failure, cancel, progress and parking transitions, in lambdajobs.runtime.transitions, and the
    # helpers they share, in lambdajobs.runtime.record_writes
    "lambdajobs.runtime.lifecycle": [
        "fail",
        "unstart",
        "wait",
        "cancel",
        "suspend",
        "supersede",
        "succeed",
        "_counted",
        "_set_each",
        "_apply",
        "_index",
        "_landed",
    ],
    # the record's dataclass and its rules, in lambdajobs.runtime.record_type
    "lambdajobs.runtime.job_record": ["JobRecord", "_LOCK_EXPIRED", "_state_of"],
    # rare options' checks, package loading, the stand-in's model, in lambdajobs.runtime.declarations
    "lambdajobs.runtime.spec": [
        "_path_problem",
        "_import_jobs_package",
        "_project_roots",
        "_check_regular_packages",
        "_Unread",
        "job_index_mode",
        "cron",
    ],
    # the naming rule and the manifest's reads, in lambdajobs.runtime.manifest
    "lambdajobs.runtime.config": ["Where"],
    "lambdajobs.runtime.settings": [
        "queue_name",
        "schedule_group_names",
        "job_queue_pattern",
        "log_group_name",
        "PRIORITY_NAME_RE",
    ],
    "lambdajobs.runtime.table": ["update", "_codecs", "_decimals", "_numbers"],
    "lambdajobs.runtime": ["Alarms", "Backoff", "cron"],
    "lambdajobs": ["Alarms", "Backoff", "cron"],
    # the envelope's field models and encoder, in lambdajobs.runtime.envelope_rare
    "lambdajobs.runtime.envelope": [
        "ParentCounts",
        "WorkflowField",
        "ResumeField",
        "DebounceField",
        "encode",
        "_summary",
    ],
    # the decisions other than a run and a success, in lambdajobs.runtime.decisions_rare / gates_rare
    "lambdajobs.runtime.gates": [
        "HandBack",
        "DeadLetter",
        "RecordSuccess",
        "Retry",
        "Park",
        "Cancel",
        "Supersede",
        "Decision",
        "duplicate",
        "failed",
        "not_acquired",
        "lock_held",
        "past_last_attempt",
        "resumes_early",
        "waits_elsewhere",
        "seconds_until",
    ],
    "lambdajobs.runtime.delivery": ["Mark", "CarriedOutcome", "Carried", "CarriedSlot"],
    # masking a written line, in lambdajobs.runtime.pii_rare; writing kept lines, in logbuffer_rare
    "lambdajobs.runtime.pii": [
        "mask_payload",
        "_erase_fields",
        "_clean",
        "_names",
        "_verbatim_names",
        "_escaped_in",
        "_scrubbed",
        "_erase_path",
        "_VERBATIM",
        "_STANDARD",
    ],
    "lambdajobs.runtime.logbuffer": ["_write"],
    "lambdajobs.runtime.context": ["_BUILDING"],
}

CHILD = """
import json, sys, time, uuid
from moto import mock_aws
with mock_aws():
    import boto3
    boto3.client("dynamodb").create_table(
        TableName="cs-jobs",
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    import gc
    collected = []
    gc.callbacks.append(lambda phase, info: phase == "start" and collected.append(info["generation"]))
    import lambdajobs.runtime.entry as entry
    from lambdajobs.runtime import aws, envelope
    init = {"collections": len(collected), "clients": sorted(k[0] for k in aws._clients)}
    now = str(int(time.time() * 1000))
    now_iso = "2026-12-02T17:00:00Z"
    body = {"v": 1, "job": "step", "id": "cold-1", "payload": {"name": "a"}, "enqueued_at": now_iso}
    record = {
        "messageId": str(uuid.uuid4()), "receiptHandle": "r", "body": json.dumps(body),
        "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": now, "SenderId": "A",
                       "ApproximateFirstReceiveTimestamp": now},
        "messageAttributes": {}, "md5OfBody": "", "eventSource": "aws:sqs",
        "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:cs_step", "awsRegion": "us-east-1",
    }

    class Context:
        function_name, function_version, memory_limit_in_mb = "cs-step", "$LATEST", 256
        invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cs-step"
        log_group_name, log_stream_name, aws_request_id = "/aws/lambda/cs-step", "s", "req-1"
        def get_remaining_time_in_millis(self):
            return 30000

    response = entry.lambda_handler({"Records": [record]}, Context())
    item = boto3.client("dynamodb").get_item(TableName="cs-jobs", Key={"id": {"S": "cold-1"}})["Item"]
    state = item["state"]
    built = [m.__name__ for m in (envelope.Envelope,) if m.__pydantic_complete__]
rare = json.loads(sys.argv[1])
defined = {m: [n for n in names if n in vars(sys.modules[m])] for m, names in rare.items()}
print(json.dumps({"failures": response["batchItemFailures"], "state": state["S"], "built": built,
    "init": init, "loaded": sorted(m for m in sys.modules if m.startswith("lambdajobs")),
    "defined": defined}))
"""


def test_a_plain_jobs_cold_start_and_first_record_load_no_rare_path_module():
    # GIVEN a worker function's environment (as CDK sets it), DynamoDB answered by moto in the process
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAMBDAJOBS_", "AWS_"))}
    env.update(
        LAMBDAJOBS_STACK="cs",
        LAMBDAJOBS_TABLE="cs-jobs",
        LAMBDAJOBS_JOB="step",
        LAMBDAJOBS_JOBS="tests.jobs",
        LAMBDAJOBS_MODULES="tests.jobs.flows",
        LAMBDAJOBS_JOB_INDEX="off",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    # WHEN it imports its entry point and handles one record of a plain job (no step, no workflow)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(RARE_NAMES)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # THEN the job succeeded,
    assert result["failures"] == [] and result["state"] == "succeeded", result
    # and its init phase made the client the first record needs, with the collector paused (AWS's
    # advice for SDK clients; the hand-written worker makes its client at import too)
    assert result["init"] == {"collections": 0, "clients": ["dynamodb"]}, result["init"]
    # and none of the modules only rare paths need was loaded, nor an envelope model built
    assert RARE & set(result["loaded"]) == set()
    assert result["built"] == []
    # and the rare paths' code split out of success-path modules was neither compiled nor run
    assert result["defined"] == {module: [] for module in RARE_NAMES}
