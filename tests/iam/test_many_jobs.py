"""Grants by the stack's naming rule, under enforced IAM: a neighbour stack's queues are out of reach,
the job DLQs are out of reach of the stack-wide senders, a job that enqueues many jobs reaches each,
and a job of a nested stack runs its whole path with its role.

Queues are named `<stack>_<job>` (a level's `<stack>_<job>--<level>`, each DLQ `<name>-dlq`), so the
producer and operator policies, the continuer and the one-time Scheduler role grant `<stack>_*`, with
an explicit deny of `<stack>_*-dlq` on SendMessage (the operator's dead-letter actions are on
`<stack>_*-dlq`). A stack named `<stack>-2` in the same account has names that start with `<stack>`:
only the `_` keeps them apart. A worker gets its targets' exact ARNs, or `<stack>_*` past
`stack.MAX_TARGET_QUEUES`.

The neighbour tests run on this project's template (`deployment`, conftest.py). The others run on a
generated app of 47 jobs over three templates (tests/big_app.py's 45, and `zz_wide` and `zz_relay`
of tests/iam/many_jobs_deployment.py), synthesized once for this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from lambdajobs.cdk.stack import MAX_TARGET_QUEUES
from lambdajobs.runtime import lifecycle
from lambdajobs.runtime.config import using
from lambdajobs.runtime.producer import enqueue
from lambdajobs.runtime.records import get_status
from lambdajobs.runtime.settings import queue_key
from lambdajobs.runtime.workflow import chain, get_workflow, sig
from lambdajobs.testing import TestStack, isolated_registry
from tests.big_app import kinds, templates
from tests.iam.enforcement import allows, enforced
from tests.iam.many_jobs_deployment import (
    RELAY_TARGET,
    SQS_BY_DOCUMENT,
    SQS_CALLS,
    Queue,
    SplitDeployment,
    as_list,
    forget_package,
    provision_neighbour,
    queues_of,
    sqs_actions,
    sqs_allowed,
    stack_of,
    synthesize_app,
    write_split_app,
)
from tests.iam.template_policies import statements

#: The stack-wide principals of the stack, by their attribute of `Deployment`.
SHARED = {
    "producer": "producer",
    "operator": "operator",
    "continuer": "continuer",
    "scheduler": "one_time_schedules",
}
#: Those that send to every job queue of the stack, and may send to no job DLQ.
SENDERS = ("producer", "continuer", "scheduler")


# -- a neighbour stack --------------------------------------------------------------------------


@pytest.mark.parametrize("who", list(SHARED))
def test_a_neighbour_stacks_queues_are_out_of_reach_of_the_stacks_shared_principals(deployment, who):
    principal = getattr(deployment, SHARED[who])
    # GIVEN a second deploy of the same jobs in the account, as stack `<stack>-2`: each of its names
    # starts with this stack's name
    own_stack = deployment.stack.stack
    neighbour = provision_neighbour(deployment, f"{own_stack}-2")
    own, theirs = queues_of(deployment.stack.provisioned), queues_of(neighbour)
    assert {q.kind for q in theirs} == {q.kind for q in own} and len(theirs) == len(own)
    assert all(q.name.startswith(f"{own_stack}-2_") or q.name.startswith(f"{own_stack}-2--") for q in theirs)
    # AND every SQS action the principal's policies allow, each one the tests know how to judge
    actions = sqs_actions(principal)
    assert actions, f"the {who} has no SQS grant"
    unknown = actions - set(SQS_CALLS) - SQS_BY_DOCUMENT
    assert not unknown, f"teach many_jobs_deployment.SQS_CALLS (or SQS_BY_DOCUMENT) {sorted(unknown)}"
    for action in sorted(actions & set(SQS_CALLS)):
        # WHEN the principal calls it on each queue of its own stack, and of the neighbour's
        allowed_own = [q.name for q in own if sqs_allowed(deployment, principal, action, q)]
        allowed_theirs = [q.name for q in theirs if sqs_allowed(deployment, principal, action, q)]
        # THEN it is allowed on some queue of its own stack, and on none of the neighbour's
        assert allowed_own, f"the {who} is allowed {action} on no queue of its own stack"
        assert allowed_theirs == [], f"the {who} may {action} the neighbour's {allowed_theirs}"
    # AND the actions moto cannot judge by queue (a name, a source ARN) likewise, by the documents
    for action in sorted(actions & SQS_BY_DOCUMENT):
        assert any(allows(principal, action, q.arn, {}) for q in own), (who, action)
        assert not [q.name for q in theirs if allows(principal, action, q.arn, {})], (who, action)


@pytest.mark.parametrize("who", SENDERS)
def test_the_stack_wide_senders_send_to_every_job_queue_and_to_no_job_dlq(deployment, who):
    principal = getattr(deployment, SHARED[who])
    jobs = [q for q in queues_of(deployment.stack.provisioned) if q.kind in ("queue", "dlq")]
    assert any("@" in q.key for q in jobs)  # a priority level's queue and DLQ among them
    # WHEN the producer, the continuer or the one-time Scheduler role sends to each job queue and
    # each job DLQ of its own stack, at every level
    allowed = {q.name: sqs_allowed(deployment, principal, "sqs:SendMessage", q) for q in jobs}
    # THEN every queue takes it, and no DLQ does: `<stack>_*` matches the DLQs too, the explicit
    # deny of `<stack>_*-dlq` keeps them out
    assert allowed == {q.name: q.kind == "queue" for q in jobs}


# -- an app of many jobs, in nested stacks ------------------------------------------------------

PACKAGE = "iam_many_jobs"
STACK = "wide"
#: Generated jobs (tests/big_app.py): of every 10 one cron job, one of three levels, one enqueuing 10.
GENERATED = 45


@pytest.fixture(scope="module")
def split_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("split-app")
    write_split_app(root, PACKAGE, GENERATED)
    try:
        assembly, built = synthesize_app(
            root, PACKAGE, stack=STACK, outdir=root / "cdk.out", stacks_file=root / "stacks.json"
        )
        yield {"constructs": built.lambdajobs, "templates": templates(assembly)}
    finally:
        forget_package(root, PACKAGE)


@pytest.fixture
def split(split_app) -> Iterator[SplitDeployment]:
    with isolated_registry(), TestStack(PACKAGE, stack=STACK) as stack:
        deployed = SplitDeployment(split_app["templates"], split_app["constructs"], stack).start()
        with enforced(deployed.recorder):
            yield deployed


def _sent_to(split: SplitDeployment, job: str) -> set[str]:
    calls = split.calls_by(split.worker(job))
    return {r for c in calls if c.action == "sqs:SendMessage" and c.allowed for r in c.resources}


def test_the_app_spreads_over_nested_stacks_that_name_queues_by_the_roots_rule(split_app):
    constructs, found = split_app["constructs"], split_app["templates"]
    # the root, Jobs2 and Jobs3; the jobs of these tests in nested stacks, RELAY_TARGET in the root
    assert sorted(constructs.job_stacks) == ["Jobs2", "Jobs3"] and len(found) == 3
    assert stack_of(constructs, "zz_wide") == stack_of(constructs, "zz_relay") == "Jobs3"
    assert stack_of(constructs, RELAY_TARGET) is None and stack_of(constructs, "job_022") == "Jobs2"
    assert len(constructs.workers) == GENERATED + 2
    # every queue of every template named by the root's rule
    names = [
        r["Properties"]["QueueName"]
        for t in found.values()
        for r in t["Resources"].values()
        if r["Type"] == "AWS::SQS::Queue"
    ]
    assert names and all(n.startswith((f"{STACK}_", f"{STACK}--")) for n in names)


def test_a_job_that_enqueues_more_than_40_queues_reaches_each_by_the_stacks_pattern(split):
    specs = split.constructs.specs
    spec = specs["zz_wide"]
    # GIVEN zz_wide (nested stack Jobs3), which enqueues all 45 generated jobs: 55 queues with levels
    queues = [(target, level) for target in spec.enqueues for level in specs[target].levels]
    assert len(queues) > MAX_TARGET_QUEUES and split.constructs.workers["zz_wide"].sends_by_pattern
    assert split.stack_of("zz_wide") == "Jobs3"
    # WHEN a job running in its function enqueues a handful of them, at every level: the first, a
    # job of levels in the root and one in Jobs2, and the last it declares
    picks = [spec.enqueues[0], "job_001", "job_021", spec.enqueues[-1]]
    assert {split.stack_of(p) for p in picks} == {None, "Jobs2"}
    assert [kinds(GENERATED)[p] for p in ("job_001", "job_021")] == ["levels", "levels"]
    with using(split.worker_config("zz_wide")):
        for target in picks:
            for priority in specs[target].priorities or [None]:
                enqueue(target, {"n": 1}, priority=priority)
    # THEN each was sent, with its role, to the target's queue of that level (any denial fails the test)
    queues_by_key = split.stack.provisioned.queues
    expected = {queues_by_key[queue_key(t, level)].queue_arn for t in picks for level in specs[t].levels}
    assert len(expected) == 8 and _sent_to(split, "zz_wide") == expected


def test_a_job_that_enqueues_10_jobs_reaches_exactly_their_queues(split):
    specs, provisioned = split.constructs.specs, split.stack.provisioned
    job = "job_022"  # a generated job of nested stack Jobs2 that enqueues 10 plain jobs
    targets = specs[job].enqueues
    assert len(targets) == 10 and not split.constructs.workers[job].sends_by_pattern
    # WHEN a job running in its function enqueues each target
    with using(split.worker_config(job)):
        for target in targets:
            enqueue(target, {"n": 1})
    # THEN each was sent (to the root and to Jobs2), with its role
    assert {split.stack_of(t) for t in targets} == {None, "Jobs2"}
    assert _sent_to(split, job) == {provisioned.queues[t].queue_arn for t in targets}
    # AND a plain job it does not enqueue is denied
    other = next(n for n, kind in kinds(GENERATED).items() if kind == "plain" and n not in targets)
    queue = Queue("queue", other, provisioned.queues[other].queue_url, provisioned.queues[other].queue_arn)
    assert not sqs_allowed(split, split.worker(job), "sqs:SendMessage", queue)
    # AND its role grants, beyond its own queue, its DLQ and the workflow queue, SendMessage on exactly
    # its targets' queues (no pattern)
    own = {provisioned.queues[job].queue_arn, provisioned.queues[job].dlq_arn, provisioned.workflow_queue_arn}
    granted = {
        resource
        for policy in split.worker(job).policies
        for statement in statements(policy.document)
        if "sqs:SendMessage" in as_list(statement["Action"]) and statement["Effect"] == "Allow"
        for resource in as_list(statement["Resource"])
    }
    assert granted - own == {provisioned.queues[t].queue_arn for t in targets}


def test_a_job_of_a_nested_stack_runs_its_whole_path_under_its_role(split, clock):
    provisioned = split.stack.provisioned
    relay = provisioned.queues["zz_relay"]
    assert split.stack_of("zz_relay") == "Jobs3" and split.stack_of(RELAY_TARGET) is None
    # GIVEN zz_relay (nested stack Jobs3) as the first step of a chain the producer enqueues, then
    # job_021 (Jobs2): the relay enqueues RELAY_TARGET (a job of the root stack) when it runs
    producer = split.producer_config()
    wid = chain(sig("zz_relay", {"n": 1}), sig("job_021", {"n": 2})).enqueue(
        workflow_id="wf-relay", config=producer
    )
    # AND one that fails once, one that can never work, one whose record another invocation holds
    retried = split.stack.enqueue("zz_relay", {"n": 0})
    dead = split.stack.enqueue("zz_relay", {"n": -1})
    held = split.stack.enqueue("zz_relay", {"n": 5}, job_id="held-1")
    now = time.time()
    config = split.harness
    lifecycle.acquire(
        config.client("dynamodb"),
        config.table_name(),
        held,
        "zz_relay",
        expiration=int(now) + 3600,
        in_progress_expiration=int(now * 1000) + 60_000,
    )
    # WHEN zz_relay's function takes them, with its role (configured by its template's environment,
    # its Parameters resolved to the root's table and role)
    runner = split.runner("zz_relay")
    runner.drain()
    # THEN the failing one waits for its retry and the one that can never work is dead
    assert get_status(retried).state == "retrying"
    assert get_status(dead).state == "dead" and runner.depth(dlq=True) == 1
    # AND the held one was handed back (a copy waits in the queue beside the retry; the record is the
    # other invocation's)
    assert get_status(held).state == "running" and runner.depth() == 2
    # AND its role made every call of the path, each allowed (a denial fails the test): receive,
    # delete, the retry's delay, the hand-back to its own queue, its DLQ, the record writes, the
    # target's queue in the root stack, the workflow notice
    calls = {(c.action, r) for c in split.calls_by(split.worker("zz_relay")) for r in c.resources}
    table = f"arn:aws:dynamodb:{split.resolver.region}:{split.account}:table/{provisioned.table}"
    assert {
        ("sqs:ReceiveMessage", relay.queue_arn),
        ("sqs:DeleteMessage", relay.queue_arn),
        ("sqs:ChangeMessageVisibility", relay.queue_arn),
        ("sqs:SendMessage", relay.queue_arn),
        ("sqs:SendMessage", relay.dlq_arn),
        ("sqs:SendMessage", provisioned.queues[RELAY_TARGET].queue_arn),
        ("sqs:SendMessage", provisioned.workflow_queue_arn),
        ("dynamodb:UpdateItem", table),
    } <= calls
    # AND the relayed job runs in the root stack, with its function's role
    target = split.runner(RELAY_TARGET)
    assert target.depth() == 1
    target.drain()
    assert target.depth() == 0 and target.depth(dlq=True) == 0
    # AND the continuer sends the chain's next step to Jobs2, whose function runs it: the workflow ends
    continuer = split.continuer_runner()
    continuer.drain()
    split.runner("job_021").drain()
    continuer.drain()
    assert get_workflow(wid, config=producer).state == "succeeded"
