"""Where a project names its jobs package, once: `[tool.lambdajobs] jobs = "..."` in pyproject.toml,
or `"jobs"` in cdk.json's context. Read by the CLI, `lambdajobs dev`, the CDK app helpers, the test
harness, and the job loader when a jobs package is not importable from where Python was started (a
script in a subfolder, plain `pytest`). Never read in Lambda: CDK passes the name to each function,
and this module is only imported when a package is not found.

The project's root is the folder whose pyproject.toml has a `[tool.lambdajobs]` table: your jobs
package, and the project code it imports, are imported from there.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

from lambdajobs.runtime.errors import ConfigurationError

HOW = (
    'name your jobs package once: [tool.lambdajobs] jobs = "<package>" in pyproject.toml, '
    '"jobs" in cdk.json\'s context, or --jobs <package>'
)


def _project_files(start: Path) -> list[Path]:
    """pyproject.toml and cdk.json in `start` and its parents, nearest first."""
    found = []
    for folder in (start, *start.parents):
        for name in ("pyproject.toml", "cdk.json"):
            if (folder / name).is_file():
                found.append(folder / name)
        if found:
            return found  # the nearest project folder only
    return found


#: Where synth records which stack of the app holds each job (`lambdajobs.cdk.layout`): beside your
#: pyproject.toml, or where `LAMBDAJOBS_STACKS_FILE` says.
STACKS_FILE_NAME = "lambdajobs.stacks.json"
ENV_STACKS_FILE = "LAMBDAJOBS_STACKS_FILE"


def stacks_file(start: Path | None = None) -> Path:
    """`lambdajobs.stacks.json` in the project folder of `start` (default: the current folder), or
    `$LAMBDAJOBS_STACKS_FILE`."""
    import os

    override = os.environ.get(ENV_STACKS_FILE)
    if override:
        return Path(override)
    return (project_root(start) or (start or Path.cwd())) / STACKS_FILE_NAME


def project_root(start: Path | None = None) -> Path | None:
    """The nearest folder (from `start`, default the current one, upwards) with a pyproject.toml or
    cdk.json: where the project's own packages are imported from."""
    found = _project_files((start or Path.cwd()).resolve())
    return found[0].parent if found else None


def _read_pyproject(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot read {path}: {exc}") from None


def lambdajobs_root(start: Path | None = None) -> Path | None:
    """The nearest folder (from `start`, default the current one, upwards) whose pyproject.toml has a
    `[tool.lambdajobs]` table, or None."""
    first = (start or Path.cwd()).resolve()
    for folder in (first, *first.parents):
        path = folder / "pyproject.toml"
        if path.is_file() and "lambdajobs" in _read_pyproject(path).get("tool", {}):
            return folder
    return None


def tool_settings(root: Path) -> dict[str, Any]:
    """The `[tool.lambdajobs]` table of `root/pyproject.toml` (empty when there is none)."""
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    table = _read_pyproject(path).get("tool", {}).get("lambdajobs", {})
    if not isinstance(table, dict):
        raise ConfigurationError(f"{path}: [tool.lambdajobs] must be a table.")
    return table


def make_importable(start: Path | None = None) -> Path | None:
    """Put the project's root (see `lambdajobs_root`) first on `sys.path` if it is not there yet, as
    `python -m` does for the current folder; return it (None when there is no such project)."""
    root = lambdajobs_root(start)
    if root is not None and str(root) not in sys.path:
        sys.path.insert(0, str(root))
    return root


def jobs_module(start: Path | None = None) -> str | None:
    """The jobs package this project names, or None.

    Raises:
        ConfigurationError: pyproject.toml or cdk.json cannot be read, or names a non-string.
    """
    for path in _project_files((start or Path.cwd()).resolve()):
        if path.name == "pyproject.toml":
            value = _read_pyproject(path).get("tool", {}).get("lambdajobs", {}).get("jobs")
        else:
            try:
                value = json.loads(path.read_text()).get("context", {}).get("jobs")
            except (OSError, ValueError) as exc:
                raise ConfigurationError(f"cannot read {path}: {exc}") from None
        if value is not None:
            if not isinstance(value, str) or not value:
                raise ConfigurationError(f"{path}: jobs = {value!r}; {HOW}.")
            return value
    return None


def require_jobs_module(given: str | None = None, start: Path | None = None) -> str:
    """`given`, else the project's jobs package.

    Raises:
        ConfigurationError: none is named anywhere.
    """
    found = given or jobs_module(start)
    if not found:
        raise ConfigurationError(f"no jobs package is named; {HOW}.")
    return found
