"""Lambda's SQS event source mapping, emulated: poll a queue the way Lambda does, call the real
handler, apply the documented partial batch response rules. (moto's own Lambda trigger delivers one
record per call, ignores batchItemFailures and needs Docker.)

What it reproduces (AWS docs, "Using Lambda with Amazon SQS"):
- long polling; batches of up to `batch_size` records gathered for at most the batching window;
- at most `max_concurrency` batches in flight (ScalingConfig.MaximumConcurrency), each in an
  invocation of its own, received by one poller apart from them;
- records shaped like Lambda's SQS event, and a context whose remaining time counts down from the
  function timeout; an invocation that overruns its timeout fails as a whole;
- the partial batch response: the batch succeeds when the response is empty/null or its
  `batchItemFailures` is empty/null; the listed records fail; the whole batch fails when the handler
  raises, the response is malformed, or an identifier is empty or not in the batch. Successes are
  deleted; failures stay, come back after their visibility timeout, and SQS redrive moves them to the
  DLQ after maxReceiveCount receives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lambdajobs.local.lambda_events import LambdaContext, sqs_event
from lambdajobs.runtime.config import StackConfig

Handler = Callable[[dict[str, Any], Any], Any]
log = logging.getLogger("lambdajobs.local")
MAX_RECEIVE = 10  # ReceiveMessage returns at most 10 messages
MAX_WAIT_SECONDS = 20  # long polling at most 20 s
#: How often a disabled (paused) mapping looks at its state again.
PAUSED_CHECK_SECONDS = 0.25


@dataclass
class BatchOutcome:
    message_ids: list[str]
    failed_ids: list[str] = field(default_factory=list)
    response: Any = None
    error: str | None = None  # why the whole batch failed, if it did

    @property
    def succeeded_ids(self) -> list[str]:
        failed = set(self.failed_ids)
        return [m for m in self.message_ids if m not in failed]


def failed_ids(response: Any, message_ids: list[str]) -> tuple[list[str], str | None]:
    """The records to keep, per the partial batch response rules; (all, reason) when the whole batch fails."""
    if response is None or response == {}:
        return [], None
    if not isinstance(response, dict):
        return list(message_ids), f"response is a {type(response).__name__}, not an object"
    items = response.get("batchItemFailures")
    if items is None or items == []:
        return [], None
    if not isinstance(items, list):
        return list(message_ids), "batchItemFailures is not a list"
    known = set(message_ids)
    failed: list[str] = []
    for item in items:
        identifier = item.get("itemIdentifier") if isinstance(item, dict) else None
        if not identifier:
            return list(message_ids), "an itemIdentifier is empty or missing"
        if identifier not in known:
            return list(message_ids), f"itemIdentifier {identifier!r} is not in the batch"
        failed.append(identifier)
    return failed, None


@dataclass
class MappingStats:
    invocations: int = 0
    records: int = 0
    succeeded: int = 0
    failed: int = 0
    batch_errors: int = 0
    in_flight: int = 0
    max_in_flight: int = 0


class EventSourceMapping:
    """One queue -> one handler, like an `AWS::Lambda::EventSourceMapping`."""

    def __init__(
        self,
        *,
        queue_url: str,
        queue_arn: str,
        handler: Handler,
        function_name: str,
        timeout_seconds: float,
        batch_size: int = 10,
        max_batching_window_seconds: float = 0,
        max_concurrency: int = 2,
        memory_mb: int = 256,
        wait_seconds: int = 1,
        region: str = "us-east-1",
        config: StackConfig | None = None,
        enabled: Callable[[], bool] | None = None,
    ) -> None:
        self.queue_url, self.queue_arn, self.handler = queue_url, queue_arn, handler
        #: Whether the mapping may poll now (its `Enabled` in the local stack's Lambda, which
        #: `lambdajobs.queue_control` changes); None: always.
        self.enabled = enabled
        #: Set while the poller holds off because the mapping is disabled (no receive in progress).
        self.holding = threading.Event()
        #: Where the queue is (the local stack's endpoint, or moto in-process): its SQS client.
        self.config = config or StackConfig()
        self.function_name, self.timeout_seconds, self.memory_mb = function_name, timeout_seconds, memory_mb
        self.batch_size, self.window = batch_size, max_batching_window_seconds
        self.max_concurrency, self.wait_seconds, self.region = max_concurrency, wait_seconds, region
        self.stats = MappingStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._invocations: set[threading.Thread] = set()
        self._slots = threading.BoundedSemaphore(max_concurrency)

    # -- one batch ----------------------------------------------------------------------------------

    def gather(self) -> list[dict[str, Any]]:
        """Receive up to `batch_size` messages, waiting at most the batching window to fill the batch
        (with no window: one long-polling receive, as soon as records are there)."""
        sqs = self.config.client("sqs")
        deadline = time.monotonic() + self.window
        messages: list[dict[str, Any]] = []
        while True:
            left = deadline - time.monotonic()
            wait = self.wait_seconds if not messages else max(0, min(MAX_WAIT_SECONDS, int(left)))
            got = sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(MAX_RECEIVE, self.batch_size - len(messages)),
                WaitTimeSeconds=min(wait, MAX_WAIT_SECONDS),
                AttributeNames=["All"],  # every system attribute, MessageGroupId (the tenant) too
                MessageAttributeNames=["All"],
            ).get("Messages", [])
            messages.extend(got)
            if len(messages) >= self.batch_size or time.monotonic() >= deadline or self._stop.is_set():
                return messages
            if not got and not messages:
                return messages

    def invoke(self, messages: list[dict[str, Any]]) -> BatchOutcome:
        """Invoke the handler with one batch and settle it: delete the successes, keep the failures."""
        ids = [m["MessageId"] for m in messages]
        outcome = BatchOutcome(message_ids=ids)
        context = LambdaContext(self.function_name, self.timeout_seconds, self.memory_mb)
        with self._lock:
            self.stats.invocations += 1
            self.stats.records += len(ids)
            self.stats.in_flight += 1
            self.stats.max_in_flight = max(self.stats.max_in_flight, self.stats.in_flight)
        started = time.monotonic()
        try:
            outcome.response = self.handler(
                sqs_event(messages, queue_arn=self.queue_arn, region=self.region), context
            )
        except Exception as exc:  # an invocation error fails the whole batch
            outcome.failed_ids, outcome.error = list(ids), f"handler raised {type(exc).__name__}: {exc}"
        else:
            if time.monotonic() - started > self.timeout_seconds:
                # Lambda would have killed it: the whole batch comes back, side effects and all.
                outcome.failed_ids, outcome.error = list(ids), f"timed out after {self.timeout_seconds} s"
            else:
                outcome.failed_ids, outcome.error = failed_ids(outcome.response, ids)
        finally:
            with self._lock:
                self.stats.in_flight -= 1
        succeeded = set(outcome.succeeded_ids)
        self._delete([m for m in messages if m["MessageId"] in succeeded])
        with self._lock:
            self.stats.succeeded += len(outcome.succeeded_ids)
            self.stats.failed += len(outcome.failed_ids)
            self.stats.batch_errors += outcome.error is not None
        return outcome

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        sqs = self.config.client("sqs")
        for start in range(0, len(messages), MAX_RECEIVE):
            chunk = messages[start : start + MAX_RECEIVE]
            entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(chunk)]
            sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=entries)

    def poll_once(self) -> BatchOutcome | None:
        messages = self.gather()
        return self.invoke(messages) if messages else None

    # -- running ------------------------------------------------------------------------------------

    def start(self) -> None:
        """Poll the queue and run up to `max_concurrency` batches at once.

        As Lambda's event source mapping does, polling is apart from the invocations: one poller
        receives a batch whenever an invocation slot is free and hands it to an invocation of its own,
        so an idle mapping is one long poll at a time, not one per slot (a local stack of many jobs
        idled at half a core with a poller per slot, issue 26)."""
        self._stop.clear()
        self._slots = threading.BoundedSemaphore(self.max_concurrency)
        thread = threading.Thread(target=self._loop, name=f"esm-{self.function_name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    @property
    def paused(self) -> bool:
        """Disabled: it receives nothing until enabled again (a batch received before still runs)."""
        return self.enabled is not None and not self.enabled()

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self.paused:  # disabled, as UpdateEventSourceMapping(Enabled=False) leaves it
                self.holding.set()
                self._stop.wait(PAUSED_CHECK_SECONDS)
                continue
            self.holding.clear()
            if not self._slots.acquire(timeout=0.5):  # every slot busy: look at the stop flag again
                continue
            try:
                messages = self.gather()
            except Exception:  # the emulator must keep polling, as Lambda does
                self._slots.release()
                log.exception("event source %s: polling failed; retrying", self.function_name)
                time.sleep(0.5)
                continue
            if not messages:
                self._slots.release()
                continue
            # a batch received while stopping still runs: it is not left invisible until its timeout
            invocation = threading.Thread(
                target=self._invoke_then_free, args=(messages,), name=f"invoke-{self.function_name}"
            )
            with self._lock:
                self._invocations.add(invocation)
            invocation.start()

    def _invoke_then_free(self, messages: list[dict[str, Any]]) -> None:
        try:
            self.invoke(messages)
        except Exception:  # settling failed (a delete): the records come back after their timeout
            log.exception("event source %s: settling a batch failed", self.function_name)
        finally:
            with self._lock:
                self._invocations.discard(threading.current_thread())
            self._slots.release()

    def signal_stop(self) -> None:
        """Ask the poller to stop (`stop` also waits for it and the batches in flight)."""
        self._stop.set()

    def stop(self, timeout: float | None = None) -> None:
        """Stop polling; in-flight batches finish first (each within its function's timeout)."""
        self.signal_stop()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        while True:
            with self._lock:
                running = list(self._invocations)
            if not running:
                return
            for thread in running:
                thread.join(timeout)
            if timeout is not None:
                return


def poll_once(
    *,
    queue_url: str,
    queue_arn: str,
    handler: Handler,
    function_name: str,
    timeout_seconds: float,
    batch_size: int = 10,
    wait_seconds: int = 0,
    region: str = "us-east-1",
    config: StackConfig | None = None,
) -> BatchOutcome | None:
    """Receive one batch, invoke the handler, settle it (tests drive the worker with this)."""
    mapping = EventSourceMapping(
        queue_url=queue_url,
        queue_arn=queue_arn,
        handler=handler,
        function_name=function_name,
        timeout_seconds=timeout_seconds,
        batch_size=min(batch_size, MAX_RECEIVE),
        wait_seconds=wait_seconds,
        region=region,
        config=config,
    )
    return mapping.poll_once()
