"""The chaos soak at quick size (`python -m chaos --quick`: 2 seeds x 250 jobs, and per seed a chord
of 50 members, a chain of 3 steps, a chord of 5 whose callback dies and 4 durable jobs of 3
checkpointed steps, crashed around their checkpoints and parks) passes every gate with every fault
injected, and the same soak catches each regression of `chaos.mutations` (one seed of 100 jobs each,
or of durable jobs alone for the durable jobs' regressions): ReportBatchItemFailures off loses jobs,
idempotency keyed on the SQS message id runs jobs twice, an unregistered Lambda context leaves locks
that never expire, workflow members not counted leave every workflow unfinished, a run that does not
replay its checkpoints runs steps again after their checkpoint landed, and a success that rewrites
the record whole drops its checkpoints. The quick soak then runs the kill soak (`chaos.kills`: 60
jobs in worker processes of their own on the local stack's moto server, 10 SIGKILLs of running
environments, attempts sleeping past their timeout): its `kills.*` gates pass and its faults happened.
Flow control runs among the quick soak's jobs (per seed: 4 bulk jobs cancelled before they run, 2 jobs
cancelled while they report progress, 8 jobs capped at 2 runs at once per key over 2 keys, 3 bursts of
4 debounced enqueues): no cancelled job ran after its cancel, no key over its cap, each burst ran once.

The seven soaks run at once, each in processes of its own (a soak patches moto and the worker, and a
mutation must not leak into another run), and write their reports to build/reports/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.mutations import MUTATIONS
from tests.conftest import FAKE_AWS_ENV

ROOT = Path(__file__).resolve().parents[2]
REPORTS = ROOT / "build" / "reports"
MUTATION_ARGS = ["--seeds", "1", "--processes", "1"]
#: The mutations of the job worker run 100 jobs without workflows (as before workflows) and without
#: durable jobs; the workflow's with 30 bulk jobs (its workflows, with a small chord, and no more bulk
#: jobs than it needs: no workflow finishes, whatever their number); the durable jobs' with durable
#: jobs alone (`--jobs 0`): two for a run that does not replay (its job of one step per invocation
#: continues for ever: a short settle), ten for a success that drops checkpoints (its jobs planned no
#: fault, three of them, succeed in their first attempt, where the rewrite happens: with two, one of
#: them sent twice, a loaded `make test` once saw no rewrite).
NO_WORKFLOWS = ["--no-workflows"]
PLAIN = ["--jobs", "100", "--step-jobs", "0", "--settle-timeout", "15"]
MUTATION_SIZES = {
    "no_workflow_tally": [
        "--jobs",
        "30",
        "--step-jobs",
        "0",
        "--settle-timeout",
        "15",
        "--chord-members",
        "10",
    ],
    "no_step_replay": ["--jobs", "0", "--step-jobs", "2", "--settle-timeout", "5", *NO_WORKFLOWS],
    "success_drops_checkpoints": [
        "--jobs",
        "0",
        "--step-jobs",
        "10",
        "--settle-timeout",
        "20",
        *NO_WORKFLOWS,
    ],
}
TIMEOUT_SECONDS = 300
#: Every fault the soak injects, as the report counts it: each must have happened at least once.
FAULTS = (
    "transient",
    "poison_invalid",
    "poison_raise",
    "producer_resends",
    "forced_redeliveries",
    "scheduled_extra_deliveries",
    "slow_received_while_running",
    "crashes.before_completion",
    "crashes.before_start",
    "throttled_dynamodb.*",
    "throttled_sqs.*",
    # workflows: the members' counted writes, reads of the workflow's item and notices, the continuer
    "workflow_enqueued_again",
    "workflow_member_redeliveries",
    "crashes.workflow_after_count",
    "crashes.workflow_at_notice",
    "crashes.continuer_after_claim",
    "crashes.continuer_before_advanced",
    "transaction_conflicts",
    # step jobs: crashes just before and just after a checkpoint and a park, those writes failing
    # past their tries, a step raising, parks between steps (continuations)
    "steps.before_checkpoint",
    "steps.after_checkpoint",
    "steps.checkpoint_fails",
    "steps.before_park",
    "steps.after_park",
    "steps.park_fails",
    "steps.planned_raises",
    "steps.parks_landed",
    "steps.producer_resends",
)
STEP_GATES = (
    "steps_run_after_checkpoint",
    "step_reruns_explained",
    "step_records_true",
    "step_jobs_succeeded",
)
#: The workflow's calls on the faulted clients (`chaos.faults.classify`): the members' counted writes,
#: reads of the workflow's item and notices; the continuer's reads, claim, next stage and stage mark.
WORKFLOW_CALLS = (
    "dynamodb.counted_complete",
    "dynamodb.counted_dead",
    "dynamodb.wf_check",
    "sqs.wf_notice",
    "dynamodb.wf_read",
    "dynamodb.wf_claim",
    "dynamodb.wf_later",
    "sqs.stage_send",
    "dynamodb.wf_finish",
)
#: Flow control's calls on the faulted clients (`chaos.faults.classify`): a key's slot taken and given
#: back, a debounced enqueue's claim, a superseded enqueue's and a cancelled job's records, progress
#: reports (refused once a cancel is recorded).
FLOW_CALLS = (
    "dynamodb.keyslot_take",
    "dynamodb.keyslot_release",
    "dynamodb.debounce_read",
    "dynamodb.debounce_claim",
    "dynamodb.supersede",
    "dynamodb.cancelled",
    "dynamodb.progress",
)
#: The kill soak's gates (`chaos.report.KillReport.gates`), as the run's report names them.
KILL_GATES = (
    "kills.lost",
    "kills.attempts_started_twice",
    "kills.record_attempts",
    "kills.attempts_never_started",
    "kills.duplicate_effects.other",
    "kills.stuck_records",
    "kills.dlq_empty",
    "kills.settled",
    "kills.kills_happened",
    "kills.timeouts_happened",
    "kills.planned_timeouts_killed",
)
#: The kill soak's faults, as its report counts them: each must have happened at least once.
KILL_FAULTS = ("kills", "timeouts", "raised")
WORKFLOW_GATES = (
    "workflow_callbacks",
    "workflow_callback_parents",
    "workflows_done",
    "workflow_stage_counts",
    "chain_order",
)


def _soak(name: str, args: list[str]) -> tuple[Path, subprocess.Popen[str]]:
    out = REPORTS / f"chaos-{name}.json"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "chaos", "--quick", *args, "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_PROFILE", "AWS_ENDPOINT_URL")}
    env |= FAKE_AWS_ENV  # the soak runs on moto in-process; never real credentials, even by mistake
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    return out, process


@pytest.fixture(scope="module")
def reports() -> Iterator[dict[str, dict[str, Any]]]:
    REPORTS.mkdir(parents=True, exist_ok=True)
    runs = {"quick": _soak("quick", [])}
    runs |= {
        name: _soak(
            f"mutation-{name}",
            ["--mutation", name, *MUTATION_ARGS, *MUTATION_SIZES.get(name, [*PLAIN, *NO_WORKFLOWS])],
        )
        for name in MUTATIONS
    }
    deadline = time.monotonic() + TIMEOUT_SECONDS
    found: dict[str, dict[str, Any]] = {}
    try:
        for name, (out, process) in runs.items():
            output, _ = process.communicate(timeout=max(1.0, deadline - time.monotonic()))
            if not out.exists():
                pytest.fail(f"the {name} soak wrote no report (exit {process.returncode}):\n{output[-3000:]}")
            found[name] = json.loads(out.read_text())
            found[name]["output"] = output
    finally:
        for _, process in runs.values():
            if process.poll() is None:
                process.kill()
    yield found


def _count(faults: dict[str, Any], path: str) -> float:
    name, _, key = path.partition(".")
    value = faults.get(name, 0)
    if key == "*":
        return sum(value.values())
    return value.get(key, 0) if key else value


def test_the_quick_soak_faults_the_workflow_calls(reports):
    faults = reports["quick"]["faults"]
    missing = [kind for kind in WORKFLOW_CALLS if not faults["worker_calls"].get(kind)]
    assert missing == [], f"workflow calls never made on the faulted clients: {missing}"
    throttled = {**faults["throttled_dynamodb"], **faults["throttled_sqs"]}
    workflow = {k: n for k, n in throttled.items() if k.startswith(("counted_", "wf_", "stage_"))}
    assert sum(workflow.values()) > 0, json.dumps(faults, indent=1)


def test_the_quick_soak_runs_its_workflows(reports):
    # per seed: a chord of 50 (3 poison), a chain of 3, a chord of 5 whose callback dies
    workflows = reports["quick"]["workflows"]
    seeds = len(reports["quick"]["seeds"])
    assert (workflows["chords"], workflows["chains"], workflows["done"]) == (2 * seeds, seeds, 3 * seeds)
    assert workflows["states"] == {"succeeded": 2 * seeds, "dead": seeds}, json.dumps(workflows, indent=1)
    assert workflows["callback_runs"] == 2 * seeds, json.dumps(workflows, indent=1)
    gates = reports["quick"]["gates"]
    assert {name: gates[name] for name in WORKFLOW_GATES if not gates[name]["passed"]} == {}


def test_the_quick_soak_runs_step_jobs_through_crashes_around_their_checkpoints(reports):
    # per seed: 4 durable jobs of 3 steps, 2 of them one step per invocation (parking between steps)
    steps = reports["quick"]["steps"]
    seeds = len(reports["quick"]["seeds"])
    shown = json.dumps({k: v for k, v in steps.items() if k != "records"}, indent=1)
    assert (steps["jobs"], steps["steps"], steps["one_per_invocation"]) == (4 * seeds, 12 * seeds, 2 * seeds)
    # every planned fault happened, on the worker's own checkpoint and park writes
    assert all(steps["fired_faults"][point] >= 1 for point in steps["planned_faults"]), shown
    calls = reports["quick"]["faults"]["worker_calls"]
    assert calls.get("dynamodb.checkpoint", 0) >= steps["steps"] and calls.get("dynamodb.park", 0) > 0
    # each step checkpointed once, none ran again after that; the re-runs before it have their causes
    assert steps["checkpoints_landed"] == steps["steps"] and steps["succeeded"] == steps["jobs"], shown
    assert (steps["run_again"], steps["landed_twice"], steps["reruns_unexplained"]) == (0, 0, 0), shown
    assert {"crashed_before", "throttled", "raised"} <= set(steps["reruns_by_cause"]), shown
    assert steps["executions"] == steps["steps"] + steps["reruns"] + steps["run_again_after_deadline"]
    gates = reports["quick"]["gates"]
    assert {name: gates[name] for name in STEP_GATES if not gates[name]["passed"]} == {}


FLOW_GATES = ("cancelled_not_run", "key_cap", "debounce_bursts_once")


def test_the_quick_soak_cancels_caps_and_debounces_among_its_faults(reports):
    flow = reports["quick"]["flow"]
    seeds = len(reports["quick"]["seeds"])
    shown = json.dumps(flow, indent=1)
    # per seed: 4 cancelled before they run, 2 while they run, 12 keyed jobs, 3 bursts of 4
    assert (flow["cancelled_before"], flow["cancelled_running"]) == (4 * seeds, 2 * seeds), shown
    assert (flow["keyed_jobs"], flow["bursts"], flow["burst_size"]) == (12 * seeds, 3 * seeds, 4), shown
    # every cancel happened: before a run (cancelled at once), and of a running job (asked to stop; or
    # cancelled at once when, at that instant, it was between attempts: its run failed by a fault)
    outcomes = flow["cancel_outcomes"]
    assert flow["cancel_missed"] == 0 and set(outcomes) <= {"cancelled", "requested"}, shown
    assert outcomes.get("cancelled", 0) >= 4 * seeds, shown
    assert flow["cancel_outcomes"].get("requested", 0) >= 1 and flow["stopped_at_check"] >= 1, shown
    assert flow["states"]["cancel_before"] == {"cancelled": 4 * seeds}, shown
    # a key's runs met its cap (the cap was exercised), and never went over it
    assert flow["max_running_per_key"] == flow["cap"] == 2, shown
    assert flow["states"]["keyed"] == {"succeeded": 12 * seeds}, shown
    # each enqueue of a burst came within the window of the one before (what makes it a burst; on a
    # loaded machine a whole burst may take longer than the window: 3.3 s once)
    assert 0 < flow["burst_gap_seconds_max"] < flow["debounce_seconds"], shown
    # the flow-control calls went through the faulted clients
    calls = reports["quick"]["faults"]["worker_calls"]
    missing = [kind for kind in FLOW_CALLS if not calls.get(kind)]
    assert missing == [], f"flow-control calls never made on the faulted clients: {missing}"
    gates = reports["quick"]["gates"]
    assert {name: gates[name] for name in FLOW_GATES[:2] if not gates[name]["passed"]} == {}


def test_each_debounced_burst_ran_once(reports):
    flow = reports["quick"]["flow"]
    seeds = len(reports["quick"]["seeds"])
    assert flow["states"]["debounced"] == {"succeeded": 3 * seeds, "superseded": 9 * seeds}, flow
    assert reports["quick"]["gates"]["debounce_bursts_once"]["passed"], flow["bursts_not_once"]


def test_the_quick_soak_injects_every_fault(reports):
    faults = reports["quick"]["faults"]
    missing = [path for path in FAULTS if _count(faults, path) <= 0]
    assert missing == [], f"faults that never happened: {missing}\n{json.dumps(faults, indent=1)}"


def test_the_quick_soak_kills_worker_processes_and_passes_the_kill_gates(reports):
    kills = reports["quick"]["kills"]
    assert kills, "the quick soak ran no kill soak"
    assert kills["error"] is None, kills["error"]
    summary = {k: kills[k] for k in ("kills", "kills_mid_run", "timeouts", "raised", "states", "functions")}
    missing = [name for name in KILL_FAULTS if kills[name] <= 0]
    assert missing == [], f"kill soak faults that never happened: {missing}\n{json.dumps(summary)}"
    # every run was in a worker process of its own function, none of them an init failure
    assert all(f["init_errors"] == 0 for f in kills["functions"].values()), kills["functions"]
    gates = reports["quick"]["gates"]
    failed = {name: gates.get(name) for name in KILL_GATES if not gates.get(name, {}).get("passed")}
    assert failed == {}, f"failed kill gates: {json.dumps(failed)}\n{json.dumps(summary)}"


def test_the_quick_soak_passes_every_gate(reports):
    report = reports["quick"]
    failed = {name: gate for name, gate in report["gates"].items() if not gate["passed"]}
    assert failed == {}, f"failed gates: {json.dumps(failed)}\n{report['output']}"


def test_ignoring_batch_item_failures_loses_jobs(reports):
    report = reports["no_partial_batch"]
    assert report["lost"] > 0
    assert not report["gates"]["lost"]["passed"]


def test_idempotency_on_the_message_id_runs_jobs_twice(reports):
    report = reports["message_id_key"]
    assert report["duplicate_effects"]["other"] > 0
    assert not report["gates"]["duplicate_effects.other"]["passed"]


def test_an_unregistered_lambda_context_leaves_locks_that_never_expire(reports):
    report = reports["no_lambda_context"]
    assert report["stuck_records"] > 0 or report["record_mismatches"] > 0
    # the signature of a lock that never expires: a record still `running` after the soak settled
    seed = report["per_seed"][0]
    running = [s for s in seed["stuck"] if s["state"] == "running"]
    running += [m for m in seed["mismatches"] if m["actual"] == "running"]
    assert running, json.dumps({k: seed[k] for k in ("stuck", "mismatches")})


def test_workflow_members_not_counted_leave_workflows_unfinished(reports):
    report = reports["no_workflow_tally"]
    failed = {name for name, gate in report["gates"].items() if not gate["passed"]}
    assert {"workflows_done", "workflow_callbacks"} <= failed, json.dumps(report["gates"], indent=1)
    assert report["workflows"]["callback_effects"] == 0


def test_a_run_that_does_not_replay_its_checkpoints_runs_steps_again(reports):
    report = reports["no_step_replay"]
    assert report["steps"]["run_again"] > 0
    assert not report["gates"]["steps_run_after_checkpoint"]["passed"]


def test_a_success_that_rewrites_the_record_drops_its_checkpoints(reports):
    report = reports["success_drops_checkpoints"]
    gates = report["gates"]
    assert not gates["step_records_true"]["passed"], json.dumps(report["steps"]["records"], indent=1)
    # the steps themselves ran once each: only the record lies
    assert gates["steps_run_after_checkpoint"]["passed"]
    problems = [p for r in report["steps"]["records"] for p in r["problems"]]
    assert any("the soak saw" in p for p in problems), problems
