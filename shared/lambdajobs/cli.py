"""`lambdajobs`: the operator CLI (typer + rich), and `lambdajobs dev`, the local stack.

Works against a deployed stack (the usual AWS profile and region; queues come from the stack's
manifest, never typed by hand) or the local stack (`--endpoint-url`, or the variables `lambdajobs
dev` prints). Errors are one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from rich.text import Text

from lambdajobs.runtime.job_record import LISTED_STATES

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
console = Console()
err = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

#: How long redrive hides the DLQ messages it works on. If it is interrupted, the ones it had not
#: moved become visible again in the DLQ after this: nothing is lost.
REDRIVE_VISIBILITY_SECONDS = 300


#: The stack this invocation works on, built once from the options (never written to os.environ).
_config: Any = None
_jobs_option: str | None = None


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
    """A table whose cells wrap instead of being cut short: ids and reasons must stay whole."""
    table = Table(title=title, show_header=show_header)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _fail(message: str, code: int = 1) -> None:
    # escape: messages quote things like [tool.lambdajobs], which rich would take for markup
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


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
    spec = _spec(job)
    wanted = spec.levels if priority is None else (spec.level_for(priority),)
    found = []
    for level in wanted:
        named = spec.priority_of(level)
        queue_url, dlq_url = _queues(spec.name, named)
        found.append((f"{spec.name} ({named})" if named else spec.name, queue_url, dlq_url))
    return found


JOB_ARGUMENT = typer.Argument(
    ..., metavar="JOB", help=f"job name (or `{WORKFLOWS}`: the workflow queue's notices)", show_default=False
)
PRIORITY_OPTION = typer.Option(
    None, "--priority", help="one priority level of the job (default: every level)"
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


# -- account ----------------------------------------------------------------------------------------


@app.command()
@friendly
def whoami() -> None:
    """The AWS account, identity and region this command (and a deploy) would use; one line saying
    what is missing otherwise."""
    cfg = _config
    sts = cfg.client("sts")
    if sts.meta.region_name in (None, "aws-global"):  # STS alone would answer from its global endpoint
        _fail("no AWS region: pass --region or set AWS_REGION (a deploy needs one).")
    identity = sts.get_caller_identity()
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
        whoami()
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
        from lambdajobs.runtime.project import stacks_file as stacks_file_of

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
    err.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False, soft_wrap=True)


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
                f"[red]error:[/red] {escape(deletion.line())}: {escape(deletion.what_to_do())}; or pass "
                "--allow-deleting-queues to delete them with it.",
                highlight=False,
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


@app.command()
@friendly
def queues() -> None:
    """Per queue: waiting, in flight, delayed, DLQ, succeeded and dead in the last hour, oldest age,
    health."""
    from botocore.exceptions import ClientError

    from lambdajobs.ops import job_counts, oldest_age_seconds, queue_health

    # narrow enough for 80 columns: two-line headers, no outer borders, a job's name never folded
    # (a long queue label wraps at its space; a header or a number never folds)
    table = Table(title="queues", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    table.add_column("job", overflow="fold")
    for column in ("waiting", "in\nflight", "delayed", "DLQ", "ok\n1h", "dead\n1h", "oldest"):
        widest = max(len(word) for word in column.split())
        table.add_column(column, justify="right", no_wrap=True, min_width=widest)
    table.add_column("health", no_wrap=True, min_width=len("backlog"))
    now = datetime.now(UTC)
    no_counts = False
    refused: str | None = None
    for spec in _all_jobs():
        try:
            counts = job_counts(spec.name, now - timedelta(hours=1), now, config=config())
        except ClientError as exc:  # no CloudWatch (or index) read permission: the counters anyway
            counts, refused = None, f"{exc.operation_name}: {exc.response.get('Error', {}).get('Code')}"
        no_counts = no_counts or (counts is None and refused is None)
        levels = _levels(spec.name)
        for label, queue_url, dlq_url in levels:
            health = queue_health(spec.name, queue_url, dlq_url, config=config())
            try:
                age = oldest_age_seconds(queue_url, config=config())
            except ClientError:
                age = None  # no CloudWatch read permission: show the counters anyway
            last = (label, queue_url) == levels[-1][:2]  # a job's counts once, on its own queue's row
            dlq = str(health.dlq_depth)
            if health.dlq_in_flight:
                dlq += f" ({health.dlq_in_flight} hidden)"
            table.add_row(
                label,
                str(health.depth),
                str(health.in_flight),
                str(health.delayed),
                dlq,
                str(counts["succeeded"]) if counts and last else "-" if last else "",
                str(counts["dead"]) if counts and last else "-" if last else "",
                _age(age),
                _health_word(spec, health, age),
            )
    console.print(table)
    if refused:
        console.print(f"ok/dead: not counted, AWS refused {refused}", highlight=False, markup=False)
    elif no_counts:
        from lambdajobs.runtime.records import index_off_message

        console.print(
            "ok/dead: " + index_off_message(config().stack, "off", "counting jobs on the local stack"),
            soft_wrap=True,
            highlight=False,
            markup=False,
        )


def _health_word(spec: Any, health: Any, age: float | None) -> str:
    limits = spec.alarms
    if health.dlq_depth > (limits.dlq_messages_above or 0):
        return "[red]failing[/red]"
    if (
        age is not None
        and limits.oldest_message_age_seconds_above is not None
        and (age > limits.oldest_message_age_seconds_above)
    ):
        return "[yellow]stale[/yellow]"
    if limits.queue_depth_above is not None and health.depth > limits.queue_depth_above:
        return "[yellow]backlog[/yellow]"
    return "[green]ok[/green]"


@app.command()
@friendly
def enqueue(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    payload_json: str = typer.Argument(..., metavar="PAYLOAD", help="the payload, as a JSON object"),
    job_id: str = typer.Option(None, "--id", help="job id (default: derived or a new uuid)"),
    delay: int = typer.Option(0, "--delay", help="delay in seconds"),
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
    when = None
    if run_at:
        try:
            when = datetime.fromisoformat(run_at)
        except ValueError:
            _fail(f"--run-at {run_at!r} is not an ISO 8601 time; use e.g. 2026-12-01T09:00:00+00:00.")
    console.print(
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

#: `lambdajobs status` exit codes, besides 0 (found; with --wait: succeeded), 1 (an error) and 2 (a
#: usage error, as for every command).
STATUS_NO_RECORD = 3
STATUS_DEAD = 4
STATUS_TIMED_OUT = 5
#: ... and a job that will never run under its id: cancelled, or superseded by a later debounced enqueue.
STATUS_CANCELLED = 6


@app.command()
@friendly
def status(
    job_id: str = typer.Argument(..., metavar="JOB_ID", help="job id"),
    wait: float = typer.Option(0, help="wait up to this many seconds for a final state"),
) -> None:
    """A job's state, attempts, progress, result and last error; a durable job's steps done, with
    their durations, and when a sleeping or waiting job continues (wake_at).

    Exit codes: 0 the job has a record (with --wait: it succeeded); 1 an error; 2 a usage error; 3 no
    record (an unknown id, or a job not started yet: nothing is written at enqueue); 4 the job is
    dead; 5 --wait ran out before the job finished; 6 the job was cancelled or superseded (it never
    runs under this id).
    """
    from lambdajobs.ops import until_text
    from lambdajobs.runtime.errors import WaitTimeoutError
    from lambdajobs.runtime.records import get_status, wait_for

    cfg = _config
    timed_out = False
    try:
        info = wait_for(job_id, wait, poll_seconds=1, config=cfg) if wait else get_status(job_id, config=cfg)
    except WaitTimeoutError as exc:
        info, timed_out = exc.status, True
    table = _table("field", "value", show_header=False, title=f"job {job_id}")
    # the state as people read it: "waiting for signal approval", not "waiting_signal"
    table.add_row("state", Text(info.described_state))
    for key in (
        "job",
        "attempts",
        "progress",
        "progress_message",
        "waiting_until",
        "wake_at",
        "created_at",
        "started_at",
        "finished_at",
    ):
        value = getattr(info, key)
        if value not in (None, ""):
            shown = f"{value} ({until_text(value)})" if key == "wake_at" else str(value)
            table.add_row(key, Text(shown))
    if info.suspensions:
        table.add_row("suspensions", Text(f"{info.suspensions} (sleeps, signal waits, continuations)"))
    # Text: what a job or its error wrote is shown as written, never read as rich markup
    if info.error:
        table.add_row("error", Text(f"{info.error.get('type')}: {info.error.get('message')}"))
    if info.note and not info.error:
        table.add_row("note", Text(info.note))
    if info.result is not None:
        table.add_row("result", Text(json.dumps(info.result)))
    console.print(table)
    if info.steps:
        console.print(_steps_table(info.steps))
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
        # Text: a step's name is the job's own text, never rich markup
        table.add_row(
            str(number), Text(step.name), duration_text(step.duration_ms), Text(step.finished_at or "-")
        )
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


@app.command()
@friendly
def jobs(
    job: str = typer.Argument(..., metavar="JOB", help="job name"),
    state: str = typer.Option(
        None,
        "--state",
        help=f"{', '.join(LISTABLE[:-1])} or {LISTABLE[-1]} (without it: every state the index holds)",
    ),
    limit: int = typer.Option(20, "--limit", help="at most this many per state"),
    after: str = typer.Option(None, "--after", help="the next page: the cursor a previous page printed"),
) -> None:
    """A job's records by state, newest first (needs the job index: the command says how to turn it on)."""
    from lambdajobs.runtime.errors import InvalidOptionError
    from lambdajobs.runtime.job_record import PARKED_STATES, JobState
    from lambdajobs.runtime.records import index_off_message, list_jobs, listed_states

    spec = _spec(job)
    cfg = config()
    held = listed_states(cfg)
    if state is not None:
        if state not in LISTABLE:
            raise InvalidOptionError(
                f"--state {state!r} is not a state a job is listed by; use one of {LISTABLE}."
            )
        wanted = [JobState(state)]
    else:
        if not held:
            _fail(index_off_message(cfg.stack, cfg.job_index_mode(), f"`lambdajobs jobs {spec.name}`"))
        wanted = held
    if after and len(wanted) != 1:
        raise InvalidOptionError("--after pages through one state: pass --state too.")
    for wanted_state in wanted:
        page = list_jobs(spec.name, wanted_state, limit=limit, cursor=after, config=cfg)
        table = _table(
            "job id", "attempts", "at", "error / result", title=f"{spec.name}: {wanted_state.value}"
        )
        for status in page.items:
            at = status.finished_at or status.started_at or status.updated_at or "-"
            if status.state in PARKED_STATES:  # a durable job between invocations: when it goes on
                detail = status.described_state + (f", wakes {status.wake_at}" if status.wake_at else "")
            elif status.error:
                detail = f"{status.error.get('type')}: {status.error.get('message')}"
            else:
                detail = "" if status.result is None else json.dumps(status.result)[:200]
            moved = "" if status.state is wanted_state else f" (now {status.described_state})"
            # Text: ids, errors and results are shown as written, never read as rich markup
            table.add_row(Text(status.job_id + moved), str(status.attempts), at, Text(detail))
        console.print(table)
        if page.cursor:
            console.print(
                f"more: lambdajobs jobs {spec.name} --state {wanted_state.value} --after {page.cursor}",
                soft_wrap=True,
                highlight=False,
                markup=False,
            )


