"""The chaos soak's fault injector tells the step ledger why a step's checkpoint did not land, so that
every re-run of a step before its checkpoint has a cause the soak saw (`step_reruns_explained`).

A step job's invocation is stopped at its first worker call past its deadline (Lambda's timeout, which
the emulator applies at the next call): when that call is the step's checkpoint write, the step ran
and its checkpoint never started. A loaded machine (CI, `make test` on 2 cores) meets this; the soak
once counted that re-run as unexplained. A re-run that starts before the run before it reached its
write (the job taken over while that run overran, which Lambda would have stopped) is explained by
that write's outcome when it comes (`chaos.steps.rerun_cause`; a write is told on the thread of the
run that made it).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from chaos.faults import ChaosCrash, FaultInjector
from chaos.steps import Execution, rerun_cause


class Observer:
    def __init__(self) -> None:
        self.checkpoints: list[tuple[str, str, str]] = []
        self.parks: list[str] = []

    def note_checkpoint(self, job_id: str, name: str, outcome: str) -> None:
        self.checkpoints.append((job_id, name, outcome))

    def note_park(self, job_id: str) -> None:
        self.parks.append(job_id)


class Context:
    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def checkpoint_call(job_id: str, step: str) -> dict[str, Any]:
    request = {
        "TableName": "jobs",
        "Key": {"id": {"S": job_id}},
        "UpdateExpression": "SET #step = :step",
        "ExpressionAttributeNames": {"#step": f"step:{step}"},
        "ExpressionAttributeValues": {":step": {"M": {}}},
    }
    return {"body": json.dumps(request).encode()}


def injector(observer: Observer) -> FaultInjector:
    faults = FaultInjector(
        seed=1, crash_rate=0.0, throttle_rates={}, force_throttle_after=10**9, observer=observer
    )
    faults.enabled = False  # the deadline applies whether the faults are on or not
    return faults


def test_a_checkpoint_write_past_the_deadline_is_stopped_and_told_as_timed_out():
    observer = Observer()
    faults = injector(observer)
    stopped = pytest.raises(ChaosCrash, match="past the invocation's deadline at the checkpoint call")
    with faults.invocation(1, Context(remaining_ms=0), deadline=True), stopped:
        faults._before_call("dynamodb", "UpdateItem", checkpoint_call("job-1", "step-2"))
    assert observer.checkpoints == [("job-1", "step-2", "timed_out")]
    assert faults.counts.deadline_stops["checkpoint"] == 1


def test_a_checkpoint_write_within_the_deadline_is_not_stopped_nor_told_before_it_answers():
    observer = Observer()
    faults = injector(observer)
    with faults.invocation(1, Context(remaining_ms=500), deadline=True):
        faults._before_call("dynamodb", "UpdateItem", checkpoint_call("job-1", "step-2"))
        faults._after_call("dynamodb", 200)
    assert observer.checkpoints == [("job-1", "step-2", "landed")]


def run(seq: int, *, raised: bool = False, outcomes: tuple[str, ...] = ()) -> Execution:
    return Execution(seq, 1, False, False, False, raised=raised, outcomes=list(outcomes))


@pytest.mark.parametrize(
    ("before", "again", "writes", "cause"),
    [
        (run(1, raised=True), run(5), [], "raised"),
        (run(1), run(5), [(2, "crashed_before")], "crashed_before"),
        (run(1), run(5), [(2, "throttled"), (3, "refused")], "refused"),
        (run(1), run(5), [(2, "timed_out")], "timed_out"),
        # taken over: the run before reached its write only after the re-run started, past its deadline
        (run(1, outcomes=("timed_out",)), run(5), [(6, "timed_out")], "timed_out"),
        (run(1, outcomes=("refused",)), run(5), [(6, "refused")], "refused"),
        # a failed write after the re-run started that is not the run before's own explains nothing
        (run(1), run(5), [(6, "timed_out")], "other"),
        # nor does a write of its own that landed; nor nothing at all
        (run(1, outcomes=("landed",)), run(5), [(6, "landed")], "other"),
        (run(1), run(5), [], "other"),
    ],
)
def test_each_re_run_of_a_step_is_given_the_cause_the_soak_saw(before, again, writes, cause):
    assert rerun_cause(before, again, writes) == cause


def test_a_write_is_the_outcome_of_the_run_last_started_on_its_thread():
    from chaos.steps import StepLedger

    ledger = StepLedger()
    key = ("job-1", "step-1")
    here, elsewhere = run(1), run(2)
    here.thread, elsewhere.thread = threading.get_ident(), -1
    ledger.executions[key] = [here, elsewhere]
    # WHEN this thread's run writes its checkpoint after the other thread's run started
    ledger.note_checkpoint(*key, "timed_out")
    # THEN it is this run's outcome, not the later run's
    assert (here.outcomes, elsewhere.outcomes) == (["timed_out"], [])
