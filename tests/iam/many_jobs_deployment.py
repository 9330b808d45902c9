"""What tests/iam/test_many_jobs.py adds to `tests.iam.deployment`: a neighbour stack, a real SQS call
judged as allowed or denied, and an app whose jobs spread over nested stacks "deployed" on moto.

- `provision_neighbour(deployment, name)`: the same jobs provisioned again, named by the rule for
  another stack (`<stack>-2`) in the same account: what a second deploy of the app would create.
- `queues_of(provisioned)`: every queue of a provisioned stack by what it is (a job's queue at a
  level, its DLQ, the workflow queue and its DLQ, the Scheduler DLQ), with its URL and ARN.
- `sqs_allowed(deployment, principal, action, queue)`: make one real SQS call as the principal and say
  whether IAM allowed it (a denial is taken from the recorder: the test asserts on it instead).
- `write_split_app` / `synthesize_app`: a generated app (tests/big_app.py) and jobs of its own that
  make the calls a job path makes, synthesized once, without cdk-nag (tests/infra checks it).
- `SplitDeployment`: `Deployment` for such an app: each worker's role comes from the template that
  holds it (the root's or a nested stack's), resolved there; a nested template's Parameters resolve
  to what the root's `AWS::CloudFormation::Stack` resource passes in, resolved in the root.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

import lambdajobs.cdk  # noqa: F401  (before any aws_cdk import: it points jsii at the virtualenv's Node)
from lambdajobs.local.provision import Provisioned, provision
from lambdajobs.runtime.settings import DLQ_SUFFIX
from lambdajobs.testing import TestStack
from tests.big_app import write_jobs
from tests.iam.deployment import PRODUCER_ROLE, REGION, Deployment
from tests.iam.enforcement import Recorder
from tests.iam.template_policies import (
    Principal,
    Resolver,
    Unresolvable,
    managed_policy_principal,
    resolved_environment,
    resource_map,
    role_principal,
    statements,
)

# -- a neighbour stack ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Queue:
    """One queue of a stack: what it is (`kind`: "queue", "dlq", "workflow queue", "workflow dlq",
    "scheduler dlq"), whose (`key`: `queue_key(job, level)` for a job's), its URL and ARN."""

    kind: str
    key: str
    url: str
    arn: str

    @property
    def name(self) -> str:
        return self.url.rsplit("/", 1)[-1]


def provision_neighbour(deployment: Deployment, name: str) -> Provisioned:
    """The deployment's jobs provisioned again as stack `name`, in the same account (as the harness)."""
    return provision(deployment.stack.specs, stack=name, config=deployment.harness, manifest=False)


def queues_of(provisioned: Provisioned) -> list[Queue]:
    """Every queue of a provisioned stack: each job's, at each level, and its DLQ; the workflow queue
    and its DLQ; the Scheduler DLQ."""
    arn_prefix = provisioned.scheduler_dlq_arn.rsplit(":", 1)[0]
    found = []
    for key, queues in sorted(provisioned.queues.items()):
        found.append(Queue("queue", key, queues.queue_url, queues.queue_arn))
        found.append(Queue("dlq", key, queues.dlq_url, queues.dlq_arn))
    workflow_dlq_name = provisioned.workflow_dlq_url.rsplit("/", 1)[-1]
    assert workflow_dlq_name.endswith(DLQ_SUFFIX)
    found += [
        Queue("workflow queue", "", provisioned.workflow_queue_url, provisioned.workflow_queue_arn),
        Queue("workflow dlq", "", provisioned.workflow_dlq_url, f"{arn_prefix}:{workflow_dlq_name}"),
        Queue("scheduler dlq", "", provisioned.scheduler_dlq_url, provisioned.scheduler_dlq_arn),
    ]
    return found


# -- one SQS call, judged -------------------------------------------------------------------------

#: SQS actions whose request names its queue by `QueueUrl`: moto authorizes them against that queue's
#: ARN, as AWS does, so a real call says whether the template allows it.
SQS_CALLS: dict[str, Callable[[Any, str], Any]] = {
    "sqs:SendMessage": lambda sqs, url: sqs.send_message(QueueUrl=url, MessageBody="{}"),
    "sqs:ReceiveMessage": lambda sqs, url: sqs.receive_message(
        QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=0, VisibilityTimeout=0
    ),
    # a receipt handle of no message: authorized first (then refused as invalid, or a no-op)
    "sqs:DeleteMessage": lambda sqs, url: sqs.delete_message(QueueUrl=url, ReceiptHandle="no-message"),
    "sqs:ChangeMessageVisibility": lambda sqs, url: sqs.change_message_visibility(
        QueueUrl=url, ReceiptHandle="no-message", VisibilityTimeout=0
    ),
    "sqs:GetQueueAttributes": lambda sqs, url: sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    ),
    "sqs:PurgeQueue": lambda sqs, url: sqs.purge_queue(QueueUrl=url),
}
#: SQS actions whose request names its queue otherwise (a name, a source ARN): moto authorizes them
#: against `*`, so a real call would be denied on every queue and prove nothing. These tests judge
#: them with the template's documents (`enforcement.allows`), explicit denies included.
SQS_BY_DOCUMENT = frozenset(
    {"sqs:GetQueueUrl", "sqs:StartMessageMoveTask", "sqs:ListMessageMoveTasks", "sqs:CancelMessageMoveTask"}
)


