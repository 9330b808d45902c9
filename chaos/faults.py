"""Faults injected into the worker's own AWS calls: throttles that outlasted the SDK's retries, and
crashes of the whole invocation at a chosen point.

Both are botocore `before-call` handlers registered on the clients the worker uses (the stack
configuration's cached DynamoDB and SQS clients; the soak gives its producer, its readers and the
event source emulator clients of their own, so only the worker's calls are hit). A handler that raises
in `before-call` fails the call before any HTTP request, so botocore's retries never see it.

- A throttle raises `ClientError` (`ThrottlingException` for DynamoDB, `RequestThrottled` for SQS) on
  a seeded fraction of calls: acquire, completion, release and reject writes, DLQ sends, visibility
  changes, whatever the worker calls.
- A crash raises `ChaosCrash`, a `BaseException`: Powertools' idempotency and BatchProcessor catch
  `Exception`, so it escapes the worker like a Lambda runtime dying; the soak's handler turns it into
  a whole-batch failure. A crash happens at the completion write of the n-th record of the batch
  (the job's effect is done, its record is not: "effect done, crash before completion") or before the
  n-th record's acquire (a record never started).

Workflows (`lambdajobs.runtime.workflow`, `continuer`) are hit the same way: their calls are named
(`classify`) and throttled like any other: a member's counted write (TransactWriteItems: half of its
throttles are a `TransactionCanceledException` for a `TransactionConflict` instead), its read of the
workflow's item and its notice to the workflow queue, the continuer's reads (the workflow's item, the
later stages' payloads), claim, next stage's SendMessageBatch and its stage mark. And they have crash
points of their own, decided per call (`workflow_crash_rate`, the first of each point always, at most
`workflow_crash_max` a seed), each at most once per job id, stage or notice message, so a message never
spends its spare receive on them. The two after a write are `after-call` handlers: they fire once the
call answered, and only when it succeeded (the write landed):

- `counted`: after a member's counted success landed (the TransactWriteItems answered), before its
  check and notice: the message comes back, the member is a duplicate that must notice again;
- `notice`: at the member's notice to the workflow queue (the stage is complete, the notice not sent);
- `claimed`: after the continuer claimed a stage, before it sent the next one;
- `stage_sent`: after the continuer sent the next stage (or decided the end), before it marked the
  stage advanced: the notice comes back and sends the stage again, to be deduplicated by job id.
  Besides the random ones, always once for each workflow in `crash_after_sending` (its stage 0).

Step jobs (`chaos.steps`: durable, `ctx.step`) have crash points of their own, planned per job
(`PlannedJob.step_faults`, once each), around a step's checkpoint (an UpdateItem naming `step:<name>`)
and around the park between two steps (the UpdateItem that parks the record, its continuing copy sent
just before):

- `before_checkpoint`: the invocation crashes as step k's checkpoint write starts (the step's effect
  is done, its checkpoint not: the step runs again, once, as documented);
- `after_checkpoint`: it crashes once step k's checkpoint landed (the step must never run again);
- `checkpoint_fails`: step k's checkpoint write is throttled on every try the worker makes
  (`lambdajobs.runtime.aws.TRIES`): the attempt fails, and the step runs again in the next;
- `before_park`, `after_park`, `park_fails`: the same around the job's first park once k of its
  steps are checkpointed (a job running one step per invocation parks after each step but its last;
  the soak plans k = 1, its first park, whichever step it follows).

Every write of a checkpoint, and every park that landed, is told to the step ledger (`observer`) with
its outcome (landed, crashed before or after, throttled, refused), whether faults are on or not: what
the soak judges a step's runs against.

Every injected fault is counted, and completion faults per job id, so a duplicate effect can be
attributed to the fault that caused it.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from botocore.exceptions import ClientError

from lambdajobs.runtime.aws import TRIES as AWS_TRIES

CrashPoint = Literal["complete", "acquire"]
CRASH_POINTS: tuple[CrashPoint, ...] = ("complete", "acquire")
THROTTLE_CODES = {"dynamodb": "ThrottlingException", "sqs": "RequestThrottled"}
#: The workflow's crash points: (call kind, before or after the call) -> point.
WORKFLOW_CRASHES: dict[tuple[str, str], str] = {
    ("counted_complete", "after"): "counted",
    ("wf_notice", "before"): "notice",
    ("wf_claim", "after"): "claimed",
    ("wf_finish", "before"): "stage_sent",
}
#: Completion writes: a plain job's UpdateItem, a workflow member's counted TransactWriteItems.
COMPLETE_KINDS = ("complete", "counted_complete")
WORKFLOW_KEY_PREFIX = "lambdajobs#wf#"  # lambdajobs.runtime.settings.WORKFLOW_ID_PREFIX
KEYSLOTS_PREFIX = "lambdajobs#keyslots#"  # lambdajobs.runtime.keyslots.ITEM_PREFIX
DEBOUNCE_PREFIX = "lambdajobs#debounce#"  # lambdajobs.runtime.debounce.ITEM_PREFIX
WORKFLOW_QUEUE_SUFFIX = "--workflows"  # lambdajobs.runtime.settings.workflow_queue_name
STEP_PREFIX = "step:"  # lambdajobs.runtime.job_record.STEP_PREFIX
#: A planned `checkpoint_fails` / `park_fails` throttles this many calls in a row: every try of the
#: worker's (`lambdajobs.runtime.aws.TRIES`), so the write fails.
STEP_WRITE_TRIES = AWS_TRIES


class StepObserver(Protocol):
    """What the injector tells of a step job's writes (`chaos.steps.StepLedger`)."""

    def note_checkpoint(self, job_id: str, name: str, outcome: str) -> None: ...

    def note_park(self, job_id: str) -> None: ...


