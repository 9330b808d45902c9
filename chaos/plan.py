"""What a soak does, decided from its seed before it starts: which jobs are poison, slow, scheduled,
re-sent or redelivered, and in what order the producer sends them."""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from chaos.jobs import FLOW, FLOW_KEY_CAP, FLOW_TIMEOUT_SECONDS, SLOW_TIMEOUT_SECONDS, Kind
from chaos.steps import STEPS, STEPS_TIMEOUT_SECONDS

WORK, SLOW = "chaos_work", "chaos_slow"
#: Flow control (`PlannedJob.flow`): a bulk job cancelled before it runs (its cancel recorded before its
#: message is sent, or while its message waits out a delay), a `chaos_flow` job reporting progress that
#: the soak cancels while it runs, a `chaos_flow` job capped per key, a debounced bulk job (a burst's).
FLOWS = ("cancel_before", "cancel_running", "keyed", "debounced")
#: The faults planned around a step job's checkpoints (`chaos.faults`): the invocation crashes just
#: before the checkpoint write of step k (its effect done: it runs again) or just after it landed (it
#: must never run again), or the write fails past its retries (the attempt fails: it runs again).
STEP_CHECKPOINT_FAULTS = ("before_checkpoint", "after_checkpoint", "checkpoint_fails")
#: And around its parks between steps (a job running one step per invocation): the invocation crashes
#: just before the job's first park write (its continuing copy already sent) or just after it landed,
#: or the write fails past its retries (the record keeps the run's lock until its deadline).
STEP_PARK_FAULTS = ("before_park", "after_park", "park_fails")
STEP_FAULTS = STEP_CHECKPOINT_FAULTS + STEP_PARK_FAULTS


