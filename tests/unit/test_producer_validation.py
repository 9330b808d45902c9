"""Producer-side checks that run before anything is sent: payload validation, delay, job id, batching.

No AWS: only the pure helpers of the producer and the job spec's payload rules are exercised.
"""

import json
from datetime import UTC, datetime
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field

from lambdajobs.runtime.envelope import MAX_MESSAGE_BYTES, decode
from lambdajobs.runtime.errors import EnqueueError, JobIdError, PayloadValidationError
from lambdajobs.runtime.producer import BATCH_MAX_ENTRIES, _check_delay, _prepare, chunk_by_size
from lambdajobs.runtime.spec import job
from lambdajobs.testing import isolated_registry

SECRET = "secret-value-123"


class Reminder(BaseModel):
    user_id: int
    message: str
    remind_at: datetime


class Other(BaseModel):
    user_id: int
    message: str
    remind_at: datetime


class Order(BaseModel):
    order_id: int
    note: str = ""


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]


class Adoption(BaseModel):
    pet: Annotated[Cat | Dog, Field(discriminator="kind")]
    scores: dict[str, int] = {}


def remind(payload: Reminder) -> None:
    pass


def place_order(payload: Order) -> None:
    pass


def adopt(payload: Adoption) -> None:
    pass


@pytest.fixture
def reminder_spec():
    with isolated_registry():
        yield job(remind).spec


@pytest.fixture
def order_spec():
    with isolated_registry():
        yield job(idempotency_key="order_id")(place_order).spec


@pytest.fixture
def adoption_spec():
    with isolated_registry():
        yield job(adopt).spec


WHEN = datetime(2026, 11, 29, 19, 0, 0, tzinfo=UTC)
EXPECTED = {"user_id": 7, "message": "hi", "remind_at": "2026-11-29T19:00:00Z"}


# --- JobSpec.payload_data ---------------------------------------------------------------------------


def test_validate_payload_accepts_a_model_instance(reminder_spec):
    # GIVEN an instance of the job's payload model
    payload = Reminder(user_id=7, message="hi", remind_at=WHEN)

    # WHEN it is validated
    data = reminder_spec.payload_data(payload)

    # THEN JSON-ready data comes back (the datetime as an ISO string)
    assert data == EXPECTED
    assert json.loads(json.dumps(data)) == data


def test_validate_payload_accepts_an_equivalent_dict(reminder_spec):
    # GIVEN a dict with the same data, datetime as a string and the id as a numeric string
    payload = {"user_id": "7", "message": "hi", "remind_at": "2026-11-29T19:00:00Z"}

    # WHEN it is validated
    data = reminder_spec.payload_data(payload)

    # THEN it gives the same JSON-ready data as the instance
    assert data == EXPECTED
    assert data == reminder_spec.payload_data(Reminder(user_id=7, message="hi", remind_at=WHEN))


def test_validate_payload_datetime_becomes_an_iso_string(reminder_spec):
    # GIVEN a dict holding a datetime object
    payload = {"user_id": 1, "message": "m", "remind_at": WHEN}

    # WHEN it is validated
    data = reminder_spec.payload_data(payload)

    # THEN the datetime is an ISO 8601 string that parses back to the same instant
    assert isinstance(data["remind_at"], str)
    assert datetime.fromisoformat(data["remind_at"]) == WHEN


def test_validate_payload_rejects_a_wrong_type_without_echoing_it(reminder_spec):
    # GIVEN a dict whose user_id is not an integer
    payload = {"user_id": SECRET, "message": "hi", "remind_at": "2026-11-29T19:00:00Z"}

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        reminder_spec.payload_data(payload)

    # THEN the error names the job, the model and the field, but not the value
    message = str(excinfo.value)
    assert "job 'remind'" in message
    assert "Reminder" in message
    assert "user_id" in message
    assert SECRET not in message
    assert "\n" not in message


def test_validate_payload_reports_every_field_on_one_line(reminder_spec):
    # GIVEN a dict with three invalid fields
    payload = {"user_id": "x", "message": ["not", "text"], "remind_at": "not a time"}

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        reminder_spec.payload_data(payload)

    # THEN each field is named, on a single line
    message = str(excinfo.value)
    assert "\n" not in message
    for field in ("user_id", "message", "remind_at"):
        assert f"{field}:" in message


def test_validate_payload_rejects_a_missing_field(reminder_spec):
    # GIVEN a dict without `message`
    payload = {"user_id": 1, "remind_at": "2026-11-29T19:00:00Z"}

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        reminder_spec.payload_data(payload)

    # THEN the error names the job and the missing field
    assert "job 'remind'" in str(excinfo.value)
    assert "message" in str(excinfo.value)