class ChaosCrash(BaseException):
    """An injected crash of the invocation. A BaseException: only the soak's handler catches it."""


class InvocationCrashed(Exception):
    """What the event source sees of a crashed invocation: the handler raised, the whole batch fails."""


def classify(service: str, operation: str, request: dict[str, Any]) -> str:
    """A name for a worker call, from its request: which lifecycle write, or which SQS call."""
    flow = _flow_call(service, operation, request)
    if flow is not None:
        return flow
    if service == "dynamodb" and operation == "TransactWriteItems":
        first = _first_update(request)
        values = first.get("ExpressionAttributeValues") or {}
        if ":result" in values:
            return "counted_complete"  # a workflow member's success, counted with its record
        return "counted_dead" if ":state" in values else operation
    if service == "dynamodb" and operation == "GetItem" and _workflow_item(request):
        if str(_job_id(request)).endswith("#later"):
            return "wf_later"  # the continuer's read of the later stages' payloads
        return "wf_check" if request.get("ProjectionExpression") else "wf_read"
    if service == "dynamodb" and operation == "PutItem" and not _workflow_item(request):
        # a first attempt's record, written only where there is none; or that record's success,
        # written whole while it holds the run's lock
        state = (request.get("Item") or {}).get("state", {}).get("S")
        return "complete" if state == "succeeded" else "acquire"
    if service == "dynamodb" and operation == "UpdateItem":
        values = request.get("ExpressionAttributeValues") or {}
        if _workflow_item(request):
            return "wf_claim" if ":token" in values else "wf_finish"
        if ":step" in values:
            return "checkpoint"  # a durable job's step done (lifecycle.checkpoint)
        if ":wake" in values:
            return "park"  # a durable job parks between invocations (lifecycle.suspend)
        if ":result" in values:
            return "complete"
        if ":until" in values:
            return "wait"
        if ":retrying" in values:
            return "acquire"
        if ":state" in values:
            releasing = str(request.get("ConditionExpression", "")).startswith("#state = :running")
            return "release" if releasing else "reject"
        if ":p" in values:
            return "progress"
        return "update_other"
    if service == "sqs" and operation == "SendMessage":
        url = str(request.get("QueueUrl", ""))
        if url.endswith(WORKFLOW_QUEUE_SUFFIX):
            return "wf_notice"
        return "dlq_send" if url.endswith("-dlq") else "send"
    if service == "sqs" and operation == "SendMessageBatch":
        return "stage_send"  # the continuer's next stage (the worker sends no batches)
    return operation


