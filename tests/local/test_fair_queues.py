"""SQS fair queues on the local stack (`lambdajobs.local.fairqueues`, installed with
`lambdajobs.local.atomic`): a tenant is a `MessageGroupId` on a standard queue, and a receive takes
quiet tenants' messages before a noisy tenant's.

The proof: tenant A's backlog of 500 jobs is being worked (max_concurrency 10, batch_size 10) when
tenant B sends one job. B starts without waiting for A's backlog; the control, the same jobs with no
group, makes B wait behind it. Why the assertion holds on a loaded machine, by ordering not timing:
the function holds at most 10 x 10 = 100 of A's messages (received, not all started); B is sent
from inside one of A's jobs, so nothing of the 500 can slip past in between. With fair queues, once A
is noisy (from its first delete, A has all the queue's recent processing time) every receive takes B
first, so the A jobs that start after B was sent and before B are at most those 100 already handed
to the function (plus, before A is noisy, fewer than 40 more). Without groups, moto hands out the
queue in order: B comes after all 500, so at least 400 A jobs start before it. The tests say "a
tenth" (50) on top of the 100 in the function: B must start before 150 of A's jobs that started
after it was sent (fair), and does not (control). Both stop as soon as that is decided: no backlog
is drained.

The other tests run moto's receive through the server: the order, the receive counts of the messages
skipped, FIFO queues and queues without groups exactly as moto, the group kept across a save and
restore of the local stack, and the emulated Lambda event carrying `attributes.MessageGroupId`.
One stack for the module; each test uses queues of its own.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs.local import fairqueues, persist
from lambdajobs.local.emulator import EventSourceMapping, poll_once
from lambdajobs.local.stack import REGION, LocalStack
from lambdajobs.ops import wait_until
from lambdajobs.runtime.handler import make_handler
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.spec import JobSpec, job
from lambdajobs.runtime.worker import Worker
from lambdajobs.testing import isolated_registry

BACKLOG = 500
BATCH, CONCURRENCY = 10, 10
#: A's messages the function can hold at most (received, not all started yet)
HELD = BATCH * CONCURRENCY
#: B is sent when this many of A's jobs have started
SEND_B_AFTER = 10
#: A's jobs that may start after B was sent and before B: the ones held, and a tenth of the backlog
JUMPED_LIMIT = HELD + BACKLOG // 10


class Work(BaseModel):
    tenant: str
    n: int


class Runs:
    """The test job: notes the order jobs start in, and sends B from inside A's `SEND_B_AFTER`-th job."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.lock = threading.Lock()
        self.send_b: Callable[[], None] = lambda: None
        #: A's jobs started when B's send returned
        self.started_when_b_sent: int | None = None

    def job(self) -> Callable[[Work], None]:
        def work(payload: Work) -> None:
            with self.lock:
                self.started.append(f"{payload.tenant}-{payload.n}")
                send = payload.tenant == "a" and len(self.started) == SEND_B_AFTER
            if send:
                self.send_b()
                with self.lock:
                    self.started_when_b_sent = len(self.started)
            time.sleep(0.01)  # a little work: the backlog lasts while B arrives

        return work

    def jumped(self) -> int | None:
        """A's jobs that started after B was sent and before B (None: B has not started)."""
        with self.lock:
            if "b-0" not in self.started or self.started_when_b_sent is None:
                return None
            return self.started.index("b-0") - self.started_when_b_sent

    def started_after_b_was_sent(self) -> int:
        with self.lock:
            return len(self.started) - (self.started_when_b_sent or len(self.started))


# -- the stack -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Iterator[tuple[LocalStack, dict[str, JobSpec], dict[str, Runs]]]:
    """A local stack (no workers started) with two test jobs: `fair`, whose producers name tenants,
    and `plain`, the control, whose producers do not."""
    notes = {"fair": Runs(), "plain": Runs()}
    with isolated_registry(keep=True):
        specs = {
            name: job(name=name, max_concurrency=CONCURRENCY, batch_size=BATCH)(tenants.job()).spec
            for name, tenants in notes.items()
        }
        log = tmp_path_factory.mktemp("fair") / "worker.log"
        with LocalStack(specs=list(specs.values()), stack="fair", port=0, log_file=log) as stack:
            yield stack, specs, notes


def envelope(job_name: str, tenant: str, n: int) -> str:
    """The documented envelope, as a producer in any language writes it."""
    return json.dumps(
        {"v": 1, "job": job_name, "id": f"{job_name}-{tenant}-{n}", "payload": {"tenant": tenant, "n": n}}
    )


def grouped(tenant: str | None) -> dict[str, str]:
    return {"MessageGroupId": f"tenant-{tenant}"} if tenant else {}