def sqs_actions(principal: Principal) -> set[str]:
    """Every SQS action the principal's documents allow on some resource."""
    return {
        action
        for policy in principal.policies
        for statement in statements(policy.document)
        if statement.get("Effect") == "Allow"
        for action in as_list(statement.get("Action", []))
        if action.startswith("sqs:")
    }


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def sqs_allowed(deployment: Deployment, principal: Principal, action: str, queue: Queue) -> bool:
    """Whether IAM lets `principal` make `action` on `queue`: the real call, made as the principal on
    moto. A denial is taken from the recorder (the caller asserts on what this returns)."""
    assert not deployment.recorder.denials(), "denials from before this call"
    before = len(deployment.calls_by(principal))
    sqs = deployment.config_for(principal, deployment.harness).client("sqs")
    try:
        SQS_CALLS[action](sqs, queue.url)
        error = ""
    except ClientError as exc:
        error = exc.response["Error"]["Code"]
    denied = deployment.recorder.take_denials()
    if denied:
        assert [(d.action, d.resources) for d in denied] == [(action, (queue.arn,))], denied
        assert error, "a denied call that did not fail"  # moto's SQS answers code "403"
        return False
    made = deployment.calls_by(principal)[before:]
    assert [(c.action, c.resources) for c in made] == [(action, (queue.arn,))], made
    return True


# -- an app of many jobs, over nested stacks ------------------------------------------------------

#: Jobs of their own beside the generated ones (names sorting after them: synth places them last, in
#: a nested stack). `wide` enqueues every generated job (more queues than `MAX_TARGET_QUEUES`);
#: `relay` makes every call of a job's path: it enqueues `RELAY_TARGET` (a job of the root stack),
#: retries on n == 0, dead-letters on n < 0.
CUSTOM_JOBS = '''"""Jobs of tests/iam/test_many_jobs.py beside the generated ones."""

from pydantic import BaseModel

from lambdajobs import JobContext, PermanentError, enqueue, job


class Item(BaseModel):
    n: int


@job(timeout_seconds=30, enqueues={wide_targets!r})
def zz_wide(payload: Item, ctx: JobContext) -> dict:
    return {{"n": payload.n}}


@job(timeout_seconds=30, max_attempts=3, enqueues=({relay_target!r},))
def zz_relay(payload: Item, ctx: JobContext) -> dict:
    if payload.n < 0:
        raise PermanentError("a negative n never works")
    if payload.n == 0:
        raise RuntimeError("n == 0 fails this attempt; the next may work")
    enqueue({relay_target!r}, {{"n": payload.n}})
    return {{"n": payload.n}}
'''
RELAY_TARGET = "job_003"


def write_split_app(root: Path, package: str, count: int) -> str:
    """The generated jobs package of `count` jobs (tests/big_app.py) and `CUSTOM_JOBS` in it."""
    write_jobs(root, package, count)
    targets = tuple(f"job_{i:03d}" for i in range(count))
    text = CUSTOM_JOBS.format(wide_targets=targets, relay_target=RELAY_TARGET)
    (root / package / "zz_custom.py").write_text(text)
    return package


def synthesize_app(
    root: Path, package: str, *, stack: str, outdir: Path, stacks_file: Path
) -> tuple[Any, Any]:
    """(cloud assembly, LambdaJobsStack) of the package in `root` (on sys.path from now on: its workers
    import it), declared in a registry of its own. No cdk-nag: tests/infra/test_many_jobs.py runs it."""
    from aws_cdk import App

    from lambdajobs.cdk import LambdaJobsStack
    from lambdajobs.testing import isolated_registry

    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    with isolated_registry():
        app = App(outdir=str(outdir))
        built = LambdaJobsStack(app, stack, jobs=package, stacks_file=stacks_file)
        return app.synth(), built


def forget_package(root: Path, package: str) -> None:
    """Undo `synthesize_app`'s import path and modules."""
    if str(root) in sys.path:
        sys.path.remove(str(root))
    for name in [m for m in sys.modules if m == package or m.startswith(f"{package}.")]:
        del sys.modules[name]


def stack_of(constructs: Any, job: str) -> str | None:
    """The nested stack holding the job (`Jobs2`, ...), or None: the root (`LambdaJobs.groups`)."""
    [index] = [i for i, group in enumerate(constructs.groups) if job in group]
    return f"Jobs{index + 1}" if index else None


