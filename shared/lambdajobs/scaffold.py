"""`lambdajobs new NAME`: a project folder whose tests pass and that synthesizes with no edit.

    NAME/
      pyproject.toml      [project] (lambdajobs[cdk,cli,local], pytest), [tool.lambdajobs] jobs and
                          dependencies, pytest's settings
      cdk.json            {"app": "python app.py", "context": aws-cdk-lib's recommended feature flags}
      app.py              one LambdaJobsStack of the jobs package
      NAME_jobs/          the jobs package: one job, `greet`
      tests/              its test, on `lambdajobs.testing.TestStack`
      README.md, .gitignore

What a new user was missing (issue 23) is all here: the app runs through the pinned CDK CLI
(`lambdajobs synth`, lambdajobs.deploy), which writes cdk.out in the project. lambdajobs is not on a
public index yet, so the project depends on what the running lambdajobs was installed from, as its
PEP 610 `direct_url.json` says (a wheel, a folder, a VCS commit), unless told otherwise.

NAME becomes the folder, the project's name, the jobs package's prefix and the stack's name (with '-'
for '_': CloudFormation stack names have no '_'). Everything is checked before anything is written,
and the folder appears whole or not at all.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import keyword
import os
import re
import shutil
import string
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lambdajobs.runtime.errors import InvalidOptionError, LambdaJobsError

#: The extras a project needs: the CDK constructs (with a Node), the CLI (synth, deploy, operate),
#: and the local stack with the test harness.
EXTRAS = "cdk,cli,local"
#: Letters and digits in words joined by single underscores, starting with a letter: a Python
#: identifier, and with '-' for '_' a CloudFormation stack name (letters, digits, '-', starting with
#: a letter) that does not end with '-' and has no '--' (the queue names' level separator).
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*$")
#: The stack name goes into queue names (`<stack>_<job>--<level>-dlq`, at most 80 characters with a job
#: name of up to 48) and schedule group names (at most 64): 40 leaves room for long job names.
MAX_NAME = 40


@dataclass(frozen=True)
class Project:
    """What `new_project` made."""

    folder: Path
    jobs: str  # the jobs package
    stack: str  # the stack's name
    requirement: str  # the project's dependency on lambdajobs


def check_name(name: str, parent: Path) -> Path:
    """The project folder `parent/name`, after checking the name can be one.

    Raises:
        InvalidOptionError: `name` is not a Python identifier of letters, digits and single underscores
            starting with a letter, is a keyword, is longer than `MAX_NAME`, names an installed
            distribution or a standard library module, or names something that exists.
    """
    if not NAME_RE.fullmatch(name or ""):
        words = [w for w in re.split(r"[^A-Za-z0-9]+", name or "") if w]
        guess = "_".join(words).lower()
        hint = f", e.g. {guess}" if NAME_RE.fullmatch(guess) and not keyword.iskeyword(guess) else ""
        raise InvalidOptionError(
            f"{name!r} cannot name a project: use a Python identifier of letters, digits and single "
            f"underscores, starting with a letter{hint}."
        )
    if keyword.iskeyword(name) or keyword.iskeyword(f"{name}_jobs"):
        raise InvalidOptionError(f"{name!r} is a Python keyword; pick another name.")
    if len(name) > MAX_NAME:
        raise InvalidOptionError(
            f"{name!r} has {len(name)} characters; use at most {MAX_NAME} (it names the stack, and "
            "queue names built from it may have 80)."
        )
    taken = _installed_distribution(name)
    if taken:  # the project would depend on a distribution of its own name (lambdajobs, pytest...)
        raise InvalidOptionError(
            f"{name!r} is the name of {taken}, which is installed here (the project would clash with it "
            f"on install); pick another name, e.g. {name}_app."
        )
    folder = parent / name
    if folder.exists() or folder.is_symlink():
        raise InvalidOptionError(f"{folder} exists; pick another name, or move it away first.")
    return folder


def _installed_distribution(name: str) -> str | None:
    """The installed distribution (or standard library module) a project called `name` would clash
    with, or None."""
    import importlib.metadata
    import sys

    if name in sys.stdlib_module_names:
        return f"a standard library module ({name})"
    wanted = re.sub(r"[-_.]+", "-", name).lower()
    for dist in importlib.metadata.distributions():
        found = dist.metadata["Name"] or ""
        if re.sub(r"[-_.]+", "-", found).lower() == wanted:
            return f"the distribution {found}"
    return None


def requirement_from_direct_url(found: dict[str, Any] | None) -> str:
    """lambdajobs with its extras, from where a PEP 610 `direct_url.json` says it was installed: a
    folder or an archive (`lambdajobs[...] @ file:///...`), a VCS commit (`@ git+https://...@<commit>`);
    plain `lambdajobs[...]` when there is none (installed from an index)."""
    url = found.get("url") if isinstance(found, dict) else None
    if not isinstance(url, str) or not url:
        return f"lambdajobs[{EXTRAS}]"
    assert isinstance(found, dict)
    vcs = found.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs"):
        url = f"{vcs['vcs']}+{url}" + (f"@{vcs['commit_id']}" if vcs.get("commit_id") else "")
    if found.get("subdirectory"):
        url += f"#subdirectory={found['subdirectory']}"
    return f"lambdajobs[{EXTRAS}] @ {url}"


def installed_requirement() -> str:
    """The requirement a new project puts on lambdajobs: what the running one was installed from."""
    from importlib import metadata

    try:
        text = metadata.distribution("lambdajobs").read_text("direct_url.json")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        text = None
    try:
        found = json.loads(text) if text else None
    except ValueError:
        found = None
    return requirement_from_direct_url(found)


_NAMED = re.compile(r"^lambdajobs(?![\w.-])(\[[^\]]*\])?(.*)$", re.IGNORECASE | re.DOTALL)


def requirement(given: str | None = None, *, cwd: Path | None = None) -> str:
    """The requirement on lambdajobs for a new project. `given` may be a requirement on lambdajobs
    (`lambdajobs==0.1.0`, `lambdajobs @ https://...`: the extras are added when it names none), a
    URL, or a wheel or folder on this machine; None: `installed_requirement()`.

    Raises:
        InvalidOptionError: `given` is none of those.
    """
    if given is None:
        return installed_requirement()
    given = given.strip()
    named = _NAMED.match(given)
    if named:
        return given if named[1] else f"lambdajobs[{EXTRAS}]{named[2]}"
    if "://" in given:
        return f"lambdajobs[{EXTRAS}] @ {given}"
    path = Path(given).expanduser()
    path = path if path.is_absolute() else (cwd or Path.cwd()) / path
    if path.exists():
        return f"lambdajobs[{EXTRAS}] @ {path.resolve().as_uri()}"
    raise InvalidOptionError(
        f"--lambdajobs-requirement {given!r} is not a requirement on lambdajobs (lambdajobs==0.1.0, "
        "lambdajobs @ URL), a URL, or a wheel or folder that exists."
    )


def recommended_feature_flags() -> dict[str, Any]:
    """aws-cdk-lib's recommended feature flags, read from the installed library's jsii bundle without
    starting jsii (what `cdk init` writes into cdk.json; without them the CLI warns that feature flags
    are not configured). Empty when aws-cdk-lib is not installed."""
    return dict(_recommended_feature_flags())


@functools.cache
def _recommended_feature_flags() -> dict[str, Any]:  # reading the 38 MB bundle takes most of a second
    spec = importlib.util.find_spec("aws_cdk")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for bundle in sorted(Path(location, "_jsii").glob("aws-cdk-lib@*.jsii.tgz")):
            try:
                with tarfile.open(bundle) as archive:
                    member = archive.extractfile("package/recommended-feature-flags.json")
                    found = json.load(member) if member else {}
            except (OSError, KeyError, ValueError, tarfile.TarError):
                continue
            if isinstance(found, dict):
                return found
    return {}


PYPROJECT = """\
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "$name"
version = "0.1.0"
description = "Background jobs on AWS with lambdajobs."
requires-python = ">=3.11"
dependencies = [
    # the CDK constructs (with a Node), the CLI (synth, deploy, operate), the local stack and test harness
    $requirement,
    "pytest",
]

