"""lambdajobs: serverless background jobs on AWS (SQS + Lambda + DynamoDB), declared once in Python.

    from lambdajobs import job, cron, enqueue, get_status, JobContext, PermanentError

`__all__` is the API a job module, a producer or an operator's script calls: declaring jobs, sending
them, reading their status, workflows, and the stack's configuration. Every error is in
`lambdajobs.errors` (`PermanentError`, which jobs raise, is here too); the rest of the runtime
(`lambdajobs.runtime.*`: the registry, the worker, the job table) is internal.

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

    from lambdajobs.runtime import LAZY as _LAZY
    from lambdajobs.runtime import (
        TENANT_FIELD,
        JobCancelled,
        JobContext,
        JobState,
        PermanentError,
        StackConfig,
        bucket_prefix,
        job,
        using,
    )
finally:
    if _COLD_START:
        _gc.freeze()
        if _collecting:
            _gc.enable()

if TYPE_CHECKING:
    from lambdajobs.runtime.alarms import Alarms as Alarms
    from lambdajobs.runtime.backoff import Backoff as Backoff
    from lambdajobs.runtime.cancellation import CancelResult as CancelResult
    from lambdajobs.runtime.cancellation import cancel as cancel
    from lambdajobs.runtime.cancellation import cancel_workflow as cancel_workflow
    from lambdajobs.runtime.debounce import Debounce as Debounce
    from lambdajobs.runtime.declarations import cron as cron
    from lambdajobs.runtime.durable import SignalResult as SignalResult
    from lambdajobs.runtime.durable import signal as signal
    from lambdajobs.runtime.keyslots import ConcurrencyKey as ConcurrencyKey
    from lambdajobs.runtime.producer import enqueue as enqueue
    from lambdajobs.runtime.producer import enqueue_many as enqueue_many
    from lambdajobs.runtime.ratelimit import RateLimit as RateLimit
    from lambdajobs.runtime.records import JobStatus as JobStatus
    from lambdajobs.runtime.records import count_finished as count_finished
    from lambdajobs.runtime.records import get_status as get_status
    from lambdajobs.runtime.records import get_statuses as get_statuses
    from lambdajobs.runtime.records import wait_for as wait_for
    from lambdajobs.runtime.workflow import WorkflowStatus as WorkflowStatus
    from lambdajobs.runtime.workflow import chain as chain
    from lambdajobs.runtime.workflow import chord as chord
    from lambdajobs.runtime.workflow import get_workflow as get_workflow
    from lambdajobs.runtime.workflow import group as group
    from lambdajobs.runtime.workflow import sig as sig

#: The public API. Declaring jobs: job, cron, JobContext, PermanentError, Backoff, Alarms, RateLimit,
#: bucket_prefix. Sending them: enqueue, enqueue_many. Their status: get_status, get_statuses, wait_for,
#: count_finished, JobStatus, JobState. Workflows: sig, chain, group, chord, get_workflow,
#: WorkflowStatus. Durable jobs: signal, SignalResult. Flow control: cancel, cancel_workflow,
#: CancelResult, JobCancelled, ConcurrencyKey, Debounce. Which stack: StackConfig, using. Searchable
#: fields: TENANT_FIELD.
__all__ = [
    "TENANT_FIELD",
    "Alarms",
    "Backoff",
    "CancelResult",
    "ConcurrencyKey",
    "Debounce",
    "JobCancelled",
    "JobContext",
    "JobState",
    "JobStatus",
    "PermanentError",
    "RateLimit",
    "SignalResult",
    "StackConfig",
    "WorkflowStatus",
    "bucket_prefix",
    "cancel",
    "cancel_workflow",
    "chain",
    "chord",
    "count_finished",
    "cron",
    "enqueue",
    "enqueue_many",
    "get_status",
    "get_statuses",
    "get_workflow",
    "group",
    "job",
    "sig",
    "signal",
    "using",
    "wait_for",
]


#: Names `lambdajobs` exported before its public API was cut down to `__all__`: still importable from
#: here (code written against the earlier API keeps working), with a DeprecationWarning that says
#: where each one lives now.
_MOVED = {
    **dict.fromkeys(
        ("get_spec", "jobs_in", "load_jobs", "registered_jobs", "Job", "JobSpec"), "lambdajobs.runtime.spec"
    ),
    "current": "lambdajobs.runtime.config",
}


def __getattr__(name: str) -> object:
    # Alarms, Backoff, RateLimit, cron, enqueue, enqueue_many, the status readers, the workflow API:
    # loaded on first use.
    if name in _LAZY:
        import lambdajobs.runtime

        return getattr(lambdajobs.runtime, name)
    from lambdajobs.runtime import errors

    where = "lambdajobs.errors" if name in errors.__all__ else _MOVED.get(name)
    if where is None:
        raise AttributeError(f"module 'lambdajobs' has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(
        f"lambdajobs.{name} has moved: import it from {where} (lambdajobs exports only its public API)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(where), name)