@dataclass(frozen=True)
class Settings:
    """The size of a soak and its fault rates. `FULL` is `make chaos`; `QUICK` runs in `make test`."""

    jobs: int = 1000
    seeds: tuple[int, ...] = tuple(range(1, 11))
    processes: int = 2
    #: Of the job function's runs: a plain exception, retried with backoff.
    transient_rate: float = 0.10
    #: Of the jobs: half an invalid payload (dead-lettered at once), half raising on every attempt.
    poison_rate: float = 0.01
    #: Of the jobs: sent again by the producer with the same job id (enqueue(..., job_id=same)).
    resend_rate: float = 0.05
    #: Of the jobs: the very same message body sent again after the job completed (a lost delete).
    redeliver_rate: float = 0.03
    #: Of the jobs: a scheduled slot, delivered 2 or 3 times with the same id and `scheduled_at`.
    scheduled_rate: float = 0.02
    scheduled_max_deliveries: int = 3
    #: Of the invocations: a crash, at a completion write or before a record's acquire.
    crash_rate: float = 0.02
    #: Of the worker's DynamoDB and SQS calls: a throttle that outlasted the SDK's retries.
    throttle_dynamodb_rate: float = 0.03
    throttle_sqs_rate: float = 0.03
    #: Jobs that sleep past their queue's visibility timeout (shortened to `slow_visibility_seconds`),
    #: within their function timeout: a second poller receives them while the first run holds the lock.
    slow_jobs: int = 3
    slow_sleep_ms: int = 2500
    slow_visibility_seconds: int = 1
    #: The producer sends in chunks and waits while the queue holds more than `max_depth` visible
    #: messages: moto's SQS costs O(depth) per call, so a soak grows by seeds, not depth.
    chunk: int = 50
    max_depth: int = 80
    #: Bounded waits: for redeliveries to become possible, and for the queues to drain and locks to
    #: expire before judging.
    redelivery_timeout_seconds: float = 90.0
    settle_timeout_seconds: float = 120.0
    #: Workflows per seed, sent by the producer while the bulk runs (`lambdajobs.chord`, `chain`): one
    #: chord of `chord_members` members (`chord_poison` of them poison, raising until fixed: they die,
    #: and the callback still runs) and a callback; one chain of `chain_steps` steps. Each workflow is
    #: enqueued again with the same workflow id a little later (a producer retrying its enqueue).
    chord_members: int = 50
    chord_poison: int = 3
    chain_steps: int = 3
    #: And a small chord whose callback dies (poison), with its continuer crashing once after it sent
    #: the callback and before it marked the stage advanced: the notice comes back and sends the
    #: callback again, which must not run the dead callback again (gate `dead_jobs_not_run_again`).
    dead_callback_members: int = 5
    #: Of the workflow's own crash points (a member's counted outcome before its notice, the notice's
    #: send, the continuer after its claim and before marking the stage advanced): a crash, at most
    #: once per job id, per stage's notice, and per notice message, and at most `workflow_crash_max`
    #: times a seed. The first of each always crashes.
    workflow_crash_rate: float = 0.1
    workflow_crash_max: int = 4
    #: The workflow queue's visibility timeout, shortened (it is 6 x the continuer's 120 s timeout) so
    #: a crashed continuer's notice comes back within the soak.
    workflow_visibility_seconds: int = 4
    #: Durable jobs of `step_count` checkpointed steps (`chaos.steps`), per seed: half run one step
    #: per invocation (continuing in a fresh invocation between steps), half every step in one; each
    #: is planned one or two faults (`STEP_FAULTS`) around a checkpoint or a park. One of them is sent
    #: again by the producer (same job id) while it runs, one sent again after it succeeded.
    step_jobs: int = 40
    step_count: int = 3
    #: Of a step's runs: a transient failure raised in the step (the attempt fails; the next replays).
    step_transient_rate: float = 0.05
    #: The step job's queue's visibility timeout, shortened (it is 6 x the job's timeout) so a crashed
    #: invocation comes back within seconds; above the timeout, so a run is not received twice.
    step_visibility_seconds: int = 4
    #: Flow control, per seed (`chaos.jobs.chaos_flow`, the bulk job): `cancel_before` bulk jobs
    #: cancelled before they run (half cancelled before their message is sent, half while it waits out
    #: a delay of `cancel_delay_seconds`); `cancel_running` jobs of `progress_parts` progress reports
    #: `progress_part_ms` apart, cancelled once they reported twice; `keyed_jobs` jobs capped at
    #: `chaos.jobs.FLOW_KEY_CAP` runs at once per key over `keyed_keys` keys, each working
    #: `keyed_work_ms`; `debounce_keys` bursts of `debounce_burst` enqueues of one debounce key, with a
    #: window of `debounce_seconds` (only each burst's last runs).
    cancel_before: int = 20
    cancel_delay_seconds: int = 3
    cancel_running: int = 10
    progress_parts: int = 12
    progress_part_ms: int = 150
    keyed_jobs: int = 60
    keyed_keys: int = 4
    keyed_work_ms: int = 250
    debounce_keys: int = 10
    debounce_burst: int = 5
    debounce_seconds: int = 3
    #: The flow job's queue's visibility timeout, shortened (as the step job's) and above its timeout.
    flow_visibility_seconds: int = 4

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(json.dumps(self.__dict__))
        return data


FULL = Settings()
QUICK = Settings(
    jobs=250,
    seeds=(1, 2),
    slow_jobs=2,
    redelivery_timeout_seconds=40.0,
    settle_timeout_seconds=60.0,  # a bound: a chain's three steps may each crash a few times
    step_jobs=4,  # each fault around a checkpoint and a park at least once over the two seeds
    cancel_before=4,
    cancel_running=2,
    # 6 jobs per key working 0.4 s: two of a key run at once in every run (8 of 0.25 s once did not,
    # with the worker's faster records)
    keyed_jobs=12,
    keyed_keys=2,
    keyed_work_ms=400,
    debounce_keys=3,
    debounce_burst=4,
)
# The slow jobs must fit their function timeout (else Lambda would have killed them: a crash, not a
# slow job) and outlast their visibility timeout.
assert FULL.slow_visibility_seconds * 1000 < FULL.slow_sleep_ms < SLOW_TIMEOUT_SECONDS * 1000
assert FULL.step_visibility_seconds > STEPS_TIMEOUT_SECONDS
assert FULL.flow_visibility_seconds > FLOW_TIMEOUT_SECONDS
assert FULL.progress_parts * FULL.progress_part_ms < FLOW_TIMEOUT_SECONDS * 1000 * 0.8
assert QUICK.keyed_jobs // QUICK.keyed_keys > FLOW_KEY_CAP  # each key has more jobs than its cap


