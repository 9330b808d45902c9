"""moto's IAM authorization, switched on for one test, and made to judge requests as AWS would.

With `moto.settings.INITIAL_NO_AUTH_ACTION_COUNT` at 0, moto authorizes every request against the
identity policies of the IAM user or assumed role whose access key signed it. On its own it judges
some requests differently from AWS; `enforced()` corrects that for the services these tests call:

- resources: moto authorizes DynamoDB, SSM, Scheduler and CloudWatch requests against resource `*`,
  so a grant on a table or parameter ARN never matches. `request_resources` derives the ARN AWS
  authorizes (the table, or `table/<t>/index/<i>` for a Query on an index; the parameter; the
  schedule `schedule/<group>/<name>`); an action it does not know keeps `*` (only `Resource: *`
  allows it: a false denial, never a false allow).
- action names: moto names batch calls by their API name (`sqs:SendMessageBatch`); IAM authorizes
  them as the single action (`sqs:SendMessage`). CloudWatch signs as `monitoring`.
- implied permissions: AWS also checks `iam:PassRole` of the execution role a CreateSchedule passes,
  with `iam:PassedToService`; moto does not. It is checked here against the template's policy
  documents, conditions included.
- signatures: moto 5.2.5 answers SignatureDoesNotMatch to correctly signed Scheduler GET requests
  (GetSchedule, ListSchedules). Signatures are not what these tests check, so they are not verified;
  the access key still selects the identity, and an unknown key is still refused.

Every authorization is recorded (`Recorder.calls`). A denied call fails the test even when the code
under test swallows the error (the worker's retry delay and moving to the DLQ are best effort, the
CLI shows a dash when CloudWatch refuses): see `pytest_pyfunc_call` in conftest.py.
"""

from __future__ import annotations

import fnmatch
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.iam.template_policies import STATIC_CONTEXT, Principal, condition_holds, statements

#: moto's action name -> the IAM action AWS authorizes for it.
IAM_ACTIONS = {
    "sqs:SendMessageBatch": "sqs:SendMessage",
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibilityBatch": "sqs:ChangeMessageVisibility",
}
#: DynamoDB calls IAM authorizes item by item, as the items' own actions.
TRANSACTIONS = {"dynamodb:TransactWriteItems", "dynamodb:TransactGetItems"}
#: The service a request is signed for -> its IAM prefix, where they differ.
IAM_PREFIXES = {"monitoring": "cloudwatch"}
#: Actions that pass a role to a service: (action, where the role ARN is in the body, the service).
PASSES_ROLE = {
    "scheduler:CreateSchedule": (("Target", "RoleArn"), "scheduler.amazonaws.com"),
    "scheduler:UpdateSchedule": (("Target", "RoleArn"), "scheduler.amazonaws.com"),
}


@dataclass(frozen=True)
class Call:
    caller: str  # the ARN of the identity that signed it
    action: str
    resources: tuple[str, ...]
    allowed: bool
    error: str = ""


@dataclass
class Recorder:
    """Every authorization moto made while enforced, and who the callers are."""

    principals: dict[str, Principal] = field(default_factory=dict)  # by moto role name
    harness_arn: str = ""
    calls: list[Call] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, call: Call) -> None:
        with self._lock:
            self.calls.append(call)

    def principal(self, caller: str) -> Principal | None:
        # arn:aws:sts::<account>:assumed-role/<role name>/<session>
        if ":assumed-role/" not in caller:
            return None
        return self.principals.get(caller.split(":assumed-role/", 1)[1].split("/", 1)[0])

    def who(self, caller: str) -> str:
        if caller == self.harness_arn:
            return f"the test harness ({caller}, allowed everything)"
        found = self.principal(caller)
        return found.describe() if found else f"{caller} (not a principal of the template)"

    def denials(self) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if not c.allowed]

    def take_denials(self) -> list[Call]:
        """The denials so far, forgotten (a test that expects one takes it)."""
        with self._lock:
            denied = [c for c in self.calls if not c.allowed]
            self.calls = [c for c in self.calls if c.allowed]
        return denied

    def by(self, principal: Principal) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if self.principal(c.caller) is principal]

    def report(self, denied: list[Call]) -> str:
        lines = [f"IAM denied {len(denied)} call(s) that the synthesized template does not allow:"]
        for call in denied:
            lines.append(f"  {call.action} on {', '.join(call.resources)}")
            lines.append(f"    by {self.who(call.caller)}")
            if call.error:
                lines.append(f"    ({call.error})")
        return "\n".join(lines)


class IAMDenied(AssertionError):
    """A test made AWS calls its principal's template policies do not allow."""


#: The recorder of the enforcement in effect (one at a time), for the pytest hook.
ACTIVE: Recorder | None = None


# -- what AWS authorizes ------------------------------------------------------------------------------


def _body(request: Any) -> dict[str, Any]:
    raw = request._body
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def iam_action(moto_action: str) -> str:
    service, _, name = moto_action.partition(":")
    action = f"{IAM_PREFIXES.get(service, service)}:{name}"
    return IAM_ACTIONS.get(action, action)


