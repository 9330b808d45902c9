"""The synthesized template's IAM policies, resolved against what `TestStack` provisioned on moto.

A policy in the template names resources through intrinsic functions (`Fn::GetAtt [Queue, Arn]`,
`Ref`, `Fn::Join` of pseudo parameters, ...). `Resolver` turns them into the ARNs, URLs and names of
the moto resources, through `resource_map`: logical id -> attribute -> value, built from the
`LambdaJobs` construct objects and the template itself, never from policy contents. Anything it
cannot resolve raises `Unresolvable` naming where it sits: a policy resolved by guessing would make
the IAM tests allow or deny silently.

A `Principal` is one identity the deployed stack runs as (a worker function's role, a role holding
the producer policy, a schedule's role) with the policy documents the template attaches to it.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lambdajobs.runtime.settings import queue_key

PARTITION = "aws"
URL_SUFFIX = "amazonaws.com"
#: AWS-managed policies the worker roles carry that these tests cannot exercise, with the reason.
#: Any other AWS-managed policy fails loudly: its statements are not in the template.
IGNORED_AWS_MANAGED = {
    "service-role/AWSLambdaBasicExecutionRole": "CloudWatch Logs only; moto sees no log calls here",
}
#: Condition keys whose value is the same for every request these tests make (in-process botocore
#: speaks HTTPS to moto). A statement conditioned only on these is decided once, when resolved.
STATIC_CONTEXT = {"aws:SecureTransport": "true"}
#: Condition keys that depend on the request and that moto cannot evaluate (it hands identity
#: policies no request context and turns every condition into an explicit deny). They are dropped
#: from what moto sees, and evaluated by `tests.iam.enforcement` where it checks them itself.
REQUEST_CONTEXT_KEYS = {
    "iam:PassedToService": "checked by the implied iam:PassRole check on CreateSchedule/UpdateSchedule",
    "dynamodb:LeadingKeys": "checked by tests.iam.enforcement against the partition keys of the request",
    "lambda:FunctionArn": "checked by tests.iam.enforcement against the event source mapping's function",
}


class Unresolvable(Exception):
    """A template value these tests cannot map to a moto resource (or a condition they cannot judge)."""


# -- intrinsic functions ---------------------------------------------------------------------------


@dataclass
class Resolver:
    """Resolves CloudFormation intrinsics against `resources` (logical id -> attribute -> value;
    attribute "Ref" is what `Ref` returns)."""

    resources: dict[str, dict[str, str]]
    region: str
    account: str
    stack_name: str
    types: dict[str, str] = field(default_factory=dict)  # logical id -> resource type, for errors

    def pseudo(self) -> dict[str, str]:
        return {
            "AWS::Partition": PARTITION,
            "AWS::Region": self.region,
            "AWS::AccountId": self.account,
            "AWS::URLSuffix": URL_SUFFIX,
            "AWS::StackName": self.stack_name,
        }

    def attribute(self, logical_id: str, attribute: str, where: str) -> str:
        if logical_id in self.pseudo() and attribute == "Ref":
            return self.pseudo()[logical_id]
        known = self.resources.get(logical_id)
        if known is None or attribute not in known:
            kind = self.types.get(logical_id, "not in the template")
            have = sorted(known) if known else "nothing"
            raise Unresolvable(
                f"{where}: no moto value for {attribute} of {logical_id} ({kind}; mapped: {have}). "
                f"Map it in tests/iam/template_policies.py resource_map()."
            )
        return known[attribute]

    def resolve(self, value: Any, where: str) -> Any:
        if isinstance(value, list):
            return [self.resolve(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), *_ = value.items()
            if key == "Ref":
                return self.attribute(arg, "Ref", where)
            if key == "Fn::GetAtt":
                logical_id, attribute = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.attribute(logical_id, attribute, where)
            if key == "Fn::Join":
                separator, parts = arg
                return separator.join(str(p) for p in self.resolve(parts, f"{where}.Fn::Join"))
            if key == "Fn::Sub":
                return self._sub(arg, where)
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items, where)[int(self.resolve(index, where))]
            if key == "Fn::Split":
                separator, text = arg
                return str(self.resolve(text, where)).split(separator)
            if key.startswith("Fn::") or key == "Condition":
                raise Unresolvable(f"{where}: {key} is not supported here: {json.dumps(value)}")
        return {k: self.resolve(v, f"{where}.{k}") for k, v in value.items()}

    def _sub(self, arg: Any, where: str) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else arg
        values = {k: self.resolve(v, f"{where}.Fn::Sub.{k}") for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match[1]
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in values:
                return str(values[name])
            logical_id, _, attribute = name.partition(".")
            return self.attribute(logical_id, attribute or "Ref", where)

        return re.sub(r"\$\{([^}]+)\}", replace, text)


def logical_id(constructs: Any, construct: Any) -> str:
    return str(constructs.resolve(construct.node.default_child.logical_id))


def ref_ids(value: Any) -> set[str]:
    """Logical ids referenced (Ref / Fn::GetAtt) anywhere inside a template value."""
    found: set[str] = set()
    if isinstance(value, dict):
        if "Ref" in value:
            found.add(value["Ref"])
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            found.add(target[0] if isinstance(target, list) else target.split(".", 1)[0])
        for v in value.values():
            found |= ref_ids(v)
    elif isinstance(value, list):
        for v in value:
            found |= ref_ids(v)
    return found


def of_type(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == kind}


def moto_role_name(role_logical_id: str) -> str:
    return role_logical_id[:64]  # IAM role names: at most 64 characters


def resource_map(
    template: dict[str, Any],
    constructs: Any,
    provisioned: Any,
    *,
    account: str,
    region: str,
    role_names: dict[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    """logical id -> attribute -> moto value, for every resource of the `LambdaJobs` construct that
    `TestStack` provisions (queues, DLQs, table, bucket, scheduler DLQ, schedule groups), every IAM
    role and managed policy of the template, and SSM parameters with a literal name.

    `role_names`: moto role names for some role logical ids (default: the logical id)."""

    def lid(construct: Any) -> str:
        return logical_id(constructs, construct)

    def queue(url: str, arn: str) -> dict[str, str]:
        return {"Ref": url, "Arn": arn, "QueueUrl": url, "QueueName": url.rsplit("/", 1)[-1]}

    found: dict[str, dict[str, str]] = {}
    for job, worker in constructs.workers.items():
        for level in worker.all_levels:  # the job's own queue and each priority level's
            queues = provisioned.queues[queue_key(job, level.level)]
            found[lid(level.queue)] = queue(queues.queue_url, queues.queue_arn)
            found[lid(level.dead_letter_queue)] = queue(queues.dlq_url, queues.dlq_arn)
    found[lid(constructs.scheduler_dlq)] = queue(provisioned.scheduler_dlq_url, provisioned.scheduler_dlq_arn)
    found[lid(constructs.workflows.queue)] = queue(
        provisioned.workflow_queue_url, provisioned.workflow_queue_arn
    )
    dlq_name = provisioned.workflow_dlq_url.rsplit("/", 1)[-1]
    found[lid(constructs.workflows.dead_letter_queue)] = queue(
        provisioned.workflow_dlq_url, f"arn:{PARTITION}:sqs:{region}:{account}:{dlq_name}"
    )
    found[lid(constructs.table)] = {
        "Ref": provisioned.table,
        "Arn": f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{provisioned.table}",
    }
    found[lid(constructs.bucket)] = {
        "Ref": provisioned.bucket,
        "Arn": f"arn:{PARTITION}:s3:::{provisioned.bucket}",
    }
    for group, name in (
        (constructs.cron_group, provisioned.cron_group),
        (constructs.one_time_group, provisioned.one_time_group),
    ):
        found[lid(group)] = {
            "Ref": name,
            "Arn": f"arn:{PARTITION}:scheduler:{region}:{account}:schedule-group/{name}",
        }
    names = role_names or {}
    for role_id in of_type(template, "AWS::IAM::Role"):
        name = names.get(role_id, moto_role_name(role_id))
        found[role_id] = {"Ref": name, "Arn": f"arn:{PARTITION}:iam::{account}:role/{name}"}
    for policy_id in of_type(template, "AWS::IAM::ManagedPolicy"):
        found[policy_id] = {"Ref": f"arn:{PARTITION}:iam::{account}:policy/{policy_id}"}
    for parameter_id, parameter in of_type(template, "AWS::SSM::Parameter").items():
        name = parameter["Properties"].get("Name")
        if isinstance(name, str):
            found[parameter_id] = {"Ref": name}
    return found


# -- principals ------------------------------------------------------------------------------------


@dataclass
class PolicySource:
    """One policy document attached to a principal in the template, resolved."""

    logical_id: str
    kind: str  # AWS::IAM::Policy, AWS::IAM::ManagedPolicy, or "inline in <role>"
    document: dict[str, Any]  # resolved, conditions kept (what AWS would evaluate)
    for_moto: dict[str, Any]  # resolved, what moto evaluates (see `moto_document`)
    dropped: list[str] = field(default_factory=list)  # conditions moto does not see, and why


@dataclass
class Principal:
    """An identity of the deployed stack: a role and the template's policies attached to it."""

    key: str  # what it is, e.g. "worker of send_email"
    role_logical_id: str | None  # the template's role; None for a role the tests make (producer)
    role_name: str  # its name in moto
    policies: list[PolicySource]
    credentials: dict[str, str] = field(default_factory=dict, repr=False)  # set once assumed in moto

    def describe(self) -> str:
        role = f"template role {self.role_logical_id}" if self.role_logical_id else "a test role"
        attached = ", ".join(f"{p.kind} {p.logical_id}" for p in self.policies) or "no policies"
        return f"{self.key} (moto role {self.role_name}: {role}; policies: {attached})"

    def without(self, predicate: Callable[[dict[str, Any]], bool]) -> Principal:
        """A copy without the statements `predicate` selects (to show that a missing grant fails)."""
        policies = []
        for policy in self.policies:
            trimmed = copy.deepcopy(policy)
            trimmed.logical_id = f"{policy.logical_id}-trimmed"
            for doc in (trimmed.document, trimmed.for_moto):
                doc["Statement"] = [s for s in statements(doc) if not predicate(s)]
            policies.append(trimmed)
        name = f"{self.role_name[:56]}-trimmed"
        return Principal(f"{self.key} (trimmed)", self.role_logical_id, name, policies)


def statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    found = document.get("Statement", [])
    return found if isinstance(found, list) else [found]


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def condition_holds(condition: dict[str, Any], context: dict[str, Any], where: str) -> bool:
    """Evaluate a Condition block against `context` (every key it names must be there).

    Raises:
        Unresolvable: an operator this evaluator does not know, or a key `context` lacks.
    """
    for operator, tests in condition.items():
        for key, expected in tests.items():
            if key not in context:
                raise Unresolvable(f"{where}: condition key {key} has no value here ({operator})")
            actual, wanted = context[key], [str(v) for v in _as_list(expected)]
            if operator == "ForAllValues:StringLike":  # a multivalued key: every value matches
                ok = all(any(fnmatch.fnmatchcase(a, w) for w in wanted) for a in _as_list(actual))
            elif operator == "ForAllValues:StringNotLike":  # every value matches none of the patterns
                ok = all(not any(fnmatch.fnmatchcase(a, w) for w in wanted) for a in _as_list(actual))
            elif operator == "StringEquals":
                ok = actual in wanted
            elif operator == "StringNotEquals":
                ok = actual not in wanted
            elif operator in ("StringLike", "ArnLike"):  # (ArnLike: the whole ARN as one pattern)
                ok = any(fnmatch.fnmatchcase(actual, w) for w in wanted)
            elif operator == "Bool":
                ok = actual.lower() in [w.lower() for w in wanted]
            else:
                raise Unresolvable(f"{where}: condition operator {operator} is not evaluated by these tests")
            if not ok:
                return False
    return True