def a_backlog_then_b(local: LocalStack, spec: JobSpec, tenants: Runs, *, tenant_groups: bool) -> Runs:
    """Queue A's backlog, start the job's event source (the emulator, the deployed handler), send B
    from inside A's `SEND_B_AFTER`-th job; return once B started or `JUMPED_LIMIT` A jobs started
    after B was sent."""
    assert local.provisioned is not None
    queues = local.provisioned.queues[spec.name]
    sqs = local.config.client("sqs")
    for start in range(0, BACKLOG, 10):
        entries = [
            {
                "Id": str(n),
                "MessageBody": envelope(spec.name, "a", n),
                **grouped("a" if tenant_groups else None),
            }
            for n in range(start, start + 10)
        ]
        assert not sqs.send_message_batch(QueueUrl=queues.queue_url, Entries=entries).get("Failed")
    tenants.send_b = lambda: sqs.send_message(
        QueueUrl=queues.queue_url,
        MessageBody=envelope(spec.name, "b", 0),
        **grouped("b" if tenant_groups else None),
    )
    mapping = EventSourceMapping(  # as LocalStack.start_workers maps the job
        queue_url=queues.queue_url,
        queue_arn=queues.queue_arn,
        handler=make_handler(Worker(config=local.config, emit_metrics=False)),
        function_name=f"fair-{spec.name}",
        timeout_seconds=spec.timeout_seconds,
        batch_size=spec.batch_size,
        max_concurrency=spec.max_concurrency,
        region=REGION,
        config=local.config,
    )
    mapping.start()
    try:
        decided = wait_until(
            lambda: tenants.jumped() is not None or tenants.started_after_b_was_sent() >= JUMPED_LIMIT,
            60,
            interval=0.02,
        )
    finally:
        mapping.stop()
    assert decided, (
        f"neither B nor {JUMPED_LIMIT} of A's jobs started after B was sent: {len(tenants.started)}"
    )
    return tenants


def test_a_quiet_tenants_job_starts_before_a_noisy_tenants_backlog(local):
    stack, specs, notes = local
    # GIVEN tenant A's backlog of 500 jobs being worked, 10 batches of 10 at a time
    # WHEN tenant B sends one job
    tenants = a_backlog_then_b(stack, specs["fair"], notes["fair"], tenant_groups=True)
    # THEN B started before more than a tenth of A's backlog beyond the jobs A already held started
    jumped = tenants.jumped()
    assert jumped is not None and jumped < JUMPED_LIMIT, f"{tenants.started_after_b_was_sent()} A jobs first"
    # AND B's job record says it started
    status = get_status("fair-b-0", config=stack.config)
    assert status.started_at is not None, status


def test_without_tenants_the_job_waits_behind_the_backlog(local):
    stack, specs, notes = local
    # GIVEN the same backlog and job, sent with no MessageGroupId
    tenants = a_backlog_then_b(stack, specs["plain"], notes["plain"], tenant_groups=False)
    # THEN more than a tenth of A's backlog beyond the jobs A held started after B was sent, B waiting
    assert tenants.jumped() is None, f"B started after {tenants.jumped()} of A's jobs"
    assert tenants.started_after_b_was_sent() >= JUMPED_LIMIT
    assert get_status("plain-b-0", config=stack.config).started_at is None


# -- moto's receive, through the server ------------------------------------------------------------


@pytest.fixture
def sqs(local) -> Any:
    return local[0].config.client("sqs")


def new_queue(sqs: Any, name: str, **attributes: str) -> str:
    return str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])


def send(sqs: Any, url: str, bodies: list[str], tenant: str | None = None) -> None:
    for start in range(0, len(bodies), 10):
        entries = [
            {"Id": str(i), "MessageBody": body, **grouped(tenant)}
            for i, body in enumerate(bodies[start : start + 10])
        ]
        assert not sqs.send_message_batch(QueueUrl=url, Entries=entries).get("Failed")


def receive(sqs: Any, url: str, count: int = 10) -> list[dict[str, Any]]:
    got = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=count, AttributeNames=["All"])
    return list(got.get("Messages", []))


def bodies(messages: list[dict[str, Any]]) -> list[str]:
    return [m["Body"] for m in messages]


def test_a_receive_takes_quiet_tenants_first_and_skipped_messages_keep_their_receive_count(sqs):
    url = new_queue(sqs, "fq-order")
    # GIVEN 60 messages of tenant a, 40 of them received (in flight: a is noisy), then u (no group) and b
    send(sqs, url, [f"a{i}" for i in range(60)], "a")
    held = [m for _ in range(4) for m in receive(sqs, url)]
    assert bodies(held) == [f"a{i}" for i in range(40)]
    send(sqs, url, ["u"])
    send(sqs, url, ["b"], "b")
    # WHEN the next receive takes 10
    # THEN u and b come first, then a's in their order
    assert bodies(receive(sqs, url)) == ["u", "b", *[f"a{i}" for i in range(40, 48)]]
    # AND a's messages passed over were not received meanwhile: their first receive counts 1
    rest = receive(sqs, url)
    assert bodies(rest) == [f"a{i}" for i in range(48, 58)]
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in rest} == {"1"}


