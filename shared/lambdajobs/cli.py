"""`lambdajobs`: the operator CLI (typer + rich), and `lambdajobs dev`, the local stack.

Works against a deployed stack (the usual AWS profile and region; queues come from the stack's
manifest, never typed by hand) or the local stack (`--endpoint-url`, or the variables `lambdajobs
dev` prints). Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import json
import os
import re
import shlex
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from lambdajobs.runtime.job_record import LISTED_STATES
from lambdajobs.text import visible

app = typer.Typer(
    name="lambdajobs",
    help="lambdajobs: serverless background jobs on AWS.",
    no_args_is_help=True,
    add_completion=False,
)
dlq_app = typer.Typer(help="Failed jobs: list, show, redrive, purge.", no_args_is_help=True)
cron_app = typer.Typer(help="Scheduled jobs: next fire times, run one now.", no_args_is_help=True)
app.add_typer(dlq_app, name="dlq")
app.add_typer(cron_app, name="cron")


class TextConsole(Console):
    """A console that prints what it is given as text: job ids, errors and bodies come from producers
    and jobs, so no rich markup (`[/]`, `[bold]`) or emoji code is read in a string, and control
    characters are shown as escapes (`lambdajobs.text.visible`), in a line as in a table's title or
    cell. Styles come only from the `Text` the CLI builds with `styled` and `as_text`, which escape
    their text too."""

    def __init__(self, **options: Any) -> None:
        super().__init__(markup=False, emoji=False, highlight=False, **options)

    def render_str(self, text: str, **options: Any) -> Text:
        options.update(markup=False, emoji=False)
        return super().render_str(visible(text), **options)


def as_text(*parts: str | tuple[str, str] | Text) -> Text:
    """One printable line from parts: a string (any text, control characters escaped), a (string,
    style) pair, or a `Text` built here."""
    built = Text()
    for part in parts:
        if isinstance(part, Text):
            built.append_text(part)
        elif isinstance(part, tuple):
            built.append(visible(part[0]), style=part[1])
        else:
            built.append(visible(str(part)))
    return built


def styled(value: Any, style: str = "") -> Text:
    """`value` as text in `style`, control characters escaped."""
    return as_text((str(value), style))


console = TextConsole()
err = TextConsole(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

#: How long redrive hides the DLQ messages it works on. If it is interrupted, the ones it had not
#: moved become visible again in the DLQ after this: nothing is lost.
REDRIVE_VISIBILITY_SECONDS = 300


#: The stack this invocation works on, built once from the options (never written to os.environ).
_config: Any = None
_jobs_option: str | None = None


def _show_version(shown: bool) -> None:
    if shown:
        from importlib.metadata import PackageNotFoundError, version

        try:
            number = version("lambdajobs")
        except PackageNotFoundError:  # run from a source tree that is not installed
            number = "unknown (not installed)"
        typer.echo(f"lambdajobs {number}")
        raise typer.Exit()


@app.callback()
def _root(
    stack: str = typer.Option(None, envvar="LAMBDAJOBS_STACK", help="stack name (default: lambdajobs)"),
    jobs: str = typer.Option(
        None,
        "--jobs",
        envvar="LAMBDAJOBS_JOBS",
        help="your jobs package (default: \\[tool.lambdajobs] jobs in pyproject.toml, or cdk.json)",
    ),
    profile: str = typer.Option(None, help="AWS profile (default: AWS_PROFILE / the default profile)"),
    region: str = typer.Option(None, help="AWS region (default: AWS_REGION / the profile's region)"),
    endpoint_url: str = typer.Option(
        None, envvar="AWS_ENDPOINT_URL", help="AWS endpoint, e.g. the local stack's"
    ),
    _version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="print the version and exit"
    ),
) -> None:
    """lambdajobs: serverless background jobs on AWS."""
    global _config, _jobs_option
    from lambdajobs.runtime.config import StackConfig
    from lambdajobs.runtime.settings import DEFAULT_STACK_NAME

    _jobs_option = jobs
    if region is None and not os.environ.get("AWS_DEFAULT_REGION"):
        # boto3 reads AWS_DEFAULT_REGION (and the profile's), not AWS_REGION, which this help and its
        # errors name (the CDK CLI and Lambda read it)
        region = os.environ.get("AWS_REGION") or None
    _config = StackConfig(
        stack=stack or DEFAULT_STACK_NAME, region=region, endpoint_url=endpoint_url, profile=profile
    )


def _project_importable() -> None:
    """Your jobs package is imported from the current folder and from the project folder that names it
    (the nearest one with pyproject.toml or cdk.json), as `celery -A` and `flask` do: the console
    script's own folder is first on sys.path, not yours."""
    from lambdajobs.project import project_root

    root = project_root()
    for folder in (str(root) if root else None, str(Path.cwd())):
        if folder and folder not in sys.path:
            sys.path.insert(0, folder)


def config() -> Any:
    """The stack configuration of this invocation, with the jobs package named (loaded on demand)."""
    from lambdajobs.project import require_jobs_module
    from lambdajobs.runtime.config import StackConfig

    _project_importable()
    base = _config or StackConfig()
    return base if base.jobs else base.with_resources(jobs=require_jobs_module(_jobs_option))


def _all_jobs() -> list[Any]:
    from lambdajobs.runtime.spec import ensure_loaded, jobs_in

    jobs = config().jobs
    ensure_loaded(jobs)
    return jobs_in(jobs)


def _table(*columns: str, title: str | None = None, show_header: bool = True) -> Table:
    """A table whose cells wrap instead of being cut short: ids and reasons must stay whole. (Its
    title and string cells are text: `TextConsole` renders them.)"""
    table = Table(title=title, show_header=show_header)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _fail(message: str, code: int = 1) -> NoReturn:
    # text: messages quote things like [tool.lambdajobs] and ids, never read as markup
    err.print(as_text(("error:", "red"), " ", message), soft_wrap=True)
    raise typer.Exit(code)


def say(message: str) -> None:
    """One line of output (or several: line breaks kept), as text."""
    console.print(message, soft_wrap=True)


