"""Envelope v1: encode/decode round trip, rejection of malformed bodies, the SQS size limit."""

import json
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from lambdajobs.runtime.envelope import MAX_MESSAGE_BYTES, Envelope, decode, encode
from lambdajobs.runtime.errors import EnvelopeError, PayloadTooLargeError

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
FIXED_NOW = datetime(2026, 11, 29, 19, 0, 0, tzinfo=UTC)
SECRET = "secret-value-123"


def test_max_message_bytes_is_one_mebibyte():
    # GIVEN / WHEN the module's limit
    # THEN it is the SQS limit of 1 MiB
    assert MAX_MESSAGE_BYTES == 1_048_576


# --- round trip ---------------------------------------------------------------------------------


def test_encode_writes_every_envelope_field():
    # GIVEN a job, a payload and an id
    payload = {"to": "a@example.com", "n": 3, "nested": {"k": [1, 2]}}

    # WHEN it is encoded at a fixed time
    body = encode("send_email", payload, "order-42", now=FIXED_NOW)

    # THEN the body is the v1 envelope, enqueued_at in RFC 3339 UTC with a Z
    assert json.loads(body) == {
        "v": 1,
        "job": "send_email",
        "id": "order-42",
        "payload": payload,
        "enqueued_at": "2026-11-29T19:00:00Z",
    }


def test_encode_without_now_stamps_current_utc_time_ending_in_z():
    # GIVEN the current time
    before = datetime.now(UTC)

    # WHEN a message is encoded without `now`
    body = encode("send_email", {}, "id-1")
    after = datetime.now(UTC)

    # THEN enqueued_at is RFC 3339 ending in Z and lies between before and after
    stamp = json.loads(body)["enqueued_at"]
    assert RFC3339_UTC.match(stamp), stamp
    assert before <= datetime.fromisoformat(stamp) <= after


def test_encode_then_decode_round_trips():
    # GIVEN an encoded message with non-ASCII text
    payload = {"to": "zoë@example.com", "amount": 12.5, "tags": ["a", "b"], "none": None}
    body = encode("send_email", payload, "job-1", now=FIXED_NOW)

    # WHEN it is decoded
    envelope = decode(body)

    # THEN every field comes back
    assert isinstance(envelope, Envelope)
    assert envelope.v == 1
    assert envelope.job == "send_email"
    assert envelope.id == "job-1"
    assert envelope.payload == payload
    assert envelope.enqueued_at == FIXED_NOW


def test_decode_minimal_envelope_has_no_id_nor_time():
    # GIVEN the three required fields only
    body = json.dumps({"v": 1, "job": "send_email", "payload": {}})

    # WHEN it is decoded
    envelope = decode(body)

    # THEN id and enqueued_at are None (the worker falls back to the SQS message id)
    assert envelope.id is None
    assert envelope.enqueued_at is None


def test_decode_ignores_unknown_fields():
    # GIVEN an envelope with fields a later version may add
    body = json.dumps({"v": 1, "job": "j", "id": "x", "payload": {"a": 1}, "group": 5, "trace": {"t": 1}})

    # WHEN it is decoded
    envelope = decode(body)

    # THEN the known fields are read and the unknown ones dropped
    assert envelope.payload == {"a": 1}
    assert set(envelope.model_dump()) == {
        "v",
        "job",
        "id",
        "payload",
        "enqueued_at",
        "scheduled_at",
        "priority",
        "workflow",
        "resume",
        "debounce",
    }


def test_priority_is_an_optional_field_of_version_1():
    # GIVEN an envelope without a priority and one with a priority level
    plain = decode(json.dumps({"v": 1, "job": "j", "payload": {}}))
    urgent = decode(json.dumps({"v": 1, "job": "j", "payload": {}, "priority": "high"}))

    # THEN both are version 1; the level is read, and absent means none
    assert (plain.v, plain.priority) == (1, None)
    assert (urgent.v, urgent.priority) == (1, "high")
    # AND the producer writes it only when a level is named
    assert "priority" not in json.loads(encode("j", {}, "id-1"))
    assert json.loads(encode("j", {}, "id-1", priority="high"))["priority"] == "high"


# --- rejections ---------------------------------------------------------------------------------

VALID = {"v": 1, "job": "send_email", "id": "job-1", "payload": {}}


def _without(key):
    return json.dumps({k: v for k, v in VALID.items() if k != key})


def _with(**changes):
    return json.dumps({**VALID, **changes})


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        pytest.param("not json at all", "not JSON", id="non-json"),
        pytest.param("", "not JSON", id="empty-body"),
        pytest.param('{"v": 1, "job": "j", "payload": {}', "not JSON", id="truncated-json"),
        pytest.param("[1, 2, 3]", "JSON list", id="json-list"),
        pytest.param('"a string"', "JSON str", id="json-string"),
        pytest.param(_without("job"), "job:", id="missing-job"),
        pytest.param(_without("payload"), "payload:", id="missing-payload"),
        pytest.param(_without("v"), "v:", id="missing-v"),
        pytest.param(_with(v=2), "v:", id="v-2"),
        pytest.param(_with(id=""), "id:", id="empty-id"),
        pytest.param(_with(job=""), "job:", id="empty-job"),
        pytest.param(_with(id="x" * 257), "id:", id="id-too-long"),
        pytest.param(_with(payload=[1, 2]), "payload:", id="payload-not-object"),
    ],
)
def test_decode_rejects_malformed_body_with_one_line_error(body, mentions):
    # GIVEN a body that is not a valid v1 envelope
    # WHEN it is decoded
    with pytest.raises(EnvelopeError) as excinfo:
        decode(body)

    # THEN the error is one line and says what is wrong
    message = str(excinfo.value)
    assert message
    assert "\n" not in message
    assert mentions in message


