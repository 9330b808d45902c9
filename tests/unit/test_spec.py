"""Declaration validation of `@job`: defaults, option ranges, signatures, names, registry behaviour.

Every declaration happens inside `isolated_registry()` so no test leaves a job in the process registry.
Payload models live at module level: `@job` resolves annotations through the function's globals.
"""

from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from lambdajobs.runtime.errors import DeclarationError, UnknownJobError
from lambdajobs.runtime.spec import Job, get_spec, job, registered_jobs
from lambdajobs.testing import isolated_registry


class EmailPayload(BaseModel):
    to: str
    subject: str = ""


class OrderPayload(BaseModel):
    order_id: int
    customer: str
    note: str = ""


@dataclass
class NotAModel:
    to: str


def send_email(payload: EmailPayload) -> None:
    """Module-level job function used by most declarations."""


# --- defaults -----------------------------------------------------------------------------------


def test_defaults_are_documented_values():
    # GIVEN a bare declaration
    with isolated_registry():
        # WHEN it is declared without options
        declared = job(send_email)

    # THEN the spec carries the documented defaults
    spec = declared.spec
    assert spec.name == "send_email"
    assert spec.payload_model is EmailPayload
    assert spec.timeout_seconds == 30
    assert spec.max_attempts == 5
    assert spec.batch_size == 10
    assert spec.max_batching_window_seconds == 0
    assert spec.max_concurrency == 10
    assert spec.memory_mb == 256
    assert spec.idempotency_key is None
    assert spec.takes_context is False


def test_decorator_with_options_and_name_override():
    # GIVEN options and an explicit name
    with isolated_registry() as registry:
        # WHEN declared with @job(...)
        declared = job(name="notify", timeout_seconds=60, memory_mb=512)(send_email)

        # THEN the spec is registered under the given name with those options
        assert registry.names() == ["notify"]
    assert declared.spec.name == "notify"
    assert declared.spec.timeout_seconds == 60
    assert declared.spec.memory_mb == 512


@pytest.mark.parametrize(
    ("timeout_seconds", "window", "expected"),
    [(30, 0, 180), (60, 5, 365), (900, 300, 5700), (1, 0, 6)],
)
def test_visibility_timeout_is_six_timeouts_plus_window(timeout_seconds, window, expected):
    # GIVEN a timeout and a batching window
    with isolated_registry():
        # WHEN the job is declared
        declared = job(timeout_seconds=timeout_seconds, max_batching_window_seconds=window)(send_email)

    # THEN the queue's visibility timeout is 6 x timeout + window
    assert declared.spec.visibility_timeout_seconds == expected


# --- option ranges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout_seconds", 0),
        ("timeout_seconds", 901),
        ("max_attempts", 0),
        ("max_attempts", 1000),  # maxReceiveCount is one more, and SQS allows 1000 at most
        ("max_concurrency", 1),
        ("max_concurrency", 1001),
        ("memory_mb", 64),
        ("memory_mb", 10_241),
        ("max_batching_window_seconds", 301),
        ("max_batching_window_seconds", -1),
        ("batch_size", 0),
        ("timeout_seconds", True),
        ("timeout_seconds", 30.0),
    ],
)
def test_out_of_range_option_is_rejected_naming_job_and_option(option, value):
    # GIVEN an option outside its AWS range (or not an int)
    with isolated_registry() as registry:
        # WHEN the job is declared
        with pytest.raises(DeclarationError) as excinfo:
            job(name="ranged", **{option: value})(send_email)

        # THEN nothing is registered
        assert registry.names() == []

    # AND the message names the job, the option and its value
    message = str(excinfo.value)
    assert "job 'ranged'" in message
    assert f"{option}={value!r}" in message


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("timeout_seconds", 1),
        ("timeout_seconds", 900),
        ("max_attempts", 1),
        ("max_attempts", 999),
        ("max_concurrency", 2),
        ("max_concurrency", 1000),
        ("memory_mb", 128),
        ("memory_mb", 10_240),
        ("max_batching_window_seconds", 300),
        ("batch_size", 1),
    ],
)
def test_option_at_range_boundary_is_accepted(option, value):
    # GIVEN an option exactly at a boundary of its range
    with isolated_registry():
        # WHEN the job is declared
        declared = job(name="bounded", **{option: value})(send_email)

    # THEN the spec keeps the value
    assert getattr(declared.spec, option) == value


