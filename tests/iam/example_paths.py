"""The IAM paths of a jobs package, derived from its job declarations and its jobs' code: each is a
(job, feature) pair that needs its own grants, and so its own IAM scenario (test_example_paths.py).

A feature comes from a `JobSpec` field (`FEATURE_FIELDS`) or from what a job's code uses
(`code_features`: what it reads of its context, a workflow it starts). Every other field of `JobSpec`
is in `NO_IAM_PATH`, with the reason it makes no AWS call of its own; a field added to `JobSpec`
later is in neither, and fails `test_every_jobspec_field_is_a_feature_or_has_no_iam_path`: classify
it, and give its features their scenarios.
"""

from __future__ import annotations

import dataclasses
import dis
import types
from collections.abc import Callable, Iterator
from typing import Any

from lambdajobs.runtime.spec import JobSpec

#: Every job: its worker takes it from its queue under the function's role, acquires and completes its
#: record, deletes the message (and retries, hands back, dead-letters on its own queues).
RUN = "run"

#: The features of a job's declaration, by `JobSpec` field: each names a path with grants of its own.
FEATURE_FIELDS: dict[str, Callable[[JobSpec], set[str]]] = {
    # SendMessage to every level of each target (stack.py `_wire`): one path per target; and
    # `enqueue(..., run_at=...)` of them: CreateSchedule, GetSchedule, PassRole of the one-time role
    "enqueues": lambda spec: (
        {f"enqueues {t}" for t in spec.enqueues} | ({"run_at"} if spec.enqueues else set())
    ),
    # one statement per resource (`_wire`): the bucket prefix, the job index
    "uses": lambda spec: {f"uses {resource}" for resource in spec.uses},
    # GetItem and UpdateItem of the limiter's item, and hand-backs to the job's queue while it waits
    "rate_limit": lambda spec: {"rate_limit"} if spec.rate_limit is not None else set(),
    # each level above the lowest has its own queue and DLQ (the lowest is the job's own: `run`)
    "priorities": lambda spec: {f"priority {level}" for level in spec.levels if level is not None},
    # the cron schedule's own execution role sends to the job's queue
    "schedule": lambda spec: {"schedule"} if spec.schedule is not None else set(),
    # GetItem and UpdateItem of the key's slots item (`lambdajobs#keyslots#<job>#<hash>`), and hand-backs
    # to the job's queue while its key is at its cap: grants every worker has (`EVERY_JOB`)
    "concurrency_key": lambda spec: {CONCURRENCY_KEY} if spec.concurrency_key is not None else set(),
    # BatchWriteItem of its search entries (`lambdajobs#sx#*` items only) at a job's first attempt
    "searchable": lambda spec: {"searchable"} if spec.searchable else set(),
    # what the job's code uses: `code_features`
    "func": lambda spec: code_features(spec.func),
}

