"""A function's cold start from its synthesized asset alone, as Lambda would run it, on an embedded moto
server. Run by the project's own Python, in the project folder:

    python cold_start.py <cdk.out> <stack> <job> <payload json> <layer packages folder>

The parent (this script) starts moto's server, provisions the stack's resources from the project's job
specs, enqueues one job and receives its message. The function then runs in an isolated interpreter
(`-I -S`: no site-packages, no PYTHONPATH, no current folder) whose `sys.path` is only what Lambda would
give it: the asset (/var/task), the layers in the template's order (the Powertools layer, then the
project's dependencies), and the runtime's boto3. It imports the handler the template names and runs
the one SQS record. Prints one JSON line: the handler's response, the job's record and which files
the function's modules were loaded from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, sys, time
sys.path[:0] = json.loads(sys.argv[1])
import importlib
module, _, name = sys.argv[2].rpartition(".")
handler = getattr(importlib.import_module(module), name)

class Context:
    function_name = "cold-start"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    aws_request_id = "cold-start-request"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:cold-start"
    log_group_name = "/aws/lambda/cold-start"
    log_stream_name = "local"
    _deadline = time.monotonic() + 30
    def get_remaining_time_in_millis(self):
        return int((self._deadline - time.monotonic()) * 1000)

response = handler(json.loads(sys.stdin.read()), Context())
files = {n: getattr(m, "__file__", None) for n, m in sys.modules.items()}
print(json.dumps({"response": response, "files": {n: f for n, f in files.items() if f}}))
"""


def main() -> None:
    outdir, stack_name, job, payload, packages = sys.argv[1:6]
    outdir = str(Path(outdir).resolve())
    from moto.server import ThreadedMotoServer

    from lambdajobs.local.lambda_events import sqs_event
    from lambdajobs.local.provision import provision
    from lambdajobs.project import require_jobs_module
    from lambdajobs.runtime import aws
    from lambdajobs.runtime.config import StackConfig, using
    from lambdajobs.runtime.producer import enqueue
    from lambdajobs.runtime.records import get_status
    from lambdajobs.runtime.spec import load_jobs

    credentials = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    os.environ.update({**credentials, "AWS_DEFAULT_REGION": "us-east-1"})
    import logging

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server: no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        jobs = require_jobs_module()
        base = StackConfig(stack=stack_name, jobs=jobs, endpoint_url=endpoint, region="us-east-1")
        aws.reset_clients()
        provisioned = provision(load_jobs(jobs), stack=stack_name, config=base)
        config = provisioned.config(base)
        with using(config):
            job_id = enqueue(job, json.loads(payload), config=config)
            queue = provisioned.queues[job]
            got = config.client("sqs").receive_message(
                QueueUrl=queue.queue_url,
                MaxNumberOfMessages=1,
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                WaitTimeSeconds=1,
            )["Messages"]
        event = sqs_event(got, queue_arn=queue.queue_arn, region="us-east-1")

        # the function as the template declares it: its handler, its environment, its layers
        template = json.loads(Path(outdir, f"{stack_name}.template.json").read_text())
        resources = template["Resources"]
        [function] = [
            r["Properties"]
            for r in resources.values()
            if r["Type"] == "AWS::Lambda::Function"
            and r["Properties"].get("Environment", {}).get("Variables", {}).get("LAMBDAJOBS_JOB") == job
        ]
        asset = Path(outdir, f"asset.{function['Code']['S3Key'].removesuffix('.zip')}")
        path = [str(asset)]
        for layer in function.get("Layers", []):
            ref = layer.get("Ref", "")
            if resources.get(ref, {}).get("Type") == "AWS::Lambda::LayerVersion":  # the project's
                content = resources[ref]["Properties"]["Content"]["S3Key"].removesuffix(".zip")
                path.append(str(Path(outdir, f"asset.{content}", "python")))
            else:  # the public Powertools layer, and Lambda's boto3 after it
                path.append(packages)
        variables = {k: v for k, v in function["Environment"]["Variables"].items() if isinstance(v, str)}
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            **variables,
            **provisioned.environment(jobs),
            **credentials,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": endpoint,
            "PYTHONTZPATH": "",
        }
        child = subprocess.run(
            [sys.executable, "-I", "-S", "-c", CHILD, json.dumps(path), function["Handler"]],
            input=json.dumps(event),
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=asset,
        )
        if child.returncode != 0:
            print(json.dumps({"error": child.stderr[-3000:]}))
            sys.exit(1)
        ran = json.loads(child.stdout.strip().splitlines()[-1])
        status = get_status(job_id, config=config)
        print(
            json.dumps(
                {
                    "response": ran["response"],
                    "files": ran["files"],
                    "path": path,
                    "state": status.state,
                    "result": status.result,
                    "error": status.error,
                }
            )
        )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
