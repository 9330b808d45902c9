"""lambdajobs: serverless background jobs on AWS (SQS + Lambda + DynamoDB), declared once in Python.

    from lambdajobs import job, cron, enqueue, get_status, JobContext, PermanentError

This module ships inside every Lambda function, so it imports only `lambdajobs.runtime` (and the
producer and status readers only when first used). The parts that never ship live beside it:
`lambdajobs.cdk` (constructs), `lambdajobs.local` (the local stack), `lambdajobs.testing` (a harness
for your tests), `lambdajobs.cli` and `lambdajobs.ops` (operator tools).
"""

import gc as _gc
import os
from typing import TYPE_CHECKING

#: A worker function's cold start (settings.ENV_JOB is set): the collector is paused while the runtime
#: loads, and what it built is frozen after (lambdajobs.runtime.startup.init_phase, written out here
#: because that module cannot be imported before the runtime it belongs to).
_COLD_START = bool(os.environ.get("LAMBDAJOBS_JOB"))
_collecting = _gc.isenabled()
if _COLD_START:
    _gc.disable()
try:
    if _COLD_START:
        # Powertools' batch utility before pydantic: imported after it, it builds pydantic models of
        # every event source's records (Kafka, Kinesis, ...) that the worker never uses (about 18 ms).
        import aws_lambda_powertools.utilities.batch  # noqa: F401

    from lambdajobs.runtime import *  # noqa: F403  (the runtime's public API: its __all__)
    from lambdajobs.runtime import LAZY as _LAZY
    from lambdajobs.runtime import __all__ as _RUNTIME
finally:
    if _COLD_START:
        _gc.freeze()
        if _collecting:
            _gc.enable()

if TYPE_CHECKING:
    from lambdajobs.runtime.producer import enqueue as enqueue
    from lambdajobs.runtime.producer import enqueue_many as enqueue_many
    from lambdajobs.runtime.ratelimit import RateLimit as RateLimit
    from lambdajobs.runtime.records import JobStatus as JobStatus
    from lambdajobs.runtime.records import get_status as get_status
    from lambdajobs.runtime.records import wait_for as wait_for
    from lambdajobs.runtime.workflow import WorkflowStatus as WorkflowStatus
    from lambdajobs.runtime.workflow import chain as chain
    from lambdajobs.runtime.workflow import chord as chord
    from lambdajobs.runtime.workflow import get_workflow as get_workflow
    from lambdajobs.runtime.workflow import group as group
    from lambdajobs.runtime.workflow import sig as sig

__all__ = sorted([*_RUNTIME, *_LAZY])


def __getattr__(name: str) -> object:
    # enqueue, enqueue_many, get_status, wait_for, JobStatus, the workflow API: loaded on first use.
    import lambdajobs.runtime

    return getattr(lambdajobs.runtime, name)
