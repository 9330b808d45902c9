"""The synth-time import check: every import a function's shipped code makes (module level and function
bodies) must resolve in its asset, its dependencies, the Powertools layer, the Lambda runtime or Python
3.14's standard library; `TYPE_CHECKING` and `try/except ImportError` imports are exempt."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lambdajobs.errors import ConfigurationError
from lambdajobs.staging import platform
from lambdajobs.staging.imports import Provided, check_asset_imports, imports_of, unresolved_imports


def asset(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def lambda_provides(dependencies: set[str] = frozenset()) -> Provided:  # type: ignore[assignment]
    return Provided(
        dependencies=frozenset(dependencies),
        layer=platform.layer_modules(),
        runtime=platform.runtime_modules(),
        stdlib=platform.stdlib_modules(),
    )


def missing(root: Path, provided: Provided | None = None) -> list[tuple[str, str]]:
    found = unresolved_imports(root, provided or lambda_provides())
    return [(ref.module, f"{path.relative_to(root)}:{ref.line}") for ref, path in found]


BILLING = """
    import json
    from typing import TYPE_CHECKING

    import boto3
    from pydantic import BaseModel
    from aws_lambda_powertools import Logger

    from acme.common import money
    from . import notices
    from .notices import Notice

    if TYPE_CHECKING:
        import mypy_boto3_sqs

    try:
        import orjson
    except ImportError:
        orjson = None

    try:
        import ujson
    except (ValueError, ModuleNotFoundError):
        ujson = None


    def render(order):
        import jinja2
        return jinja2.Template("{{ o }}").render(o=order)
"""


def test_every_import_resolves_or_is_named_with_its_file_and_line(tmp_path):
    root = asset(
        tmp_path,
        {
            "acme/__init__.py": "",
            "acme/common.py": "def money(c): ...\n",
            "billing/__init__.py": "",
            "billing/jobs.py": BILLING,
            "billing/notices.py": "class Notice: ...\n",
        },
    )
    # THEN only jinja2, imported inside a function body, is missing: the standard library, boto3,
    # pydantic, Powertools, the asset's own modules (absolute and relative) resolve, and the
    # TYPE_CHECKING and try/except ImportError imports are exempt
    assert missing(root) == [("jinja2", "billing/jobs.py:28")]
    # AND declared as a dependency, it resolves
    assert missing(root, lambda_provides({"jinja2"})) == []


def test_a_module_of_a_shipped_package_must_be_in_the_asset(tmp_path):
    # GIVEN a job importing a module of its own project that did not ship (or a lambdajobs tool)
    root = asset(
        tmp_path,
        {
            "acme/__init__.py": "",
            "acme/jobs.py": (
                "from acme.helpers import x\nimport lambdajobs.testing\nfrom lambdajobs import job\n"
            ),
            "lambdajobs/__init__.py": "",
        },
    )
    assert missing(root) == [("acme.helpers", "acme/jobs.py:1"), ("lambdajobs.testing", "acme/jobs.py:2")]


@pytest.mark.parametrize("module", ["cgi", "imghdr", "telnetlib", "distutils", "asyncore"])
def test_a_module_python_314_removed_counts_as_missing_though_this_python_has_it(tmp_path, module):
    root = asset(tmp_path, {"job.py": f"import {module}\nimport tomllib, zoneinfo, annotationlib\n"})
    assert missing(root) == [(module, "job.py:1")]


def test_a_bare_except_is_not_an_exemption(tmp_path):
    # (it hides any error: the job would run without the module and fail later, or worse, succeed)
    root = asset(tmp_path, {"job.py": "try:\n    import jinja2\nexcept:\n    jinja2 = None\n"})
    assert missing(root) == [("jinja2", "job.py:2")]


def test_an_import_in_an_except_or_else_branch_is_checked(tmp_path):
    root = asset(
        tmp_path,
        {
            "job.py": (
                "try:\n    import orjson\nexcept ImportError:\n    import simplejson\n"
                "else:\n    import ujson\n"
            )
        },
    )
    assert missing(root) == [("simplejson", "job.py:4"), ("ujson", "job.py:6")]


def test_the_error_names_the_function_the_module_the_place_and_the_fix_in_one_line(tmp_path):
    root = asset(
        tmp_path, {"acme_jobs/__init__.py": "", "acme_jobs/billing.py": BILLING, "acme_jobs/notices.py": ""}
    )
    (tmp_path / "acme").mkdir()  # acme.common is a module of a package that did not ship
    with pytest.raises(ConfigurationError) as caught:
        check_asset_imports(root, lambda_provides(), function="send_invoice", python="3.14")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "function 'send_invoice' imports acme.common, jinja2, which Lambda would not find"
    )
    assert "jinja2 at acme_jobs/billing.py:28" in message
    # the fix for the first one found: acme is not installed anywhere here
    assert "acme is not installed here either" in message


def test_the_fix_for_an_installed_library_is_to_declare_it(tmp_path):
    root = asset(tmp_path, {"job.py": "import jinja2\n"})  # installed here (the board's extra)
    with pytest.raises(
        ConfigurationError,
        match=r"add the distribution that provides jinja2 to \[tool.lambdajobs\] dependencies",
    ):
        check_asset_imports(root, lambda_provides(), function="send_invoice", python="3.14")


def test_relative_imports_resolve_against_the_package(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("from . import a\nfrom ..b import c\nfrom .d.e import f\n")
    assert [r.module for r in imports_of("top.pkg.mod", path)] == ["top.pkg", "top.b", "top.pkg.d.e"]
    init = tmp_path / "__init__.py"
    init.write_text("from . import a\n")
    assert [r.module for r in imports_of("top.pkg", init)] == ["top.pkg"]


def test_the_recorded_layer_manifest_is_the_pinned_powertools(tmp_path):
    from importlib.metadata import version

    # the layer's contents are recorded for the Powertools the package pins: bump both together
    # (python -m lambdajobs.staging.platform <version>)
    assert platform.layer_version() == version("aws-lambda-powertools")
    layer = platform.layer_modules()
    assert {"aws_lambda_powertools", "pydantic", "pydantic_core", "typing_extensions"} <= layer
    assert not {"boto3", "botocore", "dateutil", "urllib3", "six", "jmespath", "s3transfer"} & layer


def test_shared_code_in_a_folder_without_init_is_a_namespace_package_that_resolves(tmp_path):
    # GIVEN acme/common.py shipped from a folder with no __init__.py (a namespace package)
    root = asset(
        tmp_path,
        {"acme/common.py": "", "jobs/__init__.py": "", "jobs/billing.py": "from acme import common\n"},
    )
    assert missing(root) == []


def test_imports_that_never_run_on_lambdas_python_are_exempt(tmp_path):
    # GIVEN the usual fallbacks: an except-ImportError branch whose try resolves, a version gate,
    # contextlib.suppress(ImportError)
    root = asset(
        tmp_path,
        {
            "job.py": """
                import contextlib
                import sys

                try:
                    from zoneinfo import ZoneInfo
                except ImportError:
                    from backports.zoneinfo import ZoneInfo

                if sys.version_info < (3, 11):
                    import tomli as tomllib
                else:
                    import tomllib

                if sys.version_info[:2] >= (3, 15):
                    import future_only
                else:
                    import json

                with contextlib.suppress(ImportError):
                    import orjson

                if sys.version_info >= (3, 12):
                    import runs_on_314
            """
        },
    )
    # THEN only the import Lambda's 3.14 does run is checked
    assert missing(root) == [("runs_on_314", "job.py:24")]
