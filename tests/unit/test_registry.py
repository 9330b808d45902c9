"""The job registry (`lambdajobs.runtime.spec.Registry`): what it holds, what loading a jobs package
does, that looking a job up never imports, and test isolation through `lambdajobs.testing`.

Each test builds its own `Registry`, or declares inside `isolated_registry()`, and its jobs packages
are written to a temporary folder and removed from `sys.modules` after it.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import BaseModel

from lambdajobs.runtime.errors import DeclarationError, UnknownJobError
from lambdajobs.runtime.ratelimit import RateLimit
from lambdajobs.runtime.spec import (
    Job,
    JobSpec,
    Registry,
    active_registry,
    default_registry,
    ensure_loaded,
    get_spec,
    job,
)
from lambdajobs.testing import isolated_registry


class Ping(BaseModel):
    to: str = ""


def ping(payload: Ping) -> None:
    pass


def pong(payload: Ping) -> None:
    pass


def spec_of(name: str, func=ping, **options) -> JobSpec:
    return JobSpec(name=name, func=func, payload_model=Ping, **options)


@pytest.fixture
def jobs_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A jobs package on sys.path, not imported yet: `probe_registry_jobs` with one job in a module
    of a subpackage (`mail.send.probe_send`); gone from sys.modules after the test."""
    name = "probe_registry_jobs"
    root = tmp_path / name
    (root / "mail").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "mail" / "__init__.py").write_text("")
    (root / "mail" / "send.py").write_text(
        textwrap.dedent(
            """
            from pydantic import BaseModel

            from lambdajobs import job


            class Letter(BaseModel):
                to: str


            @job
            def probe_send(payload: Letter) -> None:
                pass
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    for module in [m for m in sys.modules if m == name or m.startswith(f"{name}.")]:
        del sys.modules[module]


def imported(package: str) -> bool:
    return any(m == package or m.startswith(f"{package}.") for m in sys.modules)


# --- add and get ------------------------------------------------------------------------------------


def test_an_added_job_is_found_by_name_job_and_spec():
    # GIVEN a registry with one job
    registry, spec = Registry(), spec_of("ping")
    registry.add(spec)
    # WHEN it is looked up by name, by Job and by JobSpec
    # THEN each gives the spec, and the registry lists it
    assert registry.get("ping") is spec
    assert registry.get(Job(spec)) is spec
    assert registry.get(spec) is spec
    assert "ping" in registry and registry.names() == ["ping"] and registry.specs() == [spec]


def test_specs_are_listed_sorted_by_name_and_by_module():
    # GIVEN jobs added out of order
    registry = Registry()
    for name in ["zeta", "alpha", "mid"]:
        registry.add(spec_of(name))
    # WHEN they are listed
    # THEN by name; and the jobs of this module are those whose function lives here
    assert [s.name for s in registry.specs()] == ["alpha", "mid", "zeta"]
    assert [s.name for s in registry.jobs_in(__name__)] == ["alpha", "mid", "zeta"]
    assert registry.jobs_in("tests.elsewhere") == []


def test_another_function_under_a_declared_name_is_refused_naming_both():
    # GIVEN a registry where ping is declared by `ping`
    registry = Registry()
    registry.add(spec_of("ping", func=ping))
    # WHEN another function is added under the same name
    with pytest.raises(DeclarationError, match="job 'ping' is declared twice") as caught:
        registry.add(spec_of("ping", func=pong))
    # THEN both are named, and the first declaration stays
    assert f"{__name__}.ping and {__name__}.pong" in str(caught.value)
    assert registry.get("ping").func is ping


def test_the_same_function_added_again_replaces_itself():
    # GIVEN a declared job (as when its module is imported twice)
    registry = Registry()
    registry.add(spec_of("ping", timeout_seconds=30))
    # WHEN the same function is added again
    registry.add(spec_of("ping", timeout_seconds=60))
    # THEN it is no error, and the registry holds the new spec
    assert registry.get("ping").timeout_seconds == 60 and registry.names() == ["ping"]


def test_a_shared_rate_limiter_declared_with_other_limits_is_refused():
    # GIVEN a job using the shared limiter "sendgrid" at 100/minute
    registry = Registry()
    registry.add(spec_of("ping", rate_limit=RateLimit("sendgrid", 100, per="minute")))
    # WHEN another job declares the same limiter at 50/minute
    with pytest.raises(DeclarationError) as caught:
        registry.add(spec_of("pong", func=pong, rate_limit=RateLimit("sendgrid", 50, per="minute")))
    # THEN it is refused, naming both jobs and the limits already declared
    assert str(caught.value) == (
        "job 'pong': rate limiter 'sendgrid' is declared by job 'ping' as 100/minute; "
        "a shared limiter needs the same RateLimit."
    )
    assert registry.names() == ["ping"]
    # while the same limits are shared
    registry.add(spec_of("pong", func=pong, rate_limit=RateLimit("sendgrid", 100, per="minute")))
    assert registry.names() == ["ping", "pong"]


def test_an_unknown_name_names_the_job_the_declared_jobs_the_packages_loaded_and_the_fix(jobs_package):
    # GIVEN a registry that loaded a jobs package
    registry = Registry()
    registry.load(jobs_package)
    # WHEN an undeclared job is looked up
    with pytest.raises(UnknownJobError) as caught:
        registry.get("missing")
    # THEN the one-line message says what is declared, what was loaded, and what to do
    message = str(caught.value)
    assert "\n" not in message
    assert "unknown job 'missing'" in message
    assert f"jobs module '{jobs_package}'" in message
    assert "declared jobs: probe_send" in message
    assert "import the module that declares it" in message and "ensure_loaded(" in message
    # and with nothing loaded it says so
    with pytest.raises(UnknownJobError, match=r"no jobs module is loaded here \(declared jobs: none\)"):
        Registry().get("missing")


# --- looking up never imports ----------------------------------------------------------------------


def test_get_never_imports_a_jobs_package(jobs_package, monkeypatch):
    # GIVEN a jobs package on sys.path, configured, but loaded by no registry
    monkeypatch.setenv("LAMBDAJOBS_JOBS", jobs_package)
    registry = Registry()
    # WHEN one of its jobs is looked up, in a registry and through get_spec
    with pytest.raises(UnknownJobError):
        registry.get("probe_send")
    with isolated_registry(), pytest.raises(UnknownJobError):
        get_spec("probe_send")
    # THEN nothing of the package was imported
    assert not imported(jobs_package)


# --- loading ---------------------------------------------------------------------------------------


def test_load_imports_every_module_of_the_package_and_returns_its_jobs(jobs_package):
    # GIVEN a jobs package whose __init__.py imports none of its modules
    registry = Registry()
    # WHEN it is loaded
    specs = registry.load(jobs_package)
    # THEN its module in a subpackage was imported, and its job declared here
    assert f"{jobs_package}.mail.send" in sys.modules
    assert [s.name for s in specs] == ["probe_send"]
    assert registry.loaded == {jobs_package}


def test_load_declares_into_the_loading_registry_not_the_active_one(jobs_package):
    # GIVEN another registry in effect
    with isolated_registry() as active:
        registry = Registry()
        # WHEN a registry not in effect loads a package imported for the first time
        registry.load(jobs_package)
        # THEN the package's jobs are declared there only
        assert registry.names() == ["probe_send"]
        assert active.names() == []
        assert active_registry() is active


def test_load_registers_the_jobs_of_modules_imported_before(jobs_package):
    # GIVEN the package's module imported earlier (its @job declared into another registry)
    with isolated_registry():
        module = importlib.import_module(f"{jobs_package}.mail.send")
    registry = Registry()
    # WHEN a new registry loads the package (its modules are not executed again)
    specs = registry.load(jobs_package)
    # THEN the registry has their jobs, the very Job objects the modules hold
    assert [s.name for s in specs] == ["probe_send"]
    assert registry.get("probe_send") is module.probe_send.spec


def test_ensure_loaded_loads_a_package_once_per_registry(jobs_package):
    # GIVEN a registry that ensured the package is loaded
    registry = Registry()
    registry.ensure_loaded(jobs_package)
    assert imported(jobs_package)
    # (and the package forgotten by Python, so another load would import it again)
    for module in [m for m in sys.modules if m.startswith(jobs_package)]:
        del sys.modules[module]
    # WHEN it ensures the package again
    registry.ensure_loaded(jobs_package)
    # THEN nothing is imported: it was loaded once, and its job is still declared
    assert not imported(jobs_package)
    assert registry.names() == ["probe_send"]
    # while another registry loads it for itself
    other = Registry()
    other.ensure_loaded(jobs_package)
    assert imported(jobs_package) and other.names() == ["probe_send"]


def test_ensure_loaded_without_a_package_loads_nothing():
    # GIVEN no jobs package configured (None, or an empty setting)
    registry = Registry()
    # WHEN it is ensured loaded THEN nothing is loaded (no import of "" or None is attempted)
    registry.ensure_loaded(None)
    registry.ensure_loaded("")
    assert registry.loaded == frozenset()
    ensure_loaded(None, registry=registry)


# --- the active registry and isolated_registry -----------------------------------------------------


def test_job_declares_into_the_active_registry():
    # GIVEN an isolated registry in effect
    with isolated_registry() as registry:
        # WHEN a job is declared
        declared = job(name="probe_active")(ping)
        # THEN it is in the registry in effect, and not in the process-wide one
        assert registry.get("probe_active") is declared.spec
    assert "probe_active" not in default_registry
    assert "probe_active" not in active_registry()


def test_isolated_registry_puts_a_fresh_registry_in_effect_and_the_previous_one_back():
    with isolated_registry() as before:
        # GIVEN a registry in effect with a job declared
        job(name="probe_before")(ping)
        # WHEN a block runs in an isolated registry
        with isolated_registry() as registry:
            # THEN a new, empty registry is in effect inside it
            assert active_registry() is registry and registry is not before
            assert registry.names() == []
        # AND the previous one is back after it, as it was
        assert active_registry() is before
        assert before.names() == ["probe_before"]


def test_isolated_registry_puts_the_previous_registry_back_after_an_exception():
    # GIVEN the registry in effect
    before = active_registry()
    # WHEN a block in an isolated registry raises
    with pytest.raises(RuntimeError, match="boom"), isolated_registry():
        job(name="probe_raised")(ping)
        raise RuntimeError("boom")
    # THEN the previous registry is in effect again, without the block's job
    assert active_registry() is before
    assert "probe_raised" not in before


def test_isolated_registry_keep_starts_from_a_copy_of_the_declared_jobs():
    # GIVEN a job declared in the registry in effect
    with isolated_registry() as outer:
        job(name="probe_kept")(ping)
        # WHEN a block keeps the declared jobs and declares one more
        with isolated_registry(keep=True) as inner:
            job(name="probe_inner")(pong)
            # THEN the block sees both
            assert inner.names() == ["probe_inner", "probe_kept"]
        # AND the registry outside did not get the block's job
        assert active_registry() is outer
        assert outer.names() == ["probe_kept"]
