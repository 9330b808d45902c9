"""lambdajobs' pytest plugin (registered by the package, active wherever lambdajobs is installed): plain
`pytest` in your project imports your jobs package and your project's modules as `python -m pytest`
does. Without it, pytest's default import mode puts each test file's folder first on sys.path, not
your project's folder, and `from acme_jobs.billing import Invoice` in a test fails.

Your project's root is the folder, from where pytest runs upwards, whose pyproject.toml has a
`[tool.lambdajobs]` table; it goes first on sys.path before any conftest.py or test module loads.
Nothing else changes, and a folder with no such pyproject.toml is left as it is.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: Any, args: list[str]) -> None:
    from lambdajobs.runtime.errors import LambdaJobsError
    from lambdajobs.runtime.project import make_importable

    # a pyproject.toml above that cannot be read is not this plugin's to judge: pytest goes on
    with contextlib.suppress(LambdaJobsError):
        make_importable(early_config.invocation_params.dir)
