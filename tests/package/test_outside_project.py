"""lambdajobs as a user gets it: the built wheel, installed into a fresh virtualenv, used by a small
project elsewhere whose jobs package is not called `handlers`, with a third-party library its jobs
need on Lambda and a helper module of its own outside the jobs package.

Quick and offline: the wheel is built without build isolation, installed with `--no-deps`, and the
fresh virtualenv sees the dependencies already installed here through a `.pth` file (the extras a
project would install: cdk, cli, local, and pytest for its tests). The project's own library comes
from a package index the test makes (a folder of wheels): `acme-text`, which needs `acme-speedups`,
published both for Lambda's platform and as pure Python, and `winonly`, published for Windows only.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.dev_process import running_dev
from tests.wheels import make_wheel

ROOT = Path(__file__).resolve().parents[2]

JOBS = """
from pydantic import BaseModel

from acme.common import cents
from lambdajobs import JobContext, PermanentError, enqueue, job


class Invoice(BaseModel):
    order_id: str
    amount_cents: int


@job(timeout_seconds=20, max_attempts=3, enqueues=("notify_customer",))
def send_invoice(payload: Invoice, ctx: JobContext) -> dict:
    if payload.amount_cents <= 0:
        raise PermanentError("an invoice needs a positive amount")
    import acme_text  # the project's dependency, imported where it is used

    enqueue("notify_customer", {"order_id": payload.order_id}, job_id=f"notify-{payload.order_id}")
    text = acme_text.render(payload.order_id, cents(payload.amount_cents))
    return {"invoice": f"INV-{payload.order_id}", "text": text}
"""

COMMON = """
def cents(amount: int) -> str:
    return f"{amount / 100:.2f}"
"""

#: acme-text renders with acme-speedups, which says which build of it was imported.
ACME_TEXT = """
import acme_speedups


def render(order, amount):
    return f"{order}: {amount} ({acme_speedups.BUILD})"
"""

NOTIFY = """
from pydantic import BaseModel

from lambdajobs import job


class Notice(BaseModel):
    order_id: str


@job(timeout_seconds=10)
def notify_customer(payload: Notice) -> dict:
    return {"notified": payload.order_id}
"""

USER_TESTS = """
import pytest

from acme_jobs.billing import Invoice
from lambdajobs.testing import TestStack


@pytest.fixture
def stack():
    with TestStack("acme_jobs") as stack:
        yield stack


def test_an_invoice_runs_and_notifies(stack):
    job_id = stack.enqueue("send_invoice", Invoice(order_id="42", amount_cents=1999))
    stack.runner("send_invoice").drain()
    assert stack.status(job_id).result == {"invoice": "INV-42", "text": "42: 19.99 (pure)"}
    stack.runner("notify_customer").drain()
    assert stack.status("notify-42").state == "succeeded"


def test_a_bad_invoice_is_dead_at_once(stack):
    job_id = stack.enqueue("send_invoice", {"order_id": "7", "amount_cents": 0})
    runner = stack.runner("send_invoice")
    runner.drain()
    assert stack.status(job_id).state == "dead" and runner.depth(dlq=True) == 1
"""

CDK_APP = """
import lambdajobs.cdk  # first: it points jsii at the virtualenv's Node before aws_cdk starts it
from aws_cdk import App
from lambdajobs.cdk import LambdaJobsStack

app = App()
LambdaJobsStack(app, "acme", jobs="acme_jobs")
app.synth()
"""

PYPROJECT = """[project]
name = "acme"
version = "1"

[tool.lambdajobs]
jobs = "acme_jobs"
dependencies = [{dependencies}]
"""

#: A producer script in a subfolder: `python scripts/bill.py` puts scripts/ on sys.path, not the project.
SCRIPT = """
import sys
from lambdajobs import enqueue