def moto_document(document: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """What moto evaluates for `document`, and a line per condition it does not see.

    moto passes identity policies no request context and turns any condition into an explicit deny.
    So: a condition on keys of `STATIC_CONTEXT` only is decided now (the statement is kept without
    it, or removed when it does not hold here); a condition on `REQUEST_CONTEXT_KEYS` is removed
    (those keys are checked by `tests.iam.enforcement` itself); any other key raises `Unresolvable`.
    """
    kept, dropped = [], []
    for index, statement in enumerate(statements(document)):
        condition = statement.get("Condition")
        if not condition:
            kept.append(statement)
            continue
        place = f"{where} statement {index} ({statement.get('Action')})"
        keys = {key for tests in condition.values() for key in tests}
        plain = {k: v for k, v in statement.items() if k != "Condition"}
        if keys <= set(STATIC_CONTEXT):
            if condition_holds(condition, STATIC_CONTEXT, place):
                kept.append(plain)
            dropped.append(f"{place}: {json.dumps(condition)} decided with {STATIC_CONTEXT}")
        elif keys <= set(STATIC_CONTEXT) | set(REQUEST_CONTEXT_KEYS):
            kept.append(plain)
            reasons = "; ".join(REQUEST_CONTEXT_KEYS[k] for k in sorted(keys & set(REQUEST_CONTEXT_KEYS)))
            dropped.append(f"{place}: {json.dumps(condition)} not given to moto ({reasons})")
        else:
            unknown = sorted(keys - set(STATIC_CONTEXT) - set(REQUEST_CONTEXT_KEYS))
            raise Unresolvable(
                f"{place}: condition keys {unknown} cannot be evaluated by moto or by these tests; "
                "teach tests/iam/template_policies.py (STATIC_CONTEXT or REQUEST_CONTEXT_KEYS) "
                "what they mean here."
            )
    return {**document, "Statement": kept}, dropped


def _policy_source(logical_id: str, kind: str, document: Any, resolver: Resolver) -> PolicySource:
    where = f"{kind} {logical_id}"
    resolved = resolver.resolve(document, where)
    for_moto, dropped = moto_document(resolved, where)
    return PolicySource(logical_id, kind, resolved, for_moto, dropped)


def _managed_policy(template: dict[str, Any], policy_id: str, resolver: Resolver) -> PolicySource:
    document = template["Resources"][policy_id]["Properties"]["PolicyDocument"]
    return _policy_source(policy_id, "AWS::IAM::ManagedPolicy", document, resolver)


def role_principal(template: dict[str, Any], role_id: str, resolver: Resolver, key: str) -> Principal:
    """The template's role `role_id` with every policy the template attaches to it: its inline
    `Policies`, its `ManagedPolicyArns` (template managed policies; AWS-managed ones must be in
    `IGNORED_AWS_MANAGED`), and every AWS::IAM::Policy / ManagedPolicy whose `Roles` name it."""
    resources = template["Resources"]
    role = resources[role_id]
    assert role["Type"] == "AWS::IAM::Role", f"{role_id} is a {role['Type']}, not a role"
    properties = role["Properties"]
    policies = [
        _policy_source(inline["PolicyName"], f"inline in {role_id}", inline["PolicyDocument"], resolver)
        for inline in properties.get("Policies", [])
    ]
    for index, arn in enumerate(properties.get("ManagedPolicyArns", [])):
        where = f"{role_id}.ManagedPolicyArns[{index}]"
        template_policies = [
            i for i in ref_ids(arn) if resources.get(i, {}).get("Type") == "AWS::IAM::ManagedPolicy"
        ]
        if template_policies:
            policies += [_managed_policy(template, i, resolver) for i in template_policies]
            continue
        text = resolver.resolve(arn, where)
        name = text.split(":iam::aws:policy/", 1)[-1] if ":iam::aws:policy/" in text else None
        if name not in IGNORED_AWS_MANAGED:
            raise Unresolvable(
                f"{where}: managed policy {text} is not in the template, so these tests cannot know its "
                f"statements; add it to IGNORED_AWS_MANAGED with a reason, or model it."
            )
    for policy_id, resource in resources.items():
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and role_id in ref_ids(
            resource["Properties"].get("Roles", [])
        ):
            document = resource["Properties"]["PolicyDocument"]
            policies.append(_policy_source(policy_id, resource["Type"], document, resolver))
    return Principal(key, role_id, resolver.attribute(role_id, "Ref", role_id), policies)


def managed_policy_principal(
    template: dict[str, Any], policy_ids: Iterable[str], resolver: Resolver, key: str, role_name: str
) -> Principal:
    """A role the tests make, holding the template's managed policies `policy_ids` and nothing else
    (what a user attaches to their producer's role)."""
    return Principal(key, None, role_name, [_managed_policy(template, i, resolver) for i in policy_ids])


def resolved_environment(template: dict[str, Any], function_id: str, resolver: Resolver) -> dict[str, str]:
    """A function's environment variables as the deployed function would see them, on moto."""
    variables = template["Resources"][function_id]["Properties"].get("Environment", {}).get("Variables", {})
    return {k: str(v) for k, v in resolver.resolve(variables, f"{function_id}.Environment").items()}
