"""The Python in the README and the hand-written pages is Python of today's API: every block parses, and
every name it imports from lambdajobs exists. (The tutorial's commands are run by tests/package, the
testing page's code by tests/functional/test_testing_page.py.)"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from tests.docs.test_run_figures import hand_written

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def blocks() -> list[tuple[str, int, str]]:
    found = []
    for page in hand_written():
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((str(page.relative_to(ROOT)), line, match.group(1)))
    return found


def test_the_pages_have_python_to_check():
    assert len(blocks()) > 20


@pytest.mark.parametrize(("page", "line", "code"), [pytest.param(*b, id=f"{b[0]}:{b[1]}") for b in blocks()])
def test_a_python_block_parses_and_imports_only_what_lambdajobs_has(page, line, code):
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        pytest.fail(f"{page}:{line + (exc.lineno or 0)}: {exc.msg}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "lambdajobs":
            module = importlib.import_module(node.module or "")
            missing = [a.name for a in node.names if a.name != "*" and not hasattr(module, a.name)]
            if missing:  # a submodule is a name too
                missing = [n for n in missing if importlib.util.find_spec(f"{node.module}.{n}") is None]
            assert not missing, f"{page}:{line + node.lineno}: {node.module} has no {missing}"