print(enqueue("send_invoice", {"order_id": sys.argv[1], "amount_cents": 700}, job_id=f"inv-{sys.argv[1]}"))
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def fails(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> list[str]:
    """The stderr lines of a command that must fail (exit 1) without a traceback."""
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 1 and "Traceback" not in out.stderr, (
        f"{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    )
    return [line for line in out.stderr.splitlines() if line.strip()]


def write_project(project: Path, dependencies: str) -> Path:
    for folder in ("acme_jobs", "acme", "tests", "scripts"):
        (project / folder).mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(PYPROJECT.format(dependencies=dependencies))
    (project / "acme_jobs" / "__init__.py").write_text('"""Acme\'s jobs."""\n')
    (project / "acme_jobs" / "billing.py").write_text(JOBS)
    (project / "acme_jobs" / "notices.py").write_text(NOTIFY)
    (project / "acme" / "__init__.py").write_text("")
    (project / "acme" / "common.py").write_text(COMMON)
    (project / "tests" / "test_acme.py").write_text(USER_TESTS)
    (project / "scripts" / "bill.py").write_text(SCRIPT)
    (project / "app.py").write_text(CDK_APP)
    (project / "cdk.json").write_text(json.dumps({"app": "python app.py"}))
    return project


def console_script(venv: Path, name: str, module: str, function: str) -> None:
    """A console script as pip writes one (the dependencies come through the .pth, scripts do not)."""
    path = venv / "bin" / name
    path.write_text(
        f"#!{venv / 'bin' / 'python'}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n"
    )
    path.chmod(0o755)


@pytest.fixture(scope="module")
def user(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("outside")
    # GIVEN the wheel, built from a copy of the library's sources (the checkout stays clean)
    source = base / "source"
    source.mkdir()
    shutil.copytree(
        ROOT / "shared", source / "shared", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    wheels = base / "wheels"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("AWS_")}
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            ".",
        ],
        source,
        clean,
    )
    [wheel] = wheels.glob("lambdajobs-*.whl")
    # AND a fresh virtualenv that sees this environment's installed dependencies through a .pth file
    venv = base / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], base, clean)
    python = venv / "bin" / "python"
    target = Path(
        run([str(python), "-c", "import site; print(site.getsitepackages()[0])"], base, clean).strip()
    )
    (target / "deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # AND the project's own package index: its library for Lambda's platform and as pure Python
    index = base / "index"
    make_wheel(index, "acme-text", "1.0", files={"acme_text.py": ACME_TEXT}, requires=("acme-speedups>=2",))
    for tag, build in (("cp314-cp314-manylinux_2_28_aarch64", "lambda"), ("py3-none-any", "pure")):
        make_wheel(index, "acme-speedups", "2.0", tag=tag, files={"acme_speedups.py": f"BUILD = {build!r}\n"})
    make_wheel(index, "winonly", "1.0", tag="cp314-cp314-win_amd64")
    env = {
        **clean,
        "PATH": f"{venv / 'bin'}:{clean.get('PATH', '')}",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(index),
        "PIP_CONFIG_FILE": os.devnull,
        "LAMBDAJOBS_CACHE_DIR": str(base / "cache"),
        # the CDK CLI `make install` fetched (the pinned one): the tests never fetch it again
        "LAMBDAJOBS_CDK_CLI_DIR": str(ROOT / ".venv" / "cdk-cli"),
    }
    pip = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet"]
    run([*pip, "--no-deps", str(wheel)], base, clean)
    run([*pip, "acme-text"], base, env)  # for its tests and the local stack (the pure build)
    console_script(venv, "pytest", "pytest", "console_main")
    console_script(venv, "pip", "pip._internal.cli.main", "main")
    # AND a project of its own, whose jobs package is acme_jobs (not handlers)
    project = write_project(base / "acme", '"acme-text>=1"')
    return {"wheel": wheel, "venv": venv, "python": python, "project": project, "env": env, "base": base}  # type: ignore[dict-item]


def test_the_wheel_installs_one_top_level_package(user):
    names = zipfile.ZipFile(user["wheel"]).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"lambdajobs"}
    assert not [n for n in names if n.startswith(("handlers/", "infra/", "shared/", "tests/"))]
    assert "lambdajobs/runtime/worker.py" in names and "lambdajobs/cdk/stack.py" in names
    assert "lambdajobs/staging/lambda_platform.json" in names  # what the import check resolves against


def test_the_installed_package_is_the_wheel_and_not_this_checkout(user):
    code = (
        "import json, lambdajobs, importlib.util\n"
        "print(json.dumps([lambdajobs.__file__, importlib.util.find_spec('handlers') is None]))"
    )
    where, no_handlers = json.loads(run([str(user["python"]), "-c", code], user["project"], user["env"]))
    assert where.startswith(str(user["venv"])) and no_handlers


