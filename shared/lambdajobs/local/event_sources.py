"""The local stack's event source mappings, registered in its moto server's Lambda, so that the calls
an operator makes on AWS (`ListEventSourceMappings`, `UpdateEventSourceMapping(Enabled=...)`, through
`lambdajobs.queue_control`) work on the local stack unchanged, and the emulated mappings
(`lambdajobs.local.emulator`) stop polling while theirs is disabled.

Each function of the stack (a job's worker, the workflow continuer) is created in moto's Lambda
(CreateFunction needs no Docker: only invoking does, and nothing invokes it there) with a stub role
and a one-file package; each queue gets its mapping. moto's SQS would invoke a mapping's function
itself on every SendMessage (through Docker): the mapping is created disabled, taken off moto's queue
(the server runs in this process), then enabled. What polls is the emulator, which asks moto's Lambda
backend in this process, with no request, whether its mapping is enabled.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

from lambdajobs.runtime.config import StackConfig

#: The role the stub functions name (moto checks that it exists; nothing assumes it).
ROLE_NAME = "lambdajobs-local-functions"
#: The stub functions' runtime (what moto records; the emulator runs the real handler).
RUNTIME = "python3.12"
ASSUME_ROLE = {
    "Version": "2012-10-17",
    "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}
    ],
}


@dataclass(frozen=True)
class Source:
    """One queue read by one function, as the stack maps it."""

    key: str  # the key of its emulated mapping in `LocalStack.mappings`
    function_name: str
    handler: str
    queue_arn: str
    batch_size: int
    window_seconds: int
    max_concurrency: int


def _stub_package() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "lambdajobs local stack: the emulator runs this function's handler\n")
    return buffer.getvalue()


def register(
    config: StackConfig, sources: list[Source], *, paused: frozenset[str] = frozenset()
) -> dict[str, str]:
    """Create each source's function (once per name) and mapping in the server at `config`'s endpoint;
    the mapping's UUID by source key. Sources whose key is in `paused` stay disabled."""
    iam, lam = config.client("iam"), config.client("lambda")
    role = iam.create_role(RoleName=ROLE_NAME, AssumeRolePolicyDocument=json.dumps(ASSUME_ROLE))["Role"][
        "Arn"
    ]
    package = _stub_package()
    created: set[str] = set()
    uuids: dict[str, str] = {}
    for source in sources:
        if source.function_name not in created:
            lam.create_function(
                FunctionName=source.function_name,
                Runtime=RUNTIME,
                Role=role,
                Handler=source.handler,
                Code={"ZipFile": package},
            )
            created.add(source.function_name)
        made = lam.create_event_source_mapping(
            EventSourceArn=source.queue_arn,
            FunctionName=source.function_name,
            BatchSize=source.batch_size,
            MaximumBatchingWindowInSeconds=source.window_seconds,
            FunctionResponseTypes=["ReportBatchItemFailures"],
            ScalingConfig={"MaximumConcurrency": max(2, source.max_concurrency)},
            Enabled=False,
        )
        _detach_from_moto_sqs(source.queue_arn)
        if source.key not in paused:
            lam.update_event_source_mapping(UUID=made["UUID"], Enabled=True)
        uuids[source.key] = made["UUID"]
    return uuids


def _detach_from_moto_sqs(queue_arn: str) -> None:
    """moto's SQS invokes a queue's mappings on every send (through Docker): take them off the queue.
    The mapping stays in moto's Lambda, where the API lists and updates it."""
    from moto.sqs.models import sqs_backends

    _, _, _, region, account, name = queue_arn.split(":", 5)
    queue = sqs_backends[account][region].queues.get(name)
    if queue is not None:
        queue.lambda_event_source_mappings.clear()


def enabled_reader(queue_arn: str, uuid: str) -> Callable[[], bool]:
    """Whether the mapping `uuid` is enabled now, read from moto's Lambda backend in this process (no
    request: the emulator asks before every poll). A mapping deleted through the API reads as
    disabled."""
    from moto.awslambda.models import lambda_backends

    _, _, _, region, account, _ = queue_arn.split(":", 5)

    def enabled() -> bool:
        mapping = lambda_backends[account][region].get_event_source_mapping(uuid)
        return bool(mapping is not None and mapping.enabled)

    return enabled


def disabled_keys(config: StackConfig, uuids: dict[str, str]) -> list[str]:
    """The source keys whose mapping is disabled now (what a saved state keeps)."""
    lam = config.client("lambda")
    return [
        key for key, uuid in uuids.items() if lam.get_event_source_mapping(UUID=uuid)["State"] != "Enabled"
    ]