def _flow_call(service: str, operation: str, request: dict[str, Any]) -> str | None:
    """Flow control's calls: a key's slot (`keyslot_take`, `_release`, `_clear` of an expired entry,
    `_read`, `_create`), a debounced enqueue's claim (`debounce_read`, `debounce_claim`), the records of
    a superseded enqueue and of a cancelled job (`supersede`, `cancelled`), a running job's read of its
    cancel (`cancel_check`); None for any other call."""
    if service != "dynamodb":
        return None
    item = str(_job_id(request) or "")
    values = request.get("ExpressionAttributeValues") or {}
    if item.startswith(KEYSLOTS_PREFIX):
        if operation == "GetItem":
            return "keyslot_read"
        if ":cap" in values:
            return "keyslot_take"
        if ":empty" in values:
            return "keyslot_create"
        return "keyslot_clear" if ":deadline" in values else "keyslot_release"
    if item.startswith(DEBOUNCE_PREFIX):
        return "debounce_claim" if operation == "UpdateItem" else "debounce_read"
    if operation == "UpdateItem" and ":superseded" in values:
        return "supersede"
    if operation == "UpdateItem" and ":cancelled" in values:
        return "cancelled"
    if operation == "GetItem" and request.get("ProjectionExpression") == "cancel_requested":
        return "cancel_check"
    return None


def _step_of(request: dict[str, Any]) -> str:
    """The step a checkpoint write is for (its attribute `step:<name>`)."""
    names = request.get("ExpressionAttributeNames") or {}
    return str(names.get("#step", "")).removeprefix(STEP_PREFIX)


def _first_update(request: dict[str, Any]) -> dict[str, Any]:
    items = request.get("TransactItems") or [{}]
    update = items[0].get("Update") if isinstance(items[0], dict) else None
    return update if isinstance(update, dict) else {}


def _workflow_item(request: dict[str, Any]) -> bool:
    return str(_job_id(request) or "").startswith(WORKFLOW_KEY_PREFIX)


def _job_id(request: dict[str, Any]) -> str | None:
    # an UpdateItem's key, a transaction's first update's, or a PutItem's item (a first attempt's
    # record, or its success written whole)
    key = request.get("Key") or _first_update(request).get("Key") or request.get("Item") or {}
    value = key.get("id", {}).get("S") if isinstance(key, dict) else None
    return str(value) if value is not None else None


def _crash_key(point: str, request: dict[str, Any], job_id: str | None, scope: InvocationScope) -> str:
    """What a workflow crash point is limited by: once per job id (a member's count), per stage (its
    notice), per notice message (the continuer: its claim token, kept for its stage mark)."""
    if point == "counted":
        return f"job:{job_id}"
    if point == "notice":
        try:
            notice = json.loads(str(request.get("MessageBody") or "{}"))
        except ValueError:
            notice = {}
        return f"stage:{notice.get('workflow')}:{notice.get('stage')}"
    if point == "claimed":
        token = (request.get("ExpressionAttributeValues") or {}).get(":token", {}).get("S")
        scope.token = str(token)
    return f"notice:{scope.token}"


@dataclass
class InvocationScope:
    context: Any
    plan: CrashPlan | None
    #: The continuer's claim token (its notice's message id), once it claimed a stage.
    token: str | None = None
    #: The call in flight on this thread (its kind, job id, request), for the after-call hook.
    call: tuple[str, str | None, dict[str, Any]] | None = None
    #: Stop the invocation at its first call after its deadline, as Lambda would have (`ChaosCrash`).
    deadline: bool = False


@dataclass
class CrashPlan:
    point: CrashPoint
    #: Crash at the n-th call of that kind in the invocation (1-based).
    at: int
    forced: bool = False
    seen: int = 0