@dataclass
class NestedResolver(Resolver):
    """A nested template's values: its own resources (`resources`), and its Parameters, each resolved
    in the root (`parent`) from what the root's `AWS::CloudFormation::Stack` resource passes in
    (`parameters`: name -> the root's expression). `AWS::StackName` is the nested stack's own name,
    not the root's: a value naming it is unresolvable here."""

    parent: Resolver | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    def pseudo(self) -> dict[str, str]:
        found = super().pseudo()
        del found["AWS::StackName"]
        return found

    def attribute(self, logical_id: str, attribute: str, where: str) -> str:
        if logical_id in self.parameters and attribute == "Ref":
            assert self.parent is not None
            given = self.parameters[logical_id]
            return str(self.parent.resolve(given, f"{where} (parameter {logical_id}, from the root stack)"))
        if logical_id == "AWS::StackName":
            raise Unresolvable(
                f"{where}: AWS::StackName in a nested template is the nested stack's own name (not the "
                f"root's, which every physical name derives from: lambdajobs.cdk.layout)"
            )
        return super().attribute(logical_id, attribute, where)


def _own(found: dict[str, dict[str, str]], template: dict[str, Any]) -> dict[str, dict[str, str]]:
    """The moto values of the resources `template` holds (a Ref to any other is not CloudFormation)."""
    return {k: v for k, v in found.items() if k in template["Resources"]}


class SplitDeployment(Deployment):
    """`Deployment` for an app whose jobs spread over nested stacks (`LambdaJobs.groups`).

    The root's principals (producer, continuer, one-time schedules) are made at `start`; a worker's
    role when the test first asks for it (`worker(job)`), from the template that holds it: 47 roles
    made in moto would take most of the test's time. `Deployment.__init__` is not called: it makes a
    principal of every worker, and looks for them all in the root template."""

    def __init__(self, templates: dict[str, dict[str, Any]], constructs: Any, stack: TestStack) -> None:
        assert stack.provisioned is not None
        provisioned = stack.provisioned
        self.constructs, self.stack = constructs, stack
        stack_name = constructs.stack_name
        self.templates = templates  # by file name, as the assembly wrote them
        self.template = templates[f"{stack_name}.template.json"]
        self.account = next(iter(provisioned.queues.values())).queue_arn.split(":")[4]
        self.one_time_role_id = self.logical_id(constructs.scheduler_role)
        role_names = {self.one_time_role_id: provisioned.scheduler_role_arn.rsplit("/", 1)[-1]}

        def found(template: dict[str, Any]) -> dict[str, dict[str, str]]:
            values = resource_map(
                template, constructs, provisioned, account=self.account, region=REGION, role_names=role_names
            )
            return _own(values, template)

        self.resolver = Resolver(
            found(self.template),
            region=REGION,
            account=self.account,
            stack_name=stack_name,
            types={k: v["Type"] for k, v in self.template["Resources"].items()},
        )
        #: Each nested stack's template and resolver, by its construct id (`Jobs2`, ...).
        self.nested: dict[str, tuple[dict[str, Any], NestedResolver]] = {}
        for name, nested in constructs.job_stacks.items():
            template = templates[nested.template_file]
            resource_id = self.logical_id_in_root(nested.nested_stack_resource)
            parameters = self.template["Resources"][resource_id]["Properties"].get("Parameters", {})
            assert set(parameters) == set(template.get("Parameters", {})), name
            self.nested[name] = (
                template,
                NestedResolver(
                    found(template),
                    region=REGION,
                    account=self.account,
                    stack_name=f"{stack_name} {name}",  # never read: see NestedResolver.pseudo
                    types={k: v["Type"] for k, v in template["Resources"].items()},
                    parent=self.resolver,
                    parameters=parameters,
                ),
            )
        self.principals: dict[str, Principal] = {}
        self.continuer = self._add(
            role_principal(
                self.template,
                self.logical_id(constructs.workflows.function.role),
                self.resolver,
                "workflow continuer",
            )
        )
        self.producer = self._add(
            managed_policy_principal(
                self.template,
                [self.logical_id(constructs.producer_policy)],
                self.resolver,
                "producer",
                PRODUCER_ROLE,
            )
        )
        self.operator = self.producer  # the app's operator policy: not exercised on this app
        self.one_time_schedules = self._add(
            role_principal(self.template, self.one_time_role_id, self.resolver, "one-time schedules (run_at)")
        )
        self.recorder = Recorder()
        self.harness_credentials: dict[str, str] = {}

    def logical_id_in_root(self, element: Any) -> str:
        return str(self.constructs.resolve(element.logical_id))

    def stack_of(self, job: str) -> str | None:
        return stack_of(self.constructs, job)

    def where(self, job: str) -> tuple[dict[str, Any], Resolver]:
        """The template holding the job's resources, and its resolver."""
        nested = self.stack_of(job)
        return (self.template, self.resolver) if nested is None else self.nested[nested]

    def worker(self, job: str) -> Principal:
        key = f"worker of {job}"
        if key not in self.principals:
            template, resolver = self.where(job)
            role_id = self.logical_id(self.constructs.workers[job].function.role)
            if role_id not in template["Resources"]:
                raise Unresolvable(f"{key}: role {role_id} is not in the template of its stack")
            principal = role_principal(template, role_id, resolver, key)
            self.principals[key] = principal
            self.create(principal)
        return self.principals[key]

    def worker_environment(self, job: str) -> dict[str, str]:
        template, resolver = self.where(job)
        function = self.logical_id(self.constructs.workers[job].function)
        return resolved_environment(template, function, resolver)
