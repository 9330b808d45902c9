"""Per-record log buffering: a successful job writes one log line, a failing one writes everything.

While the worker processes a record (`held`), the lines below WARNING logged through the worker's
logger (`ctx.logger`, the worker's own) are kept in memory instead of written. The first line at
WARNING or above writes the kept lines first, in their order, then itself, and every later line of
that record is written at once: whatever explains a failure (a job that raised, a write that failed,
a dead letter) reaches the log, in order, with the record's keys (correlation_id, job, attempt) and
its personal data masked. A record that ends without a warning (a success, a duplicate, a message
handed back) drops what it kept: the worker then writes one line, "job succeeded". A record whose
processing raised writes what it kept.

Lines are kept per thread of execution (a ContextVar), so the local stack's concurrent batches keep
theirs apart, and nothing depends on `_X_AMZN_TRACE_ID`: Powertools' own buffer (`LoggerBufferConfig`)
keys one buffer per process on that variable, drops lines where it is missing (the local stack, tests)
and flushes or clears every record of a batch at once, which is why the worker does not use it.

A record keeps at most `MAX_LINES` lines: past that the oldest are dropped, and a write says how many.
A job declared `@job(buffer_logs=False)` has every line written at once, as before.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: Lines kept per record; beyond, the oldest go (a write says how many).
MAX_LINES = 500


class _Kept:
    __slots__ = ("dropped", "lines", "through")

    def __init__(self) -> None:
        self.lines: deque[tuple[logging.Handler, logging.LogRecord]] = deque(maxlen=MAX_LINES)
        self.dropped = 0
        self.through = False


_kept: ContextVar[_Kept | None] = ContextVar("lambdajobs_log_kept", default=None)


class _Keep(logging.Filter):
    """A filter on the worker logger's handler (so it sees the lines of its child loggers too):
    keeps a record's lines below WARNING while the record is held."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        kept = _kept.get()
        if kept is None or kept.through:
            return True
        if record.levelno < logging.WARNING:
            if len(kept.lines) == MAX_LINES:
                kept.dropped += 1
            kept.lines.append((self.handler, record))
            return False
        _write(kept)
        return True


def install(std: logging.Logger) -> None:
    """Put the keeping filter on each handler of `std`. Idempotent."""
    for handler in std.handlers:
        if not any(isinstance(f, _Keep) for f in handler.filters):
            handler.addFilter(_Keep(handler))


def _write(kept: _Kept) -> None:
    kept.through = True
    if kept.dropped and kept.lines:
        handler, first = kept.lines[0]
        handler.handle(
            logging.makeLogRecord(
                {
                    **vars(first),
                    "levelno": logging.WARNING,
                    "levelname": "WARNING",
                    "msg": f"{kept.dropped} earlier log lines of this record were not kept "
                    f"(at most {MAX_LINES} are)",
                    "args": (),
                    "exc_info": None,
                    "exc_text": None,
                }
            )
        )
    while kept.lines:
        handler, record = kept.lines.popleft()
        handler.handle(record)


@contextmanager
def held(*, keep: bool = True) -> Iterator[None]:
    """Keep the lines below WARNING the worker's logger writes inside the block (see the module
    docstring); with `keep=False`, write every line at once."""
    kept = _Kept()
    kept.through = not keep
    token = _kept.set(kept)
    try:
        yield
    except BaseException:
        _write(kept)
        raise
    finally:
        _kept.reset(token)


@contextmanager
def written() -> Iterator[None]:
    """Lines logged inside the block are written at once, the kept ones are not (the success line)."""
    kept = _kept.get()
    if kept is None or kept.through:
        yield
        return
    kept.through = True
    try:
        yield
    finally:
        kept.through = False
