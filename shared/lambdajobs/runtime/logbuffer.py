"""Per-record log buffering: a successful job writes no log line, a failing one writes everything.

While the worker processes a record (`held`), the lines below WARNING logged through the worker's
logger (`ctx.logger`, the worker's own) are kept in memory instead of written. The first line at
WARNING or above writes the kept lines first, in their order, then itself, and every later line of
that record is written at once: whatever explains a failure (a job that raised, a write that failed,
a dead letter) reaches the log, in order, with the record's keys (correlation_id, job, attempt) and
its personal data masked. A record that ends without a warning (a success, a duplicate, a message
handed back) drops what it kept and writes nothing: the job's record, the board and the worker's
metrics say it succeeded, as with Powertools' own buffer. A record whose lines were written (a
warning, `buffer_logs=False`) ends with the worker's "job succeeded" when it succeeds (`writing`). A
record whose processing raised writes what it kept.

Lines are kept per thread of execution (a ContextVar), so the local stack's concurrent batches keep
theirs apart, and nothing depends on `_X_AMZN_TRACE_ID`: Powertools' own buffer (`LoggerBufferConfig`)
keys one buffer per process on that variable, drops lines where it is missing (the local stack, tests)
and flushes or clears every record of a batch at once, which is why the worker does not use it. Like
Powertools' buffer, the worker's logger (`RecordLogger`, the `ctx.logger` of every job) keeps a held
line as the parts of its call (level, message, arguments, extra keys, caller, time) and makes the
log record only when the line is written: a success pays for no record it drops. Lines of other
loggers whose records reach the worker's handler are kept as records (`install`). The record's keys
(`correlation_id`, `job`, `attempt`) are added to the logger when its first line is written.

A record keeps at most `MAX_LINES` lines: past that the oldest are dropped, and a write says how many.
A job declared `@job(buffer_logs=False)` has every line written at once, as before.
"""

from __future__ import annotations

import logging
import sys
import time
from collections import deque
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from lambdajobs.runtime import lazy

if TYPE_CHECKING:
    from lambdajobs.runtime.logbuffer_rare import _write as _write

#: Lines kept per record; beyond, the oldest go (a write says how many).
MAX_LINES = 500

#: Names `extra` may not use (logging refuses them): such a call is not kept but logged at once, so
#: it fails where it is made, as logging fails it.
_RESERVED = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

#: A kept call: (level, msg, args, exc_info, extra, filename, line, function, created).
_Call = tuple[int, object, tuple[object, ...], Any, dict[str, object], str, int, str, float]


class _Kept:
    __slots__ = ("dropped", "keys", "lines", "logger", "through", "written")

    def __init__(self, logger: Logger, keys: dict[str, Any]) -> None:
        self.lines: deque[_Call | tuple[logging.Handler, logging.LogRecord]] = deque(maxlen=MAX_LINES)
        self.dropped = 0
        self.through = False
        self.logger, self.keys, self.written = logger, keys, False

    def keep(self, line: _Call | tuple[logging.Handler, logging.LogRecord]) -> None:
        if len(self.lines) == self.lines.maxlen:
            self.dropped += 1
        self.lines.append(line)

    def open(self) -> None:
        """Write from now on: the record's keys go on the logger first."""
        self.through = True
        if not self.written and self.keys:
            self.logger.thread_safe_append_keys(**self.keys)
        self.written = True


_kept: ContextVar[_Kept | None] = ContextVar("lambdajobs_log_kept", default=None)

__getattr__ = lazy.exports(__name__, {"_write": "lambdajobs.runtime.logbuffer_rare"})