@app.command()
@friendly
def workflow(
    workflow_id: str = typer.Argument(
        ..., metavar="WORKFLOW_ID", help="workflow id (what .enqueue() returned)"
    ),
    wait: float = typer.Option(0, help="wait up to this many seconds for the workflow to end"),
) -> None:
    """A workflow's state, progress, and per stage its jobs and members by state."""
    import time

    from lambdajobs.runtime.workflow import get_workflow

    info = get_workflow(workflow_id, config=_config)
    deadline = time.monotonic() + wait
    while wait and not info.done and info.state != "unknown" and time.monotonic() < deadline:
        time.sleep(1)
        info = get_workflow(workflow_id, config=_config)
    if info.state == "unknown":
        _fail(f"no workflow '{workflow_id}' in stack '{_config.stack}' ({info.note}).")
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


# -- dead letters ----------------------------------------------------------------------------------


@dlq_app.command("list")
@friendly
def dlq_list(
    job: str = JOB_ARGUMENT,
    limit: int = typer.Option(50, help="at most this many"),
    priority: str = PRIORITY_OPTION,
) -> None:
    """Failed jobs in a job's DLQ (every priority level's), with their reason, attempts and age."""
    from lambdajobs.ops import peek_dead_letters

    shown = 0
    for label, _, dlq_url in _levels(job, priority):
        letters = peek_dead_letters(dlq_url, limit=limit, config=config())
        console.print(f"[bold]{escape(label)}: dead letters[/bold] ({len(letters)})", highlight=False)
        # One line per message, never cut or folded (a message id must stay whole at any width, to be
        # copied into `dlq show`), then its reason indented.
        for d in sorted(letters, key=lambda d: d.sent_at):
            line = Text(d.message_id, style="cyan")
            line.append(
                f"  {d.job_id or '-'}  {d.error_type}  attempts {d.attempts}  age {_age(d.age_seconds())}"
            )
            console.print(line, soft_wrap=True, highlight=False)
            console.print(Text(f"    {d.reason}"), soft_wrap=True, highlight=False)
        shown += len(letters)
    console.print(f"{shown} shown; `lambdajobs dlq show {job} <message id>` shows one", highlight=False)


