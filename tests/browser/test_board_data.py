"""The board's own data rules, without a browser or a server: PII masking of dead letters, and the
redrive path on AWS (SQS's StartMessageMoveTask, which moto lacks: botocore's Stubber answers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from pydantic import BaseModel

from lambdajobs.board.app import LoopbackHosts
from lambdajobs.board.data import BoardData, Queue, mask_envelope
from lambdajobs.ops import DeadLetter
from lambdajobs.runtime import aws
from lambdajobs.runtime.config import QueueAddress, StackConfig, clear_manifest_cache
from lambdajobs.runtime.pii import MASK
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry

ACCOUNT = "123456789012"
QUEUE = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/prod-invoice"
DLQ = f"https://sqs.eu-west-1.amazonaws.com/{ACCOUNT}/prod-invoice-dlq"
QUEUE_ARN = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:prod-invoice"
DLQ_ARN = f"arn:aws:sqs:eu-west-1:{ACCOUNT}:prod-invoice-dlq"
#: The functional tests' durable jobs (`approver` waits for signal "approval").
DURABLE_JOBS = "tests.functional.durable_jobs"


class Customer(BaseModel):
    email: str
    phone: str


class Invoice(BaseModel):
    order_id: str
    customer: Customer
    note: str = ""


def invoice(payload: Invoice) -> None:
    return None


@pytest.fixture
def spec():
    with isolated_registry():
        yield job(name="invoice", pii_fields=("customer.email", "customer.phone"))(invoice).spec


def test_a_dead_letters_pii_fields_are_erased_and_their_values_masked_everywhere():
    # GIVEN an envelope whose payload holds PII in nested fields, one value too short to search for
    # elsewhere ("ab"), and the address repeated in the job id and a free-text field
    envelope = {
        "v": 1,
        "job": "invoice",
        "id": "invoice-for-ada@example.com",
        "payload": {
            "order_id": "42",
            "customer": {"email": "ada@example.com", "phone": "ab"},
            "note": "call ada@example.com first",
        },
    }
    # WHEN it is masked with the job's pii_fields
    masked = mask_envelope(envelope, ("customer.email", "customer.phone"))
    # THEN both fields are erased, the address is masked wherever else it appears, the rest stays
    assert masked["payload"]["customer"] == {"email": MASK, "phone": MASK}
    assert masked["payload"]["note"] == f"call {MASK} first"
    assert masked["id"] == f"invoice-for-{MASK}"
    assert masked["payload"]["order_id"] == "42"
    assert "ada@example.com" not in json.dumps(masked)
    # AND the original is untouched (the board never changes a message)
    assert envelope["payload"]["customer"]["email"] == "ada@example.com"


def test_a_body_that_is_not_json_is_not_shown_for_a_job_with_pii_fields(spec):
    # GIVEN a dead letter of a job with pii_fields whose body is not JSON (no field can be found)
    data = BoardData(StackConfig(stack="prod", jobs=None), [spec])
    queue = Queue(key="invoice", label="invoice", dlq_url=DLQ, url=QUEUE, job="invoice")
    letter = DeadLetter("m-1", "r-1", "ada@example.com, not json", {}, datetime.now(UTC), 1)
    # WHEN the board shows it THEN the body is withheld, and says why
    shown = data._letter(queue, letter)
    assert shown.body == "" and "may hold personal data" in (shown.body_note or "")


def test_a_job_id_holding_a_pii_value_is_shown_masked_and_linked_as_it_is(spec):
    # GIVEN a dead letter whose job id holds the customer's address (a producer's choice)
    data = BoardData(StackConfig(stack="prod", jobs=None), [spec])
    queue = Queue(key="invoice", label="invoice", dlq_url=DLQ, url=QUEUE, job="invoice")
    body = json.dumps(
        {
            "v": 1,
            "job": "invoice",
            "id": "invoice-for-ada@example.com",
            "payload": {"order_id": "42", "customer": {"email": "ada@example.com", "phone": "+1 555"}},
        }
    )
    shown = data._letter(queue, DeadLetter("m-1", "r-1", body, {}, datetime.now(UTC), 1))
    # THEN the page shows it masked, and its link reaches the job's record (the real id)
    assert shown.job_id == f"invoice-for-{MASK}"
    assert shown.link_id == "invoice-for-ada@example.com"


@pytest.fixture
def deployed(spec):
    """A deployed stack's configuration (no endpoint: AWS itself), its queues known, and a stubbed
    SQS client in place of the real one."""
    config = StackConfig(
        stack="prod",
        region="eu-west-1",
        queues={"invoice": QueueAddress(url=QUEUE, arn=QUEUE_ARN, dlq_url=DLQ)},
    )
    clients = {
        name: boto3.client(name, region_name="eu-west-1", aws_access_key_id="x", aws_secret_access_key="x")
        for name in ("sqs", "ssm")
    }
    for name, client in clients.items():
        aws.set_client(name, client, config.connection)
    clear_manifest_cache()
    with Stubber(clients["ssm"]) as ssm, Stubber(clients["sqs"]) as stub:
        # the stack's manifest, read once (the board checks the stack is there first)
        manifest = {"table": "prod-jobs", "workflow_dlq_url": "", "one_time_group": "prod-once"}
        ssm.add_response(
            "get_parameter",
            {"Parameter": {"Name": "/lambdajobs/prod/stack", "Value": json.dumps(manifest)}},
            {"Name": "/lambdajobs/prod/stack"},
        )
        yield BoardData(config, [spec]), stub
    aws.reset_clients()
    clear_manifest_cache()


def test_redrive_all_on_aws_starts_sqs_native_message_move_task(deployed):
    data, stub = deployed
    # GIVEN a job's DLQ on AWS holding 7 messages
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": DLQ_ARN}},
        {"QueueUrl": DLQ, "AttributeNames": ["QueueArn"]},
    )
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"QueueArn": QUEUE_ARN}},
        {"QueueUrl": QUEUE, "AttributeNames": ["QueueArn"]},
    )
    stub.add_response(
        "get_queue_attributes",
        {"Attributes": {"ApproximateNumberOfMessages": "7"}},
        {
            "QueueUrl": DLQ,
            "AttributeNames": [
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        },
    )
    # THEN "redrive all" asks SQS to move the DLQ to the job's queue itself
    stub.add_response(
        "start_message_move_task",
        {"TaskHandle": "handle-1"},
        {"SourceArn": DLQ_ARN, "DestinationArn": QUEUE_ARN},
    )
    # WHEN the operator redrives all of it
    line = data.redrive(data.queue("invoice"))
    stub.assert_no_pending_responses()
    assert line == (
        "started moving the DLQ of invoice back to its queue (about 7 messages; SQS moves them in the "
        "background)"
    )


def test_redriving_a_selection_on_aws_moves_only_those_messages_itself(deployed):
    data, stub = deployed
    # GIVEN a DLQ on AWS that holds none of the selected messages any more
    for _ in range(2):  # two empty receives: nothing there
        stub.add_response("receive_message", {"Messages": []})
    # WHEN a selection is redriven THEN no move task starts (it cannot filter): dead_letters.redrive
    # looks for the messages and moves what it finds (nothing), saying the selected one was not there
    assert data.redrive(data.queue("invoice"), ["m-1"]) == (
        "moved 0 messages from the DLQ of invoice back to its queue; 1 selected not found in the DLQ "
        "(redriven already, or purged)"
    )
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("header", "host"),
    [
        ("127.0.0.1:8080", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]:8080", "[::1]"),
        ("attacker.example:8080", "attacker.example"),
    ],
)
def test_the_board_reads_the_host_a_request_names(header, host):
    # the name checked against the loopback names (a DNS-rebinding page sends its own)
    assert LoopbackHosts.host_of(header) == host


def asgi_get(app: Any, path: str, query: str = "") -> tuple[int, str]:
    """One GET through the app itself (no server, no browser): its status and page."""
    import asyncio

    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body").decode()


def test_the_list_of_a_parked_state_shows_each_job_as_people_read_it_with_its_wake_up():
    from lambdajobs.board import create_app
    from lambdajobs.testing import TestStack

    # GIVEN a stack whose job index holds every state, and a durable job waiting for a signal
    start = datetime(2030, 1, 1, 9, 0, tzinfo=UTC)
    with (
        isolated_registry(),
        TestStack(DURABLE_JOBS, stack="board-durable", clock=start, job_index="all") as stack,
    ):
        job_id = stack.enqueue("approver", {"timeout_seconds": 3600})
        stack.runner("approver").attempt()
        app = create_app(stack.config, stack.specs)
        # WHEN the board lists the job's records waiting for a signal
        status, page = asgi_get(app, "/jobs/approver", "state=waiting_signal")
    # THEN the job is there, its state described and its wake-up (the wait's timeout) shown
    assert status == 200, page
    assert job_id in page
    assert ">waiting for signal approval</span>" in page
    assert "2030-01-01 10:00:00Z (in 60m)" in page
