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
import json
import logging
import re
from contextvars import ContextVar
from typing import Any

MASK = "*****"  # what Powertools DataMasking.erase writes
MIN_VALUE_LENGTH = 4  # shorter values ("1", "yes") would mask unrelated text

_values: ContextVar[tuple[str, ...]] = ContextVar("lambdajobs_pii_values", default=())
_fields: ContextVar[tuple[str, ...]] = ContextVar("lambdajobs_pii_fields", default=())


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


@functools.lru_cache(maxsize=256)
def _names(fields: tuple[str, ...]) -> frozenset[str]:
    """The key names the fields erase: each field's last name (a job's fields: once, not per line)."""
    return frozenset(path[-1] for path in _paths(fields))


@functools.lru_cache(maxsize=256)
def _verbatim_names(fields: tuple[str, ...]) -> tuple[str, ...] | None:
    """The fields' key names, if JSON writes each as it is (else None: see `_clean`)."""
    names = _names(fields)
    return tuple(names) if all(_VERBATIM.fullmatch(name) for name in names) else None


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


def _erase_fields(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """`data` with the value of every key named like a PII field (at any depth) replaced by the mask,
    whatever its type, as Powertools' `DataMasking.erase` writes it. A walk of the dict: erase would
    build a JSONPath parser per line (about 1 ms each, and 50 ms to import on a cold start's first)."""
    names = _names(tuple(fields))
    return {
        k: MASK if k in names else _erase_fields(v, fields) if isinstance(v, dict) else v
        for k, v in data.items()
    }


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
        line = self.inner.format(record)
        fields, values = _fields.get(), _values.get()
        if _clean(line, fields, values):  # (nothing bound: clean)
            return line
        try:
            data = json.loads(line)
        except ValueError:
            return scrub(line)
        if isinstance(data, dict) and fields:
            data = _erase_fields(data, fields)
        return scrub(json.dumps(data, separators=(",", ":"), ensure_ascii=False, default=str))


def _clean(line: str, fields: tuple[str, ...], values: tuple[str, ...]) -> bool:
    """Whether a line as the Powertools formatter writes it (compact JSON, `ensure_ascii=False`) is
    already free of the PII bound now: every `"<field name>"` in it is a key whose value is the mask
    (the filter put it there), and no PII value appears in it. Then decoding, erasing and encoding it
    again would give the very same line: a few substring searches tell, for every line of a record.

    A value JSON writes otherwise than as it is (not printable ASCII, a quote, a backslash) is looked
    for in its escaped forms too; a field name must be one JSON writes as it is. A line written
    otherwise (`": "` between a key and its value) has a key not followed by the mask: the full path."""
    for value in values:
        if value in line or (not _VERBATIM.fullmatch(value) and _escaped_in(value, line)):
            return False
    names = _verbatim_names(tuple(fields)) if fields else ()
    if names is None:
        return False
    return all(line.count(f'"{name}"') == line.count(f'"{name}":"{MASK}"') for name in names)


def _escaped_in(value: str, line: str) -> bool:
    return any(json.dumps(value, ensure_ascii=ascii)[1:-1] in line for ascii in (True, False))


#: A value that JSON (with `ensure_ascii=False` or not) writes as it is.
_VERBATIM = re.compile(r"[ !#-\[\]-~]*")

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class ScrubbingFilter(logging.Filter):
    """Masks PII in the record itself, so every handler (not only the Powertools one) gets it clean."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields, values = _fields.get(), _values.get()
        if not fields and not values:
            return True
        record.msg, record.args = scrub(record.getMessage()), ()
        attributes = vars(record)
        extras = attributes.keys() - _STANDARD  # (and keys a handler or filter added)
        names = _names(tuple(fields)) if extras else frozenset()
        for key in extras:
            value = attributes[key]
            if key in names:
                setattr(record, key, MASK)
            elif isinstance(value, dict):
                setattr(record, key, json.loads(scrub(json.dumps(_erase_fields(value, fields), default=str))))
            elif isinstance(value, str):
                setattr(record, key, scrub(value))
        return True


def install(logger: Any) -> None:
    """Mask PII on a Powertools Logger: in each record (a filter) and in each finished line (a
    formatter wrapper, which also sees keys added with append_keys). Idempotent."""
    std = logging.getLogger(logger.service)
    if not any(isinstance(f, ScrubbingFilter) for f in std.filters):
        std.addFilter(ScrubbingFilter())
    for handler in std.handlers:
        if handler.formatter is not None and not isinstance(handler.formatter, ScrubbingFormatter):
            handler.setFormatter(ScrubbingFormatter(handler.formatter))


def _erase_path(node: Any, path: list[str]) -> Any:
    """`node` with the value at `path` (a payload field, dotted) replaced by the mask."""
    if not isinstance(node, dict) or not path or path[0] not in node:
        return node
    head, rest = path[0], path[1:]
    return {**node, head: MASK if not rest else _erase_path(node[head], rest)}


def _scrubbed(node: Any) -> Any:
    if isinstance(node, dict):
        return {scrub(str(k)): _scrubbed(v) for k, v in node.items()}
    if isinstance(node, list | tuple):
        return [_scrubbed(v) for v in node]
    if isinstance(node, str):
        return scrub(node)
    if isinstance(node, int | float) and not isinstance(node, bool):
        text = str(node)
        return MASK if scrub(text) != text else node
    return node


def mask_payload(payload: Any, fields: tuple[str, ...] | list[str]) -> Any:
    """A payload as it may be shown: the declared `fields` (dotted paths) erased, and their values
    masked wherever else they appear (another field, a nested list, a dict key), as the worker's log
    lines are. A payload that is not a dict (a cut payload's text, say) has no fields to erase: only
    values the fields had could be masked, and without the dict none are known, so it is returned
    scrubbed of the values bound now (inside a worker's run: that record's).

    Example:
        >>> mask_payload({"to": "ada@example.com", "note": "for ada@example.com"}, ("to",))
        {'to': '*****', 'note': 'for *****'}
    """
    fields = tuple(fields)
    if not isinstance(payload, dict):
        return _scrubbed(payload)
    if not fields:
        return payload
    with bound(fields, payload):
        erased: Any = payload
        for name in fields:
            erased = _erase_path(erased, name.split("."))
        return _scrubbed(erased)