def test_plain_pytest_runs_the_projects_tests(user):
    # WHEN the project runs `pytest` (not `python -m pytest`: the project folder is not on sys.path)
    out = run(
        [str(user["venv"] / "bin" / "pytest"), "-q", "-p", "no:cacheprovider"], user["project"], user["env"]
    )
    # THEN its tests import its jobs package and pass
    assert "2 passed" in out


@pytest.fixture(scope="module")
def synthesized(user) -> dict:
    """`lambdajobs synth` in the project folder: cdk.out and its template."""
    said = run([str(user["venv"] / "bin" / "lambdajobs"), "synth"], user["project"], user["env"], timeout=300)
    outdir = user["project"] / "cdk.out"
    template = json.loads((outdir / "acme.template.json").read_text())
    functions = {
        fn["Properties"]["Environment"]["Variables"]["LAMBDAJOBS_JOB"]: fn["Properties"]
        for fn in template["Resources"].values()
        if fn["Type"] == "AWS::Lambda::Function"
        and "LAMBDAJOBS_JOB" in fn["Properties"]["Environment"]["Variables"]
    }
    return {"outdir": outdir, "template": template, "functions": functions, "said": said.splitlines()}


def asset_files(outdir: Path, key: str) -> set[str]:
    asset = outdir / f"asset.{key.removesuffix('.zip')}"
    return {str(p.relative_to(asset)) for p in asset.rglob("*") if p.is_file()}


def test_each_function_ships_its_jobs_and_the_projects_helper_and_not_this_repos(synthesized):
    functions, template = synthesized["functions"], synthesized["template"]
    assert set(functions) == {"send_invoice", "notify_customer"}
    continuers = [
        fn["Properties"]
        for fn in template["Resources"].values()
        if fn["Type"] == "AWS::Lambda::Function"
        and fn["Properties"]["Handler"] == "lambdajobs.runtime.continuer_entry.lambda_handler"
    ]
    assert len(continuers) == 1 and "LAMBDAJOBS_JOBS" not in continuers[0]["Environment"]["Variables"]
    for job, fn in functions.items():
        assert fn["Handler"] == "lambdajobs.runtime.entry.lambda_handler"
        files = {f for f in asset_files(synthesized["outdir"], fn["Code"]["S3Key"]) if f.endswith(".py")}
        assert not any(f.startswith("handlers/") for f in files), job
        # the runtime is in the runtime layer every job function has, not in each asset
        assert not any(f.startswith("lambdajobs/") for f in files), job
        runtime = runtime_layer(synthesized)
        assert fn["Layers"][1] == {"Ref": runtime[0]}
        shipped = asset_files(synthesized["outdir"], runtime[1]["Properties"]["Content"]["S3Key"])
        assert "python/lambdajobs/runtime/worker.py" in shipped
        assert not any(f.startswith("python/lambdajobs/cdk") for f in shipped)
        ours = {f for f in files if f.startswith(("acme_jobs/", "acme/"))}
        # send_invoice enqueues notify_customer: it ships both modules, and the helper its module
        # imports from outside the jobs package; notify_customer only its own
        expected = {"acme_jobs/__init__.py", "acme_jobs/notices.py"}
        if job == "send_invoice":
            expected |= {"acme_jobs/billing.py", "acme/__init__.py", "acme/common.py"}
        assert ours == expected, (job, ours)


def runtime_layer(synthesized) -> tuple[str, dict]:
    """(logical id, resource) of the lambdajobs runtime layer."""
    [found] = [
        (k, r)
        for k, r in synthesized["template"]["Resources"].items()
        if r["Type"] == "AWS::Lambda::LayerVersion" and "runtime" in r["Properties"]["Description"]
    ]
    return found


