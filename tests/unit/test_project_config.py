"""Where a project names its jobs package: pyproject.toml or cdk.json, read by the CLI and CDK apps."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from lambdajobs.cli import app
from lambdajobs.errors import ConfigurationError
from lambdajobs.project import jobs_module, require_jobs_module

pytest_plugins = ["pytester"]


def test_pyproject_names_the_jobs_package(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "acme_jobs"\n')
    assert jobs_module(tmp_path) == "acme_jobs"


def test_cdk_json_context_names_it_when_pyproject_does_not(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "acme"\n')
    (tmp_path / "cdk.json").write_text('{"app": "python app.py", "context": {"jobs": "acme_jobs"}}')
    assert jobs_module(tmp_path) == "acme_jobs"


def test_the_nearest_project_folder_is_read(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "outer"\n')
    inner = tmp_path / "src" / "deep"
    inner.mkdir(parents=True)
    assert jobs_module(inner) == "outer"


def test_a_given_name_wins_and_none_anywhere_is_a_clear_error(tmp_path):
    assert require_jobs_module("mine", tmp_path) == "mine"
    with pytest.raises(ConfigurationError, match=r"\[tool.lambdajobs\] jobs"):
        require_jobs_module(None, tmp_path)


def test_a_jobs_value_that_is_not_a_name_is_refused(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.lambdajobs]\njobs = 3\n")
    with pytest.raises(ConfigurationError, match="jobs = 3"):
        jobs_module(tmp_path)


def test_the_cli_without_a_jobs_package_says_how_to_name_it_in_one_line(tmp_path, monkeypatch):
    # GIVEN a folder with no project configuration
    monkeypatch.chdir(tmp_path)
    # WHEN a command that needs the jobs runs
    result = CliRunner().invoke(app, ["queues"])
    # THEN one line says how to name the package (the brackets survive the terminal's markup)
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("error: no jobs package is named") and "[tool.lambdajobs]" in lines[0]


def test_the_cli_with_a_package_that_does_not_exist_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["--jobs", "no_such_package", "cron", "list"])
    assert result.exit_code == 1
    assert (
        "jobs module 'no_such_package' is not importable" in result.output
        and "Traceback" not in result.output
    )


def test_the_command_without_the_cli_extra_says_which_extra_to_install():
    import subprocess
    import sys

    # GIVEN an environment where typer is not installed (blocked here)
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'typer':\n"
        "            raise ModuleNotFoundError(\"No module named 'typer'\", name='typer')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from lambdajobs._script import main\n"
        "main()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    # THEN one line names the extra, and no traceback
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip() == "error: the lambdajobs command needs typer: pip install 'lambdajobs[cli]'"


def test_the_cli_imports_the_jobs_package_from_the_project_folder_when_run_below_it(tmp_path, monkeypatch):
    import sys

    # GIVEN a project whose pyproject names its jobs package, and a shell in a subfolder (docs/)
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "subdir_probe_jobs"\n')
    (tmp_path / "subdir_probe_jobs").mkdir()
    (tmp_path / "subdir_probe_jobs" / "__init__.py").write_text("")
    (tmp_path / "subdir_probe_jobs" / "ticks.py").write_text(
        "from pydantic import BaseModel\nfrom lambdajobs import cron\n\n\n"
        "class Tick(BaseModel):\n    pass\n\n\n"
        "@cron('rate(5 minutes)')\ndef subdir_probe_tick(payload: Tick) -> None:\n    pass\n"
    )
    (tmp_path / "docs").mkdir()
    monkeypatch.chdir(tmp_path / "docs")
    monkeypatch.setattr(sys, "path", list(sys.path))
    # WHEN a command loads the jobs THEN the package is found in the project folder
    from lambdajobs.testing import isolated_registry

    with isolated_registry():  # its job must not stay declared for other tests
        result = CliRunner().invoke(app, ["cron", "list"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "subdir_probe_tick" in result.output and "rate(5 minutes)" in result.output


def test_the_project_root_is_the_folder_whose_pyproject_has_a_lambdajobs_table(tmp_path):
    from lambdajobs.project import lambdajobs_root

    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "acme_jobs"\n')
    inner = tmp_path / "tools"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "tools"\n')  # nearer, but not lambdajobs'
    assert lambdajobs_root(inner) == tmp_path
    assert lambdajobs_root(tmp_path.parent) is None


def test_the_job_loader_imports_the_jobs_package_from_the_project_root_not_the_scripts_folder(
    tmp_path, monkeypatch
):
    import sys

    from lambdajobs.runtime.spec import load_jobs
    from lambdajobs.testing import isolated_registry

    # GIVEN a project whose root is not on sys.path (plain pytest, python scripts/x.py), run from a
    # subfolder of it
    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "probe_root_jobs"\n')
    (tmp_path / "probe_root_jobs").mkdir()
    (tmp_path / "probe_root_jobs" / "__init__.py").write_text("")
    (tmp_path / "probe_root_jobs" / "mail.py").write_text(
        "from pydantic import BaseModel\nfrom lambdajobs import job\n\n"
        "class Mail(BaseModel):\n    to: str\n\n"
        "@job()\ndef probe_root_mail(payload: Mail) -> None: ...\n"
    )
    (tmp_path / "scripts").mkdir()
    monkeypatch.chdir(tmp_path / "scripts")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    try:
        with isolated_registry():
            # WHEN the jobs package is loaded by name
            specs = load_jobs("probe_root_jobs")
            # THEN it was found from the project's root, which is now on sys.path
            assert [s.name for s in specs] == ["probe_root_mail"] and sys.path[0] == str(tmp_path)
    finally:
        for name in [m for m in sys.modules if m.startswith("probe_root_jobs")]:
            del sys.modules[name]


def test_shared_code_at_the_project_root_is_found_when_only_the_jobs_package_is_installed(
    tmp_path, monkeypatch
):
    import sys

    from lambdajobs.runtime.spec import load_jobs
    from lambdajobs.testing import isolated_registry

    # GIVEN a jobs package importable on its own (an editable install of it alone: another folder on
    # sys.path), whose job imports a module at the project's root, and a script run from scripts/
    root, installed = tmp_path / "proj", tmp_path / "site"
    (root / "scripts").mkdir(parents=True)
    (root / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "probe_shared_jobs"\n')
    (root / "probe_shared_common.py").write_text("def shout(text: str) -> str:\n    return text.upper()\n")
    (installed / "probe_shared_jobs").mkdir(parents=True)
    (installed / "probe_shared_jobs" / "__init__.py").write_text("")
    (installed / "probe_shared_jobs" / "mail.py").write_text(
        "from pydantic import BaseModel\nfrom lambdajobs import job\n"
        "from probe_shared_common import shout\n\n"
        "class Mail(BaseModel):\n    to: str\n\n"
        "@job()\ndef probe_shared_mail(payload: Mail) -> str:\n    return shout(payload.to)\n"
    )
    monkeypatch.chdir(root / "scripts")
    kept = [p for p in sys.path if p not in ("", ".", str(root))]
    monkeypatch.setattr(sys, "path", [str(installed), *kept])
    try:
        with isolated_registry():
            # WHEN the jobs package is loaded by name
            specs = load_jobs("probe_shared_jobs")
            # THEN the project's root was made importable for the module it imports, and it loaded
            assert [s.name for s in specs] == ["probe_shared_mail"] and str(root) in sys.path
    finally:
        for name in [m for m in sys.modules if m.startswith(("probe_shared_jobs", "probe_shared_common"))]:
            del sys.modules[name]


def test_a_library_a_jobs_package_imports_that_is_not_installed_is_named_as_it_is(tmp_path, monkeypatch):
    from lambdajobs.runtime.spec import load_jobs

    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "probe_needs_lib"\n')
    (tmp_path / "probe_needs_lib").mkdir()
    (tmp_path / "probe_needs_lib" / "__init__.py").write_text("import probe_not_installed_anywhere\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [str(tmp_path), *__import__("sys").path])
    with pytest.raises(ModuleNotFoundError, match="probe_not_installed_anywhere"):
        load_jobs("probe_needs_lib")


def test_a_jobs_package_missing_from_the_project_too_says_where_it_looked(tmp_path, monkeypatch):
    from lambdajobs.runtime.spec import load_jobs

    (tmp_path / "pyproject.toml").write_text('[tool.lambdajobs]\njobs = "probe_absent"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", list(__import__("sys").path))
    with pytest.raises(ConfigurationError) as caught:
        load_jobs("probe_absent")
    assert f"nor in the project folder {tmp_path} (its pyproject.toml has [tool.lambdajobs])" in str(
        caught.value
    )


def test_the_pytest_plugin_leaves_a_project_alone_whose_parent_has_an_unreadable_pyproject(
    pytester, monkeypatch
):
    # GIVEN a folder whose parent's pyproject.toml is not TOML (not lambdajobs' business)
    (pytester.path / "pyproject.toml").write_text("this is [not toml\n")
    sub = pytester.path / "sub"
    sub.mkdir()
    (sub / "pytest.ini").write_text("[pytest]\n")
    (sub / "test_x.py").write_text("def test_ok():\n    pass\n")
    monkeypatch.chdir(sub)
    # WHEN pytest runs there, with lambdajobs' plugin loaded as installed
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    # THEN the tests run as they would without lambdajobs
    result.assert_outcomes(passed=1)