def help_text(doc: str | None) -> str | None:
    """A command's docstring as `--help` shows it: each paragraph on one line (the command list would
    show the first as written, line breaks and all, and `--help` keeps every line break before it
    wraps at the terminal's width), brackets shown as written (not read as rich markup:
    `lambdajobs[board]`)."""
    if not doc:
        return doc
    import inspect

    paragraphs = inspect.cleandoc(doc).split("\n\n")
    return escape("\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs))


def _no_type_for_flags() -> None:
    """typer 0.29 shows a flag's type (`--dry-run <bool>`, `--help <bool>`) as if it took a value."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich
    if getattr(shown, "lambdajobs", False):
        return

    def display_type_rich(self: Any, ctx: Any) -> str | None:
        return None if getattr(self, "is_flag", False) else shown(self, ctx)

    display_type_rich.lambdajobs = True  # type: ignore[attr-defined]
    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]


_no_type_for_flags()


def friendly(command: F) -> F:
    """Turn the errors an operator can cause or meet into one line and exit 1."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        from lambdajobs.ops import describe_error

        try:
            return command(*args, **kwargs)
        except typer.Exit:
            raise
        except KeyboardInterrupt:
            _fail("interrupted.", 130)
        except Exception as exc:  # an operator gets one line; LAMBDAJOBS_DEBUG=1 shows the traceback
            line = describe_error(exc)
            if line is not None:
                _fail(line)
            if os.environ.get("LAMBDAJOBS_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {exc} (LAMBDAJOBS_DEBUG=1 shows the traceback)")

    run.__doc__ = help_text(command.__doc__)
    return run  # type: ignore[return-value]


def _spec(job: str) -> Any:
    from lambdajobs.runtime.spec import ensure_loaded, get_spec

    ensure_loaded(config().jobs)
    return get_spec(job)


def _declared(job: str) -> bool:
    from lambdajobs.runtime.errors import UnknownJobError

    try:
        _spec(job)
    except UnknownJobError:
        return False
    return True


def _queues(job: str, priority: str | None = None) -> tuple[str, str]:
    """(queue URL, DLQ URL) of a job (of one of its priority levels), from the stack's manifest
    (never from hand-typed URLs)."""
    spec = _spec(job)
    cfg = config()
    cfg.stack_entry()  # a missing stack says so, rather than "no queue for job"
    queue = cfg.queue(spec.name, spec.level_for(priority))
    return queue.url, queue.dlq_url


#: What the `dlq` commands call the workflow queue (unless a job has that name).
WORKFLOWS = "workflows"


def _queue_levels(
    spec: Any, priority: str | None = None
) -> list[tuple[str | None, str | None, str, str, str]]:
    """(queue level, priority name, label, queue URL, DLQ URL) of every queue of a job, highest
    priority first (only the one of `priority` when given). The label is the job, with its priority
    when it has several."""
    wanted = spec.levels if priority is None else (spec.level_for(priority),)
    found = []
    for level in wanted:
        named = spec.priority_of(level)
        queue_url, dlq_url = _queues(spec.name, named)
        found.append((level, named, f"{spec.name} ({named})" if named else spec.name, queue_url, dlq_url))
    return found


def _levels(job: str, priority: str | None = None) -> list[tuple[str, str, str]]:
    """(label, queue URL, DLQ URL) of every queue of a job, highest priority first (only the one of
    `priority` when given). The label is the job, with its level when it has several. `workflows`
    names the stack's workflow queue (its notices), unless a job has that name."""
    if job == WORKFLOWS and not _declared(job):
        cfg = config()
        dlq_url = cfg.stack_entry().get("workflow_dlq_url")
        if not dlq_url:
            _fail(f"stack '{cfg.stack}' has no workflow queue: deploy it with this version of lambdajobs.")
        return [(WORKFLOWS, cfg.workflow_queue(), str(dlq_url))]
    return [(label, q, d) for _, _, label, q, d in _queue_levels(_spec(job), priority)]


JOB_ARGUMENT = typer.Argument(
    ..., metavar="JOB", help=f"job name (or `{WORKFLOWS}`: the workflow queue's notices)", show_default=False
)
PRIORITY_OPTION = typer.Option(
    None, "--priority", help="one priority level of the job; without it, every level"
)


def _age(seconds: float | None) -> str:
    from lambdajobs.ops import age_text

    return age_text(seconds)


def parse_duration(text: str) -> timedelta:
    """'90s', '15m', '2h', '3d' -> timedelta."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd])\s*", text or "")
    if not match:
        from lambdajobs.runtime.errors import InvalidOptionError

        raise InvalidOptionError(
            f"duration {text!r} is not understood; use a number and s, m, h or d, e.g. 30m or 2d."
        )
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match[2]]
    return timedelta(**{unit: int(match[1])})


def parse_time(option: str, text: str | None) -> datetime | None:
    """A --since/--until value: an ISO 8601 time (UTC unless it has an offset), or a duration back
    from now ('2h': two hours ago)."""
    if text is None:
        return None
    if re.fullmatch(r"\s*\d+\s*[smhd]\s*", text):
        return datetime.now(UTC) - parse_duration(text)
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        _fail(
            f"{option} {text!r} is not understood; pass an ISO 8601 time (2026-12-01T09:00:00Z) or a "
            "duration back from now (30m, 2h, 3d).",
            2,
        )
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def in_range(option: str, value: float | None, low: float, high: float | None = None) -> None:
    """A usage error (one line, exit 2) when an option's number is out of its range."""
    if value is None or (value >= low and (high is None or value <= high)):
        return
    allowed = f"{low:g} to {high:g}" if high is not None else f"{low:g} or more"
    _fail(f"{option} {value:g} is out of range: pass {allowed}.", 2)


# -- --json: one document on stdout ----------------------------------------------------------------

JSON_OPTION = typer.Option(
    False,
    "--json",
    help="one JSON document on stdout instead of tables (its shape: docs, how-to/cli); errors stay "
    "one line on stderr, exit codes as without it",
)


def plain(value: Any) -> Any:
    """`value` as JSON can hold it: dataclasses as objects, enums as their value, times in ISO 8601."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    return value


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout: ASCII only, so no control character or bidirectional
    override of a job's text reaches the terminal (JSON escapes them)."""
    typer.echo(json.dumps(plain(document), indent=2, ensure_ascii=True, default=str))


# -- account ----------------------------------------------------------------------------------------


@app.command()
@friendly
def whoami(as_json: bool = JSON_OPTION) -> None:
    """The AWS account, identity and region this command (and a deploy) would use; one line saying
    what is missing otherwise."""
    cfg = _config
    sts = cfg.client("sts")
    if sts.meta.region_name in (None, "aws-global"):  # STS alone would answer from its global endpoint
        _fail("no AWS region: pass --region or set AWS_REGION (a deploy needs one).")
    identity = sts.get_caller_identity()
    if as_json:
        emit_json({"account": identity["Account"], "arn": identity["Arn"], "region": sts.meta.region_name})
        return
    console.print(
        f"account {identity['Account']} as {identity['Arn']} in {sts.meta.region_name}",
        highlight=False,
        soft_wrap=True,
    )


# -- projects: new, synth, diff, deploy, destroy, bootstrap, cdk -----------------------------------

#: CDK options are passed on as given (after ours, or after `--` when one is also ours, like --help).
CDK_COMMAND = {"ignore_unknown_options": True}
CDK_ARGS = typer.Argument(
    None,
    metavar="CDK_ARGS",
    help="passed to the CDK CLI as given, e.g. -c alarm_email=oncall@example.com (after -- for --help)",
    show_default=False,
)
YES_OPTION = typer.Option(
    False,
    "--yes",
    "--ci",
    help="never ask, for CI (no terminal): deploy approves IAM and security changes "
    "(cdk --require-approval never), destroy does not ask (cdk --force)",
)


ALLOW_DELETING_QUEUES_OPTION = typer.Option(
    False,
    "--allow-deleting-queues",
    help="deploy even when it deletes queues that hold messages, and the messages with them; without "
    "it such a deploy stops before it starts and names each queue (docs: how-to/upgrades)",
)
#: The commands that first say what a deploy would delete (lambdajobs.upgrade): `diff` lists it,
#: `deploy` stops on a queue that holds messages unless given --allow-deleting-queues.
UPGRADE_CHECKED = ("diff", "deploy")
#: What the upgrade check needs of whoever deploys (docs/how-to/upgrades.md).
UPGRADE_PERMISSIONS = (
    "ssm:GetParameter and ssm:GetParametersByPath on /lambdajobs/<stack>/*, and sqs:GetQueueAttributes "
    "on its queues"
)


def _cdk(
    command: str | None,
    extra: list[str] | None,
    *,
    yes: bool = False,
    needs_app: bool = True,
    allow_deleting_queues: bool = False,
) -> None:
    """Run the pinned CDK CLI (fetched on first use) on the virtualenv's Node, in the folder of the
    nearest cdk.json; `lambdajobs whoami` first for the commands that act on an account. `command`
    None: `extra` names the CDK command (`lambdajobs cdk ...`). `diff` and `deploy` synthesize first,
    say what the deploy would delete (`_upgrade_check`), and then diff or deploy that assembly."""
    from lambdajobs import deploy as cdk_cli

    extra = list(extra or [])
    cfg = _config
    folder = cdk_cli.require_app() if needs_app else (cdk_cli.find_app() or Path.cwd())
    node = cdk_cli.find_node()
    environ = dict(os.environ)
    if command in cdk_cli.ACCOUNT_COMMANDS:
        if cfg.endpoint_url:
            _fail(
                f"cdk {command} works on AWS, but the endpoint is {cfg.endpoint_url} (--endpoint-url or "
                "AWS_ENDPOINT_URL, e.g. from `lambdajobs dev`): unset it."
            )
        whoami(as_json=False)
    if cfg.region:  # --region: the CLI reads the region from the environment
        environ.update(AWS_REGION=cfg.region, AWS_DEFAULT_REGION=cfg.region)
    script = cdk_cli.ensure_cli(node=node)
    started = time.time()  # what synth writes after this: the templates, the stacks file

    def run(args: list[str], *, interactive: bool) -> int:
        return cdk_cli.run_cli(script, args, cwd=folder, node=node, environ=environ, interactive=interactive)

    report = None
    if command in UPGRADE_CHECKED:
        extra, report = _upgrade_check(
            str(command), extra, run=run, folder=folder, allow_deleting_queues=allow_deleting_queues
        )
    args = cdk_cli.cdk_arguments(command, extra, yes=yes, profile=cfg.profile)
    code = run(args, interactive=command != "synth")
    if report is not None and command == "diff":  # after the CLI's diff, where it is read last
        _say_lines(report.lines(advice=True))
    if code and command in ("deploy", "destroy") and not yes and not (sys.stdin and sys.stdin.isatty()):
        _fail(
            f"cdk {command} failed (exit {code}); if it wanted to ask you something (approve IAM or "
            f"security changes, confirm), it could not without a terminal: `lambdajobs {command} --yes` "
            "does not ask (CI).",
            code,
        )
    if code:
        raise typer.Exit(code)
    if command == "synth":
        from lambdajobs.upgrade import nested_template_files

        for template in cdk_cli.templates(folder, extra):
            for written in (template, *nested_template_files(template)):  # a nested stack's (Jobs2) too
                shown = os.path.relpath(written)
                console.print(f"wrote {shown}", highlight=False, soft_wrap=True, markup=False)
        from lambdajobs.runtime.project import lambdajobs_root, project_root
        from lambdajobs.runtime.project import stacks_file as stacks_file_of
        from lambdajobs.staging.dependencies import LOCK_NAME

        # where synth writes it (`dependencies.declared`): beside the [tool.lambdajobs] pyproject.toml
        lock = (lambdajobs_root(folder) or project_root(folder) or folder) / LOCK_NAME
        if lock.is_file() and lock.stat().st_mtime >= started:  # written when the declared ones change
            console.print(
                f"locked the versions your functions ship in {os.path.relpath(lock)}: commit it",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
        stacks_file = stacks_file_of(folder)
        if stacks_file.is_file() and stacks_file.stat().st_mtime >= started:
            console.print(
                f"recorded which stack holds each job in {os.path.relpath(stacks_file)}: commit it",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )


def _say_lines(lines: list[str]) -> None:
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True, markup=False)


def _warn(message: str) -> None:
    err.print(as_text(("warning:", "yellow"), " ", message), soft_wrap=True)


def _option_value(extra: list[str], *names: str) -> str | None:
    """The value of a CDK option in `extra` (`--app X`, `-a X` or `--app=X`), or None."""
    for i, arg in enumerate(extra):
        if arg in names and i + 1 < len(extra):
            return extra[i + 1]
        for name in names:
            if arg.startswith(f"{name}="):
                return arg.partition("=")[2]
    return None


def _without_option(extra: list[str], *names: str) -> list[str]:
    """`extra` without a CDK option and its value."""
    kept: list[str] = []
    skip = False
    for arg in extra:
        if skip:
            skip = False
        elif arg in names:
            skip = True
        elif not any(arg.startswith(f"{name}=") for name in names):
            kept.append(arg)
    return kept


def _upgrade_check(
    command: str,
    extra: list[str],
    *,
    run: Callable[..., int],
    folder: Path,
    allow_deleting_queues: bool,
) -> tuple[list[str], Any]:
    """Synthesize once, and say what deploying that assembly would delete (`lambdajobs.upgrade`):
    every deployed queue it deletes, with its messages, and a job index it drops. `deploy` stops here
    on a queue that holds messages, each one in an error line that says what to do, unless
    `allow_deleting_queues`; so it does when the check cannot be made. Returns the CDK arguments that
    diff or deploy this very assembly (`--app <cloud assembly>`: the CLI does not synthesize again),
    and the report (None: not made)."""
    from lambdajobs import deploy as cdk_cli
    from lambdajobs import upgrade
    from lambdajobs.ops import describe_error

    deploying = command == "deploy"
    code = run(cdk_cli.cdk_arguments("synth", extra, profile=_config.profile), interactive=False)
    if code:  # the synth said what was wrong
        raise typer.Exit(code)
    app_option = _option_value(extra, "--app", "-a")
    given = app_option is not None and (folder / app_option).is_dir()  # an assembly, not a command
    paths = cdk_cli.templates(folder, ["--output", str(app_option)] if given else extra)
    if not paths:  # said on stdout: the CLI's own errors stay the one line on stderr
        _say_lines(
            [
                f"not checked: what the {command} deletes (the synth wrote no stack template where "
                "lambdajobs looks: --output, cdk.json's output, else cdk.out)."
            ]
        )
        return extra, None
    extra = ["--app", str(paths[0].parent), *_without_option(extra, "--app", "-a")]
    try:
        report = upgrade.check(upgrade.read_assembly(paths), _config)
    except Exception as exc:  # AWS refused or cannot be reached: one line, never a traceback
        line = describe_error(exc)
        if line is None:
            raise
        unchecked = f"cannot tell what the {command} deletes ({line}); the check needs {UPGRADE_PERMISSIONS}"
        if deploying and not allow_deleting_queues:
            _fail(f"{unchecked}. --allow-deleting-queues deploys without it.")
        _warn(f"{unchecked}.")
        return extra, None
    if not deploying:
        return extra, report
    stopping = report.stopping if not allow_deleting_queues else ()
    _say_lines(report.lines(hold_back=stopping))
    if stopping:
        for deletion in stopping:
            err.print(
                as_text(
                    ("error:", "red"),
                    f" {deletion.line()}: {deletion.what_to_do()}; or pass --allow-deleting-queues to "
                    "delete them with it.",
                ),
                soft_wrap=True,
            )
        raise typer.Exit(1)
    return extra, report


@app.command()
@friendly
def new(
    name: str = typer.Argument(
        ..., metavar="NAME", help="the project's folder and name; its jobs package is NAME_jobs"
    ),
    lambdajobs_requirement: str = typer.Option(
        None,
        "--lambdajobs-requirement",
        help="the project's dependency on lambdajobs: a requirement, a URL, a wheel or a folder "
        "(default: what this lambdajobs was installed from)",
    ),
) -> None:
    """A new project in the folder NAME: a jobs package with one job and its test, pyproject.toml,
    app.py and cdk.json. Its tests pass and it synthesizes as it is."""
    from lambdajobs.scaffold import new_project

    made = new_project(name, lambdajobs_requirement=lambdajobs_requirement)
    for line in (
        f"made {name}/: jobs package {made.jobs} (one job, greet), its test, app.py, cdk.json; "
        f"stack {made.stack}",
        f"its lambdajobs: {made.requirement}",
        "next, in a virtualenv:",
        f"  cd {name}",
        "  pip install -e .      # lambdajobs and pytest",
        "  pytest                # the job's tests",
        "  lambdajobs dev        # every job on a local stack",
        "  lambdajobs synth      # the template, in cdk.out/",
        "  lambdajobs deploy     # to the account `lambdajobs whoami` shows",
    ):
        console.print(line, highlight=False, soft_wrap=True, markup=False)


@app.command(context_settings=CDK_COMMAND)
@friendly
def synth(cdk_args: list[str] = CDK_ARGS) -> None:
    """Synthesize your CDK app (cdk.json's "app") into cdk.out/ with the pinned CDK CLI, which is
    fetched from npm on first use; needs no AWS account.

    Runs in the folder of the nearest cdk.json, on the virtualenv's Node (the `cdk` extra). The CLI is
    cached in $XDG_CACHE_HOME/lambdajobs/cdk-cli-<version> (LAMBDAJOBS_CDK_CLI_DIR: another folder).
    """
    _cdk("synth", cdk_args)


@app.command(context_settings=CDK_COMMAND)
@friendly
def diff(cdk_args: list[str] = CDK_ARGS) -> None:
    """What a deploy would change in the account `lambdajobs whoami` shows (cdk diff), and then every
    queue of a lambdajobs stack it would delete, with the messages it holds, and a job index it would
    drop (docs: how-to/upgrades). Only says; `deploy` is what stops."""
    _cdk("diff", cdk_args)


@app.command(context_settings=CDK_COMMAND)
@friendly
def deploy(
    yes: bool = YES_OPTION,
    allow_deleting_queues: bool = ALLOW_DELETING_QUEUES_OPTION,
    cdk_args: list[str] = CDK_ARGS,
) -> None:
    """Deploy your CDK app to the account `lambdajobs whoami` shows (cdk deploy); --yes in CI.

    Without --yes the CDK CLI asks before it adds IAM or security group changes, and without a
    terminal (CI) it cannot ask, so it fails (TtyNotAttached).

    It synthesizes first and compares each lambdajobs stack with what is deployed (its manifest in
    SSM): a queue the deploy would delete is listed with the messages it holds, and one that holds
    any stops the deploy before it starts (--allow-deleting-queues: go on, and lose them). A job index
    the deploy would drop is listed. Then it deploys that very assembly. See docs: how-to/upgrades.
    """
    _cdk("deploy", cdk_args, yes=yes, allow_deleting_queues=allow_deleting_queues)


@app.command(context_settings=CDK_COMMAND)
@friendly
def destroy(yes: bool = YES_OPTION, cdk_args: list[str] = CDK_ARGS) -> None:
    """Delete your CDK app's stacks from the account `lambdajobs whoami` shows (cdk destroy)."""
    _cdk("destroy", cdk_args, yes=yes)


@app.command(context_settings=CDK_COMMAND)
@friendly
def bootstrap(cdk_args: list[str] = CDK_ARGS) -> None:
    """Prepare an AWS account and region for CDK deploys, once (cdk bootstrap)."""
    _cdk("bootstrap", cdk_args, needs_app=False)


@app.command(context_settings=CDK_COMMAND)
@friendly
def cdk(cdk_args: list[str] = CDK_ARGS) -> None:
    """Any other command of the pinned CDK CLI, e.g. `lambdajobs cdk ls`, `lambdajobs cdk --version`."""
    _cdk(None, cdk_args, needs_app=False)


# -- queues, enqueue, status -----------------------------------------------------------------------


def _pauses(spec: Any, cfg: Any) -> tuple[dict[str, Any], list[Any]]:
    """The job's event source mappings by queue key (paused or not) and its retention warnings; ({},
    []) when they cannot be read (no mapping, or no lambda:ListEventSourceMappings permission)."""
    from botocore.exceptions import BotoCoreError, ClientError

    from lambdajobs import queue_control

    try:
        found = queue_control.mappings(spec, config=cfg)
        by_key = {m.queue_key: m for m in found}
        paused = [m for m in found if m.paused]
        warnings = queue_control.retention_warnings(spec, config=cfg, found=paused) if paused else []
    except (ClientError, BotoCoreError):
        return {}, []
    return by_key, warnings


@app.command()
@friendly
def queues(as_json: bool = JSON_OPTION) -> None:
    """Per queue: waiting, in flight, delayed, DLQ, succeeded and dead in the last hour, oldest age,
    health (paused: its worker does not receive, `lambdajobs resume` starts it again)."""
    from concurrent.futures import ThreadPoolExecutor

    cfg = config()
    cfg.stack_entry()  # a missing stack says so, before any job's reads
    now = datetime.now(UTC)
    specs = _all_jobs()
    # each job's reads (counts, mappings, queue attributes) at once: a stack of many jobs answers in
    # about the time of one on AWS
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(specs)))) as pool:
        # each in a copy of this context: a stack configured in it (`using`) is the threads' too
        futures = [pool.submit(contextvars.copy_context().run, _job_queues, spec, cfg, now) for spec in specs]
        read = [future.result() for future in futures]
    jobs_found = [found for found, _, _ in read]
    warnings = [w for _, found_warnings, _ in read for w in found_warnings]
    refused = next((r for _, _, r in read if r and r != "-"), None)
    note = None
    if refused:
        note = f"ok/dead: not counted, AWS refused {refused}"
    elif any(r == "-" for _, _, r in read):  # no count source at all
        from lambdajobs.runtime.records import index_off_message

        note = "ok/dead: " + index_off_message(cfg.stack, "off", "counting jobs on the local stack")
    if as_json:
        emit_json({"jobs": jobs_found, "counts_note": note, "retention_warnings": warnings})
        return
    console.print(_queues_table(jobs_found))
    for warning in warnings:
        _warn(warning)
    if note:
        say(note)


