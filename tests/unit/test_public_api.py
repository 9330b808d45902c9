"""The public API: what `lambdajobs` exports is exactly the chosen list, every error is in
`lambdajobs.errors`, and this repository's example jobs (handlers/) use nothing else, as a user's jobs
would. The errors module imports nothing of lambdajobs, so no import cycle runs through it."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_ERRORS = ROOT / "shared" / "lambdajobs" / "runtime" / "errors.py"

#: What a job module, a producer or an operator's script calls (README, docs/, handlers/, the
#: `lambdajobs new` templates). Anything else of the runtime is internal.
PUBLIC_API = {
    # declaring jobs
    "job",
    "cron",
    "JobContext",
    "PermanentError",
    "Backoff",
    "Alarms",
    "RateLimit",
    "bucket_prefix",
    "TENANT_FIELD",
    # sending them
    "enqueue",
    "enqueue_many",
    # their status
    "get_status",
    "get_statuses",
    "wait_for",
    "count_finished",
    "JobStatus",
    "JobState",
    # workflows
    "sig",
    "chain",
    "group",
    "chord",
    "get_workflow",
    "WorkflowStatus",
    # durable jobs
    "signal",
    "SignalResult",
    # flow control
    "cancel",
    "cancel_workflow",
    "CancelResult",
    "JobCancelled",
    "ConcurrencyKey",
    "Debounce",
    # which stack
    "StackConfig",
    "using",
}
#: Where this repository's example jobs may import from: what a user's jobs may.
PUBLIC_MODULES = {"lambdajobs", "lambdajobs.errors"}


def lambdajobs_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import of a lambdajobs module in a file, those in functions included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return [(line, name) for line, name in found if name.split(".")[0] == "lambdajobs"]


def test_lambdajobs_exports_exactly_the_public_api_and_each_name_resolves():
    import lambdajobs

    # GIVEN the package's __all__ THEN it is the chosen list, no more (the runtime's internals, the
    # errors but PermanentError) and no less
    assert set(lambdajobs.__all__) == PUBLIC_API
    assert len(lambdajobs.__all__) == len(PUBLIC_API)
    # AND every name resolves (the lazily loaded ones on first use)
    for name in lambdajobs.__all__:
        assert getattr(lambdajobs, name) is not None, name


def test_a_name_lambdajobs_exported_before_still_imports_and_says_where_it_lives_now():
    import lambdajobs

    # GIVEN names lambdajobs exported before its API was cut down THEN they are not in its API
    moved = {"get_spec": "lambdajobs.runtime.spec", "JobSpec": "lambdajobs.runtime.spec"}
    moved |= {"current": "lambdajobs.runtime.config", "UnknownJobError": "lambdajobs.errors"}
    for name, where in moved.items():
        assert name not in lambdajobs.__all__, name
        # AND code written against the earlier API still gets them, told where they live now
        with pytest.warns(DeprecationWarning, match=rf"lambdajobs\.{name} has moved: import it from {where}"):
            value = getattr(lambdajobs, name)
        assert value is getattr(__import__(where, fromlist=[name]), name)
    # AND the from-import form works the same way
    with pytest.warns(DeprecationWarning, match="lambdajobs.errors"):
        from lambdajobs import PayloadValidationError  # noqa: F401
    # AND a name it never had is an AttributeError
    assert not hasattr(lambdajobs, "RecordHeldErrorr") and not hasattr(lambdajobs, "isolated_registry")


def test_every_lambdajobs_error_is_importable_from_lambdajobs_errors():
    import lambdajobs.errors
    from lambdajobs.runtime import errors

    # GIVEN every subclass of LambdaJobsError that the runtime's errors module defines
    defined = {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value)
        and issubclass(value, errors.LambdaJobsError)
        and value.__module__ == errors.__name__
    }
    assert {"LambdaJobsError", "PermanentError", "UnknownJobError", "WaitTimeoutError"} <= defined
    # THEN each is listed by lambdajobs.errors and is the very class the runtime raises
    assert set(lambdajobs.errors.__all__) == defined
    for name in defined:
        assert getattr(lambdajobs.errors, name) is getattr(errors, name), name
    # AND `from lambdajobs.errors import X` works for each
    namespace: dict[str, object] = {}
    exec(f"from lambdajobs.errors import {', '.join(sorted(defined))}", namespace)
    assert set(defined) <= set(namespace)


def test_the_permanent_error_of_lambdajobs_is_the_one_in_lambdajobs_errors():
    import lambdajobs
    import lambdajobs.errors

    assert lambdajobs.PermanentError is lambdajobs.errors.PermanentError


@pytest.mark.parametrize(
    "path", sorted((ROOT / "handlers").rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT))
)
def test_the_example_jobs_import_only_the_public_api(path: Path):
    # GIVEN a module of this repository's jobs package, written as a user's would be
    # THEN what it imports of lambdajobs is `lambdajobs` or `lambdajobs.errors`, never the runtime
    internal = [
        f"line {line}: {name}" for line, name in lambdajobs_imports(path) if name not in PUBLIC_MODULES
    ]
    assert internal == [], f"{path.relative_to(ROOT)} imports internals: {internal}"


@pytest.mark.parametrize("module", sorted(PUBLIC_MODULES))
def test_what_the_example_jobs_import_from_the_public_modules_exists(module: str):
    # GIVEN every name the example jobs import from a public module THEN the module lists it
    exported = set(importlib.import_module(module).__all__)
    for path in sorted((ROOT / "handlers").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == module:
                missing = {alias.name for alias in node.names} - exported
                assert not missing, f"{path.relative_to(ROOT)}:{node.lineno} imports {missing} from {module}"


def test_the_errors_module_imports_nothing_of_lambdajobs_not_even_for_type_checking():
    # GIVEN the runtime's errors module, which most of the runtime imports: one import of lambdajobs
    # there (even under TYPE_CHECKING, which mypy and the docs' build follow) closes a cycle
    imported = lambdajobs_imports(RUNTIME_ERRORS)
    # THEN it has none
    assert imported == [], f"lambdajobs/runtime/errors.py imports {imported}"
    # AND no relative import either
    tree = ast.parse(RUNTIME_ERRORS.read_text(encoding="utf-8"))
    assert not [n.lineno for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level]
