"""A griffe extension for the API reference: our docstrings title their doctest section `Example:`
(the dramatiq shape, STYLE.md), which griffe's Google parser reads as a plain admonition, rendering
`>>>` lines as Markdown quotes; read it as an `Examples:` section, so they render as code."""

from __future__ import annotations

import re
from typing import Any

import griffe

EXAMPLE = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **_: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = EXAMPLE.sub(r"\1Examples:", obj.docstring.value)