class RecordLogger(Logger):
    """Powertools' `Logger` whose `debug` and `info` lines, while a record is held, are kept as the
    parts of their call and made into log records only when written (see the module docstring)."""

    def debug(self, msg: object, *args: object, stacklevel: int = 2, **kwargs: Any) -> None:
        if not self._held(logging.DEBUG, msg, args, stacklevel, kwargs):
            super().debug(msg, *args, stacklevel=stacklevel + 1, **kwargs)

    def info(self, msg: object, *args: object, stacklevel: int = 2, **kwargs: Any) -> None:
        if not self._held(logging.INFO, msg, args, stacklevel, kwargs):
            super().info(msg, *args, stacklevel=stacklevel + 1, **kwargs)

    def _held(
        self, level: int, msg: object, args: tuple[object, ...], stacklevel: int, kwargs: dict[str, Any]
    ) -> bool:
        """Keep the call if its record is held (True: nothing more to do), as Powertools' `info` would
        log it: `extra` and the other keyword arguments merged, the exception taken now."""
        kept = _kept.get()
        if kept is None or kept.through or kwargs.get("stack_info"):
            return False
        if not self._logger.isEnabledFor(level):
            return True  # dropped, as logging drops it
        exc_info = kwargs.pop("exc_info", None)
        extra = {**(kwargs.pop("extra", None) or {}), **kwargs}
        if not _RESERVED.isdisjoint(extra):
            kwargs.update(exc_info=exc_info, extra=extra)
            return False
        if exc_info:
            exc_info = _exc_info(exc_info)
        caller = sys._getframe(stacklevel)  # stacklevel 2: the caller of debug/info
        code = caller.f_code
        kept.keep(
            (level, msg, args, exc_info, extra, code.co_filename, caller.f_lineno, code.co_name, time.time())
        )
        return True


def _exc_info(value: Any) -> Any:
    if isinstance(value, BaseException):
        return (type(value), value, value.__traceback__)
    return value if isinstance(value, tuple) else sys.exc_info()


class _Keep(logging.Filter):
    """A filter on the worker logger's handler (so it sees the lines of its child loggers too):
    keeps a record's lines below WARNING while the record is held; a warning writes them first."""

    def __init__(self, handler: logging.Handler) -> None:
        super().__init__()
        self.handler = handler

    def filter(self, record: logging.LogRecord) -> bool:
        kept = _kept.get()
        if kept is None or kept.through:
            return True
        if record.levelno < logging.WARNING:
            kept.keep((self.handler, record))
            return False
        _rare().write(kept)  # the record's keys are on the logger before this line is formatted
        return True


def install(std: logging.Logger) -> None:
    """Put the keeping filter on each handler of `std`. Idempotent."""
    for handler in std.handlers:
        if not any(isinstance(f, _Keep) for f in handler.filters):
            handler.addFilter(_Keep(handler))


class held:  # (lower case: used as a function, `with logbuffer.held(...)`)
    """Keep the lines below WARNING the worker's logger writes inside the block (see the module
    docstring); with `keep=False`, write every line at once. `keys` go on `logger` when the first line
    is written, and off at the end. (A class, not a generator: every record enters one.)"""

    __slots__ = ("_kept", "_token")

    def __init__(self, logger: Logger, keys: dict[str, Any], *, keep: bool = True) -> None:
        self._kept = _Kept(logger, keys)
        if not keep:
            self._kept.open()

    def __enter__(self) -> None:
        self._token = _kept.set(self._kept)

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        kept = self._kept
        try:
            if exc_type is not None:
                _rare().write(kept)
        finally:
            _kept.reset(self._token)
            if kept.written and kept.keys:
                kept.logger.thread_safe_remove_keys(list(kept.keys))


def writing() -> bool:
    """Whether the current record's lines are being written (nothing held, a warning came, or its job
    keeps no lines), rather than kept."""
    kept = _kept.get()
    return kept is None or kept.through


def _rare() -> Any:
    """`lambdajobs.runtime.logbuffer_rare`: writing a record's kept lines (at a warning, or when its
    processing raised), imported on first use."""
    from lambdajobs.runtime import logbuffer_rare

    return logbuffer_rare
