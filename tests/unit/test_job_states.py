"""The job lifecycle's one decision (retry or dead) and its states, without AWS."""

from __future__ import annotations

import pytest

from lambdajobs import JobState, PermanentError
from lambdajobs.errors import LambdaJobsError
from lambdajobs.runtime import lifecycle


@pytest.mark.parametrize(
    ("exc", "attempt", "max_attempts", "expected"),
    [
        (RuntimeError("flaky"), 1, 5, JobState.RETRYING),
        (RuntimeError("flaky"), 4, 5, JobState.RETRYING),
        (RuntimeError("flaky"), 5, 5, JobState.DEAD),  # the last attempt: SQS would dead-letter next
        (RuntimeError("flaky"), 7, 5, JobState.DEAD),  # receive count past the limit (a redrive)
        (PermanentError("bad input"), 1, 5, JobState.DEAD),  # retrying cannot help
    ],
)
def test_after_failure_is_the_single_retry_or_dead_decision(exc, attempt, max_attempts, expected):
    assert lifecycle.after_failure(exc, attempt, max_attempts) is expected


def test_states_are_one_enum_whose_values_are_what_the_records_hold():
    assert [s.value for s in JobState] == [
        "pending",
        "running",
        "retrying",
        "waiting",
        "sleeping",
        "waiting_signal",
        "succeeded",
        "dead",
        "cancelled",
        "superseded",
    ]
    assert JobState("dead") is JobState.DEAD and JobState.DEAD == "dead"
    assert {s for s in JobState if s.is_final} == {
        JobState.SUCCEEDED,
        JobState.DEAD,
        JobState.CANCELLED,
        JobState.SUPERSEDED,
    }


@pytest.mark.parametrize("state", [JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED])
def test_fail_moves_a_job_only_to_retrying_or_dead(state):
    with pytest.raises(LambdaJobsError, match="retrying or dead"):
        lifecycle.fail(
            None, "table", "id", "job", state, {"type": "E", "message": "m"}, release=True, ttl_seconds=1
        )
