"""Your jobs' third-party libraries, built for Lambda's platform at synth, without Docker.

Declare once what your jobs need on Lambda, in pyproject.toml:

    [tool.lambdajobs]
    jobs = "acme_jobs"
    dependencies = ["jinja2>=3.1,<4"]        # and/or: requirements = "requirements-lambda.txt"

Synthesis then resolves them with pip for the functions' platform only (python3.14, arm64: wheels
tagged `manylinux2014`, `manylinux_2_28` or `manylinux_2_34` aarch64 with abi `cp314` or `abi3`, and
pure-Python wheels; never a local build, which would be for this machine), with your pip index
configuration (pip.conf, `PIP_INDEX_URL`, `PIP_FIND_LINKS` ...), and installs them into a layer that
every job function gets.

- What Lambda already provides is never shipped: the runtime's boto3 and what it needs, and the
  Powertools layer's packages (Powertools, pydantic ...; `lambdajobs.staging.platform`). Resolution is
  constrained to the layer's versions, so a library needing another pydantic is refused by name, as is
  a direct requirement on a provided package that excludes the provided version.
- A library with no wheel for the platform is refused by name (`pip` would otherwise need to build
  it, and a build here is for this machine, not Lambda's).
- The resolved versions are written to `lambdajobs.lock` beside your pyproject.toml (commit it). The
  next synth reuses the lock while the declared requirements are unchanged, so it installs the same
  versions; and the installed folder is cached by those versions and the platform
  (`$LAMBDAJOBS_CACHE_DIR`, default `~/.cache/lambdajobs/dependencies`), so a second synth runs no pip
  at all: offline and fast.
- The total with the Powertools layer and a function's asset must fit Lambda's 250 MB unzipped limit
  (checked per function by `LambdaJobs`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError
from lambdajobs.staging import platform
from lambdajobs.staging.imports import top_level_modules

LOCK_NAME = "lambdajobs.lock"
#: Changing the lock's layout or the build invalidates older locks and cached folders.
_FORMAT = 1
_HOW = "[tool.lambdajobs] dependencies in pyproject.toml"


normalize = platform.normalize  # a distribution name as the package index compares them (PEP 503)


@dataclass(frozen=True)
class Requirements:
    """What a project's jobs need on Lambda: requirement strings (PEP 508) and requirements files
    (pip's format, read by pip itself: options, hashes, nested `-r`/`-c` relative to the file), where
    they were declared (for messages) and where the lock lives."""

    lines: tuple[str, ...]
    source: str
    lock_dir: Path
    files: tuple[Path, ...] = ()

    @property
    def lock_path(self) -> Path:
        return self.lock_dir / LOCK_NAME


@dataclass(frozen=True)
class BuiltDependencies:
    """The built dependencies: `folder` holds `python/` (a layer's layout), or None when there are
    none; `pins` the shipped distributions (name -> version); `modules` their top-level modules."""

    folder: Path | None = None
    pins: dict[str, str] = field(default_factory=dict)
    modules: frozenset[str] = frozenset()
    unzipped_bytes: int = 0


def project_requirements(root: Path | None) -> Requirements | None:
    """The requirements a project declares in `[tool.lambdajobs]` (`dependencies`, a list, and/or
    `requirements`, a requirements file relative to the project), or None.

    Raises:
        ConfigurationError: the keys have the wrong type, or the requirements file is missing.
    """
    from lambdajobs.project import tool_settings

    if root is None:
        return None
    settings = tool_settings(root)
    lines: list[str] = []
    declared = settings.get("dependencies", [])
    if not isinstance(declared, list) or not all(isinstance(d, str) for d in declared):
        raise ConfigurationError(
            f"{root / 'pyproject.toml'}: [tool.lambdajobs] dependencies must be a list of requirement "
            f'strings, e.g. dependencies = ["jinja2>=3.1"].'
        )
    lines += [d.strip() for d in declared if d.strip()]
    files: list[Path] = []
    file = settings.get("requirements")
    if file is not None:
        path = (root / str(file)).resolve()
        if not path.is_file():
            raise ConfigurationError(
                f"{root / 'pyproject.toml'}: [tool.lambdajobs] requirements = {file!r}, but {path} does not "
                f"exist; create it or remove the key."
            )
        files.append(path)
    if not lines and not any(_logical_lines(f) for f in files):
        return None
    return Requirements(tuple(lines), "pyproject.toml [tool.lambdajobs]", root, tuple(files))


def declared(given: Sequence[str] | None = None) -> Requirements | None:
    """The dependencies given (`LambdaJobs(dependencies=...)`), else those your project declares."""
    from lambdajobs.project import lambdajobs_root, project_root

    declaring = lambdajobs_root()
    if given is None:
        return project_requirements(declaring)
    lines = tuple(line.strip() for line in given if line.strip())
    root = declaring or project_root() or Path.cwd()  # where the lock is written
    return Requirements(lines, "LambdaJobs(dependencies=...)", root) if lines else None


def _logical_lines(path: Path) -> list[str]:
    """A requirements file's lines as pip reads them: continuations joined, comments left out."""
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = (re.sub(r"(^|\s)#.*$", "", line).strip() for line in text.splitlines())
    return [line for line in lines if line]


_NESTED = re.compile(r"^(?:-r|--requirement|-c|--constraint)[\s=]+(\S+)")
#: Options of a requirements file that say where packages come from: the install uses them too.
_INDEX_OPTIONS = re.compile(
    r"^(?:-i|--index-url|--extra-index-url|-f|--find-links|--no-index|--trusted-host)\b"
)


def _files_read(requirements: Requirements) -> list[Path]:
    """The requirements files and every file they name with `-r`/`-c`, relative to the naming one."""
    found: list[Path] = []
    todo = list(requirements.files)
    while todo:
        path = todo.pop(0)
        if path in found or not path.is_file():
            continue
        found.append(path)
        for line in _logical_lines(path):
            nested = _NESTED.match(line)
            if nested and "://" not in nested.group(1):
                todo.append((path.parent / nested.group(1)).resolve())
    return found


def _index_options(requirements: Requirements) -> list[str]:
    """The index options of the requirements files, local paths made relative to the lock's folder
    (so that the lock, read from there, finds the same packages)."""
    options = []
    for path in _files_read(requirements):
        for line in _logical_lines(path):
            if not _INDEX_OPTIONS.match(line):
                continue
            parts = re.match(r"^(\S+?)(?:[=\s]+(.*))?$", line)
            assert parts is not None  # a logical line is never empty
            flag, value = parts.group(1), (parts.group(2) or "").strip()
            if flag in ("-f", "--find-links") and value and "://" not in value:
                local = os.path.abspath(path.parent / value)  # (a link stays a link)
                if os.path.exists(local):
                    value = os.path.relpath(local, requirements.lock_dir.resolve())
            options.append(f"{flag} {value}".strip())
    return options


def cache_root() -> Path:
    """Where built dependency folders are kept: `$LAMBDAJOBS_CACHE_DIR`, else the user cache."""
    given = os.environ.get("LAMBDAJOBS_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lambdajobs"


def _provided() -> dict[str, tuple[str, str]]:
    """Distributions Lambda provides: name -> (version or "" when unknown, where)."""
    where = f"the Powertools layer {platform.layer_version()}"
    from importlib.metadata import version

    found = {name: (pinned, where) for name, pinned in platform.layer_distributions().items()}
    for name in platform.RUNTIME_PACKAGES:
        try:
            found[name] = (version(name), "the Lambda runtime (its version there may differ)")
        except Exception:  # not installed here: nothing to compare a specifier with
            found[name] = ("", "the Lambda runtime")
    return found


def _check_direct(requirements: Requirements) -> None:
    """A requirement on a package Lambda provides is fine when the provided version satisfies it (it
    is not shipped); otherwise it conflicts and is refused by name."""
    from packaging.requirements import InvalidRequirement, Requirement

    provided = _provided()
    given = [(line, True) for line in requirements.lines]
    for path in _files_read(requirements):  # pip's format: options and bare paths are pip's to read
        given += [(re.split(r"\s+--?\w", line)[0], False) for line in _logical_lines(path)]
    for line, strict in given:
        if line.startswith("-"):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            if not strict:
                continue  # a path, a URL, an option pip understands: pip reports what it cannot read
            raise ConfigurationError(
                f"{requirements.source}: dependency {line!r} is not a valid requirement ({exc}); write it "
                f'as pip would, e.g. "jinja2>=3.1".'
            ) from None
        name = normalize(req.name)
        if name in provided:
            version, where = provided[name]
            if version and req.specifier and not req.specifier.contains(version, prereleases=True):
                raise ConfigurationError(
                    f"{requirements.source}: dependency {line!r} conflicts with {req.name} {version} in "
                    f"{where}, which every function already has; drop it from {_HOW} or allow {version}."
                )


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([_FORMAT, *parts], sort_keys=True).encode()).hexdigest()


def _requirements_key(requirements: Requirements) -> str:
    """What the lock was made from: the requirements, every file read (nested ones too), the platform
    and the layer's versions."""
    base = requirements.lock_dir.resolve()
    files = [
        [str(p.relative_to(base)) if p.is_relative_to(base) else str(p), p.read_text()]
        for p in _files_read(requirements)
    ]
    layer = platform.layer_distributions()
    return _key(list(requirements.lines), files, platform.pip_platform_args(), layer)


def _pip(
    args: list[str], what: str, *, provided_env: Path | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run pip. With `provided_env`, pip runs isolated (`-I -S`) with only that folder on its path,
    where the distributions Lambda provides are stubbed: it takes them as installed (so it neither
    fetches nor ships them, and finds their versions), and sees nothing of this environment."""
    if provided_env is None:
        command = [sys.executable, "-m", "pip"]
    else:
        # sys.prefix as this environment's: pip reads its pip.conf there (a virtualenv's own)
        boot = (
            f"import sys; sys.path.insert(0, {str(provided_env)!r}); sys.prefix = {sys.prefix!r}; "
            "from pip._internal.cli.main import main; sys.exit(main())"
        )
        command = [sys.executable, "-I", "-S", "-c", boot]
    command += ["--disable-pip-version-check", "--no-input", "--no-color", *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise ConfigurationError(
            f"pip took more than 15 minutes to {what}; check your package index."
        ) from None
    if done.returncode != 0 and "No module named pip" in done.stderr:
        raise ConfigurationError(
            "synth needs pip in this environment to install your jobs' dependencies for Lambda: "
            "python -m ensurepip (or pip install pip) first."
        )
    return done


#: pip 23.3 resolves for another platform in a dry run (`--dry-run` with `--platform`, pip #12215).
MIN_PIP = (23, 3)


def _provided_env(folder: Path) -> Path:
    """A folder pip can run from that holds pip and a stub `.dist-info` of each distribution Lambda
    provides, at its version there (see `_pip`)."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("pip")
    try:
        has = importlib.metadata.version("pip")
        found = tuple(int(part) for part in has.split(".")[:2])
    except (importlib.metadata.PackageNotFoundError, ValueError):
        has, found = "none", (0, 0)
    if spec is None or not spec.submodule_search_locations or found < MIN_PIP:
        raise ConfigurationError(
            f"synth needs pip {'.'.join(map(str, MIN_PIP))} or later in this environment to resolve "
            f"your jobs' dependencies for Lambda's platform (it has {has}): "
            "python -m pip install --upgrade pip"
        )
    (folder / "pip").symlink_to(Path(next(iter(spec.submodule_search_locations))), target_is_directory=True)
    for name, (version, _) in _provided().items():
        if not version:
            continue
        info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "RECORD").write_text("")
    return folder


def _pip_failure(stderr: str, requirements: Requirements) -> ConfigurationError:
    """pip's refusal as one line: the package without a wheel for the platform, or the conflict."""
    missing = re.findall(r"No matching distribution found for (\S+)", stderr)
    label = platform.platform_label()
    provided = _provided()
    wanted = normalize(re.split(r"[<>=!~;\[ ]", missing[0], maxsplit=1)[0]) if missing else ""
    if wanted in provided:  # a version of what Lambda provides that the index does not have either
        version, where = provided[wanted]
        return ConfigurationError(
            f"the dependencies in {requirements.source} need {missing[0]}, but every function has "
            f"{wanted} {version} from {where} and lambdajobs never ships a second one; change the "
            f"versions in {_HOW}."
        )
    if missing:
        return ConfigurationError(
            f"dependency {missing[0]} has no wheel for Lambda's platform ({label}) in your package index, "
            f"and lambdajobs never builds one here (it would be for this machine); choose a version that "
            f"publishes such a wheel, or build one for that platform into your index ({_HOW})."
        )
    conflict = re.search(r"The conflict is caused by:\n(.*?)(?:\n\n|\Z)", stderr, re.S)
    if conflict:
        causes = "; ".join(
            line.strip().replace("The user requested (constraint) ", "the layer has ")
            for line in conflict.group(1).splitlines()
            if line.strip()
        )
        return ConfigurationError(
            f"the dependencies in {requirements.source} cannot be installed beside what Lambda provides "
            f"(Powertools layer {platform.layer_version()}: {_layer_pins()}): {causes}; change the "
            f"versions in {_HOW}."
        )
    errors = [line for line in stderr.splitlines() if line.startswith("ERROR")] or stderr.splitlines()[-1:]
    return ConfigurationError(
        f"pip could not resolve {requirements.source} for Lambda ({label}): {errors[-1]}"
    )


def _layer_pins() -> str:
    pins = platform.layer_distributions()
    return ", ".join(f"{n} {pins[n]}" for n in ("aws-lambda-powertools", "pydantic") if n in pins)


def resolve(requirements: Requirements) -> list[str]:
    """Resolve `requirements` for Lambda's platform with pip (a dry run, nothing installed), taking
    what Lambda provides as installed: the pins of every distribution to ship, `name==version` (or
    `name @ url` for a direct reference).

    Raises:
        ConfigurationError: a conflict with what Lambda provides, or no wheel for the platform.
    """
    _check_direct(requirements)
    provided = _provided()
    with tempfile.TemporaryDirectory(prefix="lambdajobs-resolve-") as tmp:
        reqs, constraints, report = (
            Path(tmp, "requirements.txt"),
            Path(tmp, "constraints.txt"),
            Path(tmp, "r.json"),
        )
        reqs.write_text("\n".join(requirements.lines) + "\n")
        # the layer's packages at the layer's versions: a library needing others cannot resolve
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in platform.layer_distributions().items()))
        env = Path(tmp, "provided")
        env.mkdir()
        files = [arg for path in requirements.files for arg in ("-r", str(path))]
        done = _pip(
            [
                "install",
                "--dry-run",
                "--report",
                str(report),
                *platform.pip_platform_args(),
                "-c",
                str(constraints),
                "-r",
                str(reqs),
                *files,
            ],
            "resolve your dependencies",
            provided_env=_provided_env(env),
            cwd=requirements.lock_dir,
        )
        if done.returncode != 0:
            raise _pip_failure(f"{done.stdout}\n{done.stderr}", requirements)
        installs = json.loads(report.read_text()).get("install", [])
    clash = [item for item in installs if normalize(item["metadata"]["name"]) in provided]
    if clash:  # pip would replace what Lambda provides (a runtime package: the layer's are constrained)
        raise _provided_conflict(clash[0], installs, provided, requirements)
    pins = []
    hashes = [item.get("download_info", {}).get("archive_info", {}).get("hashes", {}) for item in installs]
    hashed = all("sha256" in h for h in hashes)
    for item, digest in zip(installs, hashes, strict=True):
        name, version = normalize(item["metadata"]["name"]), item["metadata"]["version"]
        url = item.get("download_info", {}).get("url", "")
        pin = f"{name} @ {url}" if item.get("is_direct") and url else f"{name}=={version}"
        pins.append(f"{pin} --hash=sha256:{digest['sha256']}" if hashed else pin)
    return sorted(pins)