def test_batch_size_above_ten_without_window_is_rejected():
    # GIVEN batch_size 11 and no batching window
    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN the job is declared
        job(name="batched", batch_size=11, max_batching_window_seconds=0)(send_email)

    # THEN the error names the job, batch_size and the window it needs
    message = str(excinfo.value)
    assert "job 'batched'" in message
    assert "batch_size=11" in message
    assert "max_batching_window_seconds" in message


def test_batch_size_above_ten_with_window_is_accepted():
    # GIVEN batch_size 11 and a 1 s batching window
    with isolated_registry():
        # WHEN the job is declared
        declared = job(name="batched", batch_size=11, max_batching_window_seconds=1)(send_email)

    # THEN it is accepted as declared
    assert declared.spec.batch_size == 11
    assert declared.spec.max_batching_window_seconds == 1


# --- function signature -------------------------------------------------------------------------


def test_missing_payload_annotation_is_rejected():
    # GIVEN a function whose payload parameter has no annotation
    def unannotated(payload):
        pass

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN it is declared
        job(unannotated)

    # THEN the error names the job and asks for a pydantic model
    assert "job 'unannotated'" in str(excinfo.value)
    assert "pydantic model" in str(excinfo.value)


@pytest.mark.parametrize("annotation", [dict, str, NotAModel, dict[str, Any]], ids=lambda a: str(a))
def test_non_pydantic_payload_annotation_is_rejected(annotation):
    # GIVEN a function annotated with something that is not a pydantic model
    def wrong_type(payload):
        pass

    wrong_type.__annotations__ = {"payload": annotation}

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN it is declared
        job(wrong_type)

    # THEN the error names the job
    assert "job 'wrong_type'" in str(excinfo.value)
    assert "pydantic model" in str(excinfo.value)


def test_unresolvable_annotation_is_rejected():
    # GIVEN a forward reference that does not resolve
    def dangling(payload: "DoesNotExist"):  # noqa: F821
        pass

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN it is declared
        job(dangling)

    # THEN the error names the job
    assert "job 'dangling'" in str(excinfo.value)


def test_function_without_parameters_is_rejected():
    # GIVEN a function that takes nothing
    def no_params():
        pass

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN it is declared
        job(no_params)

    # THEN the error names the job and the parameter count
    assert "job 'no_params'" in str(excinfo.value)
    assert "takes 0 parameters" in str(excinfo.value)


def test_function_with_three_parameters_is_rejected():
    # GIVEN a function that takes (payload, ctx, extra)
    def three_params(payload: EmailPayload, ctx: Any, extra: Any):
        pass

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN it is declared
        job(three_params)

    # THEN the error names the job and the parameter count
    assert "job 'three_params'" in str(excinfo.value)
    assert "takes 3 parameters" in str(excinfo.value)


def test_takes_context_is_true_for_payload_and_ctx():
    # GIVEN a function taking (payload, ctx)
    def with_ctx(payload: EmailPayload, ctx: Any):
        pass

    with isolated_registry():
        # WHEN it is declared
        declared = job(with_ctx)

    # THEN the spec records that it takes a context
    assert declared.spec.takes_context is True
    assert declared.spec.payload_model is EmailPayload


def test_takes_context_is_false_for_payload_only():
    # GIVEN a function taking (payload)
    with isolated_registry():
        # WHEN it is declared
        declared = job(send_email)

    # THEN the spec records no context
    assert declared.spec.takes_context is False


def test_job_object_is_still_callable_like_the_function():
    # GIVEN a job function that returns something
    def greet(payload: EmailPayload, ctx: Any = None):
        """Say hello."""
        return {"hello": payload.to, "ctx": ctx}

    with isolated_registry():
        # WHEN it is declared
        declared = job(greet)

    # THEN the returned object is a Job that calls through to the function
    assert isinstance(declared, Job)
    assert declared(EmailPayload(to="a@example.com")) == {"hello": "a@example.com", "ctx": None}
    assert declared(EmailPayload(to="b@example.com"), ctx="c") == {"hello": "b@example.com", "ctx": "c"}
    # AND it keeps the function's identity for tooling
    assert declared.__wrapped__ is greet
    assert declared.__doc__ == "Say hello."
    assert declared.name == "greet"
    assert repr(declared) == "<Job greet>"


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_name",
    ["SendEmail", "send_Email", "1job", "send-email", "send email", "_private", "a" * 49],
)
def test_invalid_job_name_is_rejected(bad_name):
    # GIVEN a name that cannot become a queue / environment variable name
    with isolated_registry() as registry:
        # WHEN a job is declared with it
        with pytest.raises(DeclarationError) as excinfo:
            job(name=bad_name)(send_email)

        # THEN nothing is registered
        assert registry.names() == []

    # AND the error names the job and how to fix it
    assert f"job '{bad_name}'" in str(excinfo.value)
    assert "name='...'" in str(excinfo.value)