def request_resources(request: Any, action: str) -> list[str] | None:
    """The resource ARNs AWS authorizes `action` of this request against; None: keep moto's."""
    service, _, name = action.partition(":")
    region, account = request._region, request.account_id
    body = _body(request)
    if service == "dynamodb":
        table = f"arn:aws:dynamodb:{region}:{account}:table/"
        if "TableName" in body:
            index = body.get("IndexName") if name in ("Query", "Scan") else None
            return [table + body["TableName"] + (f"/index/{index}" if index else "")]
        if "RequestItems" in body:  # BatchGetItem, BatchWriteItem
            return [table + t for t in body["RequestItems"]]
        if "TransactItems" in body:
            return [table + next(iter(item.values()))["TableName"] for item in body["TransactItems"]]
        return None
    if service == "ssm":
        names = body.get("Names") or [body[k] for k in ("Name", "Path") if k in body]
        return [f"arn:aws:ssm:{region}:{account}:parameter/{n.lstrip('/')}" for n in names] or None
    if service == "scheduler":
        url = urlparse(request._path)
        parts = [p for p in url.path.split("/") if p]
        if len(parts) == 2 and parts[0] == "schedules":
            group = body.get("GroupName") or parse_qs(url.query).get("groupName", ["default"])[0]
            return [f"arn:aws:scheduler:{region}:{account}:schedule/{group}/{parts[1]}"]
        if len(parts) == 2 and parts[0] == "schedule-groups":
            return [f"arn:aws:scheduler:{region}:{account}:schedule-group/{parts[1]}"]
        return None  # ListSchedules, ListScheduleGroups: `*`, as in AWS
    if service == "lambda":
        return _lambda_resources(request, name, region, account)
    if service == "logs":
        groups = body.get("logGroupNames") or [body[k] for k in ("logGroupName",) if k in body]
        if name == "StartQuery" and groups:
            return [f"arn:aws:logs:{region}:{account}:log-group:{g}" for g in groups]
        return None  # GetQueryResults, StopQuery: `*`, as in AWS
    return None  # sqs, s3, iam, sts: moto derives the resource itself; cloudwatch reads: `*`


#: The Lambda actions on one event source mapping (its ARN, and `lambda:FunctionArn` its function's).
MAPPING_ACTIONS = {"GetEventSourceMapping", "UpdateEventSourceMapping", "DeleteEventSourceMapping"}


def _mapping_uuid(request: Any) -> str | None:
    parts = [p for p in urlparse(request._path).path.split("/") if p]
    return parts[2] if len(parts) == 3 and parts[1] == "event-source-mappings" else None


def _lambda_resources(request: Any, name: str, region: str, account: str) -> list[str] | None:
    """An event source mapping's ARN (`arn:aws:lambda:<region>:<account>:event-source-mapping:<uuid>`)
    for the actions on one; `*` for ListEventSourceMappings, as in AWS."""
    uuid = _mapping_uuid(request)
    if name in MAPPING_ACTIONS and uuid:
        return [f"arn:aws:lambda:{region}:{account}:event-source-mapping:{uuid}"]
    return None


def mapping_function(request: Any) -> str | None:
    """The ARN of the function of the event source mapping a request names (moto's record of it)."""
    from moto.awslambda.models import lambda_backends

    uuid = _mapping_uuid(request)
    if uuid is None:
        return None
    backend = lambda_backends[request.account_id][request._region]
    mapping = backend._event_source_mappings.get(uuid)
    return str(mapping.function_arn) if mapping is not None else None


def _matches(patterns: Any, value: str, *, case: bool) -> bool:
    items = patterns if isinstance(patterns, list) else [patterns]
    if case:
        return any(fnmatch.fnmatchcase(value, p) for p in items)
    return any(fnmatch.fnmatchcase(value.lower(), p.lower()) for p in items)


def allows(principal: Principal, action: str, resource: str, context: dict[str, Any]) -> bool:
    """Whether the template's documents of `principal` (conditions included) allow `action` on
    `resource` in `context`: an explicit deny wins, else any allow."""
    allowed = False
    for policy in principal.policies:
        for index, statement in enumerate(statements(policy.document)):
            if "Action" in statement and not _matches(statement["Action"], action, case=False):
                continue
            if "NotAction" in statement and _matches(statement["NotAction"], action, case=False):
                continue
            if "Resource" in statement and not _matches(statement["Resource"], resource, case=True):
                continue
            if "NotResource" in statement and _matches(statement["NotResource"], resource, case=True):
                continue
            condition = statement.get("Condition")
            where = f"{policy.kind} {policy.logical_id} statement {index}"
            if condition and not condition_holds(condition, {**STATIC_CONTEXT, **context}, where):
                continue
            if statement["Effect"] == "Deny":
                return False
            allowed = True
    return allowed


