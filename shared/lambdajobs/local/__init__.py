"""The local stack: lambdajobs on an embedded moto server, no Docker and no AWS account.

`LocalStack` (embedded server, provisioning, workers, scheduler), `EventSourceMapping` (Lambda's SQS
event source, emulated), `lambdajobs.local.functions` (Lambda's execution environments: each function
in worker processes of its own), `LocalScheduler` (EventBridge Scheduler, emulated). Never shipped to
Lambda.
"""

from lambdajobs.local.emulator import BatchOutcome, EventSourceMapping, poll_once
from lambdajobs.local.provision import Provisioned, provision
from lambdajobs.local.scheduler import LocalScheduler
from lambdajobs.local.stack import LocalStack

__all__ = [
    "BatchOutcome",
    "EventSourceMapping",
    "LocalScheduler",
    "LocalStack",
    "Provisioned",
    "poll_once",
    "provision",
]
