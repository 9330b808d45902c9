"""What a function's asset takes from a jobs package: the job's module and what it imports, found by
reading the modules (relative imports, subpackages, dotted packages), and nothing that would not ship."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_relative_imports_subpackages_and_from_imports_are_followed(project):
    from lambdajobs.staging.asset import job_modules

    write(
        project,
        {
            "probe_a/__init__.py": "",
            "probe_a/jobs.py": "from .util import helper\nfrom probe_a.sub import deep\nimport json\n",
            "probe_a/util.py": "def helper(): ...\n",
            "probe_a/sub/__init__.py": "",
            "probe_a/sub/deep.py": "from ..util import helper\n",
            "probe_a/unused.py": "",
        },
    )
    assert job_modules("probe_a", ["probe_a.jobs"]) == [
        "probe_a",
        "probe_a.jobs",
        "probe_a.sub",
        "probe_a.sub.deep",
        "probe_a.util",
    ]


def test_a_dotted_jobs_package_ships_its_parent_packages_init(project):
    from lambdajobs.staging.asset import job_modules

    write(
        project,
        {
            "probe_b/__init__.py": "",
            "probe_b/jobs/__init__.py": "",
            "probe_b/jobs/billing.py": "from probe_b.jobs import shared_bits\n",
            "probe_b/jobs/shared_bits.py": "",
        },
    )
    assert job_modules("probe_b.jobs", ["probe_b.jobs.billing"]) == [
        "probe_b",
        "probe_b.jobs",
        "probe_b.jobs.billing",
        "probe_b.jobs.shared_bits",
    ]


def test_project_code_outside_the_jobs_package_ships_with_the_jobs_that_import_it(project):
    from lambdajobs.staging.asset import job_modules

    # GIVEN a helper module beside the jobs package, imported at module level by one job and inside a
    # function by another, and a module imported only for type checking
    write(
        project,
        {
            "probe_c/__init__.py": "",
            "probe_c/common.py": "from probe_c import money\n",
            "probe_c/money.py": "",
            "probe_c/typing_only.py": "import this_does_not_exist\n",
            "probe_c/jobs/__init__.py": "",
            "probe_c/jobs/billing.py": "from probe_c.common import thing\n",
            "probe_c/jobs/refunds.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from probe_c import typing_only\n"
                "def run():\n    import probe_c_shared.tools\n"
            ),
            "probe_c_shared/__init__.py": "",
            "probe_c_shared/tools.py": "import json\n",
        },
    )
    # THEN each ships, with its package's __init__ and what it imports in turn (not the type-only one)
    assert job_modules("probe_c.jobs", ["probe_c.jobs.billing"]) == [
        "probe_c",
        "probe_c.common",
        "probe_c.jobs",
        "probe_c.jobs.billing",
        "probe_c.money",
    ]
    assert job_modules("probe_c.jobs", ["probe_c.jobs.refunds"]) == [
        "probe_c",
        "probe_c.jobs",
        "probe_c.jobs.refunds",
        "probe_c_shared",
        "probe_c_shared.tools",
    ]


def test_installed_libraries_and_the_standard_library_are_not_copied_as_source(project):
    from lambdajobs.staging.asset import job_modules

    write(
        project, {"probe_e/__init__.py": "", "probe_e/jobs.py": "import jinja2, json, pydantic, yaml_nope\n"}
    )
    assert job_modules("probe_e", ["probe_e.jobs"]) == ["probe_e", "probe_e.jobs"]


def test_source_found_outside_the_projects_folders_is_not_copied(project, tmp_path_factory, monkeypatch):
    from lambdajobs.staging.asset import job_modules

    # GIVEN a library found as plain source in a folder of another environment (a .pth, PYTHONPATH)
    elsewhere = tmp_path_factory.mktemp("other-env")
    write(elsewhere, {"probe_lib/__init__.py": "import probe_lib.inner\n", "probe_lib/inner.py": ""})
    monkeypatch.syspath_prepend(str(elsewhere))
    write(project, {"probe_g/__init__.py": "", "probe_g/jobs.py": "import probe_lib\n"})
    # THEN it is not your code: it is left to the dependencies (and the import check names it)
    assert job_modules("probe_g", ["probe_g.jobs"]) == ["probe_g", "probe_g.jobs"]


def test_finding_what_ships_never_imports_a_library(project, tmp_path_factory, monkeypatch):
    from lambdajobs.staging.asset import job_modules

    # GIVEN a library whose import raises (it needs a GPU), imported by a submodule in a job's body
    elsewhere = tmp_path_factory.mktemp("libs")
    write(elsewhere, {"probe_gpu/__init__.py": "raise RuntimeError('needs a GPU')\n", "probe_gpu/sub.py": ""})
    monkeypatch.syspath_prepend(str(elsewhere))
    write(
        project,
        {
            "probe_h/__init__.py": "",
            "probe_h/jobs.py": (
                "def run():\n    try:\n        import probe_gpu.sub\n    except ImportError:\n        pass\n"
            ),
        },
    )
    # THEN synthesis does not import it (nor fail): it is not your code
    assert job_modules("probe_h", ["probe_h.jobs"]) == ["probe_h", "probe_h.jobs"]
    assert "probe_gpu" not in sys.modules


def test_a_shipped_package_carries_its_data_files(project, tmp_path_factory):
    from lambdajobs.staging.asset import stage_function_asset

    write(
        project,
        {
            "probe_f/__init__.py": "",
            "probe_f/jobs.py": "",
            "probe_f/rates.json": "{}",
            "probe_f/templates/invoice.html": "<p>{{ id }}</p>",
            "probe_f/unused/__init__.py": "",
            "probe_f/unused/data.txt": "x",
        },
    )
    out = stage_function_asset(
        tmp_path_factory.mktemp("asset"), jobs_package="probe_f", modules=["probe_f.jobs"]
    )
    files = {str(p.relative_to(out / "probe_f")) for p in (out / "probe_f").rglob("*") if p.is_file()}
    # its files that are not Python and its folders without modules; not a subpackage nothing imports
    assert files == {"__init__.py", "jobs.py", "rates.json", "templates/invoice.html"}


def test_staging_copies_exactly_those_modules_at_their_paths(project, tmp_path_factory):
    from lambdajobs.staging.asset import VENDORED_PACKAGES, stage_function_asset

    write(
        project,
        {
            "probe_d/__init__.py": "",
            "probe_d/jobs.py": "from . import util\n",
            "probe_d/util.py": "",
            "probe_d/other.py": "",
        },
    )
    out = stage_function_asset(
        tmp_path_factory.mktemp("asset"), jobs_package="probe_d", modules=["probe_d.jobs"]
    )
    files = {str(p.relative_to(out / "probe_d")) for p in (out / "probe_d").rglob("*")}
    assert files == {"__init__.py", "jobs.py", "util.py"}
    assert sorted(p.name for p in out.iterdir()) == sorted(["lambdajobs", "probe_d", *VENDORED_PACKAGES])
