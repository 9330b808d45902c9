"""MkDocs hooks: pages generated at build time from the code, so nothing is kept in sync by hand.

- `<!-- options: job -->` (and `<!-- options: cron -->`) in a page becomes a table of that
  declaration's options: each name and meaning from its docstring's `Parameters:` section, each
  default from its signature (or, for an option that defaults to None, from `JobSpec`'s field, or
  from a `Default: ...` sentence when None stands for something computed, like the function's name).
  A keyword argument without an entry, or an entry without an argument, fails the build.
- The CLI page's `mkdocs-click` block imports `docs/cli_command.py`: the repository root is put on
  `sys.path` here so it can.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^<!-- options: (job|cron) -->$", re.MULTILINE)
DEFAULT = re.compile(r"\s*Default: (?P<text>[^.]+)\.\s*$")


def on_config(config: Any) -> Any:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return config


def parameters(func: Callable[..., Any]) -> dict[str, str]:
    """The `Parameters:` section of a Google-style docstring: each name and its (unwrapped) text."""
    doc = inspect.getdoc(func) or ""
    entries: dict[str, str] = {}
    inside, current = False, ""
    for line in doc.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            inside, current = line.strip() == "Parameters:", ""
            continue
        if not inside:
            continue
        entry = re.match(r"^    (\**\w+): (.*)$", line)
        if entry:
            current = entry.group(1)
            entries[current] = entry.group(2).strip()
        elif current and line.startswith("        "):
            entries[current] += " " + line.strip()
    return entries


def _spec_default(name: str) -> str | None:
    from lambdajobs.runtime.spec import JobSpec

    for f in dataclasses.fields(JobSpec):
        if f.name == name and f.default_factory is not dataclasses.MISSING:
            return f"`{f.default_factory.__name__}()`"  # type: ignore[attr-defined]
    return None


def _default(name: str, param: inspect.Parameter, text: str, where: str) -> tuple[str, str]:
    """The default cell of an option, and its meaning without a `Default:` sentence."""
    stated = DEFAULT.search(text)
    if param.default is not None and param.default is not inspect.Parameter.empty:
        if stated:
            raise PluginError(f"{where}: '{name}' states its default in prose; its signature holds it")
        return f"`{param.default!r}`", text
    if stated:
        return stated.group("text"), text[: stated.start()]
    if param.default is None:
        return _spec_default(name) or "none", text
    return "required", text


def options_table(func: Callable[..., Any]) -> str:
    where = f"{func.__module__}.{func.__qualname__}"
    documented = parameters(func)
    params = {
        (f"**{p.name}" if p.kind is p.VAR_KEYWORD else p.name): p
        for p in inspect.signature(func).parameters.values()
        if p.kind is not p.POSITIONAL_OR_KEYWORD or p.name != "func"
    }
    if missing := sorted(set(params) - set(documented)):
        raise PluginError(f"{where}: no `Parameters:` entry for {missing}; document each option there")
    if extra := sorted(set(documented) - set(params)):
        raise PluginError(f"{where}: `Parameters:` documents {extra}, which it does not take")
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for name, param in params.items():
        if param.kind is param.VAR_KEYWORD:
            rows.append(f"| `{name}` | | {documented[name]} |")
            continue
        default, meaning = _default(name, param, documented[name], where)
        rows.append(f"| `{name}` | {default} | {meaning.replace('|', chr(92) + '|')} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if "<!-- options:" not in markdown:
        return markdown
    from lambdajobs.runtime import spec

    return MARKER.sub(lambda m: options_table(getattr(spec, m.group(1))), markdown)
