"""DynamoDB's wire format (attribute values such as `{"S": "text"}`) is written and read only in the
codecs: `lambdajobs.runtime.table` and the item types' own modules. Everything else works with Python
values, so a record's attributes have one reader and one writer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RUNTIME = Path(__file__).resolve().parents[2] / "shared" / "lambdajobs" / "runtime"
#: The modules that must go through the codecs (the worker's pipeline and every writer of the table).
CLIENTS = (
    "worker.py",
    "delivery.py",
    "gates.py",
    "effects.py",
    "lifecycle.py",
    "records.py",
    "workflow.py",
    "continuer.py",
    "ratelimit.py",
)
TYPE_TAGS = frozenset({"S", "N", "B", "M", "L", "NS", "SS", "BS", "BOOL", "NULL"})


def wire_literals(source: str) -> list[str]:
    """Where a module spells an attribute value: a dict literal keyed by a type tag, a subscript
    `[...]["S"]`, or a `.get("N")`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Dict):
            keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if keys and set(keys) <= TYPE_TAGS:
                found.append(f"line {node.lineno}: {{{keys[0]!r}: ...}}")
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if node.slice.value in TYPE_TAGS:
                found.append(f"line {node.lineno}: [{node.slice.value!r}]")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in TYPE_TAGS
        ):
            found.append(f"line {node.lineno}: .get({node.args[0].value!r})")
    return found


@pytest.mark.parametrize("module", CLIENTS)
def test_only_the_codecs_spell_attribute_values(module):
    assert wire_literals((RUNTIME / module).read_text()) == []


def test_the_scan_finds_attribute_values():
    # the check itself can fail: each form it looks for is found
    source = 'a = {"S": "x"}\nb = item["state"]["S"]\nc = item.get("N")\nd = {"N": "1", "S": "2"}\n'
    assert len(wire_literals(source)) == 4
    assert wire_literals('e = {"state": "running"}\nf = row["id"]\n') == []