@dataclass(frozen=True)
class PlannedJob:
    job_id: str
    job: str
    kind: Kind = "normal"
    #: Scheduled slots: the slot time (RFC 3339) and how many times the same envelope is sent.
    scheduled_at: str | None = None
    deliveries: int = 1
    resend: bool = False
    redeliver: bool = False
    #: A workflow's member: its workflow id, stage and index (its job id is `<workflow>.<stage>.<index>`).
    workflow: str | None = None
    stage: int = 0
    index: int = 0
    #: A step job's steps, whether each runs in an invocation of its own, and its planned faults:
    #: (a point of `STEP_FAULTS`, the step k it follows or precedes).
    steps: int = 0
    one_per_invocation: bool = False
    step_faults: tuple[tuple[str, int], ...] = ()
    #: A step that raises on its first run (a transient failure, whatever the seeded rate draws).
    step_raises: int | None = None
    #: Flow control (one of `FLOWS`, or none); `key`: a keyed job's concurrency key, a debounced job's
    #: debounce key; `burst`: a debounced job's place in its key's burst (the last one runs).
    flow: str = ""
    key: str = ""
    burst: int = 0
    burst_last: bool = False

    @property
    def poison(self) -> bool:
        return self.kind in ("poison_raise", "poison_invalid")


@dataclass(frozen=True)
class Send:
    """One message the producer sends: a job's first delivery, or a copy of it."""

    job: PlannedJob
    #: "first", "resend" (producer, same id), "scheduled" (a slot delivered again), "burst" (every
    #: enqueue of a debounced key, one after the other: `job` is the burst's first)
    copy: str = "first"


@dataclass(frozen=True)
class PlannedWorkflow:
    """A workflow the producer enqueues before the send at `position`, and again (same workflow id)
    before the send at `again`. `members[s]`: stage s's planned jobs, in member order."""

    workflow_id: str
    kind: str  # "chord" or "chain"
    members: tuple[tuple[PlannedJob, ...], ...]
    position: int
    again: int
    #: The continuer crashes once after sending this workflow's stage 1, before marking stage 0.
    crash_after_sending: bool = False

    @property
    def jobs(self) -> list[PlannedJob]:
        return [job for stage in self.members for job in stage]


@dataclass
class Plan:
    seed: int
    jobs: list[PlannedJob] = field(default_factory=list)
    sends: list[Send] = field(default_factory=list)
    workflows: list[PlannedWorkflow] = field(default_factory=list)

    def by_id(self) -> dict[str, PlannedJob]:
        return {j.job_id: j for j in self.jobs}


def _count(rate: float, total: int, floor: int = 1) -> int:
    return max(floor, round(rate * total))


def make_plan(seed: int, settings: Settings) -> Plan:
    if not settings.jobs:  # the step jobs alone (a soak of durable jobs: `--jobs 0 --no-workflows`)
        steps = _step_jobs(seed, settings)
        sends = _with_step_sends([], steps, settings.chunk, random.Random(f"step-sends:{seed}"))
        return Plan(seed=seed, jobs=steps, sends=sends)
    rng = random.Random(seed)
    total = settings.jobs
    poison = _count(settings.poison_rate, total, floor=2)
    scheduled = _count(settings.scheduled_rate, total)
    slow = settings.slow_jobs
    normal = total - poison - scheduled - slow
    if normal < 10:
        raise ValueError(f"{total} jobs are too few for the faults planned; use {total - normal + 10}+")
    ids = [f"s{seed}-{n:05d}" for n in range(normal + poison + slow)]
    rng.shuffle(ids)
    jobs: list[PlannedJob] = []
    invalid = math.ceil(poison / 2)
    for n in range(poison):
        jobs.append(PlannedJob(ids.pop(), WORK, "poison_invalid" if n < invalid else "poison_raise"))
    for _ in range(slow):
        jobs.append(PlannedJob(ids.pop(), SLOW, "slow"))
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=seed)
    for n in range(scheduled):
        slot = (start + timedelta(minutes=n)).isoformat().replace("+00:00", "Z")
        deliveries = rng.randint(2, settings.scheduled_max_deliveries)
        jobs.append(PlannedJob(f"{WORK}@{slot}", WORK, scheduled_at=slot, deliveries=deliveries))
    plain = [PlannedJob(i, WORK) for i in ids]
    resend, redeliver = _count(settings.resend_rate, total), _count(settings.redeliver_rate, total)
    flagged = rng.sample(range(len(plain)), resend + redeliver)
    resends = set(flagged[:resend])
    for n in flagged:
        old = plain[n]
        plain[n] = PlannedJob(old.job_id, WORK, resend=n in resends, redeliver=n not in resends)
    jobs.extend(plain)
    rng.shuffle(jobs)
    sends = _sends(jobs, settings.chunk, rng)
    workflows = _workflows(seed, settings, len(sends), rng)
    jobs += [job for workflow in workflows for job in workflow.jobs]
    steps = _step_jobs(seed, settings)
    jobs += steps
    sends = _with_step_sends(sends, steps, settings.chunk, random.Random(f"step-sends:{seed}"))
    flows = _flow_jobs(seed, settings)
    jobs += flows
    sends = _with_flow_sends(sends, flows, random.Random(f"flow-sends:{seed}"))
    return Plan(seed=seed, jobs=jobs, sends=sends, workflows=workflows)