def _provided_conflict(
    item: dict, installs: list[dict], provided: dict[str, tuple[str, str]], requirements: Requirements
) -> ConfigurationError:
    name = normalize(item["metadata"]["name"])
    version, where = provided[name]
    needs = [
        f"{other['metadata']['name']} {other['metadata']['version']} needs {dep}"
        for other in installs
        for dep in other["metadata"].get("requires_dist", []) or []
        if normalize(re.split(r"[\s<>=!~;\[(]", dep, maxsplit=1)[0]) == name
    ]
    why = "; ".join(needs) or f"it asks for {name} {item['metadata']['version']}"
    return ConfigurationError(
        f"the dependencies in {requirements.source} need another {name} than the {version} of {where}: "
        f"{why}; every function has that {name} and lambdajobs never ships a second one; change the "
        f"versions in {_HOW}."
    )


def remove_stale_lock() -> Path | None:
    """Remove the lock of a project that declares no dependencies any more (its functions ship none,
    and a lock still pinning the old ones would say otherwise): the lock beside the pyproject.toml with
    `[tool.lambdajobs]`, when synth wrote it (its first line is ours). Returns the removed path."""
    from lambdajobs.project import lambdajobs_root

    root = lambdajobs_root()
    path = root / LOCK_NAME if root is not None else None
    if path is None or not path.is_file():
        return None
    with path.open() as lock:
        if not lock.readline().startswith(f"# {LOCK_NAME}: what `lambdajobs synth` ships"):
            return None  # not a lock synth wrote: leave it
    path.unlink()
    return path