def test_the_dependencies_are_a_layer_built_for_lambda_and_locked_beside_the_project(user, synthesized):
    resources = synthesized["template"]["Resources"]
    [(layer_id, layer)] = [
        (k, r)
        for k, r in resources.items()
        if r["Type"] == "AWS::Lambda::LayerVersion" and "dependencies" in r["Properties"]["Description"]
    ]
    # every job function has it, after the Powertools and runtime layers; the continuer does not
    for fn in synthesized["functions"].values():
        assert fn["Layers"][-1] == {"Ref": layer_id} and len(fn["Layers"]) == 3
    files = asset_files(synthesized["outdir"], layer["Properties"]["Content"]["S3Key"])
    assert {"python/acme_text.py", "python/acme_speedups.py"} <= files
    # the build for Lambda's platform was chosen, not the pure-Python one
    [tag] = [f for f in files if f.startswith("python/acme_speedups-2.0.dist-info/WHEEL")]
    wheel = (
        synthesized["outdir"] / f"asset.{layer['Properties']['Content']['S3Key'].removesuffix('.zip')}" / tag
    )
    assert "Tag: cp314-cp314-manylinux_2_28_aarch64" in wheel.read_text()
    lock = (user["project"] / "lambdajobs.lock").read_text().splitlines()
    pins = [line.split(" --hash=sha256:") for line in lock if not line.startswith("#")]
    assert [pin for pin, _ in pins] == ["acme-speedups==2.0", "acme-text==1.0"]  # with each wheel's hash
    # and synth said it wrote the lock, which the project commits
    assert "locked the versions your functions ship in lambdajobs.lock: commit it" in synthesized["said"]


@pytest.fixture(scope="module")
def lambda_packages(tmp_path_factory) -> Path:
    """What Lambda gives a function beside its layers' own folders (tests/lambda_packages.py)."""
    from tests.lambda_packages import link_lambda_packages

    return link_lambda_packages(tmp_path_factory.mktemp("lambda-packages"))


def test_a_cold_start_from_the_asset_alone_runs_one_record_with_the_dependency(
    user, synthesized, lambda_packages
):
    # WHEN the function starts in an isolated interpreter whose path is only its asset, its layers and
    # boto3, and runs one SQS record of send_invoice (on moto's server)
    payload = json.dumps({"order_id": "77", "amount_cents": 1250})
    out = run(
        [
            str(user["python"]),
            str(ROOT / "tests" / "package" / "cold_start.py"),
            str(synthesized["outdir"]),
            "acme",
            "send_invoice",
            payload,
            str(lambda_packages),
        ],
        user["project"],
        user["env"],
    )
    ran = json.loads(out.strip().splitlines()[-1])
    # THEN the job succeeded, rendering with the library built for Lambda (from the layer)
    assert ran["response"] == {"batchItemFailures": []}
    assert ran["state"] == "succeeded", ran["error"]
    assert ran["result"] == {"invoice": "INV-77", "text": "77: 12.50 (lambda)"}
    # AND every module of the project came from the asset, lambdajobs from the runtime layer, the
    # library from the dependencies layer
    asset, runtime, layer = ran["path"][0], ran["path"][2], ran["path"][-1]
    files = ran["files"]
    assert all(files[m].startswith(asset) for m in ("acme_jobs.billing", "acme.common"))
    assert files["lambdajobs.runtime.worker"].startswith(runtime)
    assert files["acme_text"].startswith(layer) and files["acme_speedups"].startswith(layer)
    assert not any(str(user["venv"]) in f or "site-packages" in f for f in files.values())


def test_a_library_the_jobs_import_but_do_not_declare_fails_synth_naming_it(user, tmp_path):
    # GIVEN the same project with its dependency left out
    project = write_project(tmp_path / "acme", "")
    # WHEN `lambdajobs synth` runs: one line (the CDK CLI's own about the app's exit left out) names
    # the module, the function, the file and line, and the fix
    [line] = fails([str(user["venv"] / "bin" / "lambdajobs"), "synth"], project, user["env"])
    assert line.startswith("error: function 'send_invoice' imports acme_text, which Lambda would not find")
    assert (
        "acme_jobs/billing.py:" in line
        and "add the distribution that provides acme_text to [tool.lambdajobs] dependencies" in line
    )


def test_a_library_with_only_another_platforms_wheel_fails_synth_naming_it(user, tmp_path):
    project = write_project(tmp_path / "acme", '"acme-text>=1", "winonly"')
    [line] = fails(
        [str(user["python"]), "app.py"], project, {**user["env"], "CDK_OUTDIR": str(tmp_path / "out")}
    )
    assert line.startswith("error: dependency winonly has no wheel for Lambda's platform")


