"""The chaos soak at quick size (`python -m chaos --quick`: 2 seeds x 250 jobs, and per seed a chord
of 50 members, a chain of 3 steps and a chord of 5 whose callback dies) passes every gate with every
fault injected, and the same soak catches each regression of `chaos.mutations` (one seed of 100 jobs
each): ReportBatchItemFailures off loses jobs, idempotency keyed on the SQS message id runs jobs
twice, an unregistered Lambda context leaves locks that never expire, and workflow members not
counted leave every workflow unfinished. The quick soak then runs the kill soak (`chaos.kills`: 60
jobs in worker processes of their own on the local stack's moto server, 10 SIGKILLs of running
environments, attempts sleeping past their timeout): its `kills.*` gates pass and its faults happened.

The five soaks run at once, each in processes of its own (a soak patches moto and the worker, and a
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
MUTATION_ARGS = ["--seeds", "1", "--jobs", "100", "--processes", "1", "--settle-timeout", "15"]
#: The mutations of the job worker run without workflows (as before workflows); the workflow's with a
#: small chord and the chain only.
NO_WORKFLOWS = ["--no-workflows"]
WORKFLOW_MUTATIONS = {"no_workflow_tally": ["--chord-members", "10"]}
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
            ["--mutation", name, *MUTATION_ARGS, *WORKFLOW_MUTATIONS.get(name, NO_WORKFLOWS)],
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
