"""Atomic DynamoDB and SQS requests on moto, for the local stack and the test harness.

Why: moto is not atomic under threads. A conditional `PutItem`/`UpdateItem`/`DeleteItem` reads the
item, evaluates the condition, then writes, with no lock in between; `ReceiveMessage` checks that a
message is visible, then marks it received; `DeleteMessage` rebuilds the queue's message list. The
embedded server (`moto.server.ThreadedMotoServer`) answers every request on its own thread, and
in-process moto (`mock_aws`) runs each request on the calling thread, so with concurrent callers two
deliveries of one job id could both pass `attribute_not_exists(id)` and both run the job (issue 11:
up to 4 runs of one id on `lambdajobs dev`), and a message could be received twice. AWS applies each
request atomically; with this installed, moto does too.

How: `install()` wraps moto's request handler of each service (`DynamoHandler.call_action`,
`SQSResponse.call_action`) so that a whole request runs under that service's lock: the read, the
condition check and the write of one request; `ReturnValues` read by the response layer; the
serialization of the live item. (Under that lock a cancelled TransactWriteItems is rolled back item
by item, not from a copy of the whole table: `_rolled_back_by_item`; and SQS reads the clock
cheaply: `_epoch_ms`.) One lock per service (no moto
request of one service calls the other, so the two locks never nest). The lock is re-entrant and is
put down while `ReceiveMessage` long-polls (moto waits in `Queue.wait_for_messages`, called from
inside the request), so a long poll never blocks other calls; the receive loop checks the queue
again after each wait, under the lock.

Both `LocalStack` (the embedded server) and `TestStack` (in-process moto) install it: moto's backends
live in this process in both cases, so the one patch serves both. Installs are counted: nested stacks
work and the last `uninstall()` restores moto. Calls that bypass moto's request layer (a test calling
`moto.sqs.models.sqs_backends[...]` directly) are not covered. Never imported by the Lambda runtime.
"""

from __future__ import annotations

import copy
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lambdajobs.local import fairqueues

__all__ = ["atomic", "install", "installed", "lock", "uninstall"]