def test_a_tenant_whose_messages_are_handed_back_is_quiet_again_then_noisy_by_its_processing_time(sqs):
    url = new_queue(sqs, "fq-flight")
    send(sqs, url, [f"a{i}" for i in range(50)], "a")
    held = [m for _ in range(3) for m in receive(sqs, url)]  # 30 of a's in flight: noisy
    send(sqs, url, ["b1", "b2"], "b")
    # WHEN 10 of a's are made visible again (ChangeMessageVisibility 0): 20 in flight, a is quiet
    entries = [
        {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0}
        for i, m in enumerate(held[:10])
    ]
    assert not sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries).get("Failed")
    # THEN a receive takes the queue in its order
    again = receive(sqs, url, 1)
    assert bodies(again) == ["a0"]
    # WHEN a's 20 other messages are deleted (a's processing time: all the queue's)
    deletes = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(held[10:])]
    for start in range(0, len(deletes), 10):
        assert not sqs.delete_message_batch(QueueUrl=url, Entries=deletes[start : start + 10]).get("Failed")
    # THEN a is noisy with 1 message in flight: b's come first
    assert bodies(receive(sqs, url, 3)) == ["b1", "b2", "a1"]


def receive_all(sqs: Any, url: str) -> list[list[str]]:
    rounds = []
    while got := receive(sqs, url):
        rounds.append(bodies(got))
    return rounds


def scenario(sqs: Any, name: str, *, fifo: bool, tenants: bool) -> list[list[str]]:
    """Receives (10 at a time, none deleted) of 45 messages of a, then 5 of b, then 5 of a: bodies."""
    attributes = {"FifoQueue": "true", "ContentBasedDeduplication": "true"} if fifo else {}
    url = new_queue(sqs, f"{name}.fifo" if fifo else name, **attributes)
    send(sqs, url, [f"a{i}" for i in range(45)], "a" if tenants else None)
    send(sqs, url, [f"b{i}" for i in range(5)], "b" if tenants else None)
    send(sqs, url, [f"a{i}" for i in range(45, 50)], "a" if tenants else None)
    return receive_all(sqs, url)


@pytest.mark.parametrize(
    ("fifo", "tenants"), [(True, True), (False, False)], ids=["fifo", "standard-ungrouped"]
)
def test_fifo_queues_and_queues_without_groups_receive_exactly_as_moto_does(sqs, fifo, tenants):
    # GIVEN the same sends and receives with fair queues installed and without
    name = f"fq-same-{'fifo' if fifo else 'plain'}"
    fair = scenario(sqs, name, fifo=fifo, tenants=tenants)
    fairqueues.uninstall()
    try:
        moto = scenario(sqs, f"{name}-moto", fifo=fifo, tenants=tenants)
    finally:
        fairqueues.install()
    # THEN every receive took the same messages in the same order
    assert fair == moto and len(fair) >= 2


def test_the_group_survives_a_save_and_restore_of_the_local_stack(local, sqs, tmp_path):
    stack = local[0]
    assert stack.provisioned is not None
    url = new_queue(sqs, "fq-persist")
    send(sqs, url, ["a0"], "a")
    send(sqs, url, ["u0"])
    # GIVEN the stack's state as it saves it (this queue's part), written and read back
    state, _ = persist.Capture(stack.config, stack.provisioned, REGION)()
    state = json.loads(
        json.dumps({**state, "queues": {"fq-persist": state["queues"]["fq-persist"]}, "table": []})
    )
    sqs.purge_queue(QueueUrl=url)
    # WHEN it is restored
    file = persist.StateFile(tmp_path, stack.stack)
    persist.restore(state, config=stack.config, provisioned=stack.provisioned, region=REGION, file=file)
    # THEN the message keeps its tenant, and the other still has none
    got = {m["Body"]: m["Attributes"].get("MessageGroupId") for m in receive(sqs, url)}
    assert got == {"a0": "tenant-a", "u0": None}


def test_the_emulated_lambda_event_carries_the_message_group(local, sqs):
    stack = local[0]
    url = new_queue(sqs, "fq-event")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    send(sqs, url, ["a0"], "a")
    send(sqs, url, ["u0"])
    events: list[dict[str, Any]] = []
    poll_once(
        queue_url=url,
        queue_arn=arn,
        handler=lambda event, context: events.append(event),
        function_name="fq-event",
        timeout_seconds=30,
        config=stack.config,
    )
    [event] = events
    attributes = {r["body"]: r["attributes"] for r in event["Records"]}
    assert attributes["a0"]["MessageGroupId"] == "tenant-a"
    assert "MessageGroupId" not in attributes["u0"]
