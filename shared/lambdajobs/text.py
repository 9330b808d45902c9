"""Untrusted text as operators see it: job ids, error messages and message bodies come from producers
and jobs, so every reader (the CLI, the board, the JSON API) shows them as text, never as markup, and
with control characters written out as escapes: an id holding `ESC [31m` or an OSC sequence cannot
recolour or retitle a terminal, and a bidirectional override cannot reorder what a page shows.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL, C1 controls, and the bidirectional overrides and isolates.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, *, newlines: bool = True) -> str:
    """`text` with its control characters shown as escapes (`\\x1b`, `\\u202e`); tabs and newlines are
    kept unless `newlines` is False (a table cell: `\\n` is written out too)."""
    shown = _CONTROL.sub(_escape, text)
    if not newlines:
        shown = shown.replace("\n", "\\n").replace("\t", "\\t")
    return shown


__all__ = ["visible"]
