"""lambdajobs as a user gets it: the built wheel, installed into a fresh virtualenv, used by a small
project elsewhere whose jobs package is not called `handlers`.

Quick and offline: the wheel is built without build isolation, installed with `--no-deps`, and the
fresh virtualenv sees the dependencies already installed here through a `.pth` file (the extras a
project would install: cdk, cli, local, and pytest for its tests).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.dev_process import running_dev

ROOT = Path(__file__).resolve().parents[2]

JOBS = """
from pydantic import BaseModel

from lambdajobs import JobContext, PermanentError, enqueue, job


class Invoice(BaseModel):
    order_id: str
    amount_cents: int


@job(timeout_seconds=20, max_attempts=3, enqueues=("notify_customer",))
def send_invoice(payload: Invoice, ctx: JobContext) -> dict:
    if payload.amount_cents <= 0:
        raise PermanentError("an invoice needs a positive amount")
    enqueue("notify_customer", {"order_id": payload.order_id}, job_id=f"notify-{payload.order_id}")
    return {"invoice": f"INV-{payload.order_id}"}
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

from lambdajobs.testing import TestStack


@pytest.fixture
def stack():
    with TestStack("acme_jobs") as stack:
        yield stack


def test_an_invoice_runs_and_notifies(stack):
    job_id = stack.enqueue("send_invoice", {"order_id": "42", "amount_cents": 1999})
    stack.runner("send_invoice").drain()
    assert stack.status(job_id).result == {"invoice": "INV-42"}
    stack.runner("notify_customer").drain()
    assert stack.status("notify-42").state == "succeeded"


def test_a_bad_invoice_is_dead_at_once(stack):
    job_id = stack.enqueue("send_invoice", {"order_id": "7", "amount_cents": 0})
    runner = stack.runner("send_invoice")
    runner.drain()
    assert stack.status(job_id).state == "dead" and runner.depth(dlq=True) == 1
"""

CDK_APP = """
import json, sys
import lambdajobs.cdk
from aws_cdk import App
from lambdajobs.cdk import LambdaJobsStack

app = App(outdir=sys.argv[1])
stack = LambdaJobsStack(app, "acme", jobs="acme_jobs")
assembly = app.synth()
template = json.load(open(assembly.get_stack_by_name("acme").template_full_path))
functions = {
    fn["Properties"]["Environment"]["Variables"]["LAMBDAJOBS_JOB"]: fn["Properties"]
    for fn in template["Resources"].values()
    if fn["Type"] == "AWS::Lambda::Function"
    and "LAMBDAJOBS_JOB" in fn["Properties"]["Environment"]["Variables"]
}
continuers = [  # the workflow continuer: no job of its own, the library's entry point, no job modules
    fn["Properties"] for fn in template["Resources"].values()
    if fn["Type"] == "AWS::Lambda::Function"
    and fn["Properties"]["Handler"] == "lambdajobs.runtime.continuer_entry.lambda_handler"
]
assert len(continuers) == 1 and "LAMBDAJOBS_JOBS" not in continuers[0]["Environment"]["Variables"]
found = {job: {"handler": p["Handler"], "asset": p["Code"]["S3Key"]} for job, p in functions.items()}
print(json.dumps(found))
"""


def run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float = 180) -> str:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


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
    run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)],
        base,
        clean,
    )
    # AND a project of its own, whose jobs package is acme_jobs (not handlers)
    project = base / "acme"
    (project / "acme_jobs").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "pyproject.toml").write_text(
        '[project]\nname = "acme"\nversion = "1"\n\n[tool.lambdajobs]\njobs = "acme_jobs"\n'
    )
    (project / "acme_jobs" / "__init__.py").write_text('"""Acme\'s jobs."""\n')
    (project / "acme_jobs" / "billing.py").write_text(JOBS)
    (project / "acme_jobs" / "notices.py").write_text(NOTIFY)
    (project / "tests" / "test_acme.py").write_text(USER_TESTS)
    (project / "app.py").write_text(CDK_APP)
    env = {**clean, "PATH": f"{venv / 'bin'}:{clean.get('PATH', '')}", "PYTHONDONTWRITEBYTECODE": "1"}
    return {"wheel": wheel, "venv": venv, "python": python, "project": project, "env": env, "base": base}  # type: ignore[dict-item]


def test_the_wheel_installs_one_top_level_package(user):
    names = zipfile.ZipFile(user["wheel"]).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert tops == {"lambdajobs"}
    assert not [n for n in names if n.startswith(("handlers/", "infra/", "shared/", "tests/"))]
    assert "lambdajobs/runtime/worker.py" in names and "lambdajobs/cdk/stack.py" in names


def test_the_installed_package_is_the_wheel_and_not_this_checkout(user):
    code = (
        "import json, lambdajobs, importlib.util\n"
        "print(json.dumps([lambdajobs.__file__, importlib.util.find_spec('handlers') is None]))"
    )
    where, no_handlers = json.loads(run([str(user["python"]), "-c", code], user["project"], user["env"]))
    assert where.startswith(str(user["venv"])) and no_handlers


def test_the_projects_jobs_run_through_lambdajobs_testing(user):
    out = run(
        [str(user["python"]), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        user["project"],
        user["env"],
    )
    assert "2 passed" in out


def test_the_projects_cdk_app_ships_its_jobs_and_not_this_repos(user, tmp_path):
    found = json.loads(
        run([str(user["python"]), "app.py", str(tmp_path)], user["project"], user["env"]).splitlines()[-1]
    )
    assert set(found) == {"send_invoice", "notify_customer"}
    for job, fn in found.items():
        assert fn["handler"] == "lambdajobs.runtime.entry.lambda_handler"
        asset = tmp_path / f"asset.{fn['asset'].removesuffix('.zip')}"
        files = {
            str(p.relative_to(asset)) for p in asset.rglob("*.py") if not p.parts[-2:][0].startswith("_")
        }
        assert not any(f.startswith("handlers/") for f in files), job
        assert "lambdajobs/runtime/worker.py" in files and not any(
            f.startswith("lambdajobs/cdk") for f in files
        )
        ours = {f for f in files if f.startswith("acme_jobs/")}
        # send_invoice enqueues notify_customer: it ships both modules; notify_customer only its own
        expected = {"acme_jobs/__init__.py", "acme_jobs/notices.py"}
        if job == "send_invoice":
            expected |= {"acme_jobs/billing.py"}
        assert ours == expected, (job, ours)


def test_a_job_completes_on_lambdajobs_dev_with_its_jobs_package(user):
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
        deadline = time.monotonic() + 30
        while "succeeded" not in (notice := run([cli, "status", "notify-9"], user["project"], shell)):
            assert time.monotonic() < deadline, notice
            time.sleep(0.5)
        code = dev.stop()
    assert code == 0, dev.output
