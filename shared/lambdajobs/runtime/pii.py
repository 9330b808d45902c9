"""Personal data stays out of logs: jobs declare `pii_fields`, the framework erases them.

While a record runs, the values of its payload's PII fields are known (a context variable, so
concurrent batches in one process do not mix). Every line the worker's logger writes is checked
before it leaves: keys named like a PII field are erased (their values replaced by the mask Powertools
data masking writes), and any PII value that appears anywhere else (a message, an error, another key)
is replaced by the same mask.
Error messages stored in job records and DLQ reasons go through `scrub` too.
"""

from __future__ import annotations

import functools
import json  # noqa: F401  (`pii.json`: the masking's, in lambdajobs.runtime.pii_rare; tests patch it here)
import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from lambdajobs.runtime import lazy

if TYPE_CHECKING:
    from lambdajobs.runtime.pii_rare import _STANDARD as _STANDARD
    from lambdajobs.runtime.pii_rare import _VERBATIM as _VERBATIM
    from lambdajobs.runtime.pii_rare import _clean as _clean
    from lambdajobs.runtime.pii_rare import _erase_fields as _erase_fields
    from lambdajobs.runtime.pii_rare import _erase_path as _erase_path
    from lambdajobs.runtime.pii_rare import _escaped_in as _escaped_in
    from lambdajobs.runtime.pii_rare import _names as _names
    from lambdajobs.runtime.pii_rare import _scrubbed as _scrubbed
    from lambdajobs.runtime.pii_rare import _verbatim_names as _verbatim_names
    from lambdajobs.runtime.pii_rare import mask_payload as mask_payload

MASK = "*****"  # what Powertools DataMasking.erase writes
MIN_VALUE_LENGTH = 4  # shorter values ("1", "yes") would mask unrelated text

_values: ContextVar[tuple[str, ...]] = ContextVar("lambdajobs_pii_values", default=())
_fields: ContextVar[tuple[str, ...]] = ContextVar("lambdajobs_pii_fields", default=())

#: Names of this module defined in `lambdajobs.runtime.pii_rare` (loaded on first use): the masking of
#: a line written while PII is bound, and `mask_payload`.
RARE = frozenset(
    {
        "mask_payload",
        "_scrubbed",
        "_erase_path",
        "_erase_fields",
        "_names",
        "_verbatim_names",
        "_clean",
        "_escaped_in",
        "_VERBATIM",
        "_STANDARD",
    }
)

__getattr__ = lazy.exports(__name__, dict.fromkeys(RARE, "lambdajobs.runtime.pii_rare"))


def _collect(value: Any, out: list[str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _collect(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, out)
    elif isinstance(value, str | int | float) and not isinstance(value, bool):
        text = str(value)
        if len(text) >= MIN_VALUE_LENGTH:
            out.append(text)


def values_of(fields: tuple[str, ...], payload: dict[str, Any]) -> tuple[str, ...]:
    """The values of `fields` (dotted paths) in a payload, longest first (so overlaps mask fully)."""
    found: list[str] = []
    for path in _paths(tuple(fields)):  # (a list from a caller: hashable)
        node: Any = payload
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        _collect(node, found)
    if len(found) < 2:  # (every record of a job with one PII field)
        return tuple(found)
    return tuple(sorted(set(found), key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def _paths(fields: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Each field's path, split at its dots (a job's fields: split once, not per record)."""
    return tuple(tuple(field.split(".")) for field in fields)


class bound:  # (lower case: used as a function, `with pii.bound(...)`)
    """Mask these fields' values in everything logged or recorded inside the block. (A class, not a
    generator: every record enters one.)"""

    __slots__ = ("_fields", "_payload", "_tokens")

    def __init__(self, fields: tuple[str, ...], payload: dict[str, Any]) -> None:
        self._fields, self._payload = fields, payload

    def __enter__(self) -> None:
        values = values_of(self._fields, self._payload) if self._fields else ()
        self._tokens = (_fields.set(self._fields), _values.set(values))

    def __exit__(self, *exc: object) -> None:
        _fields.reset(self._tokens[0])
        _values.reset(self._tokens[1])


def current_fields() -> tuple[str, ...]:
    """The PII fields bound now (`bound`): inside a worker's run, its job's `pii_fields`."""
    return _fields.get()


def scrub(text: str) -> str:
    """Replace the current record's PII values in a string."""
    for value in _values.get():
        text = text.replace(value, MASK)
    return text


class ScrubbingFormatter(logging.Formatter):
    """Wraps the Powertools JSON formatter: erases PII from each finished line. Everything else
    (append_keys, correlation id, ...) is delegated to the wrapped formatter."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    # the Logger calls these twice per record: passed on directly (not through `__getattr__`, which
    # only runs after the lookup on this formatter has failed)
    def thread_safe_append_keys(self, **additional_keys: Any) -> None:
        self.inner.thread_safe_append_keys(**additional_keys)  # type: ignore[attr-defined]

    def thread_safe_remove_keys(self, keys: Any) -> None:
        self.inner.thread_safe_remove_keys(keys)  # type: ignore[attr-defined]

    def format(self, record: logging.LogRecord) -> str:
        if not _fields.get() and not _values.get():  # nothing bound: the line as written
            return self.inner.format(record)
        return (_masking or _load()).format(self, record)


class ScrubbingFilter(logging.Filter):
    """Masks PII in the record itself, so every handler (not only the Powertools one) gets it clean."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _fields.get() and not _values.get():
            return True
        return (_masking or _load()).filter(record)


def install(logger: Any) -> None:
    """Mask PII on a Powertools Logger: in each record (a filter) and in each finished line (a
    formatter wrapper, which also sees keys added with append_keys). Idempotent."""
    std = logging.getLogger(logger.service)
    if not any(isinstance(f, ScrubbingFilter) for f in std.filters):
        std.addFilter(ScrubbingFilter())
    for handler in std.handlers:
        if handler.formatter is not None and not isinstance(handler.formatter, ScrubbingFormatter):
            handler.setFormatter(ScrubbingFormatter(handler.formatter))


#: `lambdajobs.runtime.pii_rare` once loaded (a line written while PII is bound loads it: `_load`).
_masking: Any = None


def _load() -> Any:
    global _masking
    from lambdajobs.runtime import pii_rare

    _masking = pii_rare
    return pii_rare
