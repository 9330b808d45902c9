"""Lambda's init phase: the garbage collector paused while a function's modules load, and what they
built frozen afterwards.

A cold start allocates about 90,000 long-lived objects (modules, classes, pydantic validators, the
boto3 client's models). With the collector on, CPython walks them again and again as they pile up:
about 30 ms of a worker's cold start here (`docs/reports/benchmarks.md`). Paused, then frozen (`gc.freeze`,
the pattern Python's `gc` documentation gives for long-lived startup state), they are never walked:
not during the init phase, and not by the collections of later invocations either. The cost is that
the few reference cycles the imports leave as garbage (about 700 objects for send_email) are kept for
the life of the execution environment.

`lambdajobs/__init__.py` does the same inline for a worker function's package imports (it cannot
import this module without importing the whole runtime first).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def init_phase() -> Iterator[None]:
    """Pause the collector for the block; then freeze what is tracked and restore the collector's state
    (on, unless the host had turned it off), whether the block succeeded or raised."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()