@pytest.mark.parametrize("payload", [None, "a string", 42, [1, 2]], ids=repr)
def test_validate_payload_rejects_non_mapping_payloads(reminder_spec, payload):
    # GIVEN a payload that is neither a model instance nor a mapping
    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        reminder_spec.payload_data(payload)

    # THEN the error names the job
    assert "job 'remind'" in str(excinfo.value)


def test_validate_payload_rejects_an_instance_of_another_model(reminder_spec):
    # GIVEN an instance of a different model with identical fields
    payload = Other(user_id=7, message="hi", remind_at=WHEN)

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        reminder_spec.payload_data(payload)

    # THEN the error names the job, the expected model and the given one
    message = str(excinfo.value)
    assert "job 'remind'" in message
    assert "Reminder" in message
    assert "Other" in message


def test_validate_payload_does_not_echo_a_bad_discriminator_tag(adoption_spec):
    # GIVEN a discriminated-union field whose tag is a recognisable value
    payload = {"pet": {"kind": SECRET}}

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        adoption_spec.payload_data(payload)

    # THEN the value does not appear in the error
    assert SECRET not in str(excinfo.value)


def test_validate_payload_does_not_echo_dict_keys(adoption_spec):
    # GIVEN a dict[str, int] field keyed by a recognisable value with a bad value under it
    payload = {"pet": {"kind": "cat"}, "scores": {SECRET: "not a number"}}

    # WHEN it is validated
    with pytest.raises(PayloadValidationError) as excinfo:
        adoption_spec.payload_data(payload)

    # THEN the key does not appear in the error
    assert SECRET not in str(excinfo.value)


# --- _check_delay -------------------------------------------------------------------------------


@pytest.mark.parametrize("delay", [-1, 901, 1.5, True, False, "10", None], ids=repr)
def test_check_delay_rejects_out_of_range_or_non_integer(delay):
    # GIVEN a delay SQS does not accept (or not an int)
    # WHEN it is checked
    # THEN it raises EnqueueError (a lambdajobs error, and a ValueError) naming delay_seconds
    with pytest.raises(EnqueueError, match="delay_seconds"):
        _check_delay(delay)


@pytest.mark.parametrize("delay", [0, 1, 900])
def test_check_delay_accepts_zero_to_900(delay):
    # GIVEN a delay within 0..900 s
    # WHEN it is checked
    # THEN it passes silently
    assert _check_delay(delay) is None


# --- JobSpec.job_id ----------------------------------------------------------------------------------


@pytest.mark.parametrize("job_id", ["a", "order-42", "x" * 256])
def test_check_job_id_accepts_one_to_256_characters(reminder_spec, job_id):
    # GIVEN a job id of 1..256 characters
    # WHEN it is checked
    # THEN it comes back unchanged
    assert reminder_spec.job_id({}, job_id) == job_id


@pytest.mark.parametrize("job_id", ["", "x" * 257, 42, b"bytes"], ids=lambda v: repr(v)[:20])
def test_check_job_id_rejects_empty_too_long_or_non_string(reminder_spec, job_id):
    # GIVEN an empty, too long or non-string id
    # WHEN it is checked
    # THEN it raises JobIdError (a lambdajobs error, and a ValueError) naming job_id
    with pytest.raises(JobIdError, match="job_id"):
        reminder_spec.job_id({}, job_id)


# --- _prepare -----------------------------------------------------------------------------------


def test_prepare_uses_the_given_job_id(order_spec):
    # GIVEN an explicit job id
    # WHEN the message is prepared
    jid, body = _prepare(order_spec, {"order_id": 1}, "mine-1")

    # THEN the id is the given one and the body carries it and the validated payload
    assert jid == "mine-1"
    envelope = decode(body)
    assert (envelope.job, envelope.id, envelope.payload) == (
        "place_order",
        "mine-1",
        {"order_id": 1, "note": ""},
    )


def test_prepare_derives_the_id_from_the_idempotency_key(order_spec):
    # GIVEN two payloads with the same order_id and different notes
    # WHEN they are prepared without a job id
    jid_a, _ = _prepare(order_spec, {"order_id": 1, "note": "a"}, None)
    jid_b, _ = _prepare(order_spec, Order(order_id=1, note="b"), None)
    jid_c, _ = _prepare(order_spec, {"order_id": 2}, None)

    # THEN the same order_id gives the same derived id, another order_id another id
    assert jid_a == jid_b == order_spec.derive_job_id({"order_id": 1})
    assert jid_c != jid_a


def test_prepare_without_key_or_id_makes_a_fresh_uuid(reminder_spec):
    # GIVEN a job without idempotency_key and no job id
    payload = {"user_id": 1, "message": "m", "remind_at": WHEN}

    # WHEN the same payload is prepared twice
    jid_a, body_a = _prepare(reminder_spec, payload, None)
    jid_b, _ = _prepare(reminder_spec, payload, None)

    # THEN each gets its own 32-hex-digit id, written into the body
    assert jid_a != jid_b
    assert len(jid_a) == 32
    int(jid_a, 16)
    assert decode(body_a).id == jid_a


