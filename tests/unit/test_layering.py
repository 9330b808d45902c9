"""Lambda runtime code stays light; infra never calls AWS at synth time."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = {"aws_cdk", "constructs", "jsii", "moto", "rich", "typer"}


def imported_modules(package: str) -> set[str]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found


def test_runtime_code_never_imports_build_test_or_cli_libraries():
    for package in ("shared", "handlers"):
        assert imported_modules(package) & HEAVY == set(), package


def test_infra_never_calls_aws_at_synth_time():
    assert imported_modules("infra") & {"boto3", "botocore"} == set()


def test_importing_the_lambda_entry_point_loads_nothing_heavy_and_creates_no_client():
    # GIVEN a fresh interpreter, as in a Lambda cold start
    code = (
        "import sys, json, handlers.entry\n"
        "from lambdajobs.runtime import aws\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'clients': sorted(aws._clients)}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout.strip().splitlines()[-1])
    # THEN no build/test/CLI library is loaded and no boto3 client exists yet
    assert {m.split(".")[0] for m in loaded["modules"]} & HEAVY == set()
    assert loaded["clients"] == []


def test_a_producer_finds_jobs_without_importing_their_module():
    # GIVEN a fresh interpreter that imports only the producer API
    code = "from lambdajobs.runtime.spec import get_spec\nprint(get_spec('send_email').name)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    # THEN the job is found: the handlers package is imported on the first unknown name
    assert out.stdout.strip() == "send_email"
