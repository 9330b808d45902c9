"""`make chaos`: a seeded soak of the real worker under injected faults, on moto in-process.

Each seed runs in a process of its own (two at a time): a `lambdajobs.testing.TestStack` of the jobs
in `chaos.jobs`, the real `Worker` behind the event source emulator, and faults mixed in one run:
transient failures, poison (invalid payload, and raising until fixed), producer re-sends with the same
job id, forced redelivery of completed messages, crashes mid-batch (before a completion write, or
before a record starts), throttled DynamoDB and SQS calls of the worker, slow jobs received again while
they run, scheduled slots delivered up to 3 times. Workflows run among them under the same faults, the
continuer on the workflow queue too: per seed a chord of 50 members (3 poison) and its callback, a chain
of 3 steps and a chord of 5 whose callback dies; their own calls throttled and crashed around (a
member's counted outcome and its notice, the continuer's claim and its next stage). Then the poison is
fixed, the DLQs redriven and the queues drained again. Durable jobs run among them too (`chaos.steps`,
`chaos.jobs.chaos_steps`: 40 per seed, 4 in the quick soak): jobs of checkpointed steps, half of them
one step per invocation (parking between steps), with the invocation crashing just before and just
after a step's checkpoint write and a park, and those writes failing past their tries; each step's
runs are judged against the checkpoint writes before them (no step runs again once its checkpoint
landed). The report (`build/reports/chaos.json`) counts what each fault did, and the run fails
(non-zero exit) when a gate fails: see `chaos.report.combine`.

Then the kill soak (`chaos.kills`, in a process of its own): the jobs of `chaos.kill_jobs` in worker
processes of their own on the local stack's moto server (its process mode), their processes
SIGKILLed while they run and killed at their timeout; its report is the run's `kills` and its gates
are `kills.*` among the run's (`chaos.report.KillReport.gates`). A run with `mutation` skips it (a
mutation patches this process, which the worker processes do not see).

    python -m chaos                      # the full soak: 10 seeds x 1,000 jobs, then 300 jobs, 40 kills
    python -m chaos --quick              # 2 seeds x 250 jobs, then 60 jobs, 10 kills (make test)
    python -m chaos --quick --no-kills   # the seeds alone
    python -m chaos --quick --mutation no_partial_batch --seeds 1
    python -m chaos --quick --no-workflows  # the job worker alone
    python -m chaos --quick --jobs 0 --step-jobs 6 --no-workflows --no-kills  # durable jobs alone
"""

from __future__ import annotations

import multiprocessing
import sys
import time
import traceback
from dataclasses import replace
from typing import Any

from chaos.plan import FULL, KILLS_FULL, KILLS_QUICK, QUICK, KillSettings, Settings
from chaos.report import ChaosReport, KillReport, SeedReport, combine

__all__ = [
    "FULL",
    "KILLS_FULL",
    "KILLS_QUICK",
    "QUICK",
    "KillSettings",
    "Settings",
    "run",
    "run_kill_soak",
    "run_seed",
]


def run_seed(seed: int, settings: Settings, mutation: str | None = None) -> SeedReport:
    """One seed in this process, with `mutation` (a name in `chaos.mutations.MUTATIONS`) patched in."""
    from chaos.soak import Soak

    if mutation is None:
        return Soak(seed, settings).run()
    from pytest import MonkeyPatch

    from chaos.mutations import MUTATIONS

    with MonkeyPatch.context() as monkeypatch:
        MUTATIONS[mutation](monkeypatch)
        return Soak(seed, settings, mutation).run()


def _seed_in_child(args: tuple[int, Settings, str | None]) -> SeedReport:
    return run_seed(*args)


def run(settings: Settings, mutation: str | None = None) -> ChaosReport:
    """Every seed of `settings`, `settings.processes` at a time, each in a fresh process."""
    started = time.monotonic()
    jobs = [(seed, settings, mutation) for seed in settings.seeds]
    if settings.processes <= 1 or len(jobs) == 1:
        seeds = [_seed_in_child(job) for job in jobs]
    else:
        method = "fork" if sys.platform == "linux" else "spawn"
        context = multiprocessing.get_context(method)
        with context.Pool(processes=settings.processes, maxtasksperchild=1) as pool:
            seeds = pool.map(_seed_in_child, jobs, chunksize=1)
    return combine(seeds, settings.to_dict(), mutation, time.monotonic() - started)


def settings_for(quick: bool, **overrides: Any) -> Settings:
    base = QUICK if quick else FULL
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def kill_settings_for(quick: bool, **overrides: Any) -> KillSettings:
    base = KILLS_QUICK if quick else KILLS_FULL
    return replace(base, **{k: v for k, v in overrides.items() if v is not None})


def _kills_in_child(settings: KillSettings) -> dict[str, Any]:
    from chaos.kills import run_kills

    try:
        return run_kills(settings.seed, settings)
    except Exception:  # a failed soak is a failed gate in the report, with its traceback
        report = KillReport(seed=settings.seed, jobs=settings.jobs, settings=settings.to_dict())
        report.error = traceback.format_exc()[-4000:]
        return report.to_dict()


def run_kill_soak(settings: KillSettings) -> dict[str, Any]:
    """The kill soak (`chaos.kills.run_kills`) in a fresh process: its report, with its gates."""
    method = "fork" if sys.platform == "linux" else "spawn"
    with multiprocessing.get_context(method).Pool(processes=1, maxtasksperchild=1) as pool:
        result: dict[str, Any] = pool.apply(_kills_in_child, (settings,))
    return result
