"""Fault injection on the project's own boto3 clients: a botocore `before-parameter-build` hook (it
sees the API parameters) makes chosen calls fail the way a throttle that outlasted the SDK's retries
does (botocore's retries never see it).

    faults = Faults(stack.client("dynamodb"))
    faults.fail(COMPLETE, when=is_completion, times=3)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

Params = dict[str, Any]


#: The calls that take a job's lock: a first attempt's PutItem (no record yet), else an UpdateItem.
ACQUIRE = ("PutItem", "UpdateItem")


def is_acquire(params: Params) -> bool:
    """The write that takes a job's lock (running): the PutItem of a record's first run, or the
    UpdateItem of a later one (fail both: `faults.fail(ACQUIRE, when=is_acquire)`)."""
    if "Item" in params:
        return params["Item"].get("state", {}).get("S") == "running"
    values = params.get("ExpressionAttributeValues", {})
    return ":retrying" in values and ":dead" in values and ":state" not in values


#: The calls that record a success: the PutItem of a record the run created, else an UpdateItem.
COMPLETE = ("PutItem", "UpdateItem")


def is_completion(params: Params) -> bool:
    """The write that records a success: the whole record's PutItem when the run created it, else
    an UpdateItem (fail both: `faults.fail(COMPLETE, when=is_completion)`)."""
    if "Item" in params:
        return params["Item"].get("state", {}).get("S") == "succeeded"
    return ":result" in params.get("ExpressionAttributeValues", {})


def is_release(params: Params) -> bool:
    """The UpdateItem that releases a failed run's lock (retrying or dead)."""
    return str(params.get("ConditionExpression", "")).startswith("#state = :running")


def is_reject(params: Params) -> bool:
    """The UpdateItem that marks dead a job that never ran (invalid payload, past its last attempt)."""
    values = params.get("ExpressionAttributeValues", {})
    return ":state" in values and not is_release(params)


def is_checkpoint(params: Params) -> bool:
    """The UpdateItem that checkpoints a durable job's step, sleep or signal wait (`step:<name>`)."""
    return "#step" in params.get("ExpressionAttributeNames", {})


def is_park(params: Params) -> bool:
    """The UpdateItem that parks a durable job (sleeping, waiting_signal) under its run's lock."""
    return ":wake" in params.get("ExpressionAttributeValues", {})


def carries_resume(params: Params) -> bool:
    """A SendMessage of the copy that continues a parked durable job."""
    return "lambdajobs.resume" in (params.get("MessageAttributes") or {})


def to_queue(url: str) -> Callable[[Params], bool]:
    return lambda params: params.get("QueueUrl") == url


@dataclass
class _Rule:
    operation: str | tuple[str, ...]
    when: Callable[[Params], bool]
    times: int
    code: str
    hits: int = 0
    #: What to raise instead of a ClientError with `code` (given the operation's name).
    error: Callable[[str], BaseException] | None = None


@dataclass
class Faults:
    """Failures injected into one client's calls; `hits` counts the calls that were failed."""

    client: Any
    rules: list[_Rule] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.client.meta.events.register("before-parameter-build", self._before_call)

    def fail(
        self,
        operation: str | tuple[str, ...],
        *,
        when: Callable[[Params], bool] = lambda _: True,
        times: int = 1,
        code: str = "ThrottlingException",
        error: Callable[[str], BaseException] | None = None,
    ) -> _Rule:
        rule = _Rule(operation, when, times, code, error=error)
        self.rules.append(rule)
        return rule

    def remove(self) -> None:
        self.client.meta.events.unregister("before-parameter-build", self._before_call)

    def _before_call(self, model: Any, params: Params, **_: Any) -> None:
        for rule in self.rules:
            names = (rule.operation,) if isinstance(rule.operation, str) else rule.operation
            if model.name in names and rule.hits < rule.times and rule.when(params):
                rule.hits += 1
                if rule.error is not None:
                    raise rule.error(model.name)
                raise ClientError({"Error": {"Code": rule.code, "Message": "injected fault"}}, model.name)
