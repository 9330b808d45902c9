"""What a deploy would delete, before it does: the queues of a deployed lambdajobs stack that the newly
synthesized app no longer has, with the messages they hold, and a job index it would drop.
`lambdajobs diff` lists them; `lambdajobs deploy` stops on a queue that holds messages unless it is
told to go on (`--allow-deleting-queues`). See docs/how-to/upgrades.md.

The AWS facts behind it:

- CloudFormation deletes an `AWS::SQS::Queue` whose logical id leaves the template, and replaces one
  whose `QueueName` changes (a property that requires replacement: the new queue is created, the old
  one deleted in the cleanup phase). SQS deletes a queue's messages with it (DeleteQueue), and neither
  a change set nor `cdk diff` says how many there were. A dead-letter queue goes the same way, with
  the failed jobs it kept for redrive. So renaming a job, removing a job or one of its priority
  levels, and an upgrade of lambdajobs that names its queues differently all delete queues.
- A global secondary index that leaves a table's `GlobalSecondaryIndexes` is deleted in place: the
  table and its items stay. Turned on again, DynamoDB backfills it only from the items that carry its
  keys, and workers write those only while the index is on.
- Counts are SQS's approximate ones: visible + in flight (`NotVisible`) + delayed.

What is deployed: each lambdajobs stack publishes its manifest in SSM (`/lambdajobs/<stack>/jobs/<job>`
and `/lambdajobs/<stack>/stack`, `lambdajobs.runtime.config`), which holds the URL of every queue and
DLQ: the last segment of a URL is the queue's name. What the new app keeps: the synthesized
templates, a stack's root template and the nested ones it references. A deployed queue is kept when
a queue of its stack there has its name: its `QueueName` (a string, or an `Fn::Join` / `Fn::Sub`
resolved with `AWS::StackName`; in a nested template `AWS::StackName` is decided at deploy time and
matches any name), or, for a queue CloudFormation named (no `QueueName`: `<stack>-<logical id>-
<suffix>`), a queue without a `QueueName` with that logical id. No naming rule is written here: the
templates say what each queue is called. A stack without a manifest is new: it has nothing to lose.

Whoever deploys (an administrator running CDK, not a lambdajobs role) needs `ssm:GetParameter` and
`ssm:GetParametersByPath` on `/lambdajobs/<stack>/*` and `sqs:GetQueueAttributes` on the stack's
queues for the check. Never ships to Lambda, and imports neither typer nor rich: the CLI prints.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.settings import (
    JOB_INDEX,
    MANIFEST_PREFIX,
    MAX_QUEUE_NAME,
    STACK_MANIFEST,
    manifest_parameter,
    stack_manifest_parameter,
)

#: The SQS counters a deleted queue would lose: waiting, in flight (received, not yet deleted), delayed.
COUNTERS = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
#: What SQS answers for a queue that does not exist (the query protocol's code, then the JSON one's).
_NO_QUEUE = ("AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist")
#: The job index's mode without the index (`lifecycle.JobIndex`); every other mode has it.
_INDEX_OFF = "off"
#: A value only known at deploy time, inside a name being resolved.
_UNKNOWN: None = None
#: What a name decided at deploy time may be in its place: SQS queue names are letters, digits, '-'
#: and '_'.
_ANY_NAME_PART = "[A-Za-z0-9_-]+"


# -- what the synthesized app has ----------------------------------------------------------------------


@dataclass(frozen=True)
class StackTemplate:
    """One stack of the synthesized app: its CloudFormation name, its template, the templates of the
    nested stacks it holds (at every depth), and its region when the app fixes one."""

    stack_name: str
    template: Mapping[str, Any]
    nested: tuple[Mapping[str, Any], ...] = ()
    region: str | None = None


@dataclass(frozen=True)
class Planned:
    """What the new app keeps of one lambdajobs stack: its queues' names, and its job index."""

    #: The lambdajobs stack's name (its manifest's `<stack>`) and CloudFormation's.
    stack: str
    stack_name: str
    region: str | None = None
    queue_names: frozenset[str] = frozenset()
    #: Names with a part decided at deploy time (a nested stack's own `AWS::StackName`).
    name_patterns: tuple[re.Pattern[str], ...] = ()
    #: The logical ids of the queues CloudFormation names (no `QueueName`).
    unnamed: frozenset[str] = frozenset()
    #: The job index's mode in the new manifest (None: not found), and whether the new job table has
    #: the index (None: the table was not found).
    job_index: str | None = None
    has_index: bool | None = None

    def keeps(self, name: str) -> bool:
        """Whether a deployed queue named `name` is in the new templates."""
        return (
            name in self.queue_names
            or any(p.fullmatch(name) for p in self.name_patterns)
            or _cloudformation_named(name, self.unnamed)
        )


