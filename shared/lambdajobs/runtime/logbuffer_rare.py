"""Writing a held record's kept lines (`lambdajobs.runtime.logbuffer`), at its first warning or when its
processing raised: loaded on first use, so a cold start whose record succeeds does not compile it."""

from __future__ import annotations

import logging

from lambdajobs.runtime.logbuffer import _Kept


def write(kept: _Kept) -> None:
    """Write the kept lines, in their order, after the record's keys went on the logger (`open`)."""
    kept.open()
    std = kept.logger._logger
    if kept.dropped and kept.lines:
        std.warning(
            "%d earlier log lines of this record were not kept (at most %d are)",
            kept.dropped,
            kept.lines.maxlen,
        )
    while kept.lines:
        line = kept.lines.popleft()
        if isinstance(line[0], logging.Handler):  # another logger's record, kept by the handler's filter
            handler, record = line
            handler.handle(record)
            continue
        level, msg, args, exc_info, extra, filename, lineno, function, created = line
        made = std.makeRecord(std.name, level, filename, lineno, msg, args, exc_info, function, extra)
        made.created, made.msecs = created, (created - int(created)) * 1000
        std.handle(made)


#: (its name in `lambdajobs.runtime.logbuffer`, which re-exports it)
_write = write
