"""Where a project names its jobs package, once: `[tool.lambdajobs] jobs = "..."` in pyproject.toml,
or `"jobs"` in cdk.json's context. Read by the CLI, `lambdajobs dev`, the CDK app helpers and the test
harness (never in Lambda: CDK passes the name to each function).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

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


def project_root(start: Path | None = None) -> Path | None:
    """The nearest folder (from `start`, default the current one, upwards) with a pyproject.toml or
    cdk.json: where the project's own packages are imported from."""
    found = _project_files((start or Path.cwd()).resolve())
    return found[0].parent if found else None


def jobs_module(start: Path | None = None) -> str | None:
    """The jobs package this project names, or None.

    Raises:
        ConfigurationError: pyproject.toml or cdk.json cannot be read, or names a non-string.
    """
    for path in _project_files((start or Path.cwd()).resolve()):
        try:
            if path.name == "pyproject.toml":
                value = tomllib.loads(path.read_text()).get("tool", {}).get("lambdajobs", {}).get("jobs")
            else:
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