def read_lock(requirements: Requirements) -> list[str] | None:
    """The lock's pins when it was made from these very requirements (and platform), else None."""
    path = requirements.lock_path
    if not path.is_file():
        return None
    text = path.read_text()
    match = re.search(r"^# requirements-sha256: ([0-9a-f]{64})$", text, re.M)
    if not match or match.group(1) != _requirements_key(requirements):
        return None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def write_lock(requirements: Requirements, pins: Sequence[str]) -> None:
    """Write the lock (atomically: a synth running beside this one reads the old or the new one):
    its header, the index options of the requirements files, the pins."""
    header = [
        f"# {LOCK_NAME}: what `lambdajobs synth` ships to your functions for Lambda "
        f"({platform.platform_label()}).",
        f"# Resolved from {requirements.source}; commit it. Synth rewrites it when those change.",
        f"# Provided on Lambda, never shipped: Powertools layer {platform.layer_version()} "
        f"({_layer_pins()}, ...), the runtime's boto3.",
        f"# requirements-sha256: {_requirements_key(requirements)}",
    ]
    partial = requirements.lock_path.with_name(f".{LOCK_NAME}.{os.getpid()}")
    partial.write_text("\n".join([*header, *_index_options(requirements), *pins]) + "\n")
    os.replace(partial, requirements.lock_path)


