"""What a template's IAM statements allow on a queue, by its name: a statement names a queue by its
ARN (`Fn::GetAtt` of a queue of the template), by an ARN written from its name, or by the stack's
name pattern (`<stack>_*`), and an explicit Deny wins, as IAM evaluates them (`*` matching any run of
characters, as fnmatch's)."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

from tests.infra.test_stack import resources


def _names(template: dict[str, Any], value: Any) -> list[str]:
    """The queue names (or name patterns) of the SQS ARNs in a statement's Resource."""
    if isinstance(value, list):
        return [n for v in value for n in _names(template, v)]
    if isinstance(value, str):
        return [value.rsplit(":", 1)[-1]] if ":sqs:" in value else []
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        resource = template["Resources"].get(logical, {})
        if resource.get("Type") == "AWS::SQS::Queue" and attribute == "Arn":
            return [resource["Properties"]["QueueName"]]
        return []
    if "Fn::Join" in value:
        parts = value["Fn::Join"][1]
        if parts and parts[0] == "arn:" and ":sqs:" in parts:
            return [str(parts[-1]).lstrip(":")]
    return []


def statements_of_role(template: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    return [
        s
        for p in resources(template, "AWS::IAM::Policy").values()
        if {"Ref": role_id} in p["Properties"].get("Roles", [])
        for s in p["Properties"]["PolicyDocument"]["Statement"]
    ]


def allows(statements: list[dict[str, Any]], template: dict[str, Any], action: str, queue: str) -> bool:
    """Whether `statements` allow `action` on the queue named `queue` (and no Deny takes it back)."""

    def matches(s: dict[str, Any]) -> bool:
        actions = s["Action"] if isinstance(s["Action"], list) else [s["Action"]]
        return any(fnmatchcase(action, a) for a in actions) and any(
            fnmatchcase(queue, name) for name in _names(template, s["Resource"])
        )

    if any(s.get("Effect") == "Deny" and matches(s) for s in statements):
        return False
    return any(s.get("Effect", "Allow") == "Allow" and matches(s) for s in statements)
