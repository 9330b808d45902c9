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

Every injected fault is counted, and completion faults per job id, so a duplicate effect can be
attributed to the fault that caused it.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from botocore.exceptions import ClientError

CrashPoint = Literal["complete", "acquire"]
CRASH_POINTS: tuple[CrashPoint, ...] = ("complete", "acquire")
THROTTLE_CODES = {"dynamodb": "ThrottlingException", "sqs": "RequestThrottled"}


class ChaosCrash(BaseException):
    """An injected crash of the invocation. A BaseException: only the soak's handler catches it."""


class InvocationCrashed(Exception):
    """What the event source sees of a crashed invocation: the handler raised, the whole batch fails."""


def classify(service: str, operation: str, request: dict[str, Any]) -> str:
    """A name for a worker call, from its request: which lifecycle write, or which SQS call."""
    if service == "dynamodb" and operation == "UpdateItem":
        values = request.get("ExpressionAttributeValues") or {}
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
        return "dlq_send" if str(request.get("QueueUrl", "")).endswith("-dlq") else "send"
    return operation


def _job_id(request: dict[str, Any]) -> str | None:
    key = request.get("Key") or {}
    value = key.get("id", {}).get("S") if isinstance(key, dict) else None
    return str(value) if value is not None else None


@dataclass
class InvocationScope:
    context: Any
    plan: CrashPlan | None


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
    ) -> None:
        self.rng = random.Random(seed)
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

    # -- wiring -------------------------------------------------------------------------------------

    def install(self, clients: dict[str, Any]) -> None:
        """Register on each client ({"dynamodb": client, "sqs": client}): only its calls are hit."""
        for service, client in clients.items():
            event = f"before-call.{service}"

            def handler(model: Any, params: dict[str, Any], _service: str = service, **_: Any) -> None:
                self._before_call(_service, model.name, params)

            client.meta.events.register(event, handler, unique_id=f"chaos-{service}")
            self._installed.append((client, event, handler))

    def uninstall(self) -> None:
        for client, event, _ in self._installed:
            client.meta.events.unregister(event, unique_id=f"chaos-{event.rsplit('.', 1)[-1]}")
        self._installed.clear()

    @contextmanager
    def invocation(self, records: int, context: Any) -> Iterator[CrashPlan | None]:
        """One invocation of the handler on this thread: decides whether (and where) it crashes."""
        scope = InvocationScope(context, self._plan(records) if self.enabled else None)
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

    def _before_call(self, service: str, operation: str, params: dict[str, Any]) -> None:
        body = params.get("body") or b"{}"
        request = json.loads(body) if isinstance(body, bytes | str) and body else {}
        kind = classify(service, operation, request)
        job_id = _job_id(request)
        scope: InvocationScope | None = getattr(self._local, "scope", None)
        with self._lock:
            self.counts.calls[f"{service}.{kind}"] += 1
            if kind == "complete" and job_id and scope and scope.context.get_remaining_time_in_millis() <= 0:
                self.counts.completion_overruns[job_id] += 1  # noted even with the faults off
            if not self.enabled:
                return
            if scope is not None and scope.plan is not None and scope.plan.point == kind:
                scope.plan.seen += 1
                if scope.plan.seen == scope.plan.at:
                    self.counts.crashes[kind] += 1
                    if kind == "complete" and job_id:
                        self.counts.completion_crashes[job_id] += 1
                    scope.plan = None  # one crash per invocation
                    raise ChaosCrash(f"injected crash at the {kind} write of {job_id or 'a record'}")
            throttled = self.counts.throttled_dynamodb if service == "dynamodb" else self.counts.throttled_sqs
            calls = sum(n for name, n in self.counts.calls.items() if name.startswith(f"{service}."))
            forced = not throttled and calls >= self.force_throttle_after
            if not forced and self.rng.random() >= self.throttle_rates.get(service, 0.0):
                return
            throttled[kind] += 1
            self.counts.throttles_forced += forced
            if kind == "complete" and job_id:
                self.counts.completion_throttles[job_id] += 1
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