class ServiceLock:
    """A re-entrant lock that its holder can put down entirely while it waits, then take back."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._local = threading.local()

    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    def __enter__(self) -> ServiceLock:
        self._lock.acquire()
        self._local.depth = self._depth() + 1
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.depth = self._depth() - 1
        self._lock.release()

    def held(self) -> bool:
        """Whether this thread holds the lock."""
        return self._depth() > 0

    @contextmanager
    def released(self) -> Iterator[None]:
        """Put the lock down while the block runs (a no-op for a thread that does not hold it)."""
        depth = self._depth()
        for _ in range(depth):
            self._lock.release()
        self._local.depth = 0
        try:
            yield
        finally:
            for _ in range(depth):
                self._lock.acquire()
            self._local.depth = depth


_LOCKS = {"dynamodb": ServiceLock("dynamodb"), "sqs": ServiceLock("sqs")}
_state_lock = threading.Lock()
_installs = 0
#: (class, attribute, what the class's own __dict__ held before: None if it inherited it)
_patched: list[tuple[Any, str, Any]] = []


def lock(service: str) -> ServiceLock:
    """The lock every request of `service` ("dynamodb" or "sqs") runs under while installed."""
    return _LOCKS[service]


def installed() -> bool:
    return _installs > 0


def _serialised(service_lock: ServiceLock, call_action: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call_action)
    def call_action_atomically(self: Any) -> Any:
        with service_lock:
            return call_action(self)

    return call_action_atomically


def _lock_put_down_while_waiting(service_lock: ServiceLock, wait: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(wait)
    def wait_without_the_lock(self: Any, *args: Any, **kwargs: Any) -> Any:
        with service_lock.released():
            return wait(self, *args, **kwargs)

    return wait_without_the_lock


class _TablesNotCopied:
    """Stands in for the `copy` module inside moto's DynamoDB backend while a transaction runs: a
    `Table` is returned as is (the transaction's items are saved one by one instead); anything else is
    copied as `copy` would."""

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        from moto.dynamodb.models.table import Table

        return value if isinstance(value, Table) else copy.deepcopy(value, memo)


def _rolled_back_by_item(transact: Callable[..., Any]) -> Callable[..., Any]:
    """moto saves a deep copy of every table a transaction writes to, to roll a cancelled one back:
    O(table size) per TransactWriteItems, minutes for a workflow of a few thousand members (each
    member's outcome is one transaction). Under the DynamoDB lock nothing else writes meanwhile, so
    saving only the items the transaction names and putting them back rolls back the same."""

    @functools.wraps(transact)
    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> Any:
        import moto.dynamodb.models as models
        from moto.dynamodb.models.dynamo_type import DynamoType

        saved: list[tuple[Any, Any, Any, Any]] = []
        try:
            for entry in transact_items:
                _, op = next(iter(entry.items()))
                table = self.get_table(op["TableName"])
                attributes = op.get("Key") or op["Item"]
                hash_key = DynamoType(attributes[table.hash_key_attr])
                range_key = DynamoType(attributes[table.range_key_attr]) if table.range_key_attr else None
                saved.append((table, hash_key, range_key, copy.deepcopy(table.get_item(hash_key, range_key))))
        except Exception:  # moto's own checks answer a malformed request, as without this patch
            return transact(self, transact_items)
        models.copy = _TablesNotCopied()  # type: ignore[assignment]
        try:
            return transact(self, transact_items)
        except BaseException:
            for table, hash_key, range_key, item in reversed(saved):
                place = table.items[hash_key] if range_key is not None else table.items
                where = range_key if range_key is not None else hash_key
                if item is None:
                    place.pop(where, None)
                else:
                    place[where] = item
            raise
        finally:
            models.copy = copy

    return transact_write_items


def _epoch_ms(unix_time_millis: Callable[..., float]) -> Callable[..., float]:
    """moto's SQS reads the clock per message, several times per message per request (is it visible?
    delayed?), through `unix_time_millis()`: datetime arithmetic that made one ReceiveMessage on a
    queue of 1,000 messages take most of a second. The same instant from `time.time()` (which clock
    fixtures move too) is ten times cheaper."""

    @functools.wraps(unix_time_millis)
    def now_ms(dt: Any = None) -> float:
        return time.time() * 1000.0 if dt is None else unix_time_millis(dt)

    return now_ms


def _patch(cls: Any, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    current = getattr(cls, name)  # fails loudly if moto renamed it: an unprotected stack is worse
    _patched.append((cls, name, cls.__dict__.get(name)))
    setattr(cls, name, wrap(current))


def install() -> None:
    """Make moto's DynamoDB and SQS requests atomic in this process (counted: pair with `uninstall`)."""
    global _installs
    with _state_lock:
        _installs += 1
        if _installs > 1:
            return
        try:
            import moto.sqs.models as sqs_models
            from moto.dynamodb.models import DynamoDBBackend
            from moto.dynamodb.responses import DynamoHandler
            from moto.sqs.models import Queue
            from moto.sqs.responses import SQSResponse

            dynamodb, sqs = _LOCKS["dynamodb"], _LOCKS["sqs"]
            _patch(DynamoHandler, "call_action", lambda f: _serialised(dynamodb, f))
            _patch(SQSResponse, "call_action", lambda f: _serialised(sqs, f))
            _patch(Queue, "wait_for_messages", lambda f: _lock_put_down_while_waiting(sqs, f))
            _patch(DynamoDBBackend, "transact_write_items", _rolled_back_by_item)
            _patch(sqs_models, "unix_time_millis", _epoch_ms)
            fairqueues.install()  # SQS fair queues (tenants) on standard queues, for both stacks
        except BaseException:
            _restore()
            _installs -= 1
            raise


def uninstall() -> None:
    """Undo one `install`; the last one restores moto as it was."""
    global _installs
    with _state_lock:
        if _installs == 0:
            return
        _installs -= 1
        if _installs == 0:
            _restore()


def _restore() -> None:
    fairqueues.uninstall()
    while _patched:
        cls, name, own = _patched.pop()
        if own is None:
            delattr(cls, name)  # it was inherited: inherit it again
        else:
            setattr(cls, name, own)


@contextmanager
def atomic() -> Iterator[None]:
    """`install()` for the duration of a block."""
    install()
    try:
        yield
    finally:
        uninstall()
