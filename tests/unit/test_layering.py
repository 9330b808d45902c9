"""The package's boundaries: what ships to Lambda stays light; nothing is imported behind your back;
the library never names this project's example jobs."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "shared" / "lambdajobs"
HEAVY = {"aws_cdk", "constructs", "jsii", "moto", "rich", "typer", "cdk_nag"}


def module_name(path: Path) -> str:
    """The dotted name of a file of the package or of this project (shared/ is the package's root)."""
    relative = path.relative_to(ROOT / "shared" if path.is_relative_to(ROOT / "shared") else ROOT)
    parts = list(relative.with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(paths: list[Path]) -> set[str]:
    """Every module name these files import, relative imports resolved to absolute names."""
    found = set()
    for path in paths:
        name = module_name(path)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1])
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                found.add(target)
                found |= {f"{target}.{alias.name}" for alias in node.names if alias.name != "*"}
    return found


def top(names: set[str]) -> set[str]:
    return {n.split(".")[0] for n in names}


def shipped_files() -> list[Path]:
    return [PACKAGE / "__init__.py", PACKAGE / "errors.py", *sorted((PACKAGE / "runtime").rglob("*.py"))]


def test_what_ships_to_lambda_never_imports_build_test_or_cli_libraries():
    # GIVEN the files that ship in every function (the package __init__ and the runtime) and the jobs
    # THEN none imports aws_cdk, moto, typer, rich ...
    assert top(imports_of(shipped_files())) & HEAVY == set()
    assert top(imports_of(sorted((ROOT / "handlers").rglob("*.py")))) & HEAVY == set()


def test_the_runtime_imports_nothing_of_the_package_that_does_not_ship():
    ours = {n for n in imports_of(shipped_files()) if n.startswith("lambdajobs")}
    assert ours and all(n == "lambdajobs.runtime" or n.startswith("lambdajobs.runtime.") for n in ours), ours


def test_the_package_init_imports_only_the_runtime():
    # (and, in a worker function only, Powertools' batch utility first: see the next test; gc pauses the
    # collector while a worker function's runtime loads)
    allowed = {"typing", "os", "gc", "importlib", "warnings", "aws_lambda_powertools"}
    names = {n for n in imports_of([PACKAGE / "__init__.py"]) if n.split(".")[0] not in allowed}
    assert names and all(n.startswith("lambdajobs.runtime") for n in names), names


def test_a_worker_cold_start_skips_powertools_parser_models_and_a_producer_skips_powertools():
    import subprocess
    import sys

    probe = (
        "import sys, lambdajobs\n"
        "print(sorted({m.split('.')[2] if m.count('.') > 1 else m for m in sys.modules "
        "if m.startswith('aws_lambda_powertools.utilities')}))"
    )

    def loaded(env: dict[str, str]) -> str:
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    import os

    base = {k: v for k, v in os.environ.items() if k != "LAMBDAJOBS_JOB"}
    # a producer (or a job module imported for a test) loads no Powertools utility at all
    assert loaded(base).strip() == "[]"
    # a worker function (LAMBDAJOBS_JOB set) loads the batch utility before pydantic, so Powertools
    # does not build its parser models of every event source (about 18 ms of a cold start)
    worker = loaded({**base, "LAMBDAJOBS_JOB": "send_email"})
    assert "batch" in worker and "parser" not in worker, worker


def test_cdk_constructs_never_call_aws_at_synth_time():
    assert top(imports_of(sorted((PACKAGE / "cdk").rglob("*.py")))) & {"boto3", "botocore"} == set()