def leading_keys(request: Any, action: str) -> list[tuple[str, str, dict[str, Any]]]:
    """A DynamoDB request's items, as AWS authorizes them with `dynamodb:LeadingKeys` (the partition
    keys): (action, table ARN, context) per table and action. A transaction's items are authorized
    as their single actions (Update -> dynamodb:UpdateItem)."""
    if not action.startswith("dynamodb:"):
        return []
    body = _body(request)
    table = f"arn:aws:dynamodb:{request._region}:{request.account_id}:table/"
    found: dict[tuple[str, str], list[str]] = {}

    def add(name: str, table_name: str, key: dict[str, Any]) -> None:
        value = key.get("id", {}).get("S")
        if value is not None:
            found.setdefault((name, table + table_name), []).append(value)

    if "TableName" in body and ("Key" in body or "Item" in body):
        add(action, body["TableName"], body.get("Key") or body.get("Item") or {})
    for table_name, request_items in (body.get("RequestItems") or {}).items():
        for key in request_items.get("Keys", []) if isinstance(request_items, dict) else []:
            add(action, table_name, key)
    for item in body.get("TransactItems", []):
        for kind, op in item.items():
            inner = {"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "Get": "GetItem"}
            add(
                f"dynamodb:{inner.get(kind, 'ConditionCheckItem')}",
                op["TableName"],
                op.get("Key") or op.get("Item") or {},
            )
    return [(name, arn, {"dynamodb:LeadingKeys": keys}) for (name, arn), keys in found.items()]


def implied(request: Any, action: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Other authorizations AWS makes for this request: (action, resource, condition context)."""
    keyed = leading_keys(request, action)
    if action.startswith("lambda:") and action.partition(":")[2] in MAPPING_ACTIONS:
        # the mapping's action judged again with `lambda:FunctionArn` (moto sees no condition)
        function = mapping_function(request)
        resources = request_resources(request, action) or []
        keyed += [(action, r, {"lambda:FunctionArn": function or ""}) for r in resources]
    if action not in PASSES_ROLE:
        return keyed
    path, service = PASSES_ROLE[action]
    value: Any = _body(request)
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return keyed + ([("iam:PassRole", value, {"iam:PassedToService": service})] if value else [])


# -- switching it on --------------------------------------------------------------------------------


def _message(exc: Exception) -> str:
    """moto's error, without its XML envelope."""
    text = str(getattr(exc, "description", "") or exc)
    found = re.search(r"<Message>(.*?)</Message>", text, re.S)
    return f"{type(exc).__name__}: {found[1] if found else text}"


def _checker(original: Any, recorder: Recorder) -> Any:
    def check_action_permitted(self: Any, resource: str) -> None:
        action = self._action = iam_action(self._action)
        resources = request_resources(self, action) or [resource]
        caller = self._access_key.arn
        # AWS authorizes a transaction as its items' own actions (Put -> dynamodb:PutItem, ...), each
        # on its table; moto would check dynamodb:TransactWriteItems, an action IAM does not have.
        checks = [(a, r) for a, r, _ in leading_keys(self, action)] if action in TRANSACTIONS else []
        try:
            for inner, each in checks:
                self._action = inner
                original(self, each)
            self._action = action
            for each in resources if not checks else []:
                original(self, each)
        except Exception as exc:
            recorder.record(Call(caller, action, tuple(resources), False, _message(exc)))
            raise
        principal = recorder.principal(caller)
        for extra_action, extra_resource, context in implied(self, action) if principal else []:
            assert principal is not None
            if not allows(principal, extra_action, extra_resource, context):
                detail = f"implied by {action}, with {context}"
                recorder.record(Call(caller, extra_action, (extra_resource,), False, detail))
                self._action = extra_action
                self._raise_access_denied()
        recorder.record(Call(caller, action, tuple(resources), True))

    return check_action_permitted


@contextmanager
def enforced(recorder: Recorder) -> Iterator[Recorder]:
    """moto authorizes every request in this block (and is restored after, whatever happens)."""
    global ACTIVE
    from moto import settings
    from moto.core.authorization import ActionAuthenticatorMixin
    from moto.iam.access_control import IAMRequestBase

    assert ACTIVE is None, "IAM enforcement is already on"
    saved = (
        settings.INITIAL_NO_AUTH_ACTION_COUNT,
        ActionAuthenticatorMixin.request_count,
        IAMRequestBase.check_action_permitted,
        IAMRequestBase.check_signature,
    )
    IAMRequestBase.check_action_permitted = _checker(saved[2], recorder)  # type: ignore[method-assign]
    IAMRequestBase.check_signature = lambda self: None  # type: ignore[method-assign]
    settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    ActionAuthenticatorMixin.request_count = 0
    ACTIVE = recorder
    try:
        yield recorder
    finally:
        ACTIVE = None
        (
            settings.INITIAL_NO_AUTH_ACTION_COUNT,
            ActionAuthenticatorMixin.request_count,
            IAMRequestBase.check_action_permitted,
            IAMRequestBase.check_signature,
        ) = saved