@dlq_app.command("show")
@friendly
def dlq_show(
    job: str = JOB_ARGUMENT,
    message_id: str = typer.Argument(..., metavar="MESSAGE_ID", help="as `dlq list` shows it"),
) -> None:
    """One failed job: reason, attributes and body."""
    from lambdajobs.ops import peek_dead_letters

    found = []
    for _, _, dlq_url in _levels(job):
        letters = peek_dead_letters(dlq_url, limit=10_000, config=config())
        found += [d for d in letters if d.message_id == message_id]
    if not found:
        _fail(f"message {message_id} is not in the DLQ of {job}; `lambdajobs dlq list {job}` lists them.")
    d = found[0]
    table = _table("field", "value", show_header=False, title=f"{job}: {message_id}")
    for key, value in (
        ("job id", d.job_id or "-"),
        ("error", d.error_type),
        ("reason", d.reason),
        ("attempts", d.attempts),
        ("failed at", d.failed_at or "-"),
        ("age", _age(d.age_seconds())),
    ):
        table.add_row(key, str(value))
    for name, value in sorted(d.attributes.items()):
        table.add_row(f"attribute {name}", str(value.get("StringValue", value.get("BinaryValue"))))
    console.print(table)
    console.print_json(d.body) if d.envelope else console.print(d.body)