def _segments(value: Any, pseudo: Mapping[str, str]) -> list[str | None]:
    """A template string value as literal parts and `_UNKNOWN` ones (a reference, an attribute, a
    pseudo parameter not in `pseudo`): `Fn::Join` and `Fn::Sub` are resolved."""
    if isinstance(value, str):
        return [value]
    if not isinstance(value, Mapping) or len(value) != 1:
        return [_UNKNOWN]
    ((function, argument),) = value.items()
    if function == "Ref":
        return [pseudo.get(argument, _UNKNOWN)] if isinstance(argument, str) else [_UNKNOWN]
    if function == "Fn::Join" and isinstance(argument, list) and len(argument) == 2:
        separator, parts = argument
        if not isinstance(separator, str) or not isinstance(parts, list):
            return [_UNKNOWN]
        joined: list[str | None] = []
        for i, part in enumerate(parts):
            joined += ([separator] if i and separator else []) + _segments(part, pseudo)
        return joined
    if function == "Fn::Sub":
        text, variables = (argument, {}) if not isinstance(argument, list) else (*argument, {})[:2]
        if not isinstance(text, str) or not isinstance(variables, Mapping):
            return [_UNKNOWN]
        subbed: list[str | None] = []
        for i, piece in enumerate(re.split(r"\$\{([^}!]+)\}", text)):
            if i % 2 == 0:
                subbed.append(piece)
            elif piece in variables:
                subbed += _segments(variables[piece], pseudo)
            else:
                subbed.append(pseudo.get(piece, _UNKNOWN))
        return subbed
    return [_UNKNOWN]


def _resolved(value: Any, pseudo: Mapping[str, str]) -> str | None:
    """A template string value, when nothing in it waits for the deploy; else None."""
    parts = _segments(value, pseudo)
    return None if _UNKNOWN in parts else "".join(p for p in parts if p is not None)


def _pattern(value: Any, pseudo: Mapping[str, str]) -> re.Pattern[str] | None:
    """A name with parts decided at deploy time, as a pattern; None when it has no literal part (it
    could be any name: it says nothing)."""
    parts = _segments(value, pseudo)
    if not any(parts):
        return None
    return re.compile("".join(_ANY_NAME_PART if p is None else re.escape(p) for p in parts))


def _cloudformation_named(name: str, logical_ids: Iterable[str]) -> bool:
    """Whether `name` is one CloudFormation gave a queue of one of `logical_ids`: `<stack>-<logical
    id>-<suffix>`, the stack and the logical id cut short when the whole would pass SQS's 80."""
    head, dash, suffix = name.rpartition("-")
    if not dash or not suffix.isalnum():
        return False
    for logical_id in logical_ids:
        if head.endswith("-" + logical_id):
            return True
        if len(name) >= MAX_QUEUE_NAME:  # cut short: the logical id's start is what is left of it
            cut = head.rpartition("-")[2]
            if cut and logical_id.startswith(cut):
                return True
    return False