#: Attributes of `JobContext` whose use makes a path of its own -> the feature.
CONTEXT_FEATURES = {
    # the stage before's results, read from its members' job records: BatchGetItem (a chain step)
    "parent_results": "ctx.parent_results",
    # the stage before's counts, from the message (no call), so the job runs only as a workflow member:
    # a chord's callback; its scenario is the workflow that sends it, under the continuer's role
    "workflow": "ctx.workflow",
    # durable jobs (issue 28), each an UpdateItem of the job's own record under the run's lock (its
    # checkpoint), and a continuation when the next step will not fit the invocation: a copy to the
    # job's own queue with DelaySeconds, then the record parked (UpdateItem)
    "step": "ctx.step",
    # a hand-back to the job's own queue with DelaySeconds up to 15 minutes; beyond, a one-time
    # schedule of its own (scheduler:CreateSchedule of `<job[:36]>-w*`, iam:PassRole of the one-time
    # schedule role to Scheduler), which Scheduler delivers as that role; then the record parked
    "sleep": "ctx.sleep",
    # parks the job as a sleep does, until the wait's timeout, with its message kept on its record for
    # `lambdajobs.signal()` to send (the signal's sender's grants: `SIGNALS_A_JOB`)
    "wait_for_signal": "ctx.wait_for_signal",
    # whether `lambdajobs.cancel()` asked the running job to stop: GetItem of its own record (a
    # projection of `cancel_requested`); stopping, its record settled `cancelled` (UpdateItem)
    "cancelled": "ctx.cancelled",
    "raise_if_cancelled": "ctx.cancelled",
}
#: A job's concurrency key (`JobSpec.concurrency_key`): the feature `FEATURE_FIELDS` derives.
CONCURRENCY_KEY = "concurrency_key"
#: Features of a call, not of a declaration: any job may be enqueued for a tenant (MessageGroupId, kept
#: by the worker's copies) or debounced (the producer's GetItem and UpdateItem of the key's item, the
#: worker's claim: GetItem and UpdateItem of the same item, and a superseded enqueue's record), and any job
#: or workflow cancelled (the operator's and producer's UpdateItem of records, DeleteSchedule of a
#: one-time schedule; the worker drops the message and settles the record). So each has its scenario
#: under every job's role (`EVERY_JOB` in test_example_paths.py), before a producer uses it.
CALL_FEATURES = ("tenant", "debounce", "cancel", "cancel_workflow")
#: Runtime functions whose call from a job's code is a path of its own -> the feature: a workflow of
#: the jobs it enqueues, started from a job (PutItem of the workflow's items, under a condition).
WORKFLOW_STARTS = ("chain", "chord", "group")
STARTS_WORKFLOW = "starts a workflow"
#: Runtime functions that send jobs: a job whose code calls one must declare `enqueues` (its role may
#: send only to the queues of the jobs it declares, and knows only their URLs).
ENQUEUES = ("enqueue", "enqueue_many", *WORKFLOW_STARTS)
#: Runtime functions that count or list jobs: a job whose code calls one must declare
#: uses=("job_stats",): cloudwatch:GetMetricData (count_finished with the job index off, the default),
#: and its role's only Query grant, on the index, when the stack turns the index on.
JOB_STATS = ("count_finished", "entered_at", "list_jobs")
#: `lambdajobs.signal()` from a job's code: UpdateItem of the signalled job's record (any worker) and
#: SendMessage of its wake-up to that job's queue, which a role may do only for the jobs it declares in
#: `enqueues` (and its own job): a job signals the jobs it enqueues.
SIGNALS = ("signal",)
SIGNALS_A_JOB = "signals a job"


#: `JobSpec` fields that make no AWS call of their own (a path of theirs is `run`'s), with the reason.
NO_IAM_PATH = {
    "name": "names the job's resources; every job has a `run` scenario",
    "payload_model": "validation, in the producer and the worker",
    "timeout_seconds": "the function's timeout and the queue's visibility timeout (template settings)",
    "max_attempts": "the redrive count; retries and dead letters go to the job's own queues (`run`)",
    "batch_size": "an event source setting",
    "max_batching_window_seconds": "an event source setting",
    "max_concurrency": "an event source setting",
    "memory_mb": "a function setting",
    "reserved_concurrency": "a function setting",
    "idempotency_key": "derives the job id from the payload: the same record calls as any job id",
    "backoff": "the retry delay: ChangeMessageVisibility on the job's own queue (`run`)",
    "pii_fields": "erased from logs and errors in the worker",
    "alarms": "CloudWatch alarms in the template; the runtime reads no metric",
    "priority_concurrency": "each level's event source setting (the levels: `priorities`)",
    "schedule_payload_json": "the cron schedule's input (its path: `schedule`)",
    "takes_context": "how the worker calls the function",
    "max_duration_seconds": "how long a durable job may run from its first start: checked in the worker "
    "against its record's times (its steps, sleeps and waits are `ctx.step`, `ctx.sleep` and "
    "`ctx.wait_for_signal`)",
    "record_mode": "the same calls on the job's record as `run` (GetItem, PutItem, UpdateItem); a light "
    "send_email runs under its function's role in test_workers.py",
    "buffer_logs": "which log lines the worker writes (to its own log group: the basic execution role)",
    "tracing": "no AWS call of lambdajobs' own: spans go to the exporter the function is given, and the "
    "trace context rides in message attributes of the sends `run` and `enqueues` already make",
}


@dataclasses.dataclass(frozen=True)
class CodeUse:
    """What a job function's code uses: every global and attribute name; the attributes it reads of
    anything but a module (`ctx.sleep`, not `time.sleep`); and the lambdajobs runtime functions among
    the globals it refers to (by their own name, whatever it imported them as)."""

    names: frozenset[str]
    runtime: frozenset[str]
    attributes: frozenset[str] = frozenset()


