"""What a function's asset takes from a jobs package: the job's module and what it imports, found by
reading the modules (relative imports, subpackages, dotted packages), and nothing that would not ship."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lambdajobs import ConfigurationError


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
    from lambdajobs.cdk.asset import job_modules

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
    from lambdajobs.cdk.asset import job_modules

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


def test_an_import_of_project_code_outside_the_jobs_package_is_refused_at_synth(project):
    from lambdajobs.cdk.asset import job_modules

    write(
        project,
        {
            "probe_c/__init__.py": "",
            "probe_c/common.py": "",
            "probe_c/jobs/__init__.py": "",
            "probe_c/jobs/billing.py": "from probe_c.common import thing\n",
        },
    )
    with pytest.raises(ConfigurationError, match=r"probe_c\.jobs\.billing imports probe_c\.common.*move it"):
        job_modules("probe_c.jobs", ["probe_c.jobs.billing"])


def test_staging_copies_exactly_those_modules_at_their_paths(project, tmp_path_factory):
    from lambdajobs.cdk.asset import VENDORED_PACKAGES, stage_function_asset

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