@dlq_app.command("redrive")
@friendly
def dlq_redrive(
    job: str = JOB_ARGUMENT,
    error: str = typer.Option(
        None, "--error", help="only failures of this error type, e.g. TransientSendError"
    ),
    older_than: str = typer.Option(None, "--older-than", help="only messages older than this, e.g. 30m, 2d"),
    limit: int = typer.Option(None, "--limit", help="move at most this many"),
    dry_run: bool = typer.Option(False, "--dry-run", help="show what would move, move nothing"),
    priority: str = PRIORITY_OPTION,
) -> None:
    """Send failed jobs back to the job's queue (each priority level's DLQ to its own level's queue):
    body and attributes as they were. A message leaves the DLQ only after its send succeeded, so an
    interrupted redrive loses nothing."""
    from lambdajobs.ops import redrive

    minimum_age = parse_duration(older_than) if older_than else None
    moved = scanned = failed = 0
    for label, queue_url, dlq_url in _levels(job, priority):
        left = None if limit is None else limit - moved
        if left is not None and left <= 0:
            break
        with Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
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
    console.print(f"{verb} {moved} of {scanned} dead letters of {job}; {failed} failed")
    if failed:
        _fail(f"{failed} messages could not be sent back; they stay in the DLQ. Run the command again.")


@dlq_app.command("purge")
@friendly
def dlq_purge(
    job: str = JOB_ARGUMENT,
    yes: bool = typer.Option(False, "--yes", help="do not ask"),
    priority: str = PRIORITY_OPTION,
) -> None:
    """Delete every message in a job's DLQ (every priority level's; cannot be undone)."""
    from lambdajobs.ops import queue_health

    levels = _levels(job, priority)
    count = sum(queue_health(job, q, d, config=config()).dlq_depth for _, q, d in levels)
    where = "the DLQ" if len(levels) == 1 else f"the {len(levels)} DLQs"
    if not yes and not typer.confirm(f"Delete all {count} messages in {where} of {job}?", default=False):
        console.print("nothing deleted.")
        raise typer.Exit(1)
    for _, _, dlq_url in levels:
        config().client("sqs").purge_queue(QueueUrl=dlq_url)
    console.print(f"purged {where} of {job} ({count} messages).")


