"""Names a module keeps importable but loads on first use (PEP 562): code a cold start's success does
not run lives in a module of its own, and the module it was split from still answers for it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def exports(module: str, lazy: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `module`: each name of `lazy` imported from the module it maps
    to, on first use, then kept as `module`'s own attribute (a later use is a plain lookup: some are on a
    record's path, such as a retry's record update); any other name (dunders such as `__path__`, which
    every `from m import x` asks for) is missing as usual."""

    def __getattr__(name: str) -> Any:
        source = lazy.get(name)
        if source is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        setattr(sys.modules[module], name, value)
        return value

    return __getattr__