def _job_queues(spec: Any, cfg: Any, now: datetime) -> tuple[dict[str, Any], list[str], str | None]:
    """One job's part of `lambdajobs queues`: (its document, its retention warnings, why it has no
    counts: what AWS refused, "-" for no count source, None when counted)."""
    from botocore.exceptions import ClientError

    from lambdajobs.ops import job_counts, oldest_age_seconds, queue_health
    from lambdajobs.runtime.settings import queue_key

    uncounted: str | None = None
    try:
        counts = job_counts(spec.name, now - timedelta(hours=1), now, config=cfg)
    except ClientError as exc:  # no CloudWatch (or index) read permission: the counters anyway
        counts, uncounted = None, f"{exc.operation_name}: {exc.response.get('Error', {}).get('Code')}"
    if counts is None and uncounted is None:
        uncounted = "-"
    mappings, retention = _pauses(spec, cfg)
    rows = []
    for level, named, label, queue_url, dlq_url in _queue_levels(spec):
        health = queue_health(spec.name, queue_url, dlq_url, config=cfg)
        try:
            age = oldest_age_seconds(queue_url, config=cfg)
        except ClientError:
            age = None  # no CloudWatch read permission: show the counters anyway
        mapping = mappings.get(queue_key(spec.name, level))
        rows.append(
            {
                "label": label,
                "level": named,
                "waiting": health.depth,
                "in_flight": health.in_flight,
                "delayed": health.delayed,
                "dlq": health.dlq_depth,
                "dlq_in_flight": health.dlq_in_flight,
                "oldest_seconds": age,
                "health": _health_word(spec, health, age),
                "paused": None if mapping is None else mapping.paused,
                "paused_since": mapping.since if mapping is not None and mapping.paused else None,
            }
        )
    found = {
        "job": spec.name,
        "succeeded_1h": counts["succeeded"] if counts else None,
        "dead_1h": counts["dead"] if counts else None,
        "queues": rows,
    }
    return found, [w.describe() for w in retention], uncounted


#: How `lambdajobs queues` colours a queue's health.
HEALTH_STYLES = {"failing": "red", "stale": "yellow", "backlog": "yellow", "ok": "green"}