@dataclass
class FaultCounts:
    invocations: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    throttled_dynamodb: Counter[str] = field(default_factory=Counter)
    throttled_sqs: Counter[str] = field(default_factory=Counter)
    crashes: Counter[str] = field(default_factory=Counter)
    crashes_planned: int = 0
    crashes_forced: int = 0
    throttles_forced: int = 0
    #: Per job id: completion writes crashed (effect done, record not completed) / throttled.
    completion_crashes: Counter[str] = field(default_factory=Counter)
    completion_throttles: Counter[str] = field(default_factory=Counter)
    #: Per job id: completion writes made after the invocation's deadline. Lambda would have killed
    #: the invocation first (the emulator only fails the batch afterwards): a crash before completion.
    completion_overruns: Counter[str] = field(default_factory=Counter)
    #: Throttles of a member's counted write injected as a TransactionCanceledException
    #: (TransactionConflict) rather than a ThrottlingException.
    transaction_conflicts: int = 0
    #: The continuer's invocations (not in `invocations`: the job workers' crash plans count those).
    continuer_invocations: int = 0
    #: The workflow crashes in order: "<point> <key>" (a job id, a stage, a notice's message id).
    workflow_crashes: list[str] = field(default_factory=list)
    #: Step jobs: the planned faults that happened (`STEP_FAULTS`: crashes, and throttled writes each
    #: counted once per planned fault), the throttles those made, and in order "<point> <job> <k>".
    step_faults: Counter[str] = field(default_factory=Counter)
    #: Invocations stopped at a call after their deadline (`InvocationScope.deadline`), by the call.
    deadline_stops: Counter[str] = field(default_factory=Counter)
    step_throttles: int = 0
    step_fault_log: list[str] = field(default_factory=list)