def _flow_jobs(seed: int, settings: Settings) -> list[PlannedJob]:
    """The seed's flow-control jobs (`FLOWS`), on ids of their own (the rest of the plan stays as it
    was): bulk jobs cancelled before they run, `chaos_flow` jobs cancelled while they run and capped
    per key (keys taken in turn), and the debounced bursts' enqueues (`b` of key `k`)."""
    found = [
        PlannedJob(f"s{seed}-cancel-{n:03d}", WORK, flow="cancel_before")
        for n in range(settings.cancel_before)
    ]
    found += [
        PlannedJob(f"s{seed}-running-{n:03d}", FLOW, flow="cancel_running", key=f"s{seed}-running-{n:03d}")
        for n in range(settings.cancel_running)
    ]
    found += [
        PlannedJob(f"s{seed}-keyed-{n:03d}", FLOW, flow="keyed", key=f"key-{n % settings.keyed_keys}")
        for n in range(settings.keyed_jobs)
    ]
    for k in range(settings.debounce_keys):
        found += [
            PlannedJob(
                f"s{seed}-debounce-{k:02d}-{b}",
                WORK,
                flow="debounced",
                key=f"s{seed}-debounce-{k:02d}",
                burst=b,
                burst_last=b == settings.debounce_burst - 1,
            )
            for b in range(settings.debounce_burst)
        ]
    return found


