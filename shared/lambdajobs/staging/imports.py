"""What a function's shipped code imports, read from its source, and the synth-time check that every
one of those imports resolves on Lambda.

A function that imports a module its asset lacks fails on Lambda, at cold start (a module-level
import) or on its first run (an import inside a function): neither the tests nor the local stack see
it, because both run where everything is installed. So synthesis reads every file the asset ships
(module level and function bodies alike) and resolves each import against what the function will
have: its asset, its dependencies (built for Lambda's platform, `lambdajobs.staging.dependencies`), the
Powertools layer and the Lambda runtime's own packages, and the standard library of Lambda's Python
(`lambdajobs.staging.platform`: recorded lists, so a module 3.14 removed counts as missing here too).

Exempt, as Python itself treats them: imports under `if TYPE_CHECKING:` (never run) and inside a
`try:` whose handler catches `ImportError` or `ModuleNotFoundError` (the code has a fallback).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError

_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


@dataclass(frozen=True)
class ImportRef:
    """One import statement's target, as a file names it.

    `module` must resolve; `names` are the names of a `from module import a, b` (each may be a
    submodule or an attribute); `exempt` is True where a missing module is handled or never imported
    (under `TYPE_CHECKING`, in a `try` that catches `ImportError`, in `with suppress(ImportError)`,
    under a `sys.version_info` test that is false on Lambda's Python); `type_checking` is True under
    `TYPE_CHECKING` (never run at all); `fallback_for` names the modules of the `try` whose
    `except ImportError` branch holds this import (needed only when one of those is missing).
    """

    module: str
    line: int
    names: tuple[str, ...] = ()
    exempt: bool = False
    type_checking: bool = False
    fallback_for: tuple[str, ...] = ()


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    if kinds is None:
        return False  # a bare except hides every error, not only a missing module: not an exemption
    found = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
    return any(
        (isinstance(k, ast.Name) and k.id in _IMPORT_ERRORS)
        or (isinstance(k, ast.Attribute) and k.attr in _IMPORT_ERRORS)
        for k in found
    )


def _suppresses_import_error(item: ast.withitem) -> bool:
    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name == "suppress" and any(
        (isinstance(a, ast.Name) and a.id in _IMPORT_ERRORS)
        or (isinstance(a, ast.Attribute) and a.attr in _IMPORT_ERRORS)
        for a in call.args
    )


def _on_lambdas_python(test: ast.expr) -> bool | None:
    """A `sys.version_info <op> (3, n)` test (or `sys.version_info[:2]`) evaluated for Lambda's
    Python; None for any other test."""
    import operator

    from lambdajobs.staging.platform import PYTHON_VERSION

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and len(test.comparators) == 1):
        return None
    left = test.left.value if isinstance(test.left, ast.Subscript) else test.left
    if not (isinstance(left, ast.Attribute) and left.attr == "version_info"):
        return None
    try:
        version = ast.literal_eval(test.comparators[0])
    except ValueError:
        return None
    if not (isinstance(version, tuple) and all(isinstance(v, int) for v in version)):
        return None
    ops = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge}
    compare = ops.get(type(test.ops[0]))
    ours = tuple(int(part) for part in PYTHON_VERSION.split("."))
    return None if compare is None else bool(compare(ours[: len(version)], version))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Visitor(ast.NodeVisitor):
    def __init__(self, package: str) -> None:
        self.package = package  # the package relative imports resolve against
        self.found: list[ImportRef] = []
        self._exempt = 0
        self._typing = 0
        self._fallback: tuple[str, ...] = ()

    def _ref(self, module: str, line: int, names: tuple[str, ...] = ()) -> ImportRef:
        return ImportRef(module, line, names, self._exempt > 0, self._typing > 0, self._fallback)

    def _visit_exempt(self, nodes: list[ast.stmt]) -> None:
        self._exempt += 1
        for child in nodes:
            self.visit(child)
        self._exempt -= 1

    def _absolute(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.package.split(".") if self.package else []
        base = ".".join(parts[: len(parts) - node.level + 1])
        return f"{base}.{node.module}" if node.module else base

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append(self._ref(alias.name, node.lineno))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        names = tuple(a.name for a in node.names if a.name != "*")
        self.found.append(self._ref(self._absolute(node), node.lineno, names))

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self._exempt += 1
            self._typing += 1
            for child in node.body:
                self.visit(child)
            self._exempt -= 1
            self._typing -= 1
            for child in node.orelse:
                self.visit(child)
            return
        runs = _on_lambdas_python(node.test)
        if runs is None:
            self.generic_visit(node)
            return
        self.visit(node.test)
        for nodes, taken in ((node.body, runs), (node.orelse, not runs)):
            if taken:
                for child in nodes:
                    self.visit(child)
            else:  # the branch Lambda's Python never takes
                self._visit_exempt(nodes)

    def visit_With(self, node: ast.With) -> None:
        if any(_suppresses_import_error(item) for item in node.items):
            self._visit_exempt(node.body)
        else:
            self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h) for h in node.handlers)
        before = len(self.found)
        self._exempt += guarded
        for child in node.body:
            self.visit(child)
        self._exempt -= guarded
        tried = tuple(ref.module for ref in self.found[before:])
        for handler in node.handlers:
            saved = self._fallback
            if guarded and _catches_import_error(handler) and tried:
                self._fallback = tried  # runs on Lambda only when one of those is missing
            self.visit(handler)
            self._fallback = saved
        for child in [*node.orelse, *node.finalbody]:
            self.visit(child)

    visit_TryStar = visit_Try  # type: ignore[assignment]


def imports_of(module: str, path: Path) -> list[ImportRef]:
    """Every import in a module's file (function bodies too), relative ones made absolute."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    visitor = _Visitor(package)
    visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return visitor.found


def asset_modules(asset: Path) -> Iterator[tuple[str, Path]]:
    """The Python modules a staged asset holds: (dotted name, file)."""
    for path in sorted(asset.rglob("*.py")):
        relative = path.relative_to(asset)
        parts = relative.with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            yield ".".join(parts), path


def top_level_modules(folder: Path) -> set[str]:
    """The top-level importable names in a folder (packages, modules, extension modules)."""
    found: set[str] = set()
    if not folder.is_dir():
        return found
    for entry in folder.iterdir():
        name = entry.name
        if entry.is_dir():
            if name.isidentifier() and name != "__pycache__":
                found.add(name)  # a package, regular or namespace
        elif name.endswith(".py"):
            found.add(name[:-3])
        elif name.endswith((".so", ".pyd")):
            found.add(name.split(".")[0])
    return found


@dataclass(frozen=True)
class Provided:
    """What a function can import beyond its asset: top-level module names, by where they come from
    (in the order an error lists them)."""

    dependencies: frozenset[str]
    layer: frozenset[str]
    runtime: frozenset[str]
    stdlib: frozenset[str]

    def has(self, top: str) -> bool:
        return top in self.dependencies or top in self.layer or top in self.runtime or top in self.stdlib


def _in_asset(asset: Path, module: str) -> bool:
    """A module or package of the asset; a folder without `__init__.py` is a namespace package."""
    base = asset.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or base.is_dir()


def unresolved_imports(
    asset: Path, provided: Provided, layers: Sequence[Path] = ()
) -> list[tuple[ImportRef, Path]]:
    """The imports of the asset's files that resolve nowhere on Lambda, with the importing file.

    A module whose top-level package ships in the asset, or in one of `layers` (folders staged here:
    the runtime layer's `python/`), must itself be there (a `from a import b` resolves when `a` does:
    `b` is then a submodule there or an attribute of `a`): `lambdajobs.runtime` is in the runtime
    layer, `lambdajobs.testing` is not. Any other module resolves by its top-level name in `provided`.
    """
    folders = (asset, *layers)
    shipped_tops = {top for folder in folders for top in top_level_modules(folder)}

    def resolves(module: str) -> bool:
        top = module.split(".")[0]
        if top in shipped_tops:
            return any(_in_asset(folder, module) for folder in folders)
        return provided.has(top)

    missing = []
    for name, path in asset_modules(asset):
        for ref in imports_of(name, path):
            if ref.exempt or not ref.module or ref.module == "__future__":
                continue
            if ref.fallback_for and all(resolves(m) for m in ref.fallback_for):
                continue  # the `except ImportError` branch of imports that all resolve: never runs
            if not resolves(ref.module):
                missing.append((ref, path))
    return missing


def advice(module: str) -> str:
    """What to do about a module a function would not find on Lambda."""
    import importlib.util
    import sys

    from lambdajobs.staging import platform

    top = module.split(".")[0]
    if top in sys.stdlib_module_names and top not in platform.stdlib_modules():
        return (
            f"{top} is in this Python's standard library but not in Python {platform.PYTHON_VERSION}'s "
            f"(Lambda's): replace it (the Python docs name a replacement for each removed module)"
        )
    if top == "lambdajobs":
        return (
            "only lambdajobs' runtime ships to Lambda (lambdajobs.testing, .cdk, .local and the CLI "
            "never do): import it in your tests or your CDK app instead"
        )
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return (
            f"add the distribution that provides {top} to [tool.lambdajobs] dependencies in "
            f"pyproject.toml (it is installed here, but nothing ships it to Lambda)"
        )
    return (
        f"{top} is not installed here either: fix the import, or install the library and add it to "
        f"[tool.lambdajobs] dependencies in pyproject.toml"
    )


def check_asset_imports(
    asset: Path,
    provided: Provided,
    *,
    function: str,
    python: str,
    shown: int = 3,
    layers: Sequence[Path] = (),
) -> None:
    """Fail synthesis, in one line, when a shipped file imports what the function would not find.

    Raises:
        ConfigurationError: naming the function, each missing module with its importing `file:line`,
            and the fix.
    """
    missing = unresolved_imports(asset, provided, layers)
    if not missing:
        return
    modules = sorted({ref.module for ref, _ in missing})
    where = "; ".join(
        f"{ref.module} at {path.relative_to(asset)}:{ref.line}" for ref, path in missing[:shown]
    )
    more = f" and {len(missing) - shown} more" if len(missing) > shown else ""
    raise ConfigurationError(
        f"function '{function}' imports {', '.join(modules)}, which Lambda would not find ({where}{more}): "
        f"not in its asset, its dependencies, the Powertools layer, the Lambda runtime or Python "
        f"{python}'s standard library; {advice(missing[0][0].module)}."
    )


def module_names(refs: Iterable[ImportRef]) -> set[str]:
    """The modules a list of imports may load: each target, and each `from` name as a submodule."""
    found: set[str] = set()
    for ref in refs:
        if ref.module:
            found.add(ref.module)
            found |= {f"{ref.module}.{n}" for n in ref.names}
    return found
