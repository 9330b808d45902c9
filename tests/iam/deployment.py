"""The synthesized stack "deployed" on moto: `TestStack` provisions its resources, and every identity
the template defines becomes a moto role holding the template's policies, resolved.

- `worker(job)`: the role of the job's function. `worker_config(job)` is what the function would
  build at cold start (`StackConfig.from_environment` of the template's environment variables, on
  moto) with that role's credentials; `runner(job)` polls the job's queue as the function's event
  source mapping does (with the function's role) and runs the real worker with that configuration.
- `producer`: a role holding the template's producer policy and nothing else; `producer_config()`
  is what a producer outside the stack has: the stack's name (the rest comes from its manifest).
- `operator`: who runs the CLI's read paths: a role holding the template's operator policy
  (`LambdaJobs.operator_policy`) when the construct has one, else the producer.
- `one_time_schedules`, `cron_schedule(job)`: the execution roles Scheduler sends with;
  `scheduler_as_service(principal)` is a configuration for `LocalScheduler` that delivers as it.
- The harness (setup, assertions) is an IAM user allowed everything: `stack.config`, `harness`.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lambdajobs.runtime import aws
from lambdajobs.runtime.config import StackConfig, clear_manifest_cache
from lambdajobs.runtime.worker import Worker
from lambdajobs.testing import ContinuerRunner, JobRunner, TestStack
from tests.iam.enforcement import Call, Recorder
from tests.iam.template_policies import (
    Principal,
    Resolver,
    logical_id,
    managed_policy_principal,
    ref_ids,
    resolved_environment,
    resource_map,
    role_principal,
)

REGION = "us-east-1"
HARNESS_USER = "lambdajobs-tests-harness"
PRODUCER_ROLE = "lambdajobs-tests-producer"
OPERATOR_ROLE = "lambdajobs-tests-operator"
SESSION = "lambdajobs-tests"
ALLOW_ALL = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


class RoleRunner(JobRunner):
    """A job's queue delivered to its worker as Lambda does it: the event source mapping receives
    and deletes with the function's role, and the worker runs with the function's configuration."""

    def __init__(self, stack: TestStack, job: str, config: StackConfig, priority: str | None = None) -> None:
        super().__init__(
            stack, job, worker=Worker(job, config=config), source_config=config, priority=priority
        )
        self.config = config

    def drain_until(self, done: Callable[[], bool], seconds: float = 30) -> None:
        """Drain, then drain again every half second until `done()` (at most `seconds`): a copy handed
        back (a rate-limit slot missed on a loaded machine) is delayed a second."""
        self.drain()
        deadline = time.monotonic() + seconds
        while not done() and time.monotonic() < deadline:
            time.sleep(0.5)
            self.drain()


class _DeliverAs:
    """An SQS client whose `send_message` is made by another identity; everything else is not."""

    def __init__(self, service: Any, deliverer: Any) -> None:
        self._service, self._deliverer = service, deliverer

    def send_message(self, **request: Any) -> Any:
        return self._deliverer.send_message(**request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._service, name)


class SchedulerAsService:
    """A configuration for `LocalScheduler` that splits it as AWS does: what EventBridge Scheduler
    does as a service (list, get and delete schedules, find the target queue) runs as the harness;
    the delivery to the target, which Scheduler makes with the schedule's execution role, runs as it."""

    def __init__(self, service: StackConfig, role: StackConfig) -> None:
        self.service, self.role = service, role

    def client(self, name: str) -> Any:
        found = self.service.client(name)
        return _DeliverAs(found, self.role.client("sqs")) if name == "sqs" else found


