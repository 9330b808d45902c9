"""`lambdajobs new NAME` as a new user runs it (issue 23): the project it makes passes its own tests and
synthesizes through the pinned CDK CLI with no edit; its dependency on lambdajobs names what the
running lambdajobs was installed from; a bad name is one line and writes nothing.

The project is made, tested and synthesized once for the module (a synth takes seconds), by the
console script in subprocesses, with the CDK CLI that `make install` fetched (.venv/cdk-cli).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lambdajobs import deploy
from lambdajobs.cli import app
from lambdajobs.runtime.errors import InvalidOptionError
from lambdajobs.scaffold import (
    EXTRAS,
    installed_requirement,
    recommended_feature_flags,
    requirement,
    requirement_from_direct_url,
)

VENV_BIN = Path(sys.executable).parent
NAME = "acme_shop"


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{cmd}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("new")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "PYTHONPATH"}
    env.update(
        PATH=f"{VENV_BIN}:/usr/bin:/bin",  # the virtualenv's tools only: its python, node, lambdajobs
        PYTHONDONTWRITEBYTECODE="1",
        CDK_DISABLE_CLI_TELEMETRY="true",
        **{deploy.ENV_CDK_CLI_DIR: str(VENV_BIN.parent / "cdk-cli")},
    )
    # GIVEN a new project, made by the console script
    new = run(["lambdajobs", "new", NAME], base, env)
    project = base / NAME
    files = sorted(str(p.relative_to(project)) for p in project.rglob("*") if p.is_file())
    # (its tests and its synth, with no edit, run in a new virtualenv from the built wheel, as a new
    # user's would: tests/package/test_outside_project.py)
    return {"project": project, "files": files, "new": new}


def test_its_pyproject_names_the_jobs_package_and_the_running_lambdajobs(made):
    project = made["project"]
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == NAME
    assert pyproject["project"]["dependencies"] == [installed_requirement(), "pytest"]
    assert pyproject["tool"]["lambdajobs"] == {"jobs": f"{NAME}_jobs", "dependencies": []}
    assert pyproject["tool"]["setuptools"]["packages"] == [f"{NAME}_jobs"]
    cdk_json = json.loads((project / "cdk.json").read_text())
    assert cdk_json["app"] == "python app.py" and cdk_json["context"] == recommended_feature_flags()
    assert cdk_json["context"]  # aws-cdk-lib's flags were found
    assert made["files"] == [
        ".gitignore",
        "README.md",
        f"{NAME}_jobs/__init__.py",
        f"{NAME}_jobs/greetings.py",
        "app.py",
        "cdk.json",
        "pyproject.toml",
        "tests/test_greetings.py",
    ]
    assert "cdk.out/" in (project / ".gitignore").read_text().splitlines()
    # AND `new` said what it made and what to run next
    said = made["new"].stdout
    assert f"its lambdajobs: {installed_requirement()}" in said and f"cd {NAME}" in said
    assert "lambdajobs synth" in said and "stack acme-shop" in said


def test_this_checkout_installed_editable_gives_a_file_url_to_it():
    from importlib import metadata

    found = json.loads(metadata.distribution("lambdajobs").read_text("direct_url.json") or "{}")
    assert installed_requirement() == f"lambdajobs[{EXTRAS}] @ {found['url']}"


@pytest.mark.parametrize(
    ("direct_url", "expected"),
    [
        ({"url": "file:///src/lambdajobs", "dir_info": {"editable": True}}, "@ file:///src/lambdajobs"),
        (
            {"url": "file:///wheels/lambdajobs-0.1.0-py3-none-any.whl", "archive_info": {}},
            "@ file:///wheels/lambdajobs-0.1.0-py3-none-any.whl",
        ),
        (
            {"url": "https://github.com/acme/lambdajobs", "vcs_info": {"vcs": "git", "commit_id": "abc123"}},
            "@ git+https://github.com/acme/lambdajobs@abc123",
        ),
        (None, ""),  # installed from an index
    ],
)
def test_the_requirement_follows_pep_610(direct_url, expected):
    assert requirement_from_direct_url(direct_url) == f"lambdajobs[{EXTRAS}] {expected}".strip()


def test_a_given_requirement_gets_the_extras_and_a_path_becomes_a_file_url(tmp_path):
    wheel = tmp_path / "lambdajobs-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    assert requirement("lambdajobs==0.1.0") == f"lambdajobs[{EXTRAS}]==0.1.0"
    assert requirement("lambdajobs[cdk] @ https://x/y.whl") == "lambdajobs[cdk] @ https://x/y.whl"
    assert requirement("https://x/y.whl") == f"lambdajobs[{EXTRAS}] @ https://x/y.whl"
    assert requirement(wheel.name, cwd=tmp_path) == f"lambdajobs[{EXTRAS}] @ {wheel.as_uri()}"
    with pytest.raises(InvalidOptionError, match="not a requirement on lambdajobs"):
        requirement("lambdajobsx==1", cwd=tmp_path)


def test_new_takes_the_requirement_as_an_option(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["new", "shop", "--lambdajobs-requirement", "lambdajobs==0.1.0"])
    assert result.exit_code == 0, result.output
    pyproject = tomllib.loads((tmp_path / "shop" / "pyproject.toml").read_text())
    assert pyproject["project"]["dependencies"][0] == f"lambdajobs[{EXTRAS}]==0.1.0"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "my-app",
            "cannot name a project: use a Python identifier of letters, digits and single underscores, "
            "starting with a letter, e.g. my_app.",
        ),
        ("1shop", "cannot name a project"),
        ("_shop", "cannot name a project"),
        ("shop_", "cannot name a project"),
        ("my__shop", "cannot name a project"),
        ("café", "cannot name a project"),
        ("class", "'class' is a Python keyword; pick another name."),
        ("a" * 41, "use at most 40"),
        ("taken", "exists; pick another name, or move it away first."),
        ("lambdajobs", "'lambdajobs' is the name of the distribution lambdajobs, which is installed here"),
        ("pytest", "is the name of the distribution pytest"),
        ("json", "'json' is the name of a standard library module (json)"),
        ("--lambdajobs-requirement=nowhere", "not a requirement on lambdajobs"),
    ],
)
def test_a_bad_name_or_requirement_is_one_line_and_writes_nothing(tmp_path, monkeypatch, name, expected):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "keep.txt").write_text("mine")
    args = ["new", "shop", name] if name.startswith("--") else ["new", name]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1 and "Traceback" not in result.output
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and expected in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
    assert [p.name for p in (tmp_path / "taken").iterdir()] == ["keep.txt"]