@pytest.mark.parametrize("good_name", ["a", "send_email", "job2", "a" * 48])
def test_valid_job_name_is_accepted(good_name):
    # GIVEN a well-formed name
    with isolated_registry() as registry:
        # WHEN a job is declared with it
        job(name=good_name)(send_email)

        # THEN it is registered under that name
        assert registry.names() == [good_name]


def test_job_name_with_trailing_newline_is_rejected():
    # GIVEN a name with a trailing newline (it would end up in a queue name and an env variable name)
    with isolated_registry(), pytest.raises(DeclarationError):
        # WHEN a job is declared with it
        # THEN it is rejected like any other invalid name
        job(name="send_email\n")(send_email)


def test_two_functions_under_one_name_are_rejected_naming_both():
    # GIVEN two different functions
    def first_handler(payload: EmailPayload):
        pass

    def second_handler(payload: EmailPayload):
        pass

    with isolated_registry() as registry:
        job(name="dup")(first_handler)

        # WHEN the second is declared under the same name
        with pytest.raises(DeclarationError) as excinfo:
            job(name="dup")(second_handler)

        # THEN the first declaration stays registered
        assert registry.get("dup").func is first_handler

    # AND the error names the job and both functions
    message = str(excinfo.value)
    assert "job 'dup'" in message
    assert "first_handler" in message
    assert "second_handler" in message


def test_redeclaring_the_same_function_is_allowed():
    # GIVEN a job already declared (as when its module is imported again)
    with isolated_registry() as registry:
        job(send_email)

        # WHEN the same function is declared again
        again = job(send_email)

        # THEN it is not an error and one job is registered
        assert registry.names() == ["send_email"]
    assert again.spec.func is send_email


# --- idempotency_key ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["order_number", ("order_id", "missing"), ()])
def test_idempotency_key_outside_the_model_is_rejected(key):
    # GIVEN an idempotency_key naming a field the payload model does not have (or no field)
    def place_order(payload: OrderPayload):
        pass

    with isolated_registry(), pytest.raises(DeclarationError) as excinfo:
        # WHEN the job is declared
        job(idempotency_key=key)(place_order)

    # THEN the error names the job, the model and the offending field
    message = str(excinfo.value)
    assert "job 'place_order'" in message
    assert "OrderPayload" in message
    assert ("order_number" in message) or ("missing" in message) or ("(empty)" in message)


def test_idempotency_key_string_becomes_a_tuple():
    # GIVEN idempotency_key as a single field name
    def place_order(payload: OrderPayload):
        pass

    with isolated_registry():
        # WHEN the job is declared
        declared = job(idempotency_key="order_id")(place_order)

    # THEN the spec holds a one-field tuple
    assert declared.spec.idempotency_key == ("order_id",)


def test_idempotency_key_derives_stable_ids_from_key_fields_only():
    # GIVEN a job keyed on (order_id, customer)
    def place_order(payload: OrderPayload):
        pass

    with isolated_registry():
        spec = job(idempotency_key=("order_id", "customer"))(place_order).spec

    # WHEN ids are derived for payloads with the same key values, differing elsewhere
    a = spec.derive_job_id({"order_id": 42, "customer": "c1", "note": "first"})
    b = spec.derive_job_id({"order_id": 42, "customer": "c1", "note": "second"})
    # AND for payloads whose key values differ
    c = spec.derive_job_id({"order_id": 43, "customer": "c1", "note": "first"})
    d = spec.derive_job_id({"order_id": 42, "customer": "c2", "note": "first"})

    # THEN same key values give the same id, different key values different ids
    assert a == b
    assert len({a, c, d}) == 3
    # AND the id is prefixed with the job name
    assert a.startswith("place_order-")


def test_no_idempotency_key_derives_no_id():
    # GIVEN a job without idempotency_key
    with isolated_registry():
        spec = job(send_email).spec

    # WHEN an id is derived
    # THEN there is none (the producer picks one)
    assert spec.derive_job_id({"to": "a@example.com"}) is None


