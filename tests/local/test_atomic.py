"""moto made atomic (`lambdajobs.local.atomic`): each DynamoDB and SQS request runs as one step, on
the embedded server (`LocalStack`) and in-process (`TestStack`).

Why: moto evaluates a condition and writes without a lock (read, check, write), and marks a visible
message received without one; the embedded server answers each request on its own thread. Concurrent
deliveries of one job id on `lambdajobs dev` ran the job up to 4 times (issue 11).

How the tests show it: the low-level tests widen moto's race window deterministically: a *rendezvous*
patched into moto makes the contending threads meet right after moto evaluated their condition (or
right before it marks a message received), so without a lock every one of them has passed the check
before any writes. With the lock, the first thread waits there alone until the rendezvous times out,
and the others then find the item written (the message taken). The `..._without_it_...` tests run the
same contest with the mechanism off and check that moto lets more than one win (all 8 do): they prove the
contest detects the race (if moto ever becomes atomic they fail, and this module can go).

Checked by hand with the mechanism off (a pytest plugin making `atomic._patch` a no-op: installs
counted, nothing patched): every `..._exactly_one...` test failed (8 of 8 contenders won), and the
end-to-end test below counted 6 and 12 of its 50 ids run two or three times in two runs (in-process,
`tests/functional/test_concurrency.py`: 27 to 37 of 50 ids, up to 5 runs). With only the long-poll
patch left out, `test_a_long_poll_does_not_hold_the_lock` failed: the sends waited 4.7 s.
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.dynamodb.comparisons import FuncAttrExists
from moto.dynamodb.responses import DynamoHandler
from moto.server import ThreadedMotoServer
from moto.sqs.models import Message, Queue
from moto.sqs.responses import SQSResponse

from lambdajobs.local import atomic
from lambdajobs.local.emulator import EventSourceMapping
from lambdajobs.local.stack import LocalStack
from lambdajobs.runtime.handler import make_handler
from lambdajobs.runtime.spec import job
from lambdajobs.runtime.worker import Worker
from lambdajobs.testing import isolated_registry
from tests.concurrent_deliveries import Deliveries

CONTENDERS = 8
RENDEZVOUS_SECONDS = 0.5  # how long a contender waits for the others inside moto
REGION = "us-east-1"


# -- where the tests talk to moto ------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """An embedded moto server on a free port (one for the module: stopping one takes 0.5 s)."""
    moto_server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto_server.start()
    host, port = moto_server.get_host_and_port()
    yield f"http://{host}:{port}"
    moto_server.stop()


@pytest.fixture(params=["in-process", "server"])
def client(request) -> Iterator[Callable[[str], Any]]:
    """`client(service)` for in-process moto (`mock_aws`), or for the embedded server, reset."""

    def make(endpoint: str | None) -> Callable[[str], Any]:
        def client_for(service: str) -> Any:
            return boto3.client(
                service,
                region_name=REGION,
                endpoint_url=endpoint,
                aws_access_key_id="testing",
                aws_secret_access_key="testing",
            )

        return client_for

    if request.param == "in-process":
        with mock_aws():
            yield make(None)
        return
    endpoint = request.getfixturevalue("server")
    reset = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(reset, timeout=10).close()  # moto's state is per process
    yield make(endpoint)


@pytest.fixture
def unprotected() -> None:
    # A stack left running by another test would protect moto here and hide the race: fail, not skip.
    assert not atomic.installed(), "something in this process holds lambdajobs.local.atomic installed"


def rendezvous_in(monkeypatch: pytest.MonkeyPatch, cls: type, name: str, *, after: bool) -> None:
    """Make every contender meet inside moto's `cls.name` (after it returns, or before it runs). A
    contender that cannot meet the others (they wait for a lock it holds) goes on after
    RENDEZVOUS_SECONDS, and every later one at once."""
    barrier = threading.Barrier(CONTENDERS, timeout=RENDEZVOUS_SECONDS)
    original = getattr(cls, name)

    def meet() -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait()

    def met(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not after:
            meet()
        result = original(self, *args, **kwargs)
        if after:
            meet()
        return result

    monkeypatch.setattr(cls, name, met)


def all_at_once(fn: Callable[[int], Any]) -> list[Any]:
    """Run fn(0..CONTENDERS-1) on as many threads, released together."""
    start = threading.Barrier(CONTENDERS)

    def released(i: int) -> Any:
        start.wait()
        return fn(i)

    with ThreadPoolExecutor(max_workers=CONTENDERS) as pool:
        return list(pool.map(released, range(CONTENDERS)))


# -- DynamoDB: a conditional write, once -----------------------------------------------------------


def claim_concurrently(client: Callable[[str], Any], operation: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """CONTENDERS threads write one new key with `attribute_not_exists(id)` at once: how many won."""
    ddb = client("dynamodb")
    ddb.create_table(
        TableName="claims",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    rendezvous_in(monkeypatch, FuncAttrExists, "expr", after=True)  # condition evaluated, not yet written

    def claim(i: int) -> bool:
        write: dict[str, Any] = {"TableName": "claims", "ConditionExpression": "attribute_not_exists(id)"}
        if operation == "put_item":
            write["Item"] = {"id": {"S": "job-1"}, "holder": {"S": str(i)}}
        else:
            write["Key"] = {"id": {"S": "job-1"}}
            write["UpdateExpression"] = "SET holder = :me"
            write["ExpressionAttributeValues"] = {":me": {"S": str(i)}}
        try:
            getattr(ddb, operation)(**write)
            return True
        except ddb.exceptions.ConditionalCheckFailedException:
            return False

    won = all_at_once(claim)
    holder = ddb.get_item(TableName="claims", Key={"id": {"S": "job-1"}})["Item"]["holder"]["S"]
    if sum(won) == 1:
        assert won[int(holder)], "the item holds the winner's write"
    return sum(won)


@pytest.mark.parametrize("operation", ["update_item", "put_item"])
def test_of_many_concurrent_conditional_writes_of_one_new_key_exactly_one_wins(
    client, operation, monkeypatch
):
    with atomic.atomic():
        assert claim_concurrently(client, operation, monkeypatch) == 1


@pytest.mark.parametrize("operation", ["update_item", "put_item"])
def test_without_it_moto_lets_every_concurrent_conditional_write_win(
    client, operation, monkeypatch, unprotected
):
    # The contest above detects the race: unprotected, moto passes every contender's condition.
    assert claim_concurrently(client, operation, monkeypatch) > 1


# -- SQS: a message, to one receiver ---------------------------------------------------------------


def receive_concurrently(client: Callable[[str], Any], monkeypatch: pytest.MonkeyPatch) -> int:
    """CONTENDERS threads receive from a queue holding one message at once: how many got it."""
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="one-message")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="only one")
    rendezvous_in(monkeypatch, Message, "mark_received", after=False)  # seen visible, not yet taken

    def receive(_: int) -> int:
        return len(sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1).get("Messages", []))

    return sum(all_at_once(receive))


def test_one_message_received_by_many_at_once_goes_to_exactly_one(client, monkeypatch):
    with atomic.atomic():
        assert receive_concurrently(client, monkeypatch) == 1


def test_without_it_moto_hands_one_message_to_every_concurrent_receiver(client, monkeypatch, unprotected):
    assert receive_concurrently(client, monkeypatch) > 1


def test_a_long_poll_does_not_hold_the_lock(client):
    # GIVEN a receive long-polling an empty queue (moto waits inside the request)
    sqs = client("sqs")
    with atomic.atomic():
        waiting = sqs.create_queue(QueueName="empty")["QueueUrl"]
        other = sqs.create_queue(QueueName="other")["QueueUrl"]
        polled: dict[str, Any] = {}

        def poll() -> None:
            started = time.monotonic()
            got = sqs.receive_message(QueueUrl=waiting, WaitTimeSeconds=5).get("Messages", [])
            polled.update(bodies=[m["Body"] for m in got], seconds=time.monotonic() - started)

        poller = threading.Thread(target=poll)
        poller.start()
        time.sleep(0.3)
        # WHEN another thread sends meanwhile THEN it is not held up by the poll
        started = time.monotonic()
        sqs.send_message(QueueUrl=other, MessageBody="meanwhile")
        sqs.send_message(QueueUrl=waiting, MessageBody="wake up")
        sent_in = time.monotonic() - started
        poller.join(10)
    assert sent_in < 1, f"sends took {sent_in:.2f} s while a receive long-polled"
    # AND the poll answers with the message as soon as it arrives, not at the end of its wait
    assert polled["bodies"] == ["wake up"] and polled["seconds"] < 3


# -- installing it ---------------------------------------------------------------------------------


def test_installs_are_counted_and_the_last_uninstall_restores_moto(unprotected):
    dynamodb_call, queue_wait = DynamoHandler.call_action, Queue.wait_for_messages
    atomic.install()
    atomic.install()
    atomic.uninstall()
    assert atomic.installed() and DynamoHandler.call_action is not dynamodb_call
    atomic.uninstall()
    assert not atomic.installed()
    assert DynamoHandler.call_action is dynamodb_call and Queue.wait_for_messages is queue_wait
    assert "call_action" not in SQSResponse.__dict__  # inherited again, as moto defines it
    atomic.uninstall()  # one too many: harmless
    assert not atomic.installed()


# -- end to end on the local stack ----------------------------------------------------------------


def test_the_local_stack_runs_each_of_five_concurrent_deliveries_of_fifty_job_ids_once(tmp_path):
    # GIVEN the local stack (embedded server) with a job that counts its runs per job id, and the
    # handler `lambdajobs dev` runs
    deliveries = Deliveries()
    installed_before = atomic.installed()
    with isolated_registry(keep=True):
        spec = job(name="counted", timeout_seconds=30, max_attempts=5)(deliveries.job()).spec
        with LocalStack(specs=[spec], stack="atomic", log_file=tmp_path / "worker.log") as local:
            assert atomic.installed() and local.provisioned is not None
            queues = local.provisioned.queues["counted"]
            mapping = EventSourceMapping(
                queue_url=queues.queue_url,
                queue_arn=queues.queue_arn,
                handler=make_handler(Worker(config=local.config, emit_metrics=False)),
                function_name="atomic-counted",
                timeout_seconds=spec.timeout_seconds,
                config=local.config,
            )
            # WHEN 5 copies of each of 50 job ids are delivered, the copies of an id at the same time
            deliveries.deliver(mapping, "counted")
            # THEN every job ran exactly once, the copies overlapping, and every job reads succeeded
            deliveries.assert_each_ran_once(local.config)
    # AND the stack uninstalled what it installed
    assert atomic.installed() == installed_before
