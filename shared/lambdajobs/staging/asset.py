"""What a function's Lambda code holds: the lambdajobs runtime (a layer every job function shares), and
just the job modules it needs (its own asset).

The runtime layer (`stage_runtime_layer`): `lambdajobs/__init__.py`, `lambdajobs/errors.py` and
`lambdajobs/runtime/` (found where lambdajobs is installed: your project or site-packages), and the
pure-Python packages the runtime imports that neither the Powertools layer nor the Lambda runtime
provide. A job function's asset (`stage_function_asset(..., runtime=False)`), from your project: the
module that declares the function's job, the modules of the jobs it `enqueues` (so its producer
validates their payloads), every module of your project those import (read from their source: module
level and function bodies, not under `TYPE_CHECKING`), the package `__init__` files on the way, and
those packages' data files. Your project's code is the jobs package (found with
`importlib.util.find_spec`, so it may be installed in site-packages too) and any module found as
Python source in your project's folders, outside the standard library and site-packages (a shared
`acme/common.py` beside the jobs package; see `source_roots`). Never `lambdajobs.cdk`, `.local`, the
CLI, tests, or the other jobs of the project. Third-party libraries are your dependencies
(`lambdajobs.staging.dependencies`, a layer), and `lambdajobs.staging.imports` checks at synth that every
import of the asset resolves on Lambda. Synthesis stays offline: everything is copied from this
environment."""

from __future__ import annotations

import functools
import importlib.util
import shutil
from collections.abc import Iterable
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.runtime.spec import JobSpec
from lambdajobs.staging.imports import imports_of, module_names

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
    except Exception:  # finding a submodule imports its package, whatever that raises
        return False