def this_machine() -> list[str]:
    """What a folder built for this machine (the local stack's functions) is keyed on."""
    import platform as host

    return ["this machine", sys.implementation.cache_tag, host.machine(), sys.platform]


def install(
    pins: Sequence[str], *, cache: Path | None = None, base: Path | None = None, for_lambda: bool = True
) -> Path:
    """The folder holding `pins` (a lock's lines: index options, then pins) installed for Lambda's
    platform under `python/` (a layer's layout), from the cache when it was built before. Relative
    `--find-links` paths are relative to `base` (the lock's folder).

    `for_lambda=False` installs the same versions for this machine instead (the local stack runs
    each function from its asset and these, `lambdajobs.local.functions`): without the lock's hashes,
    which are those of Lambda's wheels."""
    if not for_lambda:
        pins = [pin.split(" --hash")[0] for pin in pins]
    target = platform.pip_platform_args() if for_lambda else this_machine()
    key = _key([p for p in pins if not p.startswith("-")], target)
    folder = (cache or cache_root()) / "dependencies" / key[:32]
    if (folder / ".complete").is_file():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{key[:8]}-", dir=folder.parent))
    try:
        (building / "requirements.txt").write_text("\n".join(pins) + "\n")
        done = _pip(
            [
                "install",
                "--quiet",
                "--no-deps",
                "--no-compile",
                "--target",
                str(building / "python"),
                *(platform.pip_platform_args() if for_lambda else []),
                "-r",
                str(building / "requirements.txt"),
            ],
            "install your dependencies",
            cwd=base,
        )
        if done.returncode != 0:
            raise _pip_failure(done.stderr, Requirements(tuple(pins), LOCK_NAME, base or Path.cwd()))
        for junk in (building / "python").glob("bin"):
            shutil.rmtree(junk)  # console scripts: nothing on Lambda runs them
        (building / "requirements.txt").unlink()
        (building / ".complete").write_text("\n".join(pins) + "\n")
        with contextlib.suppress(OSError):  # another synth built it meanwhile
            building.rename(folder)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    if not (folder / ".complete").is_file():
        raise ConfigurationError(f"cannot keep the built dependencies in {folder}; check that folder.")
    return folder


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build(
    requirements: Requirements | None, *, cache: Path | None = None, for_lambda: bool = True
) -> BuiltDependencies:
    """Resolve (or reuse the lock), install (or reuse the cache), and describe the dependencies: for
    Lambda's platform, or with `for_lambda=False` the same locked versions for this machine.

    Raises:
        ConfigurationError: see `resolve`.
    """
    if requirements is None:
        return BuiltDependencies()
    pins = read_lock(requirements)
    if pins is None:
        write_lock(requirements, resolve(requirements))
        pins = read_lock(requirements) or []  # the lock's lines: its index options with the pins
    if not [p for p in pins if not p.startswith("-")]:  # everything asked for is provided by Lambda
        return BuiltDependencies()
    folder = install(pins, cache=cache, base=requirements.lock_dir, for_lambda=for_lambda)
    versions = {}
    for pin in pins:
        if pin.startswith("-"):
            continue  # an index option
        name, _, version = pin.split(" --hash")[0].partition("==")
        versions[name.split(" @ ")[0]] = version or "direct"
    return BuiltDependencies(
        folder=folder,
        pins=versions,
        modules=frozenset(top_level_modules(folder / "python")),
        unzipped_bytes=folder_bytes(folder / "python"),
    )