# -- cron ------------------------------------------------------------------------------------------


@cron_app.command("list")
@friendly
def cron_list(count: int = typer.Option(3, help="how many fire times")) -> None:
    """Scheduled jobs and their next fire times, in their time zone."""
    table = _table("job", "schedule", "time zone", "next fire times", title="cron jobs")
    for spec in _all_jobs():
        if spec.schedule is None:
            continue
        times = spec.schedule.next_fire_times(count)
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
    console.print(f"{spec.name}@{slot_text(slot)}")


# -- board -----------------------------------------------------------------------------------------


@app.command()
@friendly
def board(
    host: str = typer.Option("127.0.0.1", help="address to listen on (default: this machine only)"),
    port: int = typer.Option(8080, help="port to listen on"),
    read_only: bool = typer.Option(
        False, "--read-only", help="show everything, change nothing (no redrive, purge or trigger)"
    ),
) -> None:
    """A web page for the stack's jobs, queues, dead letters and schedules (lambdajobs[board])."""
    import contextlib
    import socket

    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn
    except ModuleNotFoundError as exc:
        _fail(f"lambdajobs board needs {exc.name}: pip install 'lambdajobs[board]'")
    from lambdajobs.board import create_app

    cfg = config()
    loopback = host in ("127.0.0.1", "localhost", "::1")
    app_ = create_app(cfg, _all_jobs(), read_only=read_only, allowed_hosts=None if loopback else ["*"])
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
        f"lambdajobs board: stack '{cfg.stack}' on {where}, at [bold]http://{shown}:{port}/[/bold]"
        + (" (read-only)" if read_only else ""),
        soft_wrap=True,
        highlight=False,
    )
    if not loopback:
        err.print(
            f"[yellow]warning:[/yellow] the board has no login: whoever reaches {host}:{port} can "
            + (
                "read every job's record." if read_only else "redrive, purge and trigger jobs (--read-only?)."
            ),
            soft_wrap=True,
            highlight=False,
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
    if init_errors:  # Text: an error's brackets are not rich markup
        table.caption = Text("\n".join(f"{job}: {error}" for job, error in sorted(init_errors.items())))
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
        console.print(f"lambdajobs local stack on [bold]{local.endpoint}[/bold] (stack '{stack}')")
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