[tool.setuptools]
packages = ["$jobs"]

[tool.lambdajobs]
# Your jobs package: the CDK app, `lambdajobs dev`, the CLI and lambdajobs.testing read it from here.
jobs = "$jobs"
# What your jobs import on Lambda besides lambdajobs (pip requirements, e.g. "httpx>=0.28,<1"):
# synth builds them for Lambda's platform into a layer every job function gets, and locks their
# versions in lambdajobs.lock (commit it). Boto3, Powertools and pydantic are there already.
# Add each to [project] dependencies too (then `pip install -e .`): your tests import your jobs here.
dependencies = []

[tool.pytest.ini_options]
testpaths = ["tests"]
"""

APP = '''\
#!/usr/bin/env python3
"""$name's CDK app: `lambdajobs synth` (diff, deploy, destroy) runs it, as cdk.json says.

One stack, `$stack`, of every job in the jobs package that pyproject.toml names ([tool.lambdajobs]
jobs): per job a queue, a dead-letter queue, a Lambda worker and alarms; a job table, a dashboard.
A lambdajobs error (a bad declaration, an import Lambda would not find) is one line, not a traceback.
"""

from pathlib import Path

import lambdajobs.cdk  # noqa: F401  (first: it points jsii at the virtualenv's Node)
from aws_cdk import App
from lambdajobs.cdk import LambdaJobsStack
from lambdajobs.project import require_jobs_module

app = App()
LambdaJobsStack(app, "$stack", jobs=require_jobs_module(start=Path(__file__).parent))
app.synth()
'''

JOBS_INIT = '''\
"""$name's jobs: every `@job` (or `@cron`) function in this package's modules gets its own queue,
dead-letter queue and Lambda worker."""
'''

JOB = '''\
"""An example job; replace it with yours. Send it work with
`lambdajobs.enqueue("greet", {"name": "Ada"})`, or `lambdajobs enqueue greet '{"name": "Ada"}'`."""

from pydantic import BaseModel

from lambdajobs import PermanentError, job


class Greeting(BaseModel):
    name: str


@job(timeout_seconds=30, max_attempts=5)
def greet(payload: Greeting) -> dict:
    """A greeting for `payload.name`. A blank name can never succeed: PermanentError sends the job to
    the dead-letter queue at once, with its reason, instead of retrying it."""
    if not payload.name.strip():
        raise PermanentError("a greeting needs a name")
    return {"greeting": f"Hello, {payload.name}!"}
'''

TEST = '''\
"""`greet` run the way Lambda runs it: `TestStack` is a stack of your jobs on moto in this process
(queues, dead-letter queues, job records), and its runner delivers a queue to the real worker."""

import pytest

from lambdajobs.testing import TestStack


@pytest.fixture
def stack():
    with TestStack("$jobs") as stack:
        yield stack


def test_greet_returns_a_greeting(stack):
    job_id = stack.enqueue("greet", {"name": "Ada"})
    stack.runner("greet").drain()
    status = stack.status(job_id)
    assert status.state == "succeeded" and status.result == {"greeting": "Hello, Ada!"}


def test_a_blank_name_is_dead_at_once(stack):
    job_id = stack.enqueue("greet", {"name": " "})
    runner = stack.runner("greet")
    runner.drain()
    status = stack.status(job_id)
    assert status.state == "dead" and status.attempts == 1 and runner.depth(dlq=True) == 1
'''

README = """\
# $name

