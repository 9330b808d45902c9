"""What one function's Lambda asset holds: the lambdajobs runtime, and just the job modules it needs.

Per function: `lambdajobs/__init__.py` and `lambdajobs/runtime/` (found where lambdajobs is installed:
your project or site-packages), the pure-Python packages the runtime imports that neither the
Powertools layer nor the Lambda runtime provide, and from your jobs package: the module that declares
the function's job, the modules of the jobs it `enqueues` (so its producer validates their payloads),
every module those import inside the jobs package (static imports, found by reading them), and the
package `__init__` files on the way. Never `lambdajobs.cdk`, `.local`, the CLI, tests, or the other
jobs of the project. Your jobs package is found with `importlib.util.find_spec`, so it works from
site-packages too. Synthesis stays offline: everything is copied from this environment.
"""

from __future__ import annotations

import ast
import importlib.util
import shutil
from collections.abc import Iterable
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.spec import JobSpec

#: Imported by the runtime, and in neither the Powertools layer (Powertools, pydantic) nor the Lambda
#: runtime (boto3, dateutil): @cron validation, IANA zones.
VENDORED_PACKAGES = ("aws_cron_expression_validator", "pyawscron", "tzdata")
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigurationError(f"package {name} is not installed here; install it before synthesizing.")
    return Path(next(iter(spec.submodule_search_locations)))


def module_path(name: str) -> Path:
    """The source file of a module or package (`__init__.py`).

    Raises:
        ConfigurationError: it cannot be found, or is not Python source.
    """
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError:
        spec = None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        raise ConfigurationError(
            f"module {name} is not importable Python source here; run synth from your project's folder "
            f"(or install the project) so that your jobs package can be found."
        )
    return Path(spec.origin)


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ModuleNotFoundError, ValueError):
        return False


def _imports(module: str, path: Path) -> set[str]:
    """Modules a file imports (absolute names; relative imports resolved against `module`)."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            # `from pkg import name`: name may be a submodule
            found |= {f"{target}.{alias.name}" for alias in node.names if alias.name != "*"}
    return found


def job_modules(jobs_package: str, modules: Iterable[str]) -> list[str]:
    """`modules` and every module of `jobs_package` they import (transitively), with the package
    `__init__` modules on the way (those above the jobs package too, for a dotted one such as
    `myapp.jobs`): what importing `modules` needs from your code.

    Raises:
        ConfigurationError: one of them imports a module of your project outside the jobs package
            (same top-level package): it would not ship, and the function would fail at cold start.
    """
    top = jobs_package.split(".")[0]
    parents = {".".join(jobs_package.split(".")[:i]) for i in range(1, jobs_package.count(".") + 1)}

    def inside(name: str) -> bool:
        return name == jobs_package or name.startswith(f"{jobs_package}.")

    todo = [m for m in modules if inside(m)] + sorted(parents)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or not _is_module(name):
            continue
        seen.add(name)
        parts = name.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)) if inside(".".join(parts[:i])))
        for imported in _imports(name, module_path(name)):
            if inside(imported):
                if imported not in seen:
                    todo.append(imported)
            elif imported.split(".")[0] == top and imported not in parents and _is_module(imported):
                raise ConfigurationError(
                    f"{name} imports {imported}, which is outside the jobs package '{jobs_package}' and "
                    f"would not ship with the function; move it into the jobs package."
                )
    return sorted(seen)


def modules_for(spec: JobSpec, specs: dict[str, JobSpec]) -> list[str]:
    """The job modules a function imports at cold start: its own job's, then those it enqueues."""
    names = [spec.func.__module__]
    for target in spec.enqueues:
        if target in specs and specs[target].func.__module__ not in names:
            names.append(specs[target].func.__module__)
    return names


def stage_function_asset(out_dir: Path, *, jobs_package: str, modules: Iterable[str]) -> Path:
    """Copy one function's code into `out_dir` (replaced) for `Code.from_asset`: the runtime, the
    vendored packages, and `modules` with what they import from `jobs_package`."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    library = _package_dir("lambdajobs")
    (out_dir / "lambdajobs").mkdir(parents=True)
    shutil.copy2(library / "__init__.py", out_dir / "lambdajobs" / "__init__.py")
    shutil.copytree(library / "runtime", out_dir / "lambdajobs" / "runtime", ignore=_IGNORE)
    for package in VENDORED_PACKAGES:
        shutil.copytree(_package_dir(package), out_dir / package, ignore=_IGNORE)
    for name in job_modules(jobs_package, modules):
        source = module_path(name)
        relative = Path(*name.split("."))
        target = (
            out_dir / relative / "__init__.py"
            if source.name == "__init__.py"
            else out_dir / relative.with_suffix(".py")
        )
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return out_dir