def _resources(template: Mapping[str, Any], kind: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(logical id, properties) of each resource of type `kind`."""
    for logical_id, resource in (template.get("Resources") or {}).items():
        if isinstance(resource, Mapping) and resource.get("Type") == kind:
            yield logical_id, resource.get("Properties") or {}


_PREFIX, _, _SUFFIX = STACK_MANIFEST.partition("{stack}")
#: A stack manifest's parameter name (`/lambdajobs/<stack>/stack`): which lambdajobs stack it is.
_STACK_MANIFEST = re.compile(re.escape(_PREFIX) + r"(?P<stack>[^/]+)" + re.escape(_SUFFIX))
#: In the manifest's JSON (literal parts of its `Fn::Join`): the job index's mode, and the table's
#: reference that follows `"table": "`.
_JOB_INDEX_FIELD = re.compile(r'"job_index"\s*:\s*"([^"\x00]*)"')
_TABLE_FIELD = re.compile(r'"table"\s*:\s*"$')


def _index_of(template: Mapping[str, Any], value: Any) -> tuple[str | None, bool | None]:
    """(job index mode, whether the job table has the index) from the new stack manifest's value: the
    mode from the literal parts of its `Fn::Join`, the table from the reference after `"table": "`.
    None: not found."""
    if isinstance(value, str):  # a manifest with no reference in it: plain JSON
        try:
            plain = json.loads(value)
        except ValueError:
            plain = None
        mode = plain.get("job_index") if isinstance(plain, dict) else None
        return (None if mode is None else str(mode)), None
    join = value.get("Fn::Join") if isinstance(value, Mapping) else None
    parts = join[1] if isinstance(join, list) and len(join) == 2 and isinstance(join[1], list) else []
    found = _JOB_INDEX_FIELD.search("".join(p if isinstance(p, str) else "\x00" for p in parts))
    table = next(
        (
            part.get("Ref")
            for before, part in itertools.pairwise(parts)
            if isinstance(before, str) and _TABLE_FIELD.search(before) and isinstance(part, Mapping)
        ),
        None,
    )
    resource = (template.get("Resources") or {}).get(table) if isinstance(table, str) else None
    has_index = None
    if isinstance(resource, Mapping) and resource.get("Type") == "AWS::DynamoDB::Table":
        indexes = (resource.get("Properties") or {}).get("GlobalSecondaryIndexes") or []
        has_index = any(isinstance(i, Mapping) and i.get("IndexName") == JOB_INDEX for i in indexes)
    return (found.group(1) if found else None), has_index


def planned_stacks(templates: Sequence[StackTemplate]) -> list[Planned]:
    """The lambdajobs stacks of the synthesized app (each one's stack manifest, an `AWS::SSM::Parameter`
    named `/lambdajobs/<stack>/stack`, says it is one), with what each keeps."""
    planned = []
    for stack in templates:
        root = {"AWS::StackName": stack.stack_name}
        # a nested stack's AWS::StackName is its own, named by CloudFormation when it is created
        parts = [(stack.template, root), *((nested, {}) for nested in stack.nested)]
        names: set[str] = set()
        patterns: list[re.Pattern[str]] = []
        unnamed: set[str] = set()
        manifests: list[tuple[str, str | None, bool | None]] = []
        for template, pseudo in parts:
            for logical_id, props in _resources(template, "AWS::SQS::Queue"):
                if "QueueName" not in props:
                    unnamed.add(logical_id)
                elif (name := _resolved(props["QueueName"], pseudo)) is not None:
                    names.add(name)
                elif (pattern := _pattern(props["QueueName"], pseudo)) is not None:
                    patterns.append(pattern)
            for _, props in _resources(template, "AWS::SSM::Parameter"):
                match = _STACK_MANIFEST.fullmatch(_resolved(props.get("Name"), pseudo) or "")
                if match:
                    manifests.append((match["stack"], *_index_of(template, props.get("Value"))))
        for name, job_index, has_index in manifests:
            planned.append(
                Planned(
                    stack=name,
                    stack_name=stack.stack_name,
                    region=stack.region,
                    queue_names=frozenset(names),
                    name_patterns=tuple(patterns),
                    unnamed=frozenset(unnamed),
                    job_index=job_index,
                    has_index=has_index,
                )
            )
    return planned


def _assets(assembly: Path) -> dict[str, str]:
    """Object key -> file in the assembly, for the file assets its asset manifests list (a nested
    stack's template is one: its TemplateURL names the object key)."""
    found: dict[str, str] = {}
    for manifest in sorted(assembly.glob("*.assets.json")):
        try:
            files = json.loads(manifest.read_text()).get("files", {})
        except (OSError, ValueError, AttributeError):
            continue
        for asset in files.values() if isinstance(files, dict) else ():
            path = (asset.get("source") or {}).get("path")
            for destination in (asset.get("destinations") or {}).values():
                if path and destination.get("objectKey"):
                    found[destination["objectKey"]] = path
    return found


def _nested_file(resource: Mapping[str, Any], assets: Mapping[str, str]) -> str | None:
    """The file of a nested stack's template: its `aws:asset:path` metadata (set when CDK runs with
    asset metadata, as its CLI does), else the asset whose object key ends its TemplateURL."""
    path = (resource.get("Metadata") or {}).get("aws:asset:path")
    if isinstance(path, str):
        return path
    url = (resource.get("Properties") or {}).get("TemplateURL")
    tail = _segments(url, {})[-1] if url is not None else None
    return assets.get(tail.rsplit("/", 1)[-1]) if tail else None


def nested_template_files(template_path: Path) -> list[Path]:
    """The files of the nested stacks' templates a stack template references (theirs included), in
    its cloud assembly: what `lambdajobs synth` lists beside the stack's own template."""
    assembly = template_path.parent
    assets = _assets(assembly)
    found: list[Path] = []
    todo, seen = [template_path], set()
    while todo:
        try:
            template = json.loads(todo.pop().read_text())
        except (OSError, ValueError):
            continue
        for resource in (template.get("Resources") or {}).values():
            if not isinstance(resource, Mapping) or resource.get("Type") != "AWS::CloudFormation::Stack":
                continue
            name = _nested_file(resource, assets)
            if name is not None and name not in seen:
                seen.add(name)
                found.append(assembly / name)
                todo.append(assembly / name)
    return found


def _nested(template: Mapping[str, Any], assembly: Path, assets: Mapping[str, str]) -> list[dict[str, Any]]:
    """The templates of the nested stacks `template` references, theirs included. One not found is
    left out: its queues then read as deleted, which is the safe side."""
    found: list[dict[str, Any]] = []
    todo, seen = [template], set()
    while todo:
        for _, resource in (todo.pop().get("Resources") or {}).items():
            if not isinstance(resource, Mapping) or resource.get("Type") != "AWS::CloudFormation::Stack":
                continue
            name = _nested_file(resource, assets)
            if name is None or name in seen:
                continue
            seen.add(name)
            try:
                nested = json.loads((assembly / name).read_text())
            except (OSError, ValueError):
                continue
            found.append(nested)
            todo.append(nested)
    return found


def read_assembly(paths: Sequence[Path]) -> list[StackTemplate]:
    """The stacks of a cloud assembly, from their root templates (`lambdajobs.deploy.templates`): each
    one's name and region from the assembly's manifest.json, and its nested stacks' templates.

    Raises:
        OSError, ValueError: a template cannot be read.
    """
    stacks = []
    for path in paths:
        assembly = path.parent
        try:
            artifacts = json.loads((assembly / "manifest.json").read_text()).get("artifacts", {})
        except (OSError, ValueError, AttributeError):
            artifacts = {}
        name, region = path.name.removesuffix(".template.json"), None
        for artifact_id, artifact in artifacts.items():
            properties = artifact.get("properties") or {}
            if (
                artifact.get("type") == "aws:cloudformation:stack"
                and properties.get("templateFile") == path.name
            ):
                name = properties.get("stackName") or artifact_id
                environment = str(artifact.get("environment") or "").rpartition("/")[2]
                region = None if environment in ("", "unknown-region") else environment
        template = json.loads(path.read_text())
        nested = tuple(_nested(template, assembly, _assets(assembly)))
        stacks.append(StackTemplate(stack_name=name, template=template, nested=nested, region=region))
    return stacks


# -- what is deployed --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Queue:
    """A deployed queue, from the stack's manifest. `job` None: a queue of the stack's own (workflows,
    scheduler); `dead_letter`: a DLQ."""

    name: str
    url: str
    what: str
    job: str | None = None
    dead_letter: bool = False
    #: What to do with its messages before it is deleted.
    before: str = "drain it first"


@dataclass(frozen=True)
class Deployed:
    """What a deployed lambdajobs stack's manifest says: its queues and its job index's mode."""

    stack: str
    queues: tuple[Queue, ...] = ()
    job_index: str = _INDEX_OFF


def _name(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def _job_queues(job: str, entry: Mapping[str, Any]) -> list[Queue]:
    """A job's queues and DLQs from its manifest entry, its priority levels' included."""
    levels = entry.get("levels") or {}
    found = []
    for level, where in [(None, entry), *sorted(levels.items())]:
        label = f"job {job}" if level is None else f"job {job}, priority {level}"
        if where.get("queue_url"):
            url = where["queue_url"]
            found.append(Queue(_name(url), url, f"queue of {label}", job, before=_DRAIN))
        if where.get("dlq_url"):
            listing = f"lambdajobs dlq list {job}" + (f" --priority {level}" if level else "")
            redrive = (
                f"redrive or purge its dead letters first, from code that still declares it (`{listing}`)"
            )
            url = where["dlq_url"]
            found.append(Queue(_name(url), url, f"DLQ of {label}", job, True, redrive))
    return found


#: Its workers still run until the deploy: they empty it, and `lambdajobs diff` says when.
_DRAIN = (
    "drain it first (stop its producers and let its workers empty it; `lambdajobs diff` shows what is left)"
)
#: The stack's own queues in its manifest: (field, what it is, whether it is a DLQ, what to do first).
_STACK_QUEUES = (
    (
        "workflow_queue_url",
        "the workflow queue",
        False,
        "start no workflow and let the continuer empty it (`lambdajobs diff` shows what is left)",
    ),
    (
        "workflow_dlq_url",
        "the workflow DLQ",
        True,
        "redrive or purge its notices first (`lambdajobs dlq list workflows`)",
    ),
    (
        "scheduler_dlq_url",
        "the scheduler DLQ: scheduled runs it could not deliver",
        True,
        "read its undelivered runs first (`aws sqs receive-message`)",
    ),
)


def deployed_stack(stack: str, config: StackConfig) -> Deployed | None:
    """What stack `stack` has deployed where `config` points (its region, profile, endpoint), from its
    manifest in SSM: one GetParameter, and GetParametersByPath (paginated) under its jobs. None: the
    stack has no manifest there (not deployed yet).

    Raises:
        botocore.exceptions.ClientError: AWS refused (no permission, ...).
    """
    ssm = config.client("ssm")
    try:
        value = ssm.get_parameter(Name=stack_manifest_parameter(stack))["Parameter"]["Value"]
    except ssm.exceptions.ParameterNotFound:
        return None
    manifest = json.loads(value)
    prefix = MANIFEST_PREFIX.format(stack=stack)
    queues: list[Queue] = []
    for page in ssm.get_paginator("get_parameters_by_path").paginate(Path=prefix.rstrip("/")):
        for parameter in page.get("Parameters", []):
            job = parameter["Name"][len(prefix) :]
            if parameter["Name"] == manifest_parameter(stack, job) and "/" not in job:
                queues += _job_queues(job, json.loads(parameter["Value"]))
    for key, what, dead_letter, before in _STACK_QUEUES:
        if manifest.get(key):
            queues.append(Queue(_name(manifest[key]), manifest[key], what, None, dead_letter, before))
    unique = {queue.name: queue for queue in sorted(queues, key=lambda q: (q.job or "~", q.name))}
    return Deployed(stack, tuple(unique.values()), str(manifest.get("job_index") or _INDEX_OFF))


def message_count(queue_url: str, config: StackConfig) -> int | None:
    """Every message a queue holds (waiting, in flight and delayed), or None when it no longer exists.

    Raises:
        botocore.exceptions.ClientError: AWS refused for another reason (no permission, ...).
    """
    from botocore.exceptions import ClientError

    try:
        attributes = config.client("sqs").get_queue_attributes(
            QueueUrl=queue_url, AttributeNames=list(COUNTERS)
        )
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in _NO_QUEUE:
            return None
        raise
    return sum(int(attributes.get("Attributes", {}).get(counter, 0)) for counter in COUNTERS)


# -- what the deploy would lose ------------------------------------------------------------------------


@dataclass(frozen=True)
class Deletion:
    """A deployed queue the deploy deletes, and what it holds now (None: it no longer exists)."""

    stack: str
    queue: Queue
    messages: int | None

    @property
    def loses_messages(self) -> bool:
        return bool(self.messages)

    def line(self) -> str:
        held = (
            "already gone"
            if self.messages is None
            else "empty"
            if self.messages == 0
            else f"holding {self.messages} message{'s' if self.messages != 1 else ''}"
        )
        return f"stack '{self.stack}': the deploy deletes queue {self.queue.name} ({self.queue.what}), {held}"

    def what_to_do(self) -> str:
        """What to do before a deploy that deletes this queue, so that its messages are not lost."""
        return f"{self.queue.before}, or keep its name (docs/how-to/upgrades.md)"


@dataclass(frozen=True)
class IndexDrop:
    """The deploy removes the job index of a stack whose index is on (`mode`)."""

    stack: str
    mode: str

    def line(self) -> str:
        return (
            f"stack '{self.stack}': the deploy drops the job index {JOB_INDEX} (job_index "
            f"'{self.mode}' now): `lambdajobs jobs` and the board's jobs page stop listing all but dead "
            "jobs (counts come from the worker's metrics); the records stay, and an index turned on "
            "again lists none written while it was off."
        )


def deleted_queues(deployed: Deployed, planned: Planned) -> list[Queue]:
    """The deployed queues the new templates do not have."""
    return [queue for queue in deployed.queues if not planned.keeps(queue.name)]


def dropped_index(deployed: Deployed, planned: Planned) -> IndexDrop | None:
    """The job index, when it is on and the new templates turn it off or leave it out of the table."""
    if deployed.job_index == _INDEX_OFF:
        return None
    if planned.job_index == _INDEX_OFF or planned.has_index is False:
        return IndexDrop(deployed.stack, deployed.job_index)
    return None


@dataclass(frozen=True)
class Report:
    """What a deploy of the synthesized app would lose, stack by stack."""

    deletions: tuple[Deletion, ...] = ()
    index_drops: tuple[IndexDrop, ...] = ()
    #: The app's lambdajobs stacks, in its order; those not deployed yet (nothing to compare with).
    stacks: tuple[str, ...] = ()
    new_stacks: tuple[str, ...] = ()

    @property
    def stopping(self) -> tuple[Deletion, ...]:
        """The deletions that lose messages: a deploy stops on these unless told to go on."""
        return tuple(d for d in self.deletions if d.loses_messages)

    def lines(self, *, hold_back: Collection[Deletion] = (), advice: bool = False) -> list[str]:
        """One line per finding, stack by stack, and one for a stack that loses nothing. `hold_back`:
        deletions said elsewhere (a deploy's errors); `advice`: say what to do before a deletion that
        loses messages."""
        lines = []
        for stack in self.stacks:
            if stack in self.new_stacks:
                lines.append(f"stack '{stack}': not deployed yet (no {stack_manifest_parameter(stack)}).")
                continue
            deletions = [d for d in self.deletions if d.stack == stack]
            found = [
                d.line() + (f": {d.what_to_do()}." if advice and d.loses_messages else ".")
                for d in deletions
                if d not in hold_back
            ]
            found += [i.line() for i in self.index_drops if i.stack == stack]
            if not deletions and not found:
                found = [f"stack '{stack}': the deploy deletes no queue of lambdajobs."]
            lines += found
        return lines


def check(templates: Sequence[StackTemplate], config: StackConfig) -> Report:
    """Compare every lambdajobs stack of the synthesized app with what is deployed where `config`
    points (a stack whose template fixes a region: there): its deleted queues with their counts, and a
    dropped job index.

    Raises:
        botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError: AWS refused, or cannot be
            reached.
    """
    deletions: list[Deletion] = []
    drops: list[IndexDrop] = []
    stacks: list[str] = []
    new: list[str] = []
    for planned in planned_stacks(templates):
        stacks.append(planned.stack)
        where = config.with_resources(stack=planned.stack, region=planned.region or config.region)
        deployed = deployed_stack(planned.stack, where)
        if deployed is None:
            new.append(planned.stack)
            continue
        for queue in deleted_queues(deployed, planned):
            deletions.append(Deletion(planned.stack, queue, message_count(queue.url, where)))
        drop = dropped_index(deployed, planned)
        if drop is not None:
            drops.append(drop)
    return Report(tuple(deletions), tuple(drops), tuple(dict.fromkeys(stacks)), tuple(new))


def planned_deletions(templates: Sequence[StackTemplate], config: StackConfig) -> list[Deletion]:
    """The deployed queues a deploy of `templates` deletes, each with the messages it holds now."""
    return list(check(templates, config).deletions)