@functools.cache
def _library_folders() -> tuple[Path, ...]:
    """Where installed and standard-library code lives: a module found there is not your source."""
    import site
    import sysconfig

    folders = {sysconfig.get_path(key) for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders |= set(site.getsitepackages()) | {site.getusersitepackages()}
    return tuple(Path(f).resolve() for f in folders if f)


def source_roots(jobs_package: str) -> tuple[Path, ...]:
    """The folders your project's source is found in: the one holding the jobs package's top-level
    package (`acme/` beside `acme_jobs/`, a `src/` layout's `src/`), and your project's root (the
    folder whose pyproject.toml has `[tool.lambdajobs]`, else the nearest project folder)."""
    from lambdajobs.project import lambdajobs_root, project_root

    roots = []
    top = jobs_package.split(".")[0]
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots.append(Path(next(iter(spec.submodule_search_locations))).resolve().parent)
    root = lambdajobs_root() or project_root()
    if root is not None:
        roots.append(root.resolve())
    return tuple(dict.fromkeys(roots))


def _in_source(path: Path, roots: tuple[Path, ...]) -> bool:
    """Under one of `roots`, and not in the standard library or an installed distribution."""
    path = path.resolve()
    if not any(path.is_relative_to(root) for root in roots):
        return False
    return not ({"site-packages", "dist-packages"} & set(path.parts)) and not any(
        path.is_relative_to(folder) for folder in _library_folders()
    )


def _source_file(name: str, roots: tuple[Path, ...]) -> Path | None:
    """The .py file of `name` when it is your project's source (Python source under one of `roots`,
    and not in the standard library or an installed distribution), else None.

    The top-level name is looked at first: finding it imports nothing, while finding `x.y` imports
    `x`, which synthesis must never do for a library (importing it may fail, or do anything)."""
    top = name.split(".")[0]
    try:
        found = importlib.util.find_spec(top)
    except Exception:
        return None
    if found is None:
        return None
    places = (
        [Path(found.origin)] if found.origin else [Path(p) for p in found.submodule_search_locations or ()]
    )
    if not any(_in_source(place, roots) for place in places):
        return None
    try:
        spec = importlib.util.find_spec(name) if name != top else found
    except Exception:  # your own package failed to import: the import check will name the module
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    origin = Path(spec.origin)
    return origin.resolve() if _in_source(origin, roots) else None


def job_modules(jobs_package: str, modules: Iterable[str]) -> list[str]:
    """`modules` and every module of your project they import (transitively: anywhere in a file,
    function bodies too, except under `TYPE_CHECKING`), with the package `__init__` modules on the
    way: what running `modules` needs from your code. Your code is the jobs package and any module
    found as Python source in your project's folders (`source_roots`: `acme/common.py` beside the
    jobs package), never in the standard library or site-packages. lambdajobs ships separately; a
    module found nowhere of these is for the import check to name (`lambdajobs.staging.imports`).
    """

    def parents(name: str) -> list[str]:
        parts = name.split(".")
        return [".".join(parts[:i]) for i in range(1, len(parts))]

    def ours(name: str) -> bool:
        if name.split(".")[0] == "lambdajobs":  # the runtime ships whole, beside your code
            return False
        if name == jobs_package or name.startswith(f"{jobs_package}.") or name in parents(jobs_package):
            return _is_module(name)  # the jobs package ships wherever it is installed
        return _source_file(name, roots) is not None

    roots = source_roots(jobs_package)
    todo = [m for m in modules if m == jobs_package or m.startswith(f"{jobs_package}.")]
    todo += parents(jobs_package)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen or not ours(name):
            continue
        seen.add(name)
        todo.extend(parents(name))
        refs = [ref for ref in imports_of(name, module_path(name)) if not ref.type_checking]
        todo.extend(m for m in module_names(refs) if m not in seen)
    return sorted(seen)


def modules_for(spec: JobSpec, specs: dict[str, JobSpec]) -> list[str]:
    """The job modules a function imports at cold start: its own job's, then those it enqueues."""
    names = [spec.func.__module__]
    for target in spec.enqueues:
        if target in specs and specs[target].func.__module__ not in names:
            names.append(specs[target].func.__module__)
    return names


def _copy_runtime(out_dir: Path) -> None:
    """The lambdajobs runtime and the vendored packages into `out_dir`."""
    library = _package_dir("lambdajobs")
    (out_dir / "lambdajobs").mkdir(parents=True)
    shutil.copy2(library / "__init__.py", out_dir / "lambdajobs" / "__init__.py")
    # `from lambdajobs.errors import`
    shutil.copy2(library / "errors.py", out_dir / "lambdajobs" / "errors.py")
    shutil.copytree(library / "runtime", out_dir / "lambdajobs" / "runtime", ignore=_IGNORE)
    for package in VENDORED_PACKAGES:
        shutil.copytree(_package_dir(package), out_dir / package, ignore=_IGNORE)


def stage_runtime_layer(out_dir: Path) -> Path:
    """The runtime as a layer, in `out_dir` (replaced): `python/` holding the lambdajobs runtime and the
    vendored packages (Lambda puts a layer's `python/` on `sys.path`). Every job function has it, so
    what every function ships is in the cloud assembly once, not once per job."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    _copy_runtime(out_dir / "python")
    return out_dir


def stage_function_asset(
    out_dir: Path, *, jobs_package: str, modules: Iterable[str], runtime: bool = True
) -> Path:
    """Copy one function's code into `out_dir` (replaced) for `Code.from_asset`: `modules` with what
    they import from `jobs_package`, and with `runtime` the runtime and the vendored packages (False:
    the function has the runtime layer, `stage_runtime_layer`)."""
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    if runtime:
        _copy_runtime(out_dir)
    for name in job_modules(jobs_package, modules):
        source = module_path(name)
        relative = Path(*name.split("."))
        if source.name == "__init__.py":
            _copy_package_data(source.parent, out_dir / relative)
            target = out_dir / relative / "__init__.py"
        else:
            target = out_dir / relative.with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)
    return out_dir


def _copy_package_data(package: Path, target: Path) -> None:
    """A shipped package's data files: the files beside its modules that are not Python (templates,
    JSON, ...) and its folders that hold no Python module (a `templates/` folder), as a wheel would
    carry them. Its subpackages ship only as far as they are imported."""
    target.mkdir(parents=True, exist_ok=True)
    for entry in package.iterdir():
        if entry.name.startswith(".") or entry.name == "__pycache__":
            continue
        if entry.is_file() and entry.suffix not in (".py", ".pyc"):
            shutil.copy2(entry, target / entry.name)
        elif entry.is_dir() and not any(entry.rglob("*.py")):
            shutil.copytree(entry, target / entry.name, ignore=_IGNORE, dirs_exist_ok=True)