def test_the_package_never_names_this_projects_jobs_package():
    # The user's jobs package is named in configuration (pyproject.toml, cdk.json, --jobs), never in code.
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                # a name, a dotted path or a quoted mention in a docstring; not "logger.handlers"
                text = node.value.replace(".handlers", "")
                if text == "handlers" or "handlers." in text or '"handlers"' in text:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if any(n.split(".")[0] == "handlers" for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def run(code: str, **env: str) -> dict:
    full = {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_start_imports_only_its_jobs_modules_nothing_heavy_and_makes_only_its_records_client():
    # GIVEN a fresh interpreter with the environment CDK gives the send_email function
    code = (
        "import sys, json\n"
        "import gc\n"
        "import lambdajobs.runtime.entry\n"
        "from lambdajobs.runtime import aws\n"
        "print(json.dumps({'modules': sorted(sys.modules), 'clients': sorted(k[0] for k in aws._clients),\n"
        "    'collecting': gc.isenabled(), 'frozen': gc.get_freeze_count(), 'young': len(gc.get_objects())}))"
    )
    loaded = run(
        code,
        LAMBDAJOBS_JOB="send_email",
        LAMBDAJOBS_JOBS="handlers",
        LAMBDAJOBS_MODULES="handlers.emails",
        AWS_DEFAULT_REGION="us-east-1",
    )
    modules = set(loaded["modules"])
    # THEN no build/test/CLI library is loaded, and of the boto3 clients only the one its first record
    # needs (its job records' DynamoDB client, made in the init phase while the collector is paused),
    assert top(modules) & HEAVY == set()
    assert loaded["clients"] == ["dynamodb"]
    # and of the jobs package only the function's own module (not the other jobs)
    assert {m for m in modules if m.startswith("handlers")} == {"handlers", "handlers.emails"}
    # and none of the package's tools that never ship
    assert not {m for m in modules if m.startswith(("lambdajobs.cdk", "lambdajobs.local", "lambdajobs.cli"))}
    # and what the cold start built is frozen (never walked by a collection), with the collector back on
    assert loaded["collecting"] is True
    assert loaded["frozen"] > 50_000 and loaded["young"] < 2_000, loaded


def test_a_cron_jobs_cold_start_skips_the_cron_check_that_synthesis_made():
    # GIVEN daily_report's function (a @cron job): its expression was checked when synth imported it
    code = (
        "import sys, json\n"
        "import lambdajobs.runtime.entry\n"
        "from lambdajobs.runtime.spec import get_spec\n"
        "print(json.dumps({'checked': 'aws_cron_expression_validator' in sys.modules,\n"
        "    'schedule': get_spec('daily_report').schedule.expression}))"
    )
    env = {"LAMBDAJOBS_JOBS": "handlers", "AWS_DEFAULT_REGION": "us-east-1"}
    # WHEN the function cold-starts
    deployed = run(code, LAMBDAJOBS_JOB="daily_report", LAMBDAJOBS_MODULES="handlers.reports", **env)
    # THEN the job is declared with its schedule, without loading the cron checker (~40 ms)
    assert deployed == {"checked": False, "schedule": "cron(0 9 * * ? *)"}, deployed
    # while where users write their jobs (tests, synth, the local stack) the check runs at import
    local = run(
        "import sys, json\nimport handlers.reports\n"
        "print(json.dumps({'checked': 'aws_cron_expression_validator' in sys.modules}))",
        **env,
    )
    assert local == {"checked": True}


def test_an_unknown_job_name_imports_nothing_and_says_how_to_load_its_package():
    # GIVEN a fresh interpreter, a jobs package configured but not loaded
    code = (
        "import sys, json\n"
        "from lambdajobs.errors import UnknownJobError\n"
        "from lambdajobs.runtime.spec import get_spec\n"
        "try:\n    get_spec('send_email')\nexcept UnknownJobError as exc:\n    message = str(exc)\n"
        "print(json.dumps({'message': message, 'imported': 'handlers' in sys.modules}))"
    )
    # WHEN a job is looked up by name
    found = run(code, LAMBDAJOBS_JOBS="handlers")
    # THEN nothing was imported implicitly, and the error says no jobs package is loaded and how to
    assert found["imported"] is False
    assert "unknown job 'send_email'" in found["message"]
    assert "no jobs module is loaded" in found["message"] and "ensure_loaded" in found["message"]


def test_a_loaded_jobs_package_is_searched_and_named_in_the_error():
    # GIVEN the jobs package loaded explicitly, as an entry point does
    code = (
        "import json\n"
        "from lambdajobs.errors import UnknownJobError\n"
        "from lambdajobs.runtime.spec import ensure_loaded, get_spec\n"
        "ensure_loaded('handlers')\n"
        "name = get_spec('send_email').name\n"
        "try:\n    get_spec('no_such_job')\n"
        "except UnknownJobError as exc:\n    message = str(exc)\n"
        "print(json.dumps({'name': name, 'message': message}))"
    )
    # WHEN a declared and an undeclared job are looked up
    found = run(code)
    # THEN the first is found, and the error for the second names the package it was not in
    assert found["name"] == "send_email"
    assert "unknown job 'no_such_job'" in found["message"] and "jobs module 'handlers'" in found["message"]


def test_users_import_the_api_from_lambdajobs_and_declaring_loads_no_powertools():
    # GIVEN a fresh interpreter importing what a job module imports
    code = (
        "import sys, json\n"
        "from lambdajobs import job, cron, JobContext, PermanentError, JobState, StackConfig\n"
        "from lambdajobs.errors import LambdaJobsError, EnqueueError\n"
        "declaring = 'aws_lambda_powertools' in sys.modules\n"
        "from lambdajobs import enqueue, enqueue_many, get_status, wait_for, JobStatus\n"
        "import lambdajobs\n"
        "print(json.dumps({'declaring': declaring, 'all': lambdajobs.__all__}))"
    )
    found = run(code)
    # THEN declaring jobs (and naming errors) costs no Powertools import (the producer and status
    # readers load on first use)
    assert found["declaring"] is False
    # AND what it imported from lambdajobs is listed in __all__ (tests/unit/test_public_api.py: all of it)
    for name in (
        "job",
        "cron",
        "enqueue",
        "enqueue_many",
        "get_status",
        "wait_for",
        "JobContext",
        "PermanentError",
        "JobState",
        "StackConfig",
        "JobStatus",
    ):
        assert name in found["all"], name


def test_every_error_lives_in_the_errors_module_and_is_exported():
    import inspect

    import lambdajobs.errors
    from lambdajobs.runtime import errors

    # GIVEN every exception class defined anywhere in the package
    defined = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                defined.add((path.name, node.name))
    # THEN they are all in the errors module, which lists and exports each one
    assert {module for module, _ in defined} == {"errors.py"}
    classes = {n for n, v in vars(errors).items() if inspect.isclass(v) and issubclass(v, Exception)}
    assert {name for _, name in defined} == classes == set(errors.__all__)
    assert classes == set(lambdajobs.errors.__all__)
    assert all(issubclass(getattr(errors, n), errors.LambdaJobsError) for n in classes)