def test_decode_reports_every_problem_on_one_line():
    # GIVEN an envelope with a wrong version, no job and no payload
    body = json.dumps({"v": 2, "id": ""})

    # WHEN it is decoded
    with pytest.raises(EnvelopeError) as excinfo:
        decode(body)

    # THEN every problem is named, on a single line
    message = str(excinfo.value)
    assert "\n" not in message
    for loc in ("v:", "job:", "id:", "payload:"):
        assert loc in message


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_with(v=SECRET), id="bad-v"),
        pytest.param(_with(id=SECRET * 20), id="id-too-long"),
        pytest.param(_with(payload=SECRET), id="payload-is-a-string"),
        pytest.param(_with(job=[SECRET]), id="job-is-a-list"),
        pytest.param(_with(enqueued_at=SECRET), id="bad-enqueued-at"),
        pytest.param(f"{SECRET} not json", id="non-json"),
        pytest.param(f'{{"v": 1, "job": "{SECRET}", ', id="truncated-json"),
    ],
)
def test_decode_error_never_contains_the_offending_value(body):
    # GIVEN a malformed envelope carrying a recognisable value
    # WHEN it is decoded
    with pytest.raises(EnvelopeError) as excinfo:
        decode(body)

    # THEN the value does not appear in the error (values may hold personal data)
    assert SECRET not in str(excinfo.value)


def test_decode_rejects_boolean_version():
    # GIVEN an envelope whose version is the JSON boolean true
    # WHEN it is decoded
    # THEN it is rejected: true is not version 1
    with pytest.raises(EnvelopeError):
        decode(_with(v=True))


# --- size limit ---------------------------------------------------------------------------------


def _overhead(job="send_email", job_id="job-1"):
    """Bytes of an envelope whose payload is {"data": ""}: the body minus the string's content."""
    return len(encode(job, {"data": ""}, job_id, now=FIXED_NOW).encode())


def test_encode_accepts_a_body_of_exactly_the_limit():
    # GIVEN a payload sized so the body is exactly MAX_MESSAGE_BYTES
    data = "x" * (MAX_MESSAGE_BYTES - _overhead())

    # WHEN it is encoded
    body = encode("send_email", {"data": data}, "job-1", now=FIXED_NOW)

    # THEN it is accepted at exactly the limit
    assert len(body.encode()) == MAX_MESSAGE_BYTES


def test_encode_accepts_a_body_just_under_the_limit():
    # GIVEN a payload one byte under the limit
    data = "x" * (MAX_MESSAGE_BYTES - _overhead() - 1)

    # WHEN it is encoded
    body = encode("send_email", {"data": data}, "job-1", now=FIXED_NOW)

    # THEN it is accepted
    assert len(body.encode()) == MAX_MESSAGE_BYTES - 1


def test_encode_rejects_a_body_one_byte_over_the_limit():
    # GIVEN a payload one byte over the limit
    data = "x" * (MAX_MESSAGE_BYTES - _overhead() + 1)

    # WHEN it is encoded
    with pytest.raises(PayloadTooLargeError) as excinfo:
        encode("send_email", {"data": data}, "job-1", now=FIXED_NOW)

    # THEN the error names the job, the id, the size and the limit, without the payload
    message = str(excinfo.value)
    assert "job 'send_email'" in message
    assert "'job-1'" in message
    assert str(MAX_MESSAGE_BYTES + 1) in message
    assert str(MAX_MESSAGE_BYTES) in message
    assert "xxxxxxxx" not in message


def test_encode_counts_utf8_bytes_not_characters():
    # GIVEN a payload of 2-byte characters under the limit in characters but over it in bytes
    chars = (MAX_MESSAGE_BYTES - _overhead()) // 2 + 1
    data = "é" * chars
    assert len(json.dumps({"data": data}, ensure_ascii=False)) < MAX_MESSAGE_BYTES

    # WHEN it is encoded
    # THEN it is rejected
    with pytest.raises(PayloadTooLargeError):
        encode("send_email", {"data": data}, "job-1", now=FIXED_NOW)


def test_encode_with_naive_now_still_writes_rfc3339_utc():
    # GIVEN a naive `now` (no tzinfo)
    now = datetime(2026, 11, 29, 19, 0, 0)

    # WHEN a message is encoded with it
    stamp = json.loads(encode("send_email", {}, "job-1", now=now))["enqueued_at"]

    # THEN enqueued_at is still RFC 3339 with a Z
    assert RFC3339_UTC.match(stamp), stamp


def test_encode_with_aware_non_utc_now_keeps_the_instant():
    # GIVEN an aware `now` two hours east of UTC
    now = datetime(2026, 11, 29, 21, 0, 0, tzinfo=timezone(timedelta(hours=2)))

    # WHEN a message is encoded with it
    stamp = json.loads(encode("send_email", {}, "job-1", now=now))["enqueued_at"]

    # THEN enqueued_at carries an offset and names the same instant
    assert datetime.fromisoformat(stamp) == FIXED_NOW


def test_a_body_nested_too_deeply_is_an_envelope_error_not_a_crash():
    from lambdajobs.runtime.envelope import decode, parse_body
    from lambdajobs.runtime.errors import EnvelopeError

    deep = '{"v": 1, "job": "x", "payload": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}"
    for reader in (decode, parse_body):
        with pytest.raises(EnvelopeError, match="nested too deeply"):
            reader(deep)
