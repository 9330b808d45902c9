"""Which stack each job's resources live in, when one stack cannot hold them all.

CloudFormation takes at most 500 resources in one template (and 1 MB of it). A job costs
`job_resources(spec)`: for each of its queues (one per priority level) the queue, its DLQ, the event
source mapping and four alarms; once, the queue policy of all its queues, the function, its role and
the role's policy, its log group, its manifest entry, its function's two alarms and the composite
alarm over them; a cron job its schedule. Plain jobs cost 16, so one template holds a few dozen.

So `LambdaJobs` puts its jobs into groups: the first group in the stack itself (where small apps
keep everything, and where a job already deployed keeps its logical ids), each further group in a
nested stack (`Jobs2`, `Jobs3`, ...) that shares the root's table, bucket, topic and layers. A job that
moves from one group to another is a new resource in another template: CloudFormation deletes its
queue (and its messages) and creates another. So a job, once placed, stays where it is: the groups
are kept in `lambdajobs.stacks.json` beside your pyproject.toml (commit it, as you commit
lambdajobs.lock), and synth adds new jobs to the last group while it has room, then opens a new one.
A job removed leaves its group (an empty group is kept in the file so later groups keep their
names). Without the file, jobs are placed in name order.

Physical names (queues, manifest entries, schedule groups) derive from the root stack's name, not
from a nested stack's, so they are the same in any group.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.project import ENV_STACKS_FILE, STACKS_FILE_NAME, stacks_file
from lambdajobs.runtime.spec import JobSpec

LAYOUT_NAME = STACKS_FILE_NAME
#: Where the layout file is instead (tests point it at a temporary file).
ENV_LAYOUT_FILE = ENV_STACKS_FILE
#: CloudFormation's limit per template.
MAX_TEMPLATE_RESOURCES = 500
#: What a group's jobs may take of a template: the rest is room for what the stack holds beside them
#: (the root's shared resources, a nested stack's dashboard and alarms and Scheduler's target role).
GROUP_RESOURCES = 440
#: The root stack's own resources beside its jobs: the table, bucket, schedule groups, Scheduler's
#: role and DLQ, layers, policies, the workflow queue and continuer, the topics, dashboards and
#: stack-wide alarms, the manifest. Counted from the synthesized template by a test (tests/infra).
ROOT_RESOURCES = 60
#: Per queue of a job (one per priority level): queue, DLQ, event source mapping, four alarms.
RESOURCES_PER_QUEUE = 7
#: Per job: queue policy, function, role, role policy, log group, manifest entry, two function
#: alarms, and a composite alarm (at most one per job: a composite covers a run of jobs).
RESOURCES_PER_JOB = 9


def job_resources(spec: JobSpec) -> int:
    """The resources one job adds to its template, at most (`tests/infra` checks it against the
    synthesized)."""
    return RESOURCES_PER_JOB + RESOURCES_PER_QUEUE * len(spec.levels) + (1 if spec.schedule else 0)


def layout_path() -> Path:
    """`lambdajobs.stacks.json` beside your pyproject.toml (or `$LAMBDAJOBS_STACKS_FILE`)."""
    return stacks_file()


def read_layout(path: Path, stack: str) -> list[list[str]] | None:
    """The groups recorded for `stack` (None: none recorded).

    Raises:
        ConfigurationError: the file is not the layout's JSON.
    """
    if not path.is_file():
        return None
    try:
        groups = json.loads(path.read_text())["stacks"].get(stack)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigurationError(
            f"{path} is not a lambdajobs stacks file ({exc}); restore it from version control, or "
            f"delete it to place jobs afresh (a deployed job that moves stack is replaced, with its queue)."
        ) from None
    if groups is None:
        return None
    if not isinstance(groups, list) or not all(
        isinstance(g, list) and all(isinstance(j, str) for j in g) for g in groups
    ):
        raise ConfigurationError(
            f"{path}: stack '{stack}' must map to a list of lists of job names; restore it from "
            f"version control."
        )
    return [list(g) for g in groups]


def write_layout(path: Path, stack: str, groups: Sequence[Sequence[str]]) -> None:
    """Record `groups` for `stack` (other stacks' entries kept); unchanged content is not rewritten."""
    try:
        data = json.loads(path.read_text()) if path.is_file() else {}
        stacks = data.get("stacks") if isinstance(data, dict) else None
    except (OSError, ValueError):
        stacks = None
    stacks = dict(stacks) if isinstance(stacks, dict) else {}
    wanted = [list(g) for g in groups]
    if stacks.get(stack) == wanted and path.is_file():
        return
    stacks[stack] = wanted
    body = {
        "about": "Which stack of the app holds each job: the first list the stack itself, each further "
        "list a nested stack. Written by synth; commit it. A job moved to another list is replaced "
        "on deploy, its queues (and their messages) with it.",
        "stacks": dict(sorted(stacks.items())),
    }
    try:
        path.write_text(json.dumps(body, indent=2) + "\n")
    except OSError as exc:
        raise ConfigurationError(
            f"cannot write {path} ({exc.strerror or exc}): synth records there which stack holds each job; "
            f"make it writable, or set {ENV_LAYOUT_FILE} to a file that is."
        ) from None


def assign(
    specs: Iterable[JobSpec], previous: Sequence[Sequence[str]] | None, *, root_room: int, group_room: int
) -> list[list[str]]:
    """Each job's group: those in `previous` stay in theirs (jobs no longer declared leave), the others
    (in name order) go to the last group while it has room, then to a new one. `root_room` and
    `group_room`: the resources the first group and each further group may take.

    Raises:
        ConfigurationError: a group holds more than it may (its jobs grew, or the file was edited), or
            one job alone needs more than a group holds.
    """
    by_name = {spec.name: spec for spec in specs}
    groups = [[job for job in group if job in by_name] for group in (previous or [[]])]
    placed = {job for group in groups for job in group}

    def room(index: int) -> int:
        return root_room if index == 0 else group_room

    def used(group: list[str]) -> int:
        return sum(job_resources(by_name[job]) for job in group)

    for index, group in enumerate(groups):
        if used(group) > room(index):
            where = "the stack itself" if index == 0 else f"nested stack Jobs{index + 1}"
            raise ConfigurationError(
                f"{where} would hold {used(group)} resources of its jobs ({', '.join(group)}), over the "
                f"{room(index)} a group may take of CloudFormation's {MAX_TEMPLATE_RESOURCES}; move a job "
                f"to a new list at the end of {LAYOUT_NAME} (it is replaced on deploy: drain its queue "
                f"first, docs/how-to/upgrades.md), or declare fewer priority levels."
            )
    for name in sorted(set(by_name) - placed):
        need = job_resources(by_name[name])
        if need > group_room:
            raise ConfigurationError(
                f"job '{name}' alone needs {need} resources, over the {group_room} a stack may hold of "
                f"a job's: declare fewer priority levels."
            )
        last = len(groups) - 1
        if used(groups[last]) + need > room(last):
            groups.append([])
        groups[-1].append(name)
    return groups
