"""Tracing's switches, without AWS: the stack's (`LAMBDAJOBS_TRACING`, `StackConfig.tracing`) and the
job's (`@job(tracing=True)`), both off by default and checked when read or declared; and the
producer's rule for sending the trace context (`producer.trace_options`)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import ConfigurationError, DeclarationError
from lambdajobs.runtime.producer import trace_options
from lambdajobs.runtime.settings import ENV_TRACING
from lambdajobs.runtime.spec import JobSpec, job
from lambdajobs.testing import isolated_registry


class Ping(BaseModel):
    n: int


@pytest.mark.parametrize(
    ("value", "on"), [(None, False), ("", False), ("0", False), ("false", False), ("1", True), ("true", True)]
)
def test_the_stacks_tracing_comes_from_its_variable(value, on):
    env = {} if value is None else {ENV_TRACING: value}
    assert StackConfig.from_environment(env).tracing is on


def test_a_bad_tracing_variable_says_what_it_takes():
    with pytest.raises(ConfigurationError, match=r"LAMBDAJOBS_TRACING='yes'; use 1 \(on\) or 0 \(off\)"):
        StackConfig.from_environment({ENV_TRACING: "yes"})


def test_a_jobs_tracing_is_off_by_default_and_must_be_a_bool():
    assert JobSpec.tracing is False
    with isolated_registry():

        @job(tracing=True)
        def traced(payload: Ping) -> None: ...

        @job
        def plain(payload: Ping) -> None: ...

        assert traced.spec.tracing is True and plain.spec.tracing is False
        with pytest.raises(DeclarationError, match=r"job 'odd': tracing='yes'; use True or False"):

            @job(tracing="yes")  # type: ignore[arg-type]
            def odd(payload: Ping) -> None: ...


def test_outside_a_traced_record_nothing_is_sent_unless_the_stack_or_the_job_traces():
    # (no span is current here, so even "on" has no context to send: {} either way, and off costs
    # two flag tests; the functional tests send with a span current)
    assert trace_options(StackConfig()) == {}
    assert trace_options(StackConfig(tracing=True)) == {}
    assert trace_options(StackConfig(), traced=True) == {}