def test_a_job_completes_on_lambdajobs_dev_and_a_script_in_a_subfolder_enqueues(user):
    env = {**user["env"], "COLUMNS": "200"}
    cli = str(user["venv"] / "bin" / "lambdajobs")
    command = [cli, "dev", "--jobs", "acme_jobs", "--port", "0", "--log-file", str(user["base"] / "dev.log")]
    with running_dev(command, user["project"], env) as dev:
        exports = next(line for line in dev.lines if line.strip().startswith("export "))
        local = dict(pair.split("=", 1) for pair in exports.split()[1:])
        assert local["LAMBDAJOBS_JOBS"] == "acme_jobs" and re.match(
            r"http://127\.0\.0\.1:\d+", local["AWS_ENDPOINT_URL"]
        )
        shell = {**env, **local}
        payload = json.dumps({"order_id": "9", "amount_cents": 500})
        sent = run([cli, "enqueue", "send_invoice", payload, "--id", "inv-9"], user["project"], shell)
        assert sent.strip() == "inv-9"
        status = run([cli, "status", "inv-9", "--wait", "30"], user["project"], shell)
        assert "succeeded" in status and "INV-9" in status
        # the job's own enqueue reached the local stack too
        assert "succeeded" in run([cli, "status", "notify-9", "--wait", "30"], user["project"], shell)
        # and a producer script run from its own folder finds the jobs package from the project's root
        sent = run([str(user["python"]), "scripts/bill.py", "10"], user["project"], shell)
        assert sent.strip() == "inv-10"
        assert "succeeded" in run([cli, "status", "inv-10", "--wait", "30"], user["project"], shell)
        code = dev.stop()
    assert code == 0, dev.output


TUTORIAL = ROOT / "docs" / "tutorial" / "first-project.md"
#: A shell block of the tutorial, and whether the page marks it as one the tests do not run.
SHELL_BLOCK = re.compile(
    r"(?P<marker><!-- not run by the tests:[^>]*-->\n)?```sh\n(?P<code>.*?)```", re.DOTALL
)


def tutorial_script(wheel: Path) -> tuple[str, list[str]]:
    """The tutorial's shell blocks that the page does not mark, in order, as one bash script (a `cd`
    carries on to the next block, as in the reader's shell), with the wheel's real path; and the
    blocks the page marks."""
    page = TUTORIAL.read_text(encoding="utf-8")
    run, skipped = [], []
    for block in SHELL_BLOCK.finditer(page):
        (skipped if block["marker"] else run).append(block["code"])
    script = "set -euo pipefail\n" + "".join(f"echo '>>> block {n}'\n{code}" for n, code in enumerate(run, 1))
    return script.replace("path/to/lambdajobs-0.1.0-py3-none-any.whl", str(wheel)), skipped


def test_the_tutorials_commands_work_as_written_in_a_new_virtualenv(user, tmp_path):
    # GIVEN the tutorial's commands, but for those it marks (an AWS account, lambdajobs dev, the
    # wheel and virtualenv this test made itself)
    script, skipped = tutorial_script(user["wheel"])
    assert "lambdajobs new acme" in script and "lambdajobs synth" in script
    assert all(
        (
            "deploy" in b
            or "bootstrap" in b
            or "dev" in b
            or "enqueue" in b
            or "status" in b
            or "export" in b
            or "wheel" in b
            or "venv" in b
        )
        for b in skipped
    ), skipped
    # WHEN they run in order, in one shell, in an empty folder (pip offline: what they install is
    # installed already, and the editable install builds with this environment's setuptools)
    env = {**user["env"], "PIP_NO_BUILD_ISOLATION": "0"}
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    # THEN every command passes: the new project's tests, then the changed job's, and its synth
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.count(" passed") == 2 and "3 passed" in done.stdout, done.stdout
    assert "wrote cdk.out/acme.template.json" in done.stdout.splitlines()
    assert "feature flags are not configured" not in done.stderr  # cdk.json carries them
    template = json.loads((tmp_path / "acme" / "cdk.out" / "acme.template.json").read_text())
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert "greet" in {f["Properties"]["Environment"]["Variables"].get("LAMBDAJOBS_JOB") for f in functions}