def _with_flow_sends(sends: list[Send], flows: list[PlannedJob], rng: random.Random) -> list[Send]:
    """The flow jobs' sends among the others, each within the first half of the order (their checks
    need them done while the soak settles); a debounced key's burst as one send (its enqueues go one
    after the other, well within its window)."""
    keyed: list[tuple[float, Send]] = [(float(n), send) for n, send in enumerate(sends)]
    for planned in flows:
        if planned.flow == "debounced" and planned.burst:
            continue
        copy = "burst" if planned.flow == "debounced" else "first"
        keyed.append((rng.uniform(0, max(1, len(sends) // 2)), Send(planned, copy)))
    return [send for _, send in sorted(keyed, key=lambda pair: pair[0])]


def _step_jobs(seed: int, settings: Settings) -> list[PlannedJob]:
    """The seed's step jobs, on a random stream of their own (the rest of the plan stays as it was):
    even ones one step per invocation, each planned a fault around its first park and one around the
    checkpoint of a step after the first (so the park after step 1 stays, and a park that a random
    fault or a deadline stop takes away leaves a later one for the planned fault: with the fault at a
    given park, a soak on a loaded machine once saw that one park lost and the fault never fired);
    odd ones every step in one invocation, each planned a fault around a checkpoint but
    every other one from the second (planned none: its first attempt runs every step and its success
    is written onto a record that holds their checkpoints; the soak's random faults still reach it). The
    faults go round `STEP_FAULTS` (from where the seed before stopped), so 6 step jobs, or 4 in each
    of two seeds, see each at least once; the step k of each is seeded. The
    second job is sent again by the producer while it runs; the third again after it succeeded; in the
    fourth, a step raises on its first run (the soak's seeded transient failures may draw none)."""
    if not settings.step_jobs:
        return []
    if settings.step_count < 2:
        raise ValueError("step jobs need 2 steps or more (a park between steps)")
    rng = random.Random(f"steps:{seed}")
    count = settings.step_count
    found: list[PlannedJob] = []
    offset = (seed - 1) * math.ceil(settings.step_jobs / 2)  # the next seed goes on round the faults
    for n in range(settings.step_jobs):
        one, turn = n % 2 == 0, n // 2 + offset
        faults: tuple[tuple[str, int], ...]
        if one:
            faults = (
                (STEP_PARK_FAULTS[turn % 3], 1),
                (STEP_CHECKPOINT_FAULTS[(turn + 1) % 3], rng.randint(2, count)),
            )
        elif n % 4 == 1:
            faults = ()  # a first attempt that checkpoints every step and succeeds
        else:
            faults = ((STEP_CHECKPOINT_FAULTS[turn % 3], rng.randint(1, count)),)
        found.append(
            PlannedJob(
                f"s{seed}-steps-{n:03d}",
                STEPS,
                "steps",
                resend=n == 1,
                redeliver=n == 2,
                steps=count,
                one_per_invocation=one,
                step_faults=faults,
                step_raises=rng.randint(1, count) if n == 3 else None,
            )
        )
    return found


def _with_step_sends(
    sends: list[Send], steps: list[PlannedJob], chunk: int, rng: random.Random
) -> list[Send]:
    """The step jobs' sends among the others: each first sent within the first half of the order, a
    re-send a little later (within a chunk: while the job still runs, or parks between steps)."""
    keyed: list[tuple[float, Send]] = [(float(n), send) for n, send in enumerate(sends)]
    for planned in steps:
        position = rng.uniform(0, max(1, len(sends) // 2))
        keyed.append((position, Send(planned)))
        if planned.resend:
            keyed.append((position + rng.uniform(1, chunk), Send(planned, "resend")))
    return [send for _, send in sorted(keyed, key=lambda pair: pair[0])]


def _member(
    workflow_id: str, stage: int, index: int, kind: Kind = "normal", redeliver: bool = False
) -> PlannedJob:
    job_id = f"{workflow_id}.{stage}.{index}"  # lambdajobs.runtime.workflow.member_job_id
    return PlannedJob(job_id, WORK, kind, redeliver=redeliver, workflow=workflow_id, stage=stage, index=index)


def _workflows(seed: int, settings: Settings, sends: int, rng: random.Random) -> list[PlannedWorkflow]:
    """A chord, a chain and a chord whose callback dies, each enqueued at a seeded point of the
    producer's first chunk (a chain's steps run one after the other, each may crash: its tail must fit
    in the soak) and again within the next two chunks. Redelivered after they completed (the very
    body again): two of the chord's members, its callback and the chain's middle step."""
    found: list[tuple[str, str, tuple[tuple[PlannedJob, ...], ...]]] = []
    if settings.chord_members:
        wid = f"s{seed}-chord"
        poison = set(
            rng.sample(range(settings.chord_members), min(settings.chord_poison, settings.chord_members))
        )
        healthy = [i for i in range(settings.chord_members) if i not in poison]
        redelivered = set(rng.sample(healthy, min(2, len(healthy))))
        header = tuple(
            _member(wid, 0, i, "poison_raise" if i in poison else "normal", redeliver=i in redelivered)
            for i in range(settings.chord_members)
        )
        found.append((wid, "chord", (header, (_member(wid, 1, 0, redeliver=True),))))
    if settings.chain_steps:
        wid = f"s{seed}-chain"
        middle = settings.chain_steps // 2
        steps = tuple((_member(wid, i, 0, redeliver=i == middle),) for i in range(settings.chain_steps))
        found.append((wid, "chain", steps))
    if settings.dead_callback_members:
        wid = f"s{seed}-deadcb"
        header = tuple(_member(wid, 0, i) for i in range(settings.dead_callback_members))
        found.append((wid, "chord", (header, (_member(wid, 1, 0, "poison_raise"),))))
    workflows = []
    for wid, kind, members in found:
        position = rng.randrange(0, max(1, min(sends, settings.chunk)))
        again = min(sends, position + rng.randint(1, 2 * settings.chunk))
        crash = wid.endswith("-deadcb")
        workflows.append(PlannedWorkflow(wid, kind, members, position, again, crash_after_sending=crash))
    return workflows


def _sends(jobs: list[PlannedJob], chunk: int, rng: random.Random) -> list[Send]:
    """The producer's order: every job once, and its copies a little later (within two chunks), so a
    copy may arrive while the first delivery waits, runs, or after it finished."""
    keyed: list[tuple[float, Send]] = [(float(n), Send(j)) for n, j in enumerate(jobs)]
    for position, planned in enumerate(jobs):
        copies = ["resend"] if planned.resend else []
        copies += ["scheduled"] * (planned.deliveries - 1)
        keyed += [(position + rng.uniform(0.5, 2 * chunk), Send(planned, copy)) for copy in copies]
    return [send for _, send in sorted(keyed, key=lambda pair: pair[0])]


# -- the kill soak (chaos.kills) --------------------------------------------------------------------

#: The kill soak's jobs (`chaos.kill_jobs`): batches of 4, and one record per invocation.
KILL_BATCH, KILL_SINGLE = "kill_batch", "kill_single"


@dataclass(frozen=True)
class KillSettings:
    """The kill soak's size (`chaos.kills`): jobs run in worker processes of their own, on the local
    stack's moto server. `KILLS_FULL` is `make chaos`; `KILLS_QUICK` runs in `make test`."""

    seed: int = 1
    jobs: int = 300
    #: Of each job's jobs: attempt 1 sleeps past the job's timeout (its process is killed at the
    #: timeout), and, of the others, attempt 1 raises (a transient failure, retried with backoff).
    timeout_rate: float = 0.10
    raise_rate: float = 0.10
    #: Of the jobs: on `KILL_SINGLE` (one record per invocation); the rest on `KILL_BATCH`.
    single_rate: float = 0.33
    #: The parent's kills: a running environment's process SIGKILLed every `kill_interval_seconds`
    #: (seeded within the range) while the jobs drain, `kills` times at most, and only within
    #: `kill_window_seconds` of the first send (later, a kill only prolongs the soak).
    kills: int = 40
    kill_interval_seconds: tuple[float, float] = (0.5, 1.0)
    kill_window_seconds: float = 90.0
    #: The producer sends `chunk` jobs every `chunk_interval_seconds`, so kills meet work throughout.
    chunk: int = 10
    chunk_interval_seconds: float = 0.5
    #: Every run works this long after its effect (a kill may land between its effect and its end); a
    #: planned timeout sleeps `oversleep_seconds` past the job's timeout.
    work_seconds: float = 0.2
    oversleep_seconds: float = 3.0
    #: Bounded wait, from the last send, for every record to be final and the queues empty.
    settle_timeout_seconds: float = 240.0

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(json.dumps(self.__dict__))
        return data


KILLS_FULL = KillSettings()
KILLS_QUICK = KillSettings(jobs=60, kills=10, kill_window_seconds=25.0, settle_timeout_seconds=120.0)


@dataclass(frozen=True)
class PlannedKillJob:
    """One job of the kill soak: which job, and the attempts on which it sleeps past its timeout or
    raises (carried in its payload: the plan reaches the worker process with the message)."""

    job_id: str
    job: str
    sleep_on: tuple[int, ...] = ()
    raise_on: tuple[int, ...] = ()


def make_kill_plan(seed: int, settings: KillSettings) -> list[PlannedKillJob]:
    """The kill soak's jobs in the order the producer sends them: per job (`KILL_BATCH`,
    `KILL_SINGLE`), a seeded tenth of its jobs planned to time out on attempt 1 and another (disjoint)
    tenth to raise on attempt 1, at least one of each."""
    rng = random.Random(f"kills:{seed}")
    total = settings.jobs
    single = set(rng.sample(range(total), round(settings.single_rate * total)))
    sleepy: set[int] = set()
    raising: set[int] = set()
    for mine in ([n for n in range(total) if n in single], [n for n in range(total) if n not in single]):
        timeouts, raises = _count(settings.timeout_rate, len(mine)), _count(settings.raise_rate, len(mine))
        if timeouts + raises > len(mine):
            raise ValueError(f"{total} jobs are too few for the timeouts and raises planned")
        rng.shuffle(mine)
        sleepy.update(mine[:timeouts])
        raising.update(mine[timeouts : timeouts + raises])
    return [
        PlannedKillJob(
            job_id=f"k{seed}-{n:05d}",
            job=KILL_SINGLE if n in single else KILL_BATCH,
            sleep_on=(1,) if n in sleepy else (),
            raise_on=(1,) if n in raising else (),
        )
        for n in range(total)
    ]