def _queues_table(jobs_found: list[dict[str, Any]]) -> Table:
    # narrow enough for 80 columns: two-line headers, no outer borders, a job's name never folded
    # (a long queue label wraps at its space; a header or a number never folds)
    table = Table(title="queues", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    table.add_column("job", overflow="fold")
    for column in ("waiting", "in\nflight", "delayed", "DLQ", "ok\n1h", "dead\n1h", "oldest"):
        widest = max(len(word) for word in column.split())
        table.add_column(column, justify="right", no_wrap=True, min_width=widest)
    table.add_column("health", no_wrap=True, min_width=len("backlog"))
    for found in jobs_found:
        for row in found["queues"]:
            last = row is found["queues"][-1]  # a job's counts once, on its own queue's row
            counted = [found["succeeded_1h"], found["dead_1h"]]
            dlq = str(row["dlq"]) + (f" ({row['dlq_in_flight']} hidden)" if row["dlq_in_flight"] else "")
            health = styled(row["health"], HEALTH_STYLES[row["health"]])
            if row["paused"]:
                health = as_text(("paused", "bold yellow"), " ", health)
            table.add_row(
                row["label"],
                str(row["waiting"]),
                str(row["in_flight"]),
                str(row["delayed"]),
                dlq,
                *[("-" if n is None else str(n)) if last else "" for n in counted],
                _age(row["oldest_seconds"]),
                health,
            )
    return table


def _health_word(spec: Any, health: Any, age: float | None) -> str:
    limits = spec.alarms
    if health.dlq_depth > (limits.dlq_messages_above or 0):
        return "failing"
    if (
        age is not None
        and limits.oldest_message_age_seconds_above is not None
        and (age > limits.oldest_message_age_seconds_above)
    ):
        return "stale"
    if limits.queue_depth_above is not None and health.depth > limits.queue_depth_above:
        return "backlog"
    return "ok"


@app.command()
@friendly
def enqueue(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    payload_json: str = typer.Argument(..., metavar="PAYLOAD", help="the payload, as a JSON object"),
    job_id: str = typer.Option(None, "--id", help="job id (default: derived or a new uuid)"),
    delay: int = typer.Option(
        0, "--delay", help="delay in seconds, 0 or more (above 900: a one-time schedule sends it)"
    ),
    run_at: str = typer.Option(
        None, "--run-at", help="ISO 8601 time with an offset, e.g. 2026-12-01T09:00:00-05:00"
    ),
    priority: str = typer.Option(None, "--priority", help="one of the job's priority levels"),
    tenant: str = typer.Option(
        None, "--tenant", help="the fair queue's tenant (its MessageGroupId), e.g. a customer id"
    ),
    debounce_key: str = typer.Option(
        None,
        "--debounce",
        metavar="KEY",
        help="debounce: of this key's enqueues in the window, the last runs",
    ),
    debounce_seconds: int = typer.Option(30, "--debounce-seconds", help="the debounce window, 1 to 900 s"),
    max_wait: int = typer.Option(
        86_400, "--max-wait", help="the longest a debounced key's first enqueue waits for a run (s)"
    ),
) -> None:
    """Send one job."""
    from lambdajobs.runtime.debounce import Debounce
    from lambdajobs.runtime.producer import enqueue as send

    try:
        payload = json.loads(payload_json)
    except ValueError as exc:
        _fail(f'malformed payload JSON ({exc}); pass an object such as \'{{"to": "ada@example.com"}}\'.')
    if not isinstance(payload, dict):
        _fail(f"the payload must be a JSON object, not a {type(payload).__name__}.")
    in_range("--delay", delay, 0)
    when = None
    if run_at:
        try:
            when = datetime.fromisoformat(run_at)
        except ValueError:
            _fail(f"--run-at {run_at!r} is not an ISO 8601 time; use e.g. 2026-12-01T09:00:00+00:00.")
    say(
        send(
            _spec(job),
            payload,
            job_id=job_id,
            delay_seconds=delay,
            run_at=when,
            priority=priority,
            tenant=tenant,
            debounce=Debounce(debounce_key, debounce_seconds, max_wait) if debounce_key else None,
            config=config(),
        )
    )


#: The states `lambdajobs jobs --state` takes: those the job index can hold (in its mode "all"; a
#: stack's own mode may hold fewer, and says how to turn it up), in a job's order.
LISTABLE = tuple(state.value for state in LISTED_STATES)

#: States `lambdajobs jobs` cannot list, and what to do instead.
_NOT_STARTED = (
    "a job not started has no record to list (nothing is written at enqueue): SQS holds it, "
    "`lambdajobs queues` counts the queue's waiting and delayed messages, and `lambdajobs status JOB_ID` "
    "reads one by its id"
)
UNLISTED = {
    "pending": _NOT_STARTED,
    "queued": _NOT_STARTED,
    "waiting": "the job index does not hold rate-limited jobs waiting for their slot: `lambdajobs status "
    "JOB_ID` shows one's waiting_until, and `lambdajobs queues` counts the queue's messages",
}

#: `lambdajobs status` exit codes, besides 0 (found; with --wait: succeeded), 1 (an error) and 2 (a
#: usage error, as for every command).
STATUS_NO_RECORD = 3
STATUS_DEAD = 4
STATUS_TIMED_OUT = 5
#: ... and a job that will never run under its id: cancelled, or superseded by a later debounced enqueue.
STATUS_CANCELLED = 6


def _pii_fields(job: str | None) -> tuple[str, ...] | None:
    """The `pii_fields` of a declared job; None when the job is not declared here (its fields are
    unknown, so nothing of its payload can be shown)."""
    if not job or not _declared(job):
        return None
    return tuple(_spec(job).pii_fields)


def _masked_payload(job: str | None, payload: Any) -> Any:
    """A record's payload as it may be shown: masked by its job's `pii_fields` (runtime/pii.py);
    None when the job is not declared in this jobs package."""
    from lambdajobs.runtime import pii

    fields = _pii_fields(job)
    if payload is None or fields is None:
        return None
    return pii.mask_payload(payload, fields)


def status_document(info: Any) -> dict[str, Any]:
    """A `JobStatus` as `--json` prints it: its fields (the payload masked by the job's pii_fields),
    `described_state`, and the derived `queue_wait_seconds`, `run_seconds` and `attempt_rows`."""
    document = plain(info)
    document["described_state"] = info.described_state
    if "payload" in document:
        document["payload"] = _masked_payload(info.job, info.payload)
    for name in ("queue_wait_seconds", "run_seconds"):
        if hasattr(info, name):
            document[name] = getattr(info, name)
    if hasattr(info, "attempt_rows"):
        document["attempt_rows"] = plain(info.attempt_rows())
    return document


#: The fields `lambdajobs status` shows, in order (those a record has).
STATUS_FIELDS = (
    "job",
    "attempts",
    "progress",
    "progress_message",
    "waiting_until",
    "wake_at",
    "level",
    "tenant",
    "enqueued_at",
    "created_at",
    "started_at",
    "finished_at",
)


def _status_table(info: Any) -> Table:
    from lambdajobs.ops import duration_text, until_text

    table = _table("field", "value", show_header=False, title=f"job {info.job_id}")
    # the state as people read it: "waiting for signal approval", not "waiting_signal"
    table.add_row("state", info.described_state)
    for key in STATUS_FIELDS:
        value = getattr(info, key, None)
        if value not in (None, ""):
            table.add_row(key, f"{value} ({until_text(value)})" if key == "wake_at" else str(value))
    for key in ("queue_wait_seconds", "run_seconds"):
        seconds = getattr(info, key, None)
        if seconds is not None:
            table.add_row(key.removesuffix("_seconds").replace("_", " "), duration_text(seconds * 1000))
    member = getattr(info, "workflow", None)
    if member:
        table.add_row("workflow", f"{member.get('id')} (stage {member.get('stage')}, #{member.get('index')})")
    if info.suspensions:
        table.add_row("suspensions", f"{info.suspensions} (sleeps, signal waits, continuations)")
    # strings: what a job or its error wrote is shown as written (TextConsole), never as markup
    if info.error:
        table.add_row("error", f"{info.error.get('type')}: {info.error.get('message')}")
    if info.note and not info.error:
        table.add_row("note", info.note)
    if info.result is not None:
        table.add_row("result", json.dumps(info.result))
    payload = _masked_payload(info.job, getattr(info, "payload", None))
    if payload is not None:
        cut = " (cut)" if getattr(info, "payload_cut", False) else ""
        table.add_row("payload" + cut, json.dumps(payload, ensure_ascii=False))
    return table


def _attempts_table(info: Any) -> Table | None:
    """Every attempt of a job that failed at least once: start, duration, outcome, error."""
    from lambdajobs.ops import duration_text

    rows = info.attempt_rows() if getattr(info, "history", ()) else []
    if not rows:
        return None
    table = _table("#", "started", "duration", "outcome", "error", title="attempts")
    for row in rows:
        error = f"{row.error_type}: {row.error_message}" if row.error_type else ""
        seconds = row.seconds
        table.add_row(
            str(row.attempt),
            row.started_at or "-",
            "-" if seconds is None else duration_text(seconds * 1000),
            row.outcome or "-",
            error,
        )
    return table


@app.command()
@friendly
def status(
    job_id: str = typer.Argument(..., metavar="JOB_ID", help="job id"),
    wait: float = typer.Option(0, help="wait up to this many seconds for a final state"),
    as_json: bool = JSON_OPTION,
) -> None:
    """A job's state, attempts, progress, result and last error; a durable job's steps done, with
    their durations, and when a sleeping or waiting job continues (wake_at). A job that failed once
    also shows its payload (masked by its pii_fields), every attempt and the last traceback.

    Exit codes: 0 the job has a record (with --wait: it succeeded); 1 an error; 2 a usage error; 3 no
    record (an unknown id, or a job not started yet: nothing is written at enqueue); 4 the job is
    dead; 5 --wait ran out before the job finished; 6 the job was cancelled or superseded (it never
    runs under this id).
    """
    from lambdajobs.runtime.errors import WaitTimeoutError
    from lambdajobs.runtime.records import get_status, wait_for

    in_range("--wait", wait, 0)
    cfg = _config
    timed_out = False
    try:
        info = wait_for(job_id, wait, poll_seconds=1, config=cfg) if wait else get_status(job_id, config=cfg)
    except WaitTimeoutError as exc:
        info, timed_out = exc.status, True
    if as_json:
        emit_json(status_document(info))
    else:
        console.print(_status_table(info))
        attempts = _attempts_table(info)
        if attempts is not None:
            console.print(attempts)
        if info.steps:
            console.print(_steps_table(info.steps))
        if getattr(info, "traceback", None):
            console.print(styled("traceback (last failure):", "bold"))
            say(str(info.traceback))
    if timed_out:
        _fail(f"job '{job_id}' is still {info.described_state} after {wait:g} s (--wait).", STATUS_TIMED_OUT)
    if info.state == "dead":
        raise typer.Exit(STATUS_DEAD)
    if info.state in ("cancelled", "superseded"):
        raise typer.Exit(STATUS_CANCELLED)
    if not info.has_record:  # no record, or only signals kept for a job that has not run
        raise typer.Exit(STATUS_NO_RECORD)


def _steps_table(steps: Any) -> Table:
    """A durable job's steps done, in the order they ended, with how long each ran."""
    from lambdajobs.ops import duration_text

    table = _table("#", "step", "duration", "finished_at", title=f"steps ({len(steps)} done)")
    for number, step in enumerate(steps, 1):
        # a step's name is the job's own text: a string cell, shown as written (TextConsole)
        table.add_row(str(number), step.name, duration_text(step.duration_ms), step.finished_at or "-")
    return table


@app.command("signal")
@friendly
def send_signal(
    job_id: str = typer.Argument(..., metavar="JOB_ID", help="the durable job's id"),
    name: str = typer.Argument(
        ..., metavar="NAME", help="the signal's name, as the job waits for it: ctx.wait_for_signal(NAME, ...)"
    ),
    data_json: str = typer.Option(
        None,
        "--data",
        metavar="JSON",
        help="the signal's data, as JSON: what the wait returns (default: null)",
    ),
) -> None:
    """Send a signal to a durable job: if it waits for NAME (ctx.wait_for_signal), it wakes and the
    wait returns the data; otherwise the signal is kept for when it waits (a job not started yet
    too).

    A finished job refuses it, and so does a job that already has this signal with other data (the
    same data sent again changes nothing).
    """
    from lambdajobs.runtime.durable import signal as deliver
    from lambdajobs.runtime.job_record import JobState
    from lambdajobs.runtime.records import get_status

    data = None
    if data_json is not None:
        try:
            data = json.loads(data_json)
        except ValueError as exc:
            _fail(
                f"malformed --data JSON ({exc}); pass JSON in single quotes, e.g. "
                """--data '{"approved": true}'."""
            )
    sent = deliver(job_id, name, data, config=_config)
    if sent.woke:
        console.print(
            f"woke job {job_id}: it was waiting for signal {name}, and continues with its data.",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
        return
    info = get_status(job_id, config=_config)
    if info.state is JobState.PENDING:
        now = "it has not started (or the id is unknown: nothing is written at enqueue)"
    else:
        now = f"it is {info.described_state}"
    console.print(
        f"kept signal {name} for job {job_id}: {now}; its wait for {name} returns the data.",
        soft_wrap=True,
        highlight=False,
        markup=False,
    )


#: `lambdajobs cancel` exit code, besides 0 (cancelled, or asked to stop), 1 and 2: nothing changed,
#: the job had already finished (with --workflow: every member had).
CANCEL_FINISHED = 3


@app.command()
@friendly
def cancel(
    job_id: str = typer.Argument(
        None, metavar="JOB_ID", help="the job's id (or --workflow instead)", show_default=False
    ),
    job: str = typer.Option(
        None,
        "--job",
        metavar="NAME",
        help="the job's name: also deletes the one-time schedule of a --run-at job not started yet",
    ),
    workflow_id: str = typer.Option(
        None,
        "--workflow",
        metavar="WORKFLOW_ID",
        help="cancel every member of this workflow that has not finished (instead of JOB_ID)",
    ),
) -> None:
    """Cancel a job: one that is not running (not started, retrying, sleeping, waiting for a signal)
    never runs again under its id; a running one is asked to stop, and stops at its next progress
    report or step. A finished job is left as it is.

    With --workflow: every member not finished is cancelled (the callback too), and the counts are
    printed.

    Exit codes: 0 cancelled, or asked to stop; 1 an error; 2 a usage error; 3 nothing changed: the job
    had already finished (with --workflow: every member had).
    """
    from lambdajobs.runtime.cancellation import cancel as cancel_job
    from lambdajobs.runtime.cancellation import cancel_workflow

    if workflow_id is not None:
        if job_id is not None or job is not None:
            _fail("--workflow cancels a workflow's members: pass no JOB_ID or --job with it.", 2)
        cancelled = cancel_workflow(workflow_id, config=_config)
        console.print(
            f"workflow {workflow_id}: {cancelled.cancelled} cancelled, {cancelled.requested} asked to stop, "
            f"{cancelled.finished} already finished (of {len(cancelled.members)} members).",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
        if cancelled.members and not (cancelled.cancelled or cancelled.requested):
            raise typer.Exit(CANCEL_FINISHED)
        return
    if not job_id:
        _fail("name the job to cancel: lambdajobs cancel JOB_ID (or --workflow WORKFLOW_ID).", 2)
    name = _spec(job).name if job is not None else None  # a job name that is not declared: one line
    result = cancel_job(job_id, job=name, config=_config)
    console.print(result.message, soft_wrap=True, highlight=False, markup=False)
    if result.schedule_deleted:
        console.print(
            f"deleted its one-time schedule {result.schedule_deleted}.",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    if not result.changed:
        raise typer.Exit(CANCEL_FINISHED)


LIMIT_HELP = "rows per page, 1 to 1000"
SINCE_OPTION = typer.Option(
    None, "--since", help="only jobs from this time on: ISO 8601 (2026-12-01T09:00:00Z) or back from now (2h)"
)
UNTIL_OPTION = typer.Option(None, "--until", help="only jobs before this time: ISO 8601, or back from now")
CURSOR_OPTION = typer.Option(
    None, "--cursor", "--after", help="the next page: the cursor a previous page printed"
)


def _job_detail(status: Any) -> str:
    """A listed job's last column: when a parked job goes on, its error, or its result."""
    from lambdajobs.runtime.job_record import PARKED_STATES

    if status.state in PARKED_STATES:  # a durable job between invocations: when it goes on
        return status.described_state + (f", wakes {status.wake_at}" if status.wake_at else "")
    if status.error:
        return f"{status.error.get('type')}: {status.error.get('message')}"
    return "" if status.result is None else json.dumps(status.result)[:200]


def _jobs_table(title: str, items: list[Any], wanted: Any = None) -> Table:
    """Listed jobs; `wanted`: the state listed (None: any state, shown in a column of its own)."""
    columns = ("job id", "attempts", "at", "error / result")
    table = _table(*(columns if wanted is not None else ("job id", "state", *columns[1:])), title=title)
    for status in items:
        at = status.finished_at or status.started_at or status.updated_at or "-"
        moved = "" if wanted is None or status.state is wanted else f" (now {status.described_state})"
        shown = [status.job_id + moved] if wanted is not None else [status.job_id, status.described_state]
        # strings: ids, errors and results are shown as written (TextConsole), never as markup
        table.add_row(*shown, str(status.attempts), at, _job_detail(status))
    return table


@app.command()
@friendly
def jobs(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    state: str = typer.Option(
        None,
        "--state",
        help=f"{', '.join(LISTABLE[:-1])} or {LISTABLE[-1]} (without it: every state the index holds)",
    ),
    since: str = SINCE_OPTION,
    until: str = UNTIL_OPTION,
    limit: int = typer.Option(50, "--limit", help="at most this many per state, 1 to 1000"),
    cursor: str = CURSOR_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """A job's records by state, newest first, a page at a time (needs the job index: the command says
    how to turn it on); --since/--until: entered that state in a time range."""
    from lambdajobs.runtime.errors import InvalidOptionError
    from lambdajobs.runtime.job_record import JobState
    from lambdajobs.runtime.records import index_off_message, list_jobs, listed_states

    in_range("--limit", limit, 1, 1000)
    start, end = parse_time("--since", since), parse_time("--until", until)
    spec = _spec(job)
    cfg = config()
    held = listed_states(cfg)
    if state is not None:
        if state in UNLISTED:
            raise InvalidOptionError(f"--state {state}: {UNLISTED[state]}")
        if state not in LISTABLE:
            raise InvalidOptionError(
                f"--state {state!r} is not a state a job is listed by; use one of {LISTABLE}."
            )
        wanted = [JobState(state)]
    else:
        if not held:
            _fail(index_off_message(cfg.stack, cfg.job_index_mode(), f"`lambdajobs jobs {spec.name}`"))
        wanted = held
    if cursor and len(wanted) != 1:
        raise InvalidOptionError("--cursor pages through one state: pass --state too.")
    ranged: dict[str, Any] = {k: v for k, v in (("since", start), ("until", end)) if v is not None}
    pages = [(s, list_jobs(spec.name, s, limit=limit, cursor=cursor, config=cfg, **ranged)) for s in wanted]
    if as_json:
        emit_json(
            {
                "job": spec.name,
                "states": [
                    {
                        "state": s.value,
                        "items": [status_document(i) for i in page.items],
                        "cursor": page.cursor,
                    }
                    for s, page in pages
                ],
            }
        )
        return
    window = " ".join(f"--{k} {v}" for k, v in (("since", since), ("until", until)) if v)
    for wanted_state, page in pages:
        console.print(_jobs_table(f"{spec.name}: {wanted_state.value}", page.items, wanted_state))
        if page.cursor:
            say(
                f"more: lambdajobs jobs {spec.name} --state {wanted_state.value} "
                + (f"{window} " if window else "")
                + f"--limit {limit} --cursor {page.cursor}"
            )


@app.command()
@friendly
def search(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    field: str = typer.Argument(
        ...,
        metavar="FIELD",
        help="one of the job's searchable fields: a payload path (customer_id, address.country) or @tenant",
    ),
    value: str = typer.Argument(..., metavar="VALUE", help="the value the field had at enqueue"),
    since: str = typer.Option(
        None, "--since", help="enqueued from this time on: ISO 8601, or back from now (2h)"
    ),
    until: str = typer.Option(None, "--until", help="enqueued before this time: ISO 8601, or back from now"),
    limit: int = typer.Option(50, "--limit", help=LIMIT_HELP),
    cursor: str = CURSOR_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """A job's jobs whose searchable FIELD had VALUE when they were enqueued, newest first, whatever
    their state (@job(searchable=...); docs: how-to/search). A field that is also a pii_fields field
    is matched by its exact value."""
    from lambdajobs.runtime.records import search as find

    in_range("--limit", limit, 1, 1000)
    start, end = parse_time("--since", since), parse_time("--until", until)
    spec = _spec(job)
    page = find(spec, field, value, since=start, until=end, limit=limit, cursor=cursor, config=config())
    if as_json:
        document = {"job": spec.name, "field": field, "value": value}
        emit_json({**document, "items": [status_document(i) for i in page.items], "cursor": page.cursor})
        return
    console.print(_jobs_table(f"{spec.name}: {field} = {value}", page.items))
    shown = f"{len(page.items)} found"
    if page.cursor:
        window = "".join(f" --{k} {v}" for k, v in (("since", since), ("until", until)) if v)
        value_arg = shlex.quote(value)
        say(
            f"{shown}; more: lambdajobs search {spec.name} {field} {value_arg}{window} --cursor {page.cursor}"
        )
    else:
        say(shown)


@app.command()
@friendly
def workflow(
    workflow_id: str = typer.Argument(
        ..., metavar="WORKFLOW_ID", help="workflow id (what .enqueue() returned)"
    ),
    wait: float = typer.Option(0, help="wait up to this many seconds for the workflow to end"),
    as_json: bool = JSON_OPTION,
) -> None:
    """A workflow's state, progress, and per stage its jobs and members by state."""
    import time

    from lambdajobs.runtime.workflow import get_workflow

    in_range("--wait", wait, 0)
    info = get_workflow(workflow_id, config=_config)
    deadline = time.monotonic() + wait
    while wait and not info.done and info.state != "unknown" and time.monotonic() < deadline:
        time.sleep(1)
        info = get_workflow(workflow_id, config=_config)
    if info.state == "unknown":
        _fail(f"no workflow '{workflow_id}' in stack '{_config.stack}' ({info.note}).")
    if as_json:
        emit_json(info)
        return
    summary = _table("field", "value", show_header=False, title=f"workflow {workflow_id}")
    for key in ("state", "kind", "progress", "callback_job_id", "reason", "created_at", "ended_at"):
        value = getattr(info, key)
        if value not in (None, ""):
            summary.add_row(key, f"{value}%" if key == "progress" else str(value))
    console.print(summary)
    stages = _table("stage", "jobs", "members", "pending", "running", "succeeded", "dead", "sent")
    for stage in info.stages:
        stages.add_row(
            str(stage.index),
            ", ".join(f"{job} x{n}" for job, n in stage.jobs.items()),
            str(stage.total),
            str(stage.pending),
            "-" if stage.running is None else str(stage.running),
            str(stage.succeeded),
            str(stage.dead),
            "yes" if stage.sent else "no",
        )
    console.print(stages)


def _mappings_line(verb: str, spec: Any, changed: list[Any]) -> str:
    queues = ", ".join(m.queue_key for m in changed)
    plural = "s" if len(changed) != 1 else ""
    return f"{verb} {spec.name}: {queues} ({len(changed)} event source mapping{plural})"


@app.command()
@friendly
def pause(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    priority: str = PRIORITY_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Stop a job's worker receiving from its queues (every priority level's, or one's): their Lambda
    event source mappings are disabled. Messages stay in the queue, and enqueues go on; on AWS Lambda
    stops polling within seconds (a batch already received finishes). SQS deletes a message that
    waits longer than the queue's retention (4 days): `lambdajobs queues` warns a day before.
    `lambdajobs resume JOB` starts it again."""
    from lambdajobs import queue_control

    spec = _spec(job)
    changed = queue_control.pause(spec, priority, config=config())
    if as_json:
        emit_json({"job": spec.name, "mappings": changed})
        return
    say(_mappings_line("paused", spec, changed) + f"; `lambdajobs resume {spec.name}` starts it again.")


@app.command()
@friendly
def resume(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    priority: str = PRIORITY_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """Let a paused job's worker receive from its queues again (every priority level's, or one's)."""
    from lambdajobs import queue_control

    spec = _spec(job)
    changed = queue_control.resume(spec, priority, config=config())
    if as_json:
        emit_json({"job": spec.name, "mappings": changed})
        return
    say(_mappings_line("resumed", spec, changed) + ".")


# -- dead letters ----------------------------------------------------------------------------------


def _dlq_targets(job: str, priority: str | None) -> list[tuple[Any, str | None, str, str, str]]:
    """(spec or None, queue level, label, queue URL, DLQ URL) of the DLQs a `dlq` command works on:
    a job's (every priority level's, or one's), or the workflow queue's (no spec: no records)."""
    if job == WORKFLOWS and not _declared(job):
        return [(None, None, *_levels(job)[0])]
    spec = _spec(job)
    return [(spec, level, label, q, d) for level, _, label, q, d in _queue_levels(spec, priority)]


def _masked_letter(job: str | None, d: Any) -> dict[str, Any]:
    """What may be shown of a received dead letter, as the board shows it: the body's envelope with
    its job's `pii_fields` erased and their values masked wherever else they appear (the id, the
    reason, the attributes); a body that is not JSON is not shown when the job declares pii_fields
    (nothing in it can be found to mask)."""
    from lambdajobs.runtime import pii

    envelope = d.envelope
    names = [n for n in (job, envelope.get("job")) if n and isinstance(n, str) and _declared(n)]
    fields = tuple(dict.fromkeys(f for n in names for f in _spec(n).pii_fields))
    paths = tuple(f"payload.{f}" for f in fields)  # the payload's fields, as paths in the envelope
    with pii.bound(paths, envelope):
        body: Any = None
        note = d.body_error
        if envelope:
            body, note = pii.mask_payload(envelope, paths), None
        elif fields:
            note = f"body not shown: {d.body_error}; it may hold personal data."
        else:
            body = d.body
        return {
            "message_id": d.message_id,
            "job_id": pii.scrub(d.job_id) if d.job_id else None,
            "error_type": pii.scrub(d.error_type),
            "reason": pii.scrub(d.reason),
            "attempts": d.attempts,
            "failed_at": d.failed_at,
            "sent_at": d.sent_at,
            "age_seconds": d.age_seconds(),
            "receive_count": d.receive_count,
            "attributes": {
                name: pii.scrub(str(value.get("StringValue", value.get("BinaryValue", ""))))
                for name, value in sorted(d.attributes.items())
            },
            "body": body,
            "body_note": note,
        }


def _say_received(letters: list[dict[str, Any]]) -> None:
    """Received letters, oldest first: the message id first on its line, never cut or folded (it is
    what `dlq show --id` and `dlq redrive --id` take), then the reason indented."""
    for d in letters:
        age = _age(d["age_seconds"])
        shown = f"  {d['job_id'] or '-'}  {d['error_type']}  attempts {d['attempts']}  age {age}"
        console.print(as_text((d["message_id"], "cyan"), shown), soft_wrap=True)
        console.print(f"    {d['reason']}", soft_wrap=True)


def _dead_counts(targets: list[Any]) -> dict[str | None, int] | None:
    """A job's recorded dead letters of every level it lists, counted in one pass over its dead
    records (`records.count_dead_levels`); None for one level (`list_letters` counts it)."""
    from lambdajobs import dead_letters
    from lambdajobs.runtime import records
    from lambdajobs.runtime.settings import queue_key

    specs = [(spec, level) for spec, level, *_ in targets if spec is not None]
    if len(specs) < 2 or len({spec.name for spec, _ in specs}) != 1:
        return None
    cfg = config()
    afters = {
        dead_letters.record_level(spec, level): records.purged_at(queue_key(spec.name, level), config=cfg)
        for spec, level in specs
    }
    return records.count_dead_levels(specs[0][0].name, afters, config=cfg)


def _counted(counts: dict[str | None, int], spec: Any, level: str | None) -> Any:
    """`list_letters`' `recorded` hook answering from `counts` (see `_dead_counts`)."""
    from lambdajobs import dead_letters

    found = counts[dead_letters.record_level(spec, level)]
    return lambda _count: found


@dlq_app.command("list")
@friendly
def dlq_list(
    job: str = JOB_ARGUMENT,
    limit: int = typer.Option(50, help="at most this many per DLQ, 1 to 100"),
    cursor: str = typer.Option(None, "--cursor", help="the next page: the cursor a previous page printed"),
    error: str = typer.Option(
        None, "--error", help="only failures of this error type, e.g. TransientSendError"
    ),
    older_than: str = typer.Option(None, "--older-than", help="only letters older than this, e.g. 30m, 2d"),
    priority: str = typer.Option(
        None, "--priority", "--level", help="one priority level of the job; without it, every level"
    ),
    receive: bool = typer.Option(
        False,
        "--receive",
        help="receive the DLQ's messages to show them, the unrecorded too (SQS moved them: crashes, "
        "throttles, init failures); each receive counts on the message",
    ),
    as_json: bool = JSON_OPTION,
) -> None:
    """Failed jobs in a job's DLQ (every priority level's), newest first, with their reason, attempts
    and age: read from the dead records the worker wrote, so listing receives nothing (no message's
    receive count changes). Messages SQS moved itself are counted as unrecorded; --receive receives
    the messages to show them all. The workflow queue's DLQ (`workflows`) has no records: it is received."""
    from lambdajobs import dead_letters

    in_range("--limit", limit, 1, 100)
    minimum_age = parse_duration(older_than) if older_than else None
    targets = _dlq_targets(job, priority)
    if cursor and len(targets) != 1:
        _fail(f"--cursor pages through one DLQ: pass --priority too (job {job} has {len(targets)}).", 2)
    queues_found: list[dict[str, Any]] = []
    counts = None if receive else _dead_counts(targets)
    for spec, level, label, _, dlq_url in targets:
        found: dict[str, Any] = {"label": label, "level": spec.priority_of(level) if spec else None}
        if spec is None or receive:
            letters = dead_letters.peek(config(), dlq_url, limit=limit)
            name = spec.name if spec is not None else None
            found["received"] = [_masked_letter(name, d) for d in letters[:limit]]
        else:
            page = dead_letters.list_letters(
                config(),
                spec,
                level,
                cursor=cursor,
                limit=limit,
                error_type=error,
                older_than=minimum_age,
                dlq_url=dlq_url,
                recorded=None if counts is None else _counted(counts, spec, level),
            )
            found.update(
                items=page.items,
                cursor=page.cursor,
                recorded=page.recorded,
                depth=page.depth,
                unrecorded=page.unrecorded,
            )
        queues_found.append(found)
    if as_json:
        emit_json({"job": job, "queues": queues_found})
        return
    shown = 0
    filters = "".join(
        f" {flag} {shlex.quote(str(value))}"
        for flag, value in (("--error", error), ("--older-than", older_than), ("--limit", limit))
        if value
    )
    for found in queues_found:
        shown += _say_dlq(job, found, filters)
    how = "--id <message id>" if any("received" in f for f in queues_found) else "--job-id <job id>"
    say(f"{shown} shown; `lambdajobs dlq show {job} {how}` shows one")


def _say_dlq(job: str, found: dict[str, Any], filters: str = "") -> int:
    """Print one DLQ's page (`filters`: the options its next page repeats); returns how many letters
    it showed."""
    label = found["label"]
    if "received" in found:
        letters = found["received"]
        console.print(as_text((f"{label}: dead letters", "bold"), f" ({len(letters)} received)"))
        _say_received(letters)
        return len(letters)
    console.print(
        as_text(
            (f"{label}: dead letters", "bold"),
            f" ({found['depth']} in the DLQ: {found['recorded']} recorded, {found['unrecorded']} unrecorded)",
        )
    )
    # One line per letter, never cut or folded: the job id first (what `dlq show --job-id` takes),
    # then its reason indented.
    for entry in found["items"]:
        shown = f"  {entry.error_type}  attempts {entry.attempts}  failed {entry.failed_at or '-'}"
        console.print(as_text((entry.job_id, "cyan"), shown), soft_wrap=True)
        console.print(f"    {entry.reason}", soft_wrap=True)
    priority = f" --priority {found['level']}" if found["level"] else ""
    if found["cursor"]:  # the same filters and page size, from the cursor on
        say(f"more: lambdajobs dlq list {job}{priority}{filters} --cursor {found['cursor']}")
    if found["unrecorded"]:
        say(
            f"{found['unrecorded']} unrecorded (SQS moved them: crashes, throttles, init failures): "
            f"`lambdajobs dlq list {job}{priority} --receive` receives the messages to show them"
        )
    return len(found["items"])


def _advance(bar: Progress, task: Any, scanned: int) -> None:
    bar.update(task, completed=scanned)


def _advance_report(bar: Progress, task: Any, report: Any) -> None:
    bar.update(task, completed=report.scanned)


def _scanning(label: str) -> Progress:
    """The progress line of a scan of a DLQ (on stderr, gone once it ends)."""
    return Progress(
        TextColumn("{task.description}", markup=False),
        TextColumn("{task.completed} messages looked at", markup=False),
        console=err,
        transient=True,
        # not a terminal (a script, a pipe): no line at all, so an error stays the one line on stderr
        disable=not err.is_terminal,
    )


@dlq_app.command("show")
@friendly
def dlq_show(
    job: str = JOB_ARGUMENT,
    message_id: str = typer.Argument(None, metavar="MESSAGE_ID", help="the same as --id", show_default=False),
    by_id: str = typer.Option(None, "--id", metavar="MESSAGE_ID", help="the message's id"),
    job_id: str = typer.Option(
        None, "--job-id", metavar="JOB_ID", help="the failed job's id (as `dlq list` shows it)"
    ),
    priority: str = PRIORITY_OPTION,
    as_json: bool = JSON_OPTION,
) -> None:
    """One failed job: reason, attributes and body, the body's pii_fields masked as the board masks
    them. Found by receiving the DLQ's messages until it comes (a progress line says how many were
    looked at); each one received is released at once."""
    from lambdajobs import dead_letters

    wanted = by_id or message_id
    if (wanted is None) == (job_id is None):
        _fail("name one dead letter: --id MESSAGE_ID or --job-id JOB_ID.", 2)
    found = None
    name: str | None = None
    for spec, _, label, _, dlq_url in _dlq_targets(job, priority):
        with _scanning(label) as bar:
            task = bar.add_task(f"looking for it in the DLQ of {label}:", total=None)
            found = dead_letters.find(
                config(),
                dlq_url,
                message_id=wanted,
                job_id=job_id,
                progress=functools.partial(_advance, bar, task),
            )
        if found is not None:
            name = spec.name if spec is not None else None
            break
    what = f"message {wanted}" if wanted else f"job {job_id}"
    if found is None:
        _fail(f"{what} is not in the DLQ of {job}; `lambdajobs dlq list {job}` lists them.")
    shown = _masked_letter(name, found)
    if as_json:
        emit_json({"job": job, **shown})
        return
    table = _table("field", "value", show_header=False, title=f"{job}: {shown['message_id']}")
    for key, value in (
        ("job id", shown["job_id"] or "-"),
        ("error", shown["error_type"]),
        ("reason", shown["reason"]),
        ("attempts", shown["attempts"]),
        ("failed at", shown["failed_at"] or "-"),
        ("age", _age(shown["age_seconds"])),
        ("receives", shown["receive_count"]),
    ):
        table.add_row(key, str(value))
    for attribute, value in shown["attributes"].items():
        table.add_row(f"attribute {attribute}", value)
    console.print(table)
    if shown["body_note"]:
        say(shown["body_note"])
    if shown["body"] is not None:
        body = shown["body"]
        say(json.dumps(body, indent=2, ensure_ascii=False) if not isinstance(body, str) else body)


@dlq_app.command("redrive")
@friendly
def dlq_redrive(
    job: str = JOB_ARGUMENT,
    error: str = typer.Option(
        None, "--error", help="only failures of this error type, e.g. TransientSendError"
    ),
    older_than: str = typer.Option(None, "--older-than", help="only messages older than this, e.g. 30m, 2d"),
    limit: int = typer.Option(None, "--limit", help="move at most this many, 1 or more"),
    dry_run: bool = typer.Option(False, "--dry-run", help="show what would move, move nothing"),
    priority: str = PRIORITY_OPTION,
    message_id: str = typer.Option(None, "--id", metavar="MESSAGE_ID", help="only this message"),
    job_id: str = typer.Option(None, "--job-id", metavar="JOB_ID", help="only this failed job's message"),
) -> None:
    """Send failed jobs back to the job's queue (each priority level's DLQ to its own level's queue):
    body and attributes as they were. A message leaves the DLQ only after its send succeeded, so an
    interrupted redrive loses nothing. --id or --job-id: one message, found by receiving until it
    comes (a progress line says how many were looked at)."""
    from lambdajobs.ops import redrive

    in_range("--limit", limit, 1)
    if message_id is not None or job_id is not None:
        if message_id is not None and job_id is not None:
            _fail("name one dead letter: --id MESSAGE_ID or --job-id JOB_ID, not both.", 2)
        if error or older_than or limit is not None or dry_run:
            _fail(
                "--id and --job-id redrive one message: pass no --error, --older-than, --limit or --dry-run.",
                2,
            )
        _redrive_one(job, priority, message_id, job_id)
        return
    minimum_age = parse_duration(older_than) if older_than else None
    moved = scanned = failed = 0
    for label, queue_url, dlq_url in _levels(job, priority):
        left = None if limit is None else limit - moved
        if left is not None and left <= 0:
            break
        with Progress(
            TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), console=console
        ) as bar:
            task = bar.add_task(f"redrive {label}", total=None)
            report = redrive(
                dlq_url,
                queue_url,
                error_type=error,
                older_than=minimum_age,
                limit=left,
                dry_run=dry_run,
                visibility_seconds=REDRIVE_VISIBILITY_SECONDS,
                on_selected=lambda n, bar=bar, task=task: bar.update(task, total=n),
                on_moved=lambda n, bar=bar, task=task: bar.update(task, completed=n),
                config=config(),
            )
        moved, scanned, failed = moved + report.moved, scanned + report.scanned, failed + report.failed
    verb = "would move" if dry_run else "moved"
    say(f"{verb} {moved} of {scanned} dead letters of {job}; {failed} failed")
    if failed:
        _fail(f"{failed} messages could not be sent back; they stay in the DLQ. Run the command again.")


def _redrive_one(job: str, priority: str | None, message_id: str | None, job_id: str | None) -> None:
    """`dlq redrive --id/--job-id`: one message back to its queue, with a progress line."""
    from lambdajobs import dead_letters

    for _, _, label, queue_url, dlq_url in _dlq_targets(job, priority):
        with _scanning(label) as bar:
            task = bar.add_task(f"looking for it in the DLQ of {label}:", total=None)
            report = dead_letters.redrive(
                config(),
                dlq_url,
                queue_url,
                message_ids=[message_id] if message_id else None,
                job_ids=[job_id] if job_id else None,
                on_progress=functools.partial(_advance_report, bar, task),
            )
        if report.selected:
            say(dead_letters.moved_line(report, label))
            if report.failed:
                _fail("it could not be sent back; it stays in the DLQ. Run the command again.")
            return
    what = f"message {message_id}" if message_id else f"job {job_id}"
    _fail(f"{what} is not in the DLQ of {job}; `lambdajobs dlq list {job}` lists them.")


@dlq_app.command("purge")
@friendly
def dlq_purge(
    job: str = JOB_ARGUMENT,
    yes: bool = typer.Option(False, "--yes", help="do not ask"),
    priority: str = PRIORITY_OPTION,
) -> None:
    """Delete every message in a job's DLQ (every priority level's; cannot be undone). It asks first;
    without a terminal (a script, CI) pass --yes."""
    from lambdajobs.ops import queue_health
    from lambdajobs.runtime.records import mark_purged
    from lambdajobs.runtime.settings import queue_key

    targets = _dlq_targets(job, priority)
    count = sum(queue_health(job, q, d, config=config()).dlq_depth for _, _, _, q, d in targets)
    where = "the DLQ" if len(targets) == 1 else f"the {len(targets)} DLQs"
    if count == 0 and not yes:  # nothing to ask about (nor to refuse without a terminal)
        say(f"{where} of {job} holds no message: nothing to purge.")
        return
    if not yes:
        try:
            confirmed = typer.confirm(f"Delete all {count} messages in {where} of {job}?", default=False)
        except typer.Abort:  # no answer: no terminal (stdin closed), or Ctrl-C at the question
            _fail("refusing to purge without a terminal: pass --yes.")
        if not confirmed:
            say("nothing deleted.")
            raise typer.Exit(1)
    for spec, level, _, _, dlq_url in targets:
        config().client("sqs").purge_queue(QueueUrl=dlq_url)
        if spec is not None:  # a listing shows only the letters dead after this (records.purged_at)
            mark_purged(queue_key(spec.name, level), config=config())
    say(f"purged {where} of {job} ({count} messages).")


# -- cron ------------------------------------------------------------------------------------------


@cron_app.command("list")
@friendly
def cron_list(
    count: int = typer.Option(3, help="how many fire times, 1 to 100"), as_json: bool = JSON_OPTION
) -> None:
    """Scheduled jobs and their next fire times, in their time zone."""
    in_range("--count", count, 1, 100)
    found = [
        (spec, spec.schedule.next_fire_times(count)) for spec in _all_jobs() if spec.schedule is not None
    ]
    if as_json:
        emit_json(
            {
                "jobs": [
                    {
                        "job": spec.name,
                        "schedule": spec.schedule.expression,
                        "timezone": spec.schedule.timezone,
                        "next": [t.isoformat() for t in times],
                    }
                    for spec, times in found
                ]
            }
        )
        return
    table = _table("job", "schedule", "time zone", "next fire times", title="cron jobs")
    for spec, times in found:
        shown = ", ".join(f"{t:%Y-%m-%d %H:%M %Z} ({t.astimezone(UTC):%H:%M}Z)" for t in times)
        table.add_row(spec.name, spec.schedule.expression, spec.schedule.timezone, shown)
    console.print(table)


@cron_app.command("trigger")
@friendly
def cron_trigger(job: str = typer.Argument(..., metavar="JOB", help="a cron job's name")) -> None:
    """Run a scheduled job now: send the envelope its schedule would send, for the current minute."""
    from lambdajobs.local.scheduler import slot_text

    spec = _spec(job)
    if spec.schedule is None:
        _fail(f"job {job} is not a cron job; use `lambdajobs enqueue {job} '{{...}}'`.")
    queue_url, _ = _queues(job)
    slot = datetime.now(UTC).replace(second=0, microsecond=0)
    body = json.dumps(spec.scheduled_envelope(slot_text(slot)), separators=(",", ":"))
    config().client("sqs").send_message(QueueUrl=queue_url, MessageBody=body)
    say(f"{spec.name}@{slot_text(slot)}")


# -- board -----------------------------------------------------------------------------------------


@app.command()
@friendly
def board(
    host: str = typer.Option("127.0.0.1", help="address to listen on (default: this machine only)"),
    port: int = typer.Option(8080, help="port to listen on, 1 to 65535"),
    read_only: bool = typer.Option(
        False, "--read-only", help="show everything, change nothing (no redrive, purge or trigger)"
    ),
    allow_host: list[str] = typer.Option(
        None,
        "--allow-host",
        metavar="NAME",
        help="a host name (or address) browsers reach the board by, besides the loopback names; "
        "repeatable; needed with a --host other than loopback",
    ),
) -> None:
    """A web page for the stack's jobs, queues, dead letters and schedules (lambdajobs[board]).

    It answers only requests whose Host header names it: the loopback names (127.0.0.1, localhost,
    [::1]) and each --allow-host, so a web page elsewhere cannot reach it through DNS rebinding. A
    --host other than loopback (0.0.0.0, an address of this machine) needs the names other machines
    use, e.g. --host 0.0.0.0 --allow-host board.internal.example.
    """
    import contextlib
    import socket

    in_range("--port", port, 1, 65535)
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn
    except ModuleNotFoundError as exc:
        _fail(f"lambdajobs board needs {exc.name}: pip install 'lambdajobs[board]'")
    from lambdajobs.board import create_app

    allowed = _allowed_host_names(host, allow_host or [])
    cfg = config()
    loopback = host in LOOPBACK_NAMES
    app_ = create_app(cfg, _all_jobs(), read_only=read_only, allowed_hosts=allowed)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:  # as uvicorn binds: with address reuse
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            _fail(f"cannot listen on {host}:{port} ({exc.strerror}); pass another --port.")
    shown = f"[{host}]" if ":" in host else host
    where = cfg.endpoint_url or f"AWS{' ' + cfg.region if cfg.region else ''}"
    console.print(
        as_text(
            f"lambdajobs board: stack '{cfg.stack}' on {where}, at ",
            (f"http://{shown}:{port}/", "bold"),
            " (read-only)" if read_only else "",
        ),
        soft_wrap=True,
    )
    if allow_host:
        say(f"it answers the Host names {', '.join(allowed)} only.")
    if not loopback:
        _warn(
            f"the board has no login: whoever reaches {host}:{port} can "
            + ("read every job's record." if read_only else "redrive, purge and trigger jobs (--read-only?).")
        )
    console.print("Ctrl-C stops it.")

    class Stopped(Exception):
        pass

    def stop(*_: Any) -> None:
        raise Stopped

    # uvicorn takes SIGINT and SIGTERM while it serves, stops gracefully, then raises the signal
    # again for the handler it found: this one, so a stop is a clean exit, not a traceback or -15.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stop)
    with contextlib.suppress(Stopped):
        uvicorn.run(app_, host=host, port=port, log_level="warning")
    console.print("stopped.")


#: --host values that reach this machine only.
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def _allowed_host_names(host: str, given: list[str]) -> list[str]:
    """Every Host name the board answers: the loopback names and the --allow-host names
    (`board.security.allowed_host_names`: no wildcard, no port). One-line usage errors for a bad name,
    and for a --host other than loopback without any name."""
    from lambdajobs.board.security import LOOPBACK_HOSTS, allowed_host_names

    try:
        names = allowed_host_names(given)
    except ValueError as exc:
        _fail(f"--allow-host: {exc}.", 2)
    if host not in LOOPBACK_NAMES and len(names) == len(LOOPBACK_HOSTS):
        example = host if host not in ("0.0.0.0", "::") else "ADDRESS"
        _fail(
            f"--host {host} serves other machines, and the board answers only the Host names it is "
            f"given: add --allow-host NAME for each name they reach it by (e.g. --allow-host "
            f"board.internal.example, or --allow-host {example}).",
            2,
        )
    return names


def _dev_table(local: Any) -> Table:
    """A line per queue. `ok`, `retrying`, `dead` and `cancelled` (cancelled or superseded) count the
    jobs its event source delivered since the start, each once, by its state now as its record says
    (`LocalStack.outcomes`): not the records the event source deleted, which include the ones the
    worker moved to the DLQ itself."""
    table = Table(title=f"lambdajobs dev: stack '{local.stack}' on {local.endpoint}")
    columns = (
        "job",
        "depth",
        "in flight",
        "delayed",
        "DLQ",
        "ok",
        "retrying",
        "dead",
        "cancelled",
        "invocations",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "job" else "right")
    from lambdajobs.ops import queue_health
    from lambdajobs.runtime.lifecycle import JobState

    fleet = local.fleet
    if fleet is not None:
        table.add_column("timed out", justify="right")
    outcomes = local.outcomes.counts() if local.outcomes is not None else {}
    init_errors: dict[str, str] = {}
    for key, mapping in sorted(local.mappings.items()):
        queues = local.provisioned.queues.get(key)  # one line per queue: each priority level has one
        if queues is None:  # the workflow queue, whose continuer sends workflows' next stages
            name, url, dlq = (
                "(workflows)",
                local.provisioned.workflow_queue_url,
                local.provisioned.workflow_dlq_url,
            )
            jobs = ["-", "-", "-", "-"]  # its messages are workflow notices, not jobs
        else:
            name = queues.job if queues.level is None else f"{queues.job} ({queues.level})"
            url, dlq = queues.queue_url, queues.dlq_url
            states = outcomes.get(key, {})
            jobs = [str(states.get(s, 0)) for s in (JobState.SUCCEEDED, JobState.RETRYING, JobState.DEAD)]
            # never run: cancelled, or superseded by a later debounced enqueue
            jobs.append(str(states.get(JobState.CANCELLED, 0) + states.get(JobState.SUPERSEDED, 0)))
        health = queue_health(name, url, dlq, config=local.config)
        function: list[str] = []
        if fleet is not None:
            stats = fleet.stats(mapping.function_name)
            function = [str(stats.timeouts)]
            if stats.init_error:
                init_errors[queues.job if queues is not None else name] = stats.init_error
        table.add_row(
            name,
            str(health.depth),
            str(health.in_flight),
            str(health.delayed),
            str(health.dlq_depth),
            *jobs,
            str(mapping.stats.invocations),
            *function,
        )
    if init_errors:  # text: an error's brackets are not rich markup, its control characters escaped
        table.caption = styled("\n".join(f"{job}: {error}" for job, error in sorted(init_errors.items())))
        table.caption_style = "red"
    return table


def _port_free(port: int) -> bool:
    """Whether `lambdajobs dev` can listen on `port`. The probe reuses the address, as the server does
    (werkzeug sets SO_REUSEADDR): connections of a `dev` just stopped wait out TIME_WAIT (60 s on
    Linux) on this port, and a probe without it was refused for that long. A socket listening on the
    port still makes it busy."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


#: `lambdajobs dev`'s long polls: one per event source at a time; a stop waits for them at most this long.
DEV_POLL_SECONDS = 3
#: The live lines are read again at least this often when nothing changed.
IDLE_REFRESH_SECONDS = 10.0


@app.command()
@friendly
def dev(
    port: int = typer.Option(4580, help="loopback port of the embedded AWS endpoint (0: any free port)"),
    stack: str = typer.Option("local", help="stack name (queue names, manifest)"),
    jobs: str = typer.Option(
        None, "--jobs", help="your jobs package (default: --jobs before the command, or pyproject.toml)"
    ),
    log_file: Path = typer.Option(Path("build/local/worker.log"), help="where the workers' JSON logs go"),
    refresh_seconds: float = typer.Option(1.0, help="how often the queue lines refresh"),
    fresh: bool = typer.Option(
        False,
        "--fresh",
        help="start empty instead of restoring the saved state (state.json, next to the log file); "
        "the old file is kept as state.previous.json",
    ),
    threads: bool = typer.Option(
        False,
        "--threads",
        help="run every job in threads of this process, on its imports, instead of each function in "
        "worker processes of its own from its asset, as on Lambda",
    ),
    max_processes: int = typer.Option(
        None,
        "--max-processes",
        help="worker processes at most, every function's together; invocations beyond wait. Unset: "
        "LAMBDAJOBS_LOCAL_MAX_PROCESSES, else 4 per core and at least 8",
    ),
) -> None:
    """Run every job of your jobs package on a local stack: embedded AWS, Lambda-like polling, cron.

    Each job's function runs as on Lambda: in worker processes of its own, from its staged asset and
    your declared dependencies (built for this machine), with its synthesized environment, killed at
    its timeout; a job module its function cannot import shows under the table, and its records go
    to its DLQ with that reason. --threads runs every job in this process instead.

    What the stack holds (queued, delayed and failed messages, job records, the bucket, one-time
    schedules) is saved next to the log file (build/local/state.json) when it changed, at most every
    10 s, and when it stops, and restored at the next start; --fresh starts empty.
    """
    from lambdajobs.local.stack import LocalStack
    from lambdajobs.project import require_jobs_module

    package = require_jobs_module(jobs or _jobs_option)
    _project_importable()
    try:
        import moto.server  # noqa: F401
    except ModuleNotFoundError:
        _fail("lambdajobs dev needs moto, the embedded AWS: pip install 'lambdajobs[local]'")
    in_range("--port", port, 0, 65535)
    in_range("--refresh-seconds", refresh_seconds, 0.1)
    if max_processes is not None:
        in_range("--max-processes", max_processes, 1)
    if port and not _port_free(port):
        _fail(f"port {port} is in use (another `lambdajobs dev`?); pass --port 0 for any free port.")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    # The state lives next to the worker log: build/local/ (a test's --log-file keeps it in its tmp).
    local = LocalStack(
        package,
        stack=stack,
        port=port,
        log_file=log_file,
        state_dir=log_file.parent,
        fresh=fresh,
        processes=not threads,
        max_processes=max_processes,
        wait_seconds=DEV_POLL_SECONDS,
    )
    local.start()
    try:
        for note in local.state_notes:
            console.print(note, soft_wrap=True, highlight=False)
        local.start_workers()
        exports = " ".join(f"{k}={v}" for k, v in local.environment().items())
        console.print(as_text("lambdajobs local stack on ", (local.endpoint, "bold"), f" (stack '{stack}')"))
        console.print("Point boto3, a producer or the CLI at it from another shell:")
        console.print(f"  export {exports}", soft_wrap=True, highlight=False)
        console.print("  lambdajobs queues")
        first = local.specs[0].name if local.specs else "<job>"
        console.print(f"  lambdajobs enqueue {first} '<payload JSON>'", soft_wrap=True, highlight=False)
        console.print(
            f"  python -c 'from lambdajobs import enqueue; print(enqueue(\"{first}\", {{...}}))'",
            soft_wrap=True,
            highlight=False,
        )
        console.print(
            f"Worker logs: {log_file}. Ctrl-C stops (in-flight batches finish first).", soft_wrap=True
        )
        # The lines are read again when a request may have changed something, and every
        # IDLE_REFRESH_SECONDS anyway (a delayed message becomes visible with no request): an idle
        # stack reads next to nothing.
        with Live(_dev_table(local), console=console, refresh_per_second=1, transient=False) as live:
            shown, at = local.changes, time.monotonic()
            while not stop.wait(refresh_seconds):
                if local.changes != shown or time.monotonic() - at >= IDLE_REFRESH_SECONDS:
                    shown, at = local.changes, time.monotonic()
                    live.update(_dev_table(local))
        console.print("\nstopping: no new polls, waiting for in-flight batches...")
    finally:
        shown = len(local.state_notes)
        local.stop()
        for note in local.state_notes[shown:]:  # saved (or why not)
            console.print(note, soft_wrap=True, highlight=False)
    console.print("stopped.")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
