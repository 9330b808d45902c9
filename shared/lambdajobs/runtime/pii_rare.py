"""What `lambdajobs.runtime.pii` needs only when a line is written while PII is bound, or a payload is
shown: the filter's and the formatter's masking, and `mask_payload`. Loaded on first use (each name is
importable from `lambdajobs.runtime.pii` too), so a cold start whose record writes no line does not
compile it."""

from __future__ import annotations

import functools
import json
import logging
import re
from typing import Any

from lambdajobs.runtime.pii import MASK, ScrubbingFormatter, _fields, _paths, _values, bound, scrub


@functools.lru_cache(maxsize=256)
def _names(fields: tuple[str, ...]) -> frozenset[str]:
    """The key names the fields erase: each field's last name (a job's fields: once, not per line)."""
    return frozenset(path[-1] for path in _paths(fields))


@functools.lru_cache(maxsize=256)
def _verbatim_names(fields: tuple[str, ...]) -> tuple[str, ...] | None:
    """The fields' key names, if JSON writes each as it is (else None: see `_clean`)."""
    names = _names(fields)
    return tuple(names) if all(_VERBATIM.fullmatch(name) for name in names) else None


def _erase_fields(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    """`data` with the value of every key named like a PII field (at any depth) replaced by the mask,
    whatever its type, as Powertools' `DataMasking.erase` writes it. A walk of the dict: erase would
    build a JSONPath parser per line (about 1 ms each, and 50 ms to import on a cold start's first)."""
    names = _names(tuple(fields))
    return {
        k: MASK if k in names else _erase_fields(v, fields) if isinstance(v, dict) else v
        for k, v in data.items()
    }


def format(formatter: ScrubbingFormatter, record: logging.LogRecord) -> str:
    """`ScrubbingFormatter.format`: erases PII from a finished line."""
    line = formatter.inner.format(record)
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


def filter(record: logging.LogRecord) -> bool:
    """`ScrubbingFilter.filter` of a record logged while PII is bound: masked in place."""
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