def code_use(func: Callable[..., Any]) -> CodeUse:
    """`func`'s `CodeUse`, with the code of the functions of its own package it calls, transitively
    (`make_thumbnails` reads `ctx.parent_results` in a helper). Bytecode, not source text: a name in
    a comment or a string does not count."""
    package = func.__module__.split(".", 1)[0]
    seen: set[Any] = set()
    names: set[str] = set()
    runtime: set[str] = set()
    attributes: set[str] = set()

    def codes(code: types.CodeType) -> Iterator[types.CodeType]:
        yield code
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                yield from codes(const)

    def visit(function: types.FunctionType) -> None:
        if function in seen:
            return
        seen.add(function)
        for code in codes(function.__code__):
            attributes.update(object_attributes(code, function.__globals__))
            names.update(code.co_names)
            for name in global_names(code):  # not an attribute that a global happens to share a name with
                used = function.__globals__.get(name)
                home = str(getattr(used, "__module__", "") or "")
                if isinstance(used, types.FunctionType) and home.split(".", 1)[0] == package:
                    visit(used)
                elif callable(used) and home.startswith("lambdajobs.runtime."):
                    runtime.add(str(getattr(used, "__name__", name)))

    if isinstance(func, types.FunctionType):
        visit(func)
    return CodeUse(frozenset(names), frozenset(runtime), frozenset(attributes))


def global_names(code: types.CodeType) -> set[str]:
    """The names `code` reads as globals (`payload.signal` is no call of `lambdajobs.signal`)."""
    return {str(i.argval) for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}


#: Instructions that read or write an attribute of the object on top of the stack.
_ATTRIBUTE_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD", "STORE_ATTR"})


def object_attributes(code: types.CodeType, module_globals: dict[str, Any]) -> set[str]:
    """The attribute names `code` reads or writes, but those of a module it names as a global
    (`time.sleep(1)` is no `ctx.sleep`)."""
    found: set[str] = set()
    previous: dis.Instruction | None = None
    for instruction in dis.get_instructions(code):
        if instruction.opname in _ATTRIBUTE_OPS:
            of_module = (
                previous is not None
                and previous.opname in ("LOAD_GLOBAL", "LOAD_NAME")
                and isinstance(module_globals.get(str(previous.argval)), types.ModuleType)
            )
            if not of_module:
                found.add(str(instruction.argval))
        if instruction.opname not in ("CACHE", "EXTENDED_ARG"):
            previous = instruction
    return found


def code_features(func: Callable[..., Any]) -> set[str]:
    """The features `func`'s code uses: `CONTEXT_FEATURES` (attributes it reads of its context, or
    of anything but a module), starting a workflow, signalling a job."""
    use = code_use(func)
    found = {feature for name, feature in CONTEXT_FEATURES.items() if name in use.attributes}
    found |= {STARTS_WORKFLOW} if use.runtime & set(WORKFLOW_STARTS) else set()
    return found | ({SIGNALS_A_JOB} if use.runtime & set(SIGNALS) else set())


def undeclared(spec: JobSpec) -> list[str]:
    """What `spec`'s code uses that its declaration does not grant: each is denied on AWS."""
    use, missing = code_use(spec.func), []
    if use.runtime & set(ENQUEUES) and not spec.enqueues:
        missing.append(f"it sends jobs ({sorted(use.runtime & set(ENQUEUES))}): declare enqueues=(...)")
    if use.runtime & set(SIGNALS) and not spec.enqueues:
        missing.append("it signals jobs (signal): declare the jobs it signals in enqueues=(...)")
    if use.runtime & set(JOB_STATS) and "job_stats" not in spec.uses:
        missing.append(f"it counts or lists jobs ({sorted(use.runtime & set(JOB_STATS))}): uses job_stats")
    if "bucket_name" in use.names and "bucket" not in spec.uses:
        missing.append("it reads the data bucket's name (ctx.config.bucket_name()): uses bucket")
    return missing


def features(spec: JobSpec) -> set[str]:
    """Every feature of one job: `run`, and what its declaration and code use."""
    found = {RUN}
    for derive in FEATURE_FIELDS.values():
        found |= derive(spec)
    return found


def declared_paths(specs: list[JobSpec]) -> set[tuple[str, str]]:
    """(job, feature) for every job of `specs` and every feature it uses."""
    return {(spec.name, feature) for spec in specs for feature in features(spec)}


def unclassified_fields() -> tuple[set[str], set[str]]:
    """(`JobSpec` fields neither a feature nor in `NO_IAM_PATH`, names classified that are no field)."""
    fields = {f.name for f in dataclasses.fields(JobSpec)}
    classified = set(FEATURE_FIELDS) | set(NO_IAM_PATH)
    return fields - classified, classified - fields