# --- registry -----------------------------------------------------------------------------------


def test_get_spec_unknown_name_lists_declared_jobs():
    # GIVEN two declared jobs
    with isolated_registry():
        job(name="zeta")(send_email)
        job(name="alpha")(send_email)

        # WHEN an undeclared job is looked up
        with pytest.raises(UnknownJobError) as excinfo:
            get_spec("missing_job")

    # THEN the error names the job and lists the declared ones, sorted
    message = str(excinfo.value)
    assert "unknown job 'missing_job'" in message
    assert "declared jobs: alpha, zeta" in message


def test_get_spec_unknown_name_with_empty_registry_says_none():
    # GIVEN no declared jobs
    with isolated_registry(), pytest.raises(UnknownJobError) as excinfo:
        # WHEN a job is looked up
        get_spec("anything")

    # THEN the error says none are declared
    assert "declared jobs: none" in str(excinfo.value)


def test_get_spec_accepts_name_job_and_spec():
    # GIVEN a declared job
    with isolated_registry():
        declared = job(send_email)

        # WHEN it is looked up by name, Job and JobSpec
        # THEN each gives the same spec
        assert get_spec("send_email") is declared.spec
        assert get_spec(declared) is declared.spec
        assert get_spec(declared.spec) is declared.spec


def test_registered_jobs_is_sorted_by_name():
    # GIVEN jobs declared out of order
    with isolated_registry():
        for name in ["mid", "zeta", "alpha", "beta2"]:
            job(name=name)(send_email)

        # WHEN the registry is listed
        names = [spec.name for spec in registered_jobs()]

    # THEN it is sorted by name
    assert names == ["alpha", "beta2", "mid", "zeta"]


def test_isolated_registry_restores_the_process_registry():
    # GIVEN the process registry as it is
    before = [spec.name for spec in registered_jobs()]

    # WHEN a job is declared in an isolated block
    with isolated_registry():
        job(name="temporary_job")(send_email)
        assert [spec.name for spec in registered_jobs()] == ["temporary_job"]

    # THEN the process registry is back as it was
    assert [spec.name for spec in registered_jobs()] == before


def test_a_jobs_package_folder_without_init_is_refused_with_its_name(tmp_path, monkeypatch):
    # GIVEN a jobs package with a subfolder of modules but no __init__.py (its jobs would be skipped)
    from lambdajobs.errors import ConfigurationError
    from lambdajobs.runtime.spec import load_jobs

    (tmp_path / "probe_ns" / "billing").mkdir(parents=True)
    (tmp_path / "probe_ns" / "__init__.py").write_text("")
    (tmp_path / "probe_ns" / "billing" / "invoices.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    # THEN loading it says which folder needs one
    with isolated_registry(), pytest.raises(ConfigurationError, match=r"probe_ns/billing .*no __init__.py"):
        load_jobs("probe_ns")


def test_a_package_loaded_inside_an_isolated_registry_is_loaded_again_after_it():
    from lambdajobs.runtime.spec import ensure_loaded, load_jobs

    # GIVEN the test jobs package loaded inside an isolated block (its jobs land there only)
    with isolated_registry():
        load_jobs("tests.jobs")
    # WHEN the registry outside ensures the package is loaded, and looks a job of it up by name
    ensure_loaded("tests.jobs")
    # THEN it loaded the package itself (the block's load counted for the block only) and finds it
    assert get_spec("deliver").name == "deliver"


def test_a_dead_letter_age_alarm_that_would_fire_after_deletion_is_refused():
    from lambdajobs import Alarms, job
    from lambdajobs.errors import DeclarationError

    class Tock(BaseModel):
        pass

    def tock(payload: Tock) -> None:
        pass

    tock.__annotations__ = {"payload": Tock, "return": None}
    # 10 days: a dead letter may be deleted 10 days after its move to the DLQ (4 were spent before)
    with (
        isolated_registry(),
        pytest.raises(DeclarationError, match="dlq_oldest_message_age_seconds_above=864000"),
    ):
        job(alarms=Alarms(dlq_oldest_message_age_seconds_above=10 * 86400))(tock)
    with isolated_registry():
        assert job(alarms=Alarms(dlq_oldest_message_age_seconds_above=9 * 86400))(tock).spec.alarms
