"""Your jobs' dependencies, built for Lambda's platform (python3.14, arm64) from a package index: wheels
for that platform only, what Lambda provides never shipped, conflicts refused by name, a lock and a
cache that make the next synth offline. The index here is a folder of hand-made wheels (offline)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from lambdajobs.errors import ConfigurationError
from lambdajobs.staging import dependencies as deps
from lambdajobs.staging import platform
from tests.wheels import make_wheel, offline_index

ARM = "cp314-cp314-manylinux_2_28_aarch64"


@pytest.fixture
def index(tmp_path, monkeypatch) -> Path:
    wheelhouse = tmp_path / "wheelhouse"
    make_wheel(wheelhouse, "acme-text", "1.2", requires=("acme-speedups>=2",))
    make_wheel(wheelhouse, "acme-speedups", "2.0", tag=ARM)
    make_wheel(wheelhouse, "acme-speedups", "2.1", tag="cp314-cp314-win_amd64")  # newer, wrong platform
    make_wheel(wheelhouse, "winonly", "1.0", tag="cp314-cp314-win_amd64")
    make_wheel(wheelhouse, "hostonly", "1.0", tag="cp311-cp311-linux_x86_64")  # this machine's, not Lambda's
    make_wheel(wheelhouse, "uses-provided", "1.0", requires=("pydantic>=2", "boto3"))
    make_wheel(wheelhouse, "old-pydantic-user", "1.0", requires=("pydantic<2",))
    make_wheel(wheelhouse, "jinja2", "3.0.0")  # installed here (a newer one), not on Lambda
    offline_index(monkeypatch, wheelhouse)
    monkeypatch.setenv("LAMBDAJOBS_CACHE_DIR", str(tmp_path / "cache"))
    return wheelhouse


def reqs(tmp_path: Path, *lines: str) -> deps.Requirements:
    return deps.Requirements(tuple(lines), "pyproject.toml [tool.lambdajobs]", tmp_path)


def no_pip(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("pip ran")

    monkeypatch.setattr(deps, "_pip", refuse)


def test_a_library_and_its_dependency_are_built_for_lambdas_platform_and_locked(index, tmp_path):
    # GIVEN a project that needs acme-text (which needs acme-speedups, a compiled library)
    built = deps.build(reqs(tmp_path, "acme-text>=1"))
    # THEN both are installed in a layer's layout, the platform's wheel chosen (not the newer one
    # for Windows), and the lock records exactly those versions
    assert built.pins == {"acme-text": "1.2", "acme-speedups": "2.0"}
    assert built.modules == {"acme_text", "acme_speedups"}
    assert (built.folder / "python" / "acme_speedups" / "__init__.py").read_text() == "VERSION = '2.0'\n"
    lock = [line for line in (tmp_path / deps.LOCK_NAME).read_text().splitlines() if not line.startswith("#")]
    assert [line.split(" --hash=")[0] for line in lock] == ["acme-speedups==2.0", "acme-text==1.2"]
    # with each wheel's hash: the next install takes exactly the files resolved now
    speedups = hashlib.sha256(
        (index / "acme_speedups-2.0-cp314-cp314-manylinux_2_28_aarch64.whl").read_bytes()
    )
    assert lock[0] == f"acme-speedups==2.0 --hash=sha256:{speedups.hexdigest()}"
    assert built.unzipped_bytes == deps.folder_bytes(built.folder / "python") > 0


def test_the_next_synth_runs_no_pip_and_a_changed_requirement_resolves_again(index, tmp_path, monkeypatch):
    first = deps.build(reqs(tmp_path, "acme-text>=1"))
    # WHEN the same requirements are built again with pip unavailable (offline)
    with monkeypatch.context() as m:
        no_pip(m)
        again = deps.build(reqs(tmp_path, "acme-text>=1"))
    # THEN the lock and the cache answer: the same folder and versions
    assert again == first
    # AND a changed requirement set is resolved again (the lock is stale) and rewritten
    other = deps.build(reqs(tmp_path, "acme-speedups"))
    assert other.pins == {"acme-speedups": "2.0"} and other.folder != first.folder
    assert "acme-text" not in (tmp_path / deps.LOCK_NAME).read_text()


def test_a_lock_edited_by_hand_for_other_requirements_is_not_trusted(index, tmp_path):
    deps.build(reqs(tmp_path, "acme-text>=1"))
    lock = tmp_path / deps.LOCK_NAME
    lock.write_text(lock.read_text().replace("acme-text==1.2", "acme-text==9.9"))
    assert deps.read_lock(reqs(tmp_path, "acme-text>=1")) is not None  # same requirements: trusted pins
    assert deps.read_lock(reqs(tmp_path, "acme-text>=1.1")) is None


@pytest.mark.parametrize("name", ["winonly", "hostonly"])
def test_a_library_with_no_wheel_for_lambdas_platform_is_refused_by_name(index, tmp_path, name):
    # GIVEN a library whose only wheel is for another platform (Windows, or this very machine)
    with pytest.raises(ConfigurationError) as caught:
        deps.build(reqs(tmp_path, name))
    # THEN synth refuses it, naming it and the platform, in one line
    message = str(caught.value)
    assert f"dependency {name} has no wheel for Lambda's platform" in message and "\n" not in message
    assert "manylinux_2_28_aarch64" in message and "cp314" in message
    assert not (tmp_path / deps.LOCK_NAME).exists()


def test_what_lambda_provides_is_neither_fetched_nor_shipped(index, tmp_path):
    # GIVEN a library needing pydantic and boto3, which the index does not even hold
    built = deps.build(reqs(tmp_path, "uses-provided", "pydantic>=2"))
    # THEN only the library ships: the layer's pydantic and the runtime's boto3 are taken as installed
    assert built.pins == {"uses-provided": "1.0"}
    assert not {"pydantic", "boto3", "botocore"} & built.modules


def test_a_library_installed_here_ships_all_the_same(index, tmp_path):
    # GIVEN jinja2, installed in this environment (for the tests) but provided by nothing on Lambda
    built = deps.build(reqs(tmp_path, "jinja2"))
    # THEN it is resolved and shipped, not taken as already there
    assert built.pins == {"jinja2": "3.0.0"} and built.modules == {"jinja2"}


def test_a_requirement_that_excludes_the_layers_version_is_refused_before_pip_runs(
    index, tmp_path, monkeypatch
):
    no_pip(monkeypatch)
    version = platform.layer_distributions()["pydantic"]
    with pytest.raises(
        ConfigurationError, match=rf"'pydantic<2' conflicts with pydantic {version} in the Powertools layer"
    ):
        deps.build(reqs(tmp_path, "pydantic<2"))


def test_a_library_needing_another_version_of_a_layer_package_is_refused_with_the_cause(index, tmp_path):
    with pytest.raises(ConfigurationError) as caught:
        deps.build(reqs(tmp_path, "old-pydantic-user"))
    message = str(caught.value)
    assert "cannot be installed beside what Lambda provides" in message
    assert "old-pydantic-user 1.0 depends on pydantic<2" in message and "the layer has pydantic==" in message


def test_nothing_declared_builds_nothing(tmp_path, monkeypatch):
    no_pip(monkeypatch)
    assert deps.build(None) == deps.BuiltDependencies()


def test_a_project_declares_them_in_pyproject_and_a_requirements_file(tmp_path):
    (tmp_path / "requirements-lambda.txt").write_text("# for Lambda\nacme-speedups>=2  # compiled\n\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.lambdajobs]\njobs = "j"\ndependencies = ["acme-text"]\n'
        'requirements = "requirements-lambda.txt"\n'
    )
    found = deps.project_requirements(tmp_path)
    assert found is not None and found.lines == ("acme-text",) and found.lock_dir == tmp_path
    assert found.files == ((tmp_path / "requirements-lambda.txt").resolve(),)
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "j"\n')
    assert deps.project_requirements(tmp_path) is None


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ('dependencies = "jinja2"', "dependencies must be a list of requirement strings"),
        ('requirements = "missing.txt"', "missing.txt does not exist"),
    ],
)
def test_a_bad_declaration_is_one_line_naming_the_fix(tmp_path, table, error):
    (tmp_path / "pyproject.toml").write_text(f'[tool.lambdajobs]\njobs = "j"\n{table}\n')
    with pytest.raises(ConfigurationError, match=error):
        deps.project_requirements(tmp_path)


def test_an_invalid_requirement_is_refused_by_name(index, tmp_path):
    with pytest.raises(ConfigurationError, match=r"dependency 'jinja2 >>> 3' is not a valid requirement"):
        deps.build(reqs(tmp_path, "jinja2 >>> 3"))


def test_a_pip_too_old_to_resolve_for_another_platform_says_to_upgrade_it(index, tmp_path, monkeypatch):
    import importlib.metadata

    real = importlib.metadata.version
    # GIVEN a virtualenv's bundled pip from before 23.3 (its dry run cannot take --platform)
    monkeypatch.setattr(importlib.metadata, "version", lambda n: "23.2.1" if n == "pip" else real(n))
    with pytest.raises(
        ConfigurationError,
        match=r"needs pip 23\.3 or later .* \(it has 23\.2\.1\): python -m pip install --upgrade pip",
    ):
        deps.build(reqs(tmp_path, "acme-text"))


def test_a_function_over_lambdas_250_mb_with_its_layers_is_refused(tmp_path):
    from lambdajobs.cdk.stack import _check_function
    from lambdajobs.staging.imports import Provided

    asset = tmp_path / "asset"
    asset.mkdir()
    (asset / "job.py").write_text("import json\n")
    provided = Provided(
        frozenset(), platform.layer_modules(), platform.runtime_modules(), frozenset({"json"})
    )
    room = platform.MAX_UNZIPPED_BYTES - platform.layer_unzipped_bytes() - deps.folder_bytes(asset)
    _check_function(asset, provided, "send_invoice", room)  # exactly at the limit: fine
    with pytest.raises(
        ConfigurationError, match=r"function 'send_invoice' would be 250 MB unzipped .* over Lambda's 250 MB"
    ):
        _check_function(asset, provided, "send_invoice", room + 1)


def test_a_requirements_file_is_read_by_pip_with_its_options_hashes_and_nested_files(
    index, tmp_path, monkeypatch
):
    # GIVEN a requirements file in a subfolder naming its own index (relative), with a hashed
    # requirement on two lines and a nested constraints file, and no index in pip's configuration
    monkeypatch.delenv("PIP_FIND_LINKS")
    project = tmp_path / "project"
    (project / "reqs").mkdir(parents=True)
    (project / "reqs" / "wheels").symlink_to(index, target_is_directory=True)
    wheel = index / "acme_speedups-2.0-cp314-cp314-manylinux_2_28_aarch64.whl"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (project / "reqs" / "lambda.txt").write_text(
        "--find-links ./wheels  # our own index\n-c pins.txt\n"
        f"acme-speedups==2.0 \\\n    --hash=sha256:{digest}\n"
    )
    (project / "reqs" / "pins.txt").write_text("acme-speedups<3\n")
    (project / "pyproject.toml").write_text(
        '[tool.lambdajobs]\njobs = "j"\nrequirements = "reqs/lambda.txt"\n'
    )
    requirements = deps.project_requirements(project)
    # WHEN it is built
    built = deps.build(requirements)
    # THEN pip read it as written, and the lock keeps the index, relative to the lock's folder
    assert built.pins == {"acme-speedups": "2.0"}
    lock = (project / deps.LOCK_NAME).read_text().splitlines()
    assert "--find-links reqs/wheels" in lock
    # AND the next synth installs from the lock alone (a new cache: pip reads the lock's index)
    monkeypatch.setenv("LAMBDAJOBS_CACHE_DIR", str(tmp_path / "cache2"))
    assert deps.build(requirements).pins == {"acme-speedups": "2.0"}
    # AND a change to the nested file makes the lock stale
    (project / "reqs" / "pins.txt").write_text("acme-speedups<2.5\n")
    assert deps.read_lock(requirements) is None


@pytest.mark.parametrize("published", [True, False])
def test_a_library_needing_another_version_of_a_runtime_package_is_refused_by_name(
    index, tmp_path, published
):
    # GIVEN a library that needs a six the Lambda runtime does not have (published on the index, or not)
    make_wheel(index, "needs-new-six", "1.0", requires=("six>=99",))
    if published:
        make_wheel(index, "six", "99.0")
    with pytest.raises(ConfigurationError) as caught:
        deps.build(reqs(tmp_path, "needs-new-six"))
    # THEN synth refuses it, naming six, and never ships a second six
    message = str(caught.value)
    if published:
        assert "need another six than the" in message and "needs-new-six 1.0 needs six>=99" in message
    else:
        assert "need six>=99, but every function has six" in message


def test_only_a_lock_synth_wrote_is_removed_when_nothing_is_declared(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "j"\n')
    monkeypatch.chdir(tmp_path)
    # GIVEN a file of the lock's name that synth did not write: it stays
    (tmp_path / deps.LOCK_NAME).write_text("jinja2==3.1.6\n")
    assert deps.remove_stale_lock() is None and (tmp_path / deps.LOCK_NAME).is_file()
    # AND one synth wrote goes
    deps.write_lock(reqs(tmp_path, "jinja2"), ["jinja2==3.1.6"])
    assert deps.remove_stale_lock() == tmp_path / deps.LOCK_NAME
    assert not (tmp_path / deps.LOCK_NAME).exists()