class Deployment:
    """The template's principals on a started `TestStack` (whose resources the template's names match)."""

    def __init__(self, template: dict[str, Any], constructs: Any, stack: TestStack) -> None:
        assert stack.provisioned is not None
        self.template, self.constructs, self.stack = template, constructs, stack
        provisioned = stack.provisioned
        self.account = next(iter(provisioned.queues.values())).queue_arn.split(":")[4]
        # The one-time schedule role: the ARN the local provisioning publishes in the manifest.
        self.one_time_role_id = self.logical_id(constructs.scheduler_role)
        role_names = {self.one_time_role_id: provisioned.scheduler_role_arn.rsplit("/", 1)[-1]}
        self.resolver = Resolver(
            resource_map(
                template, constructs, provisioned, account=self.account, region=REGION, role_names=role_names
            ),
            region=REGION,
            account=self.account,
            stack_name=constructs.stack_name,
            types={k: v["Type"] for k, v in template["Resources"].items()},
        )
        self.principals: dict[str, Principal] = {}
        for job, worker in constructs.workers.items():
            self._add(
                role_principal(
                    template, self.logical_id(worker.function.role), self.resolver, f"worker of {job}"
                )
            )
        # The workflow continuer: the workflow queue delivered to it with its role (`continuer_runner`).
        self.continuer = self._add(
            role_principal(
                template,
                self.logical_id(constructs.workflows.function.role),
                self.resolver,
                "workflow continuer",
            )
        )
        self.producer = self._add(
            managed_policy_principal(
                template,
                [self.logical_id(constructs.producer_policy)],
                self.resolver,
                "producer",
                PRODUCER_ROLE,
            )
        )
        # The CLI's read paths: the template's operator policy once it has one, else the producer's.
        operator_policy = getattr(constructs, "operator_policy", None)
        self.operator = (
            self._add(
                managed_policy_principal(
                    template, [self.logical_id(operator_policy)], self.resolver, "operator", OPERATOR_ROLE
                )
            )
            if operator_policy is not None
            else self.producer
        )
        self.one_time_schedules = self._add(
            role_principal(template, self.one_time_role_id, self.resolver, "one-time schedules (run_at)")
        )
        cron_roles: dict[str, list[str]] = {}  # a schedule role may serve several cron jobs
        for job, worker in constructs.workers.items():
            if worker.schedule is not None:
                [role_id] = ref_ids(self.schedule_target(job)["RoleArn"])
                cron_roles.setdefault(role_id, []).append(job)
        for role_id, jobs in cron_roles.items():
            self._add(
                role_principal(template, role_id, self.resolver, f"cron schedules of {', '.join(jobs)}")
            )
        self.recorder = Recorder()
        self.harness_credentials: dict[str, str] = {}

    # -- building ------------------------------------------------------------------------------------

    def logical_id(self, construct: Any) -> str:
        return logical_id(self.constructs, construct)

    def _add(self, principal: Principal) -> Principal:
        """Register a principal; one role serving two purposes is one principal (the first key)."""
        same_role = [p for p in self.principals.values() if p.role_name == principal.role_name]
        if same_role:
            return same_role[0]
        self.principals[principal.key] = principal
        return principal

    def schedule_target(self, job: str) -> dict[str, Any]:
        """The template's target of a cron job's schedule (RoleArn, DeadLetterConfig, ... unresolved)."""
        schedule = self.constructs.workers[job].schedule
        assert schedule is not None, f"job {job} has no schedule"
        target: dict[str, Any] = self.template["Resources"][self.logical_id(schedule)]["Properties"]["Target"]
        return target

    def cron_schedule(self, job: str) -> Principal:
        """The execution role of a cron job's schedule, as the template gives it."""
        [role_id] = ref_ids(self.schedule_target(job)["RoleArn"])
        return next(p for p in self.principals.values() if p.role_logical_id == role_id)

    def create(self, principal: Principal) -> Principal:
        """Create the principal's role and policies in moto and assume it (harness credentials)."""
        iam, sts = self.harness.client("iam"), self.harness.client("sts")
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    # the account, and the harness by name: moto checks the name when IAM is enforced
                    "Principal": {"AWS": [f"arn:aws:iam::{self.account}:root", self.recorder.harness_arn]},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        role = iam.create_role(RoleName=principal.role_name, AssumeRolePolicyDocument=json.dumps(trust))
        for policy in principal.policies:
            document = json.dumps(policy.for_moto)
            if policy.kind == "AWS::IAM::ManagedPolicy":
                arn = f"arn:aws:iam::{self.account}:policy/{policy.logical_id}"
                try:
                    iam.get_policy(PolicyArn=arn)
                except iam.exceptions.NoSuchEntityException:
                    iam.create_policy(PolicyName=policy.logical_id, PolicyDocument=document)
                iam.attach_role_policy(RoleName=principal.role_name, PolicyArn=arn)
            else:
                iam.put_role_policy(
                    RoleName=principal.role_name, PolicyName=policy.logical_id, PolicyDocument=document
                )
        found = sts.assume_role(RoleArn=role["Role"]["Arn"], RoleSessionName=SESSION)["Credentials"]
        principal.credentials = {
            "access_key_id": found["AccessKeyId"],
            "secret_access_key": found["SecretAccessKey"],
            "session_token": found["SessionToken"],
        }
        self.recorder.principals[principal.role_name] = principal
        return principal

    def start(self) -> Deployment:
        """Make the harness an IAM user allowed everything (the default identity from now on), and
        every principal a role. Runs before IAM is enforced."""
        iam = self.stack.config.client("iam")
        user = iam.create_user(UserName=HARNESS_USER)["User"]
        iam.put_user_policy(
            UserName=HARNESS_USER, PolicyName="everything", PolicyDocument=json.dumps(ALLOW_ALL)
        )
        key = iam.create_access_key(UserName=HARNESS_USER)["AccessKey"]
        self.harness_credentials = {
            "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
            "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
        }
        self.recorder.harness_arn = user["Arn"]
        self._use_environment(self.harness_credentials)
        for principal in list(self.principals.values()):
            self.create(principal)
        return self

    # -- using it ------------------------------------------------------------------------------------

    @property
    def harness(self) -> StackConfig:
        return self.stack.config

    def worker(self, job: str) -> Principal:
        return self.principals[f"worker of {job}"]

    def config_for(self, principal: Principal, base: StackConfig) -> StackConfig:
        return base.with_resources(**principal.credentials)

    def worker_environment(self, job: str) -> dict[str, str]:
        function = self.logical_id(self.constructs.workers[job].function)
        return resolved_environment(self.template, function, self.resolver)

    def worker_config(self, job: str) -> StackConfig:
        """What the job's function builds at cold start, with its role's credentials."""
        return self.config_for(self.worker(job), StackConfig.from_environment(self.worker_environment(job)))

    def runner(self, job: str, priority: str | None = None) -> RoleRunner:
        """The job's queue (a priority level's) delivered to its function, with the function's role."""
        return RoleRunner(self.stack, job, self.worker_config(job), priority)

    def continuer_config(self) -> StackConfig:
        """What the continuer builds at cold start, with its role's credentials."""
        function = self.logical_id(self.constructs.workflows.function)
        environment = resolved_environment(self.template, function, self.resolver)
        return self.config_for(self.continuer, StackConfig.from_environment(environment))

    def continuer_runner(self) -> ContinuerRunner:
        """The workflow queue delivered to the continuer, with the continuer's role."""
        from lambdajobs.runtime.continuer import Continuer

        config = self.continuer_config()
        runner = ContinuerRunner(self.stack, source_config=config)
        runner.continuer = Continuer(config=config)
        return runner

    def producer_config(self) -> StackConfig:
        """A producer outside the stack knows its name and jobs package; the rest is in the manifest."""
        return self.config_for(self.producer, StackConfig(stack=self.stack.stack, jobs=self.stack.jobs))

    def operator_config(self) -> StackConfig:
        """What the CLI builds (`lambdajobs signal`, `lambdajobs cancel`): the stack's name and jobs
        package, the operator's credentials."""
        return self.config_for(self.operator, StackConfig(stack=self.stack.stack, jobs=self.stack.jobs))

    def every_job(self) -> list[str]:
        """Every job that has a worker in the template."""
        return sorted(self.constructs.workers)

    def allowed(self, principal: Principal) -> set[str]:
        """The actions `principal` was allowed (as enforced) so far."""
        return {c.action for c in self.calls_by(principal) if c.allowed}

    def scheduler_as_service(self, principal: Principal) -> SchedulerAsService:
        return SchedulerAsService(self.harness, self.config_for(principal, self.harness))

    def role_arn(self, principal: Principal) -> str:
        return f"arn:aws:iam::{self.account}:role/{principal.role_name}"

    def calls_by(self, principal: Principal) -> list[Call]:
        return self.recorder.by(principal)

    @contextmanager
    def acting_as(self, principal: Principal) -> Iterator[None]:
        """boto3's default credentials are the principal's in this block (for the CLI, which builds
        its own configuration)."""
        credentials = principal.credentials
        self._use_environment(
            {
                "AWS_ACCESS_KEY_ID": credentials["access_key_id"],
                "AWS_SECRET_ACCESS_KEY": credentials["secret_access_key"],
                "AWS_SESSION_TOKEN": credentials["session_token"],
            }
        )
        try:
            yield
        finally:
            self._use_environment(self.harness_credentials)

    @staticmethod
    def _use_environment(credentials: dict[str, str]) -> None:
        for name in CREDENTIAL_VARIABLES:
            os.environ.pop(name, None)
        os.environ.update(credentials)  # TestStack.stop restores what was there before it started
        aws.reset_clients()
        clear_manifest_cache()