def test_prepare_rejects_an_invalid_payload_before_checking_the_id(reminder_spec):
    # GIVEN an invalid payload and an invalid (empty) job id
    # WHEN it is prepared
    # THEN the payload error is the one raised
    with pytest.raises(PayloadValidationError):
        _prepare(reminder_spec, {"user_id": "nope"}, "")


def test_prepare_rejects_an_invalid_job_id(reminder_spec):
    # GIVEN a valid payload and a job id longer than 256 characters
    payload = {"user_id": 1, "message": "m", "remind_at": WHEN}

    # WHEN it is prepared
    # THEN it raises ValueError naming job_id
    with pytest.raises(ValueError, match="job_id"):
        _prepare(reminder_spec, payload, "x" * 257)


# --- chunk_by_size ------------------------------------------------------------------------------------


def _assert_chunk_limits(chunks):
    for chunk in chunks:
        assert 1 <= len(chunk) <= BATCH_MAX_ENTRIES
        assert sum(len(body.encode()) for _, body in chunk) <= MAX_MESSAGE_BYTES


def test_chunks_of_25_small_bodies_are_10_10_5():
    # GIVEN 25 small bodies
    bodies = [(i, f"body-{i}") for i in range(25)]

    # WHEN they are chunked
    chunks = list(chunk_by_size(bodies))

    # THEN chunks hold 10, 10 and 5 entries within the limits, every entry kept in order
    assert [len(c) for c in chunks] == [10, 10, 5]
    _assert_chunk_limits(chunks)
    assert [entry for chunk in chunks for entry in chunk] == bodies


def test_chunks_of_five_400kb_bodies_are_2_2_1():
    # GIVEN 5 bodies of ~400 KB (three of them exceed 1 MiB together)
    bodies = [(i, chr(ord("a") + i) * 400_000) for i in range(5)]

    # WHEN they are chunked
    chunks = list(chunk_by_size(bodies))

    # THEN chunks hold 2, 2 and 1 entries, none above 1 MiB, every entry kept in order
    assert [len(c) for c in chunks] == [2, 2, 1]
    _assert_chunk_limits(chunks)
    assert [entry for chunk in chunks for entry in chunk] == bodies


def test_chunks_fill_exactly_to_the_byte_limit():
    # GIVEN two bodies that together are exactly 1 MiB, then one more byte
    half = MAX_MESSAGE_BYTES // 2
    bodies = [(0, "a" * half), (1, "b" * half), (2, "c")]

    # WHEN they are chunked
    chunks = list(chunk_by_size(bodies))

    # THEN the first chunk is filled to exactly the limit and the extra byte starts a new one
    assert chunks == [[(0, "a" * half), (1, "b" * half)], [(2, "c")]]
    _assert_chunk_limits(chunks)


def test_chunks_count_utf8_bytes():
    # GIVEN two bodies of 2-byte characters: under 1 MiB together in characters, over it in bytes
    chars = MAX_MESSAGE_BYTES // 4 + 1
    bodies = [(0, "é" * chars), (1, "é" * chars)]

    # WHEN they are chunked
    chunks = list(chunk_by_size(bodies))

    # THEN they go in separate chunks
    assert [len(c) for c in chunks] == [1, 1]
    _assert_chunk_limits(chunks)


def test_chunks_keep_non_contiguous_indexes_in_order():
    # GIVEN the retry case: a subset of indexes, mixed sizes
    bodies = [(3, "x" * 600_000), (7, "y"), (8, "z" * 600_000), *[(20 + i, "s") for i in range(12)]]

    # WHEN they are chunked
    chunks = list(chunk_by_size(bodies))

    # THEN limits hold and the flattened chunks equal the input, in order
    _assert_chunk_limits(chunks)
    assert [entry for chunk in chunks for entry in chunk] == bodies


def test_chunks_of_nothing_is_nothing():
    # GIVEN no bodies
    # WHEN they are chunked
    # THEN no chunk (and so no empty SendMessageBatch call) is produced
    assert list(chunk_by_size([])) == []


def test_a_negative_delay_says_what_to_pass_with_no_upper_bound_to_misstate():
    # GIVEN a negative delay on the path that has no upper bound (enqueue with run_at's checks)
    # WHEN it is checked
    # THEN the error says it is negative and what to pass, and names no "None" bound
    with pytest.raises(EnqueueError, match="is negative: pass 0 or more seconds") as excinfo:
        _check_delay(-5, limit=None)
    assert "None" not in str(excinfo.value)
