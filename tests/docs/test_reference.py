"""The API reference covers the public API: every public name of `lambdajobs` (its lazily exported
ones included), `lambdajobs.errors`, `lambdajobs.cdk` and `lambdajobs.testing` has an entry in the
site's object inventory, and no name `lambdajobs` does not export has one under `lambdajobs.`.

The site is built once per session, strictly (`mkdocs build --strict`, as `make docs`), into a
temporary folder; its `objects.inv` (Sphinx's format: four header lines, then zlib-compressed lines
`name domain:role priority uri dispname`) lists every object mkdocstrings rendered.
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def inventory_names(path: Path) -> set[str]:
    """The object names of a Sphinx inventory (version 2)."""
    data = path.read_bytes()
    *header, body = data.split(b"\n", 4)
    assert header[0] == b"# Sphinx inventory version 2", header[0]
    return {line.split(" ", 1)[0] for line in zlib.decompress(body).decode().splitlines() if line}


@pytest.fixture(scope="session")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed (make docs says the same):\n{done.stderr}"
    return inventory_names(site / "objects.inv")


def public_names(module_name: str) -> list[str]:
    """A module's `__all__`, lazily exported names included (`lambdajobs.__all__` lists them); for a
    module that defines classes and functions of its own, every public one of those too."""
    module = importlib.import_module(module_name)
    names = set(getattr(module, "__all__", ()))
    names |= {
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and getattr(obj, "__module__", None) == module_name
    }
    return sorted(names)


@pytest.mark.parametrize(
    "module", ["lambdajobs", "lambdajobs.errors", "lambdajobs.cdk", "lambdajobs.testing"]
)
def test_every_public_name_has_a_reference_entry(module: str, inventory: set[str]) -> None:
    # GIVEN the module's public names
    names = public_names(module)
    assert names, f"{module} exports nothing?"
    # WHEN the site is built THEN each has an entry under the module's own path
    missing = [name for name in names if f"{module}.{name}" not in inventory]
    assert not missing, (
        f"{module} exports {missing} but the reference has no entry for them: add them to a "
        f"`::: {module}` block's members in docs/reference/python-api.md (errors: docs/reference/errors.md)"
    )


def test_the_reference_documents_under_lambdajobs_only_what_it_exports(inventory: set[str]) -> None:
    # GIVEN the entries right under `lambdajobs.` (`lambdajobs.job`, not `lambdajobs.cdk.JobWorker`)
    import lambdajobs

    top_level = {name.split(".")[1] for name in inventory if name.count(".") == 1}
    # THEN each is a public name: a page naming `lambdajobs.get_spec` would promise what is internal
    assert top_level - set(lambdajobs.__all__) == set()


def test_the_lazily_exported_names_are_checked() -> None:
    # GIVEN the names `lambdajobs` loads on first use THEN the check above covers them
    from lambdajobs.runtime import LAZY

    assert set(LAZY) <= set(public_names("lambdajobs"))