Background jobs on AWS with lambdajobs: the jobs are in `$jobs/`, the stack in `app.py`.

```sh
pip install -e .        # in a virtualenv: lambdajobs[cdk,cli,local] and pytest
pytest                  # the jobs' tests, on a moto-backed TestStack
lambdajobs dev          # every job on a local stack (no AWS account needed)
lambdajobs synth        # the CloudFormation template, in cdk.out/
lambdajobs bootstrap    # once per AWS account and region
lambdajobs deploy       # the stack `$stack` (CI: lambdajobs deploy --yes)
```

Synth writes `lambdajobs.lock` (the versions of the dependencies you declare, once you declare some)
and `lambdajobs.stacks.json` (which stack holds each job, once they spread over nested stacks) beside
`pyproject.toml`: commit both.
"""

GITIGNORE = """\
.venv/
__pycache__/
*.pyc
*.egg-info/
.pytest_cache/
cdk.out/
build/
"""


def jobs_package(name: str) -> str:
    return f"{name}_jobs"


def stack_name(name: str) -> str:
    return name.replace("_", "-")


def project_files(name: str, lambdajobs_requirement: str) -> dict[str, str]:
    """The files of a project `name` (relative path -> text)."""
    jobs = jobs_package(name)
    values = {
        "name": name,
        "jobs": jobs,
        "stack": stack_name(name),
        # a TOML basic string: JSON's escapes are TOML's
        "requirement": json.dumps(lambdajobs_requirement),
    }
    cdk_json = {"app": "python app.py", "context": recommended_feature_flags()}

    def fill(template: str) -> str:
        return string.Template(template).substitute(values)

    return {
        "pyproject.toml": fill(PYPROJECT),
        "cdk.json": json.dumps(cdk_json, indent=2) + "\n",
        "app.py": fill(APP),
        f"{jobs}/__init__.py": fill(JOBS_INIT),
        f"{jobs}/greetings.py": JOB,
        "tests/test_greetings.py": fill(TEST),
        "README.md": fill(README),
        ".gitignore": GITIGNORE,
    }


def new_project(
    name: str, *, parent: Path | None = None, lambdajobs_requirement: str | None = None
) -> Project:
    """Make the project folder `parent/name` (default: in the current folder). `lambdajobs_requirement`:
    as `requirement` takes it (default: what the running lambdajobs was installed from).

    Raises:
        InvalidOptionError: a bad name, a folder that exists, a requirement that is not one.
        LambdaJobsError: the folder cannot be written. Nothing is left behind.

    Example:
        >>> new_project("acme").stack
        'acme'
    """
    parent = parent if parent is not None else Path.cwd()
    folder = check_name(name, parent)
    needed = requirement(lambdajobs_requirement, cwd=parent)
    files = project_files(name, needed)
    staging = parent / f".{name}.lambdajobs-new-{os.getpid()}"
    try:
        for relative, text in files.items():
            path = staging / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (staging / "app.py").chmod(0o755)
        if folder.exists():  # made meanwhile
            raise InvalidOptionError(f"{folder} exists; pick another name, or move it away first.")
        staging.rename(folder)  # whole or not at all
    except OSError as exc:
        raise LambdaJobsError(f"cannot write {folder}: {exc.strerror or exc}.") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return Project(folder=folder, jobs=jobs_package(name), stack=stack_name(name), requirement=needed)