class FaultInjector:
    """Throttles and crashes on the worker's clients, from a seeded random stream.

    Floors, so that short runs see every fault: `force_crash_after`: once that many invocations ran
    and no crash at a point happened yet, the next invocation crashes at that point's first call;
    `force_throttle_after`: once the worker made that many calls to a service and none was throttled,
    the next one is.
    """

    def __init__(
        self,
        *,
        seed: int,
        crash_rate: float,
        throttle_rates: dict[str, float],
        force_crash_after: dict[CrashPoint, int] | None = None,
        force_throttle_after: int = 25,
        workflow_crash_rate: float = 0.0,
        workflow_crash_max: int = 4,
        crash_after_sending: frozenset[str] = frozenset(),
        step_faults: dict[str, tuple[tuple[str, int], ...]] | None = None,
        observer: StepObserver | None = None,
    ) -> None:
        self.rng = random.Random(seed)
        self.workflow_rng = random.Random(seed * 7919 + 1)  # the bulk's fault stream stays as it was
        self.workflow_crash_rate, self.workflow_crash_max = workflow_crash_rate, workflow_crash_max
        self._crashed: set[str] = set()
        #: Workflow ids whose continuer crashes once after sending stage 1, before marking stage 0.
        self.crash_after_sending = set(crash_after_sending)
        self.crash_rate = crash_rate
        self.throttle_rates = dict(throttle_rates)
        self.force_crash_after = force_crash_after or {"complete": 4, "acquire": 8}
        self.force_throttle_after = force_throttle_after
        self.enabled = True
        self.counts = FaultCounts()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._installed: list[tuple[Any, str, Any]] = []
        self._last_forced: dict[CrashPoint, int] = {}
        #: Step jobs: per job id, its planned faults still to happen ([point, k, throttles left]), the
        #: steps whose checkpoint landed, and who is told of its writes.
        self._step_plan: dict[str, list[list[Any]]] = {
            job_id: [[point, k, STEP_WRITE_TRIES] for point, k in faults]
            for job_id, faults in (step_faults or {}).items()
        }
        self._steps_landed: dict[str, set[str]] = {}
        self.observer = observer

    # -- wiring -------------------------------------------------------------------------------------

    def install(self, clients: dict[str, Any]) -> None:
        """Register on each client ({"dynamodb": client, "sqs": client}): only its calls are hit."""
        for service, client in clients.items():
            event = f"before-call.{service}"

            def handler(
                model: Any, params: dict[str, Any], _service: str = service, _client: Any = client, **_: Any
            ) -> None:
                self._before_call(_service, model.name, params, _client)

            def after(http_response: Any, _service: str = service, **_: Any) -> None:
                self._after_call(_service, int(getattr(http_response, "status_code", 0) or 0))

            client.meta.events.register(event, handler, unique_id=f"chaos-{service}")
            client.meta.events.register(f"after-call.{service}", after, unique_id=f"chaos-after-{service}")
            self._installed.append((client, event, handler))

    def uninstall(self) -> None:
        for client, event, _ in self._installed:
            service = event.rsplit(".", 1)[-1]
            client.meta.events.unregister(event, unique_id=f"chaos-{service}")
            client.meta.events.unregister(f"after-call.{service}", unique_id=f"chaos-after-{service}")
        self._installed.clear()

    @contextmanager
    def invocation(
        self, records: int, context: Any, *, continuer: bool = False, deadline: bool = False
    ) -> Iterator[CrashPlan | None]:
        """One invocation of the handler on this thread: decides whether (and where) it crashes. The
        continuer's invocations get no crash plan: only the workflow's own crash points hit them.
        `deadline`: the invocation is stopped at its first worker call after its deadline (the step
        jobs': Lambda would have stopped it there, the emulator cannot; a run going on past its lock's
        expiry would meet the run that took its job over)."""
        if continuer:
            with self._lock:
                self.counts.continuer_invocations += 1
        plan = self._plan(records) if self.enabled and not continuer else None
        scope = InvocationScope(context, plan, deadline=deadline)
        self._local.scope = scope
        try:
            yield scope.plan
        finally:
            self._local.scope = None

    def _plan(self, records: int) -> CrashPlan | None:
        with self._lock:
            self.counts.invocations += 1
            for point in CRASH_POINTS:
                last = self._last_forced.get(point)
                if (
                    self.counts.crashes[point] == 0
                    and self.counts.invocations >= self.force_crash_after[point]
                    and (last is None or self.counts.invocations - last >= 3)  # one at a time
                    and records > 0
                ):
                    self._last_forced[point] = self.counts.invocations
                    self.counts.crashes_forced += 1
                    return CrashPlan(point=point, at=1, forced=True)
            if self.rng.random() >= self.crash_rate:
                return None
            self.counts.crashes_planned += 1
            return CrashPlan(point=self.rng.choice(CRASH_POINTS), at=self.rng.randint(1, max(1, records)))

    # -- the hook -----------------------------------------------------------------------------------

    def _before_call(self, service: str, operation: str, params: dict[str, Any], client: Any = None) -> None:
        body = params.get("body") or b"{}"
        request = json.loads(body) if isinstance(body, bytes | str) and body else {}
        kind = classify(service, operation, request)
        job_id = _job_id(request)
        scope: InvocationScope | None = getattr(self._local, "scope", None)
        if scope is not None:
            scope.call = (kind, job_id, request)
        with self._lock:
            self.counts.calls[f"{service}.{kind}"] += 1
            completion = kind in COMPLETE_KINDS
            if completion and job_id and scope and scope.context.get_remaining_time_in_millis() <= 0:
                self.counts.completion_overruns[job_id] += 1  # noted even with the faults off
            if scope is not None and scope.deadline and scope.context.get_remaining_time_in_millis() <= 0:
                self.counts.deadline_stops[kind] += 1  # whether the faults are on or not: Lambda's timeout
                if kind == "checkpoint" and job_id:  # the step ran; its checkpoint write never started
                    self._note_checkpoint(job_id, request, "timed_out")
                raise ChaosCrash(f"past the invocation's deadline at the {kind} call of {job_id}: stopped")
            if not self.enabled:
                return
            if kind in ("checkpoint", "park") and job_id:
                self._step_fault(kind, "before", job_id, request)
            point = "complete" if completion else kind
            if scope is not None and scope.plan is not None and scope.plan.point == point:
                scope.plan.seen += 1
                if scope.plan.seen == scope.plan.at:
                    self.counts.crashes[point] += 1
                    if completion and job_id:
                        self.counts.completion_crashes[job_id] += 1
                    scope.plan = None  # one crash per invocation
                    raise ChaosCrash(f"injected crash at the {kind} write of {job_id or 'a record'}")
            self._workflow_crash(kind, "before", job_id, request, scope)
            throttled = self.counts.throttled_dynamodb if service == "dynamodb" else self.counts.throttled_sqs
            calls = sum(n for name, n in self.counts.calls.items() if name.startswith(f"{service}."))
            forced = not throttled and calls >= self.force_throttle_after
            # a workflow member's first counted write meets a transaction conflict whatever the dice say:
            # a quick soak makes few counted writes, and each fault must be seen (it once saw none)
            counted = kind.startswith("counted_") and client is not None
            first_conflict = counted and not self.counts.transaction_conflicts
            rate = self.throttle_rates.get(service, 0.0)
            if not forced and not first_conflict and self.rng.random() >= rate:
                return
            throttled[kind] += 1
            self.counts.throttles_forced += forced
            if kind == "checkpoint" and job_id:
                self._note_checkpoint(job_id, request, "throttled")
            if completion and job_id:
                self.counts.completion_throttles[job_id] += 1
            conflict = first_conflict or (counted and self.rng.random() < 0.5)
            self.counts.transaction_conflicts += conflict
        if conflict:  # what DynamoDB answers when another transaction holds the workflow's item
            raise client.exceptions.TransactionCanceledException(
                {
                    "Error": {
                        "Code": "TransactionCanceledException",
                        "Message": "Transaction cancelled, please refer cancellation reasons for "
                        "specific reasons [None, TransactionConflict] (injected)",
                    },
                    "CancellationReasons": [
                        {"Code": "None"},
                        {"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"},
                    ],
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                },
                operation,
            )
        raise ClientError(
            {
                "Error": {
                    "Code": THROTTLE_CODES[service],
                    "Message": "injected throttle: it outlasted the SDK's retries",
                },
                "ResponseMetadata": {"HTTPStatusCode": 400},
            },
            operation,
        )

    def _after_call(self, service: str, status: int) -> None:
        """After a call answered: the workflow's and step jobs' crash points that follow a write that
        landed; a step job's checkpoint and park writes told to the observer."""
        scope: InvocationScope | None = getattr(self._local, "scope", None)
        if scope is None or scope.call is None:
            return
        kind, job_id, request = scope.call
        scope.call = None
        with self._lock:
            if kind in ("checkpoint", "park") and job_id:
                self._step_written(kind, job_id, request, landed=status < 300)
            if status >= 300:  # the write did not land (a condition failed, say): nothing to crash after
                return
            if self.enabled:
                self._workflow_crash(kind, "after", job_id, request, scope)

    # -- step jobs (under the lock) -----------------------------------------------------------------

    def _note_checkpoint(self, job_id: str, request: dict[str, Any], outcome: str) -> None:
        if self.observer is not None:
            self.observer.note_checkpoint(job_id, _step_of(request), outcome)

    def _step_written(self, kind: str, job_id: str, request: dict[str, Any], *, landed: bool) -> None:
        """A checkpoint or park write answered: tell the observer, then crash if one is planned after it."""
        if kind == "checkpoint":
            if not landed:
                self._note_checkpoint(job_id, request, "refused")
                return
            self._steps_landed.setdefault(job_id, set()).add(_step_of(request))
            crash = self.enabled and self._step_fault(kind, "after", job_id, request, check_only=True)
            self._note_checkpoint(job_id, request, "crashed_after" if crash else "landed")
        elif landed and self.observer is not None:
            self.observer.note_park(job_id)
        if landed and self.enabled:
            self._step_fault(kind, "after", job_id, request)

    def _step_fault(
        self, kind: str, when: str, job_id: str, request: dict[str, Any], *, check_only: bool = False
    ) -> bool:
        """The planned fault of a step job at this write, if any: a crash (`ChaosCrash`) before or
        after it, or a throttle of it (`ClientError`, `STEP_WRITE_TRIES` calls in a row). With
        `check_only`, whether one is due, without acting."""
        if not self.enabled:
            return False
        for fault in self._step_plan.get(job_id, []):
            point, k, left = fault
            moment, _, target = point.partition("_")  # before_checkpoint, after_park ...
            if point.endswith("_fails"):  # checkpoint_fails, park_fails: before the call
                target, moment = point.removesuffix("_fails"), "before"
            if target != kind or moment != when:
                continue
            if kind == "checkpoint" and _step_of(request) != f"step-{k}":
                continue
            if kind == "park" and len(self._steps_landed.get(job_id, ())) < k:
                continue  # the first park once k steps are done (a crash may have moved the parks)
            if check_only:
                return not point.endswith("_fails")
            if point.endswith("_fails"):
                if left == STEP_WRITE_TRIES:
                    self.counts.step_faults[point] += 1
                    self.counts.step_fault_log.append(f"{point} {job_id} {k}")
                fault[2] -= 1
                if fault[2] <= 0:
                    self._step_plan[job_id].remove(fault)
                self.counts.step_throttles += 1
                if kind == "checkpoint":
                    self._note_checkpoint(job_id, request, "throttled")
                raise ClientError(
                    {
                        "Error": {
                            "Code": THROTTLE_CODES["dynamodb"],
                            "Message": f"injected throttle ({point})",
                        },
                        "ResponseMetadata": {"HTTPStatusCode": 400},
                    },
                    "UpdateItem",
                )
            self._step_plan[job_id].remove(fault)
            self.counts.step_faults[point] += 1
            self.counts.step_fault_log.append(f"{point} {job_id} {k}")
            if kind == "checkpoint" and when == "before":
                self._note_checkpoint(job_id, request, "crashed_before")
            raise ChaosCrash(f"injected crash {when} the {kind} write of {job_id} ({point}, step {k})")
        return False

    def _workflow_crash(
        self, kind: str, when: str, job_id: str | None, request: dict[str, Any], scope: InvocationScope | None
    ) -> None:
        """A workflow crash point (`WORKFLOW_CRASHES`), under the lock: crash at the first call of each
        point, then at `workflow_crash_rate` of them, at most once per key (`_crash_key`) and at most
        `workflow_crash_max` times a seed (a crashed batch of members comes back 12 s later, all of
        them: more would only lengthen the soak's tail)."""
        point = WORKFLOW_CRASHES.get((kind, when))
        if point is None or scope is None:
            return
        key = _crash_key(point, request, job_id, scope)
        wid = str(job_id or "").removeprefix(WORKFLOW_KEY_PREFIX)
        update = str(request.get("UpdateExpression", ""))
        if point == "stage_sent" and wid in self.crash_after_sending and "advanced_0 =" in update:
            self.crash_after_sending.discard(wid)  # the planned crash: whatever the rate and the cap
            self._crashed.add(key)
            self.counts.crashes[point] += 1
            self.counts.workflow_crashes.append(f"{time.strftime('%H:%M:%S')} {point} {wid} (planned)")
            raise ChaosCrash(f"injected crash before marking stage 0 of {wid} advanced (planned)")
        if key in self._crashed or self.counts.crashes[point] >= self.workflow_crash_max:
            return
        if self.counts.crashes[point] and self.workflow_rng.random() >= self.workflow_crash_rate:
            return
        self._crashed.add(key)
        self.counts.crashes[point] += 1
        self.counts.workflow_crashes.append(f"{time.strftime('%H:%M:%S')} {point} {key}")
        raise ChaosCrash(f"injected crash {when} the {kind} call ({point}, {job_id or key})")
