"""What every view of the board shares: rendering a page or its live part, JSON for the API, the
CSRF-checked form of an action, running blocking AWS calls off the event loop, one-line errors."""

from __future__ import annotations

import dataclasses
import html
import logging
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jinja2
import markupsafe
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from lambdajobs.board import render
from lambdajobs.board.data import BoardData, describe_error
from lambdajobs.board.security import Csrf, Notices
from lambdajobs.runtime.errors import (
    QueueNotFoundError,
    StackNotFoundError,
    UnknownJobError,
)
from lambdajobs.runtime.job_record import LISTED_STATES
from lambdajobs.text import visible

HERE = Path(__file__).parent
#: How often the live parts of a page are fetched again.
POLL_SECONDS = 5
JOB_POLL_SECONDS = 2
#: A redriven job's page keeps polling until its record changes, for this long at most.
WATCH_SECONDS = 15 * 60
#: The states the jobs page lists, in this order: every state the job index can hold.
LISTED = LISTED_STATES
MAX_FORM_BYTES = 256 * 1024
#: What a page says of a job or queue its URL names and the stack does not have: in the board's own
#: words, never the URL's (a link from elsewhere must not put its text in the board's banner).
NOT_FOUND_LINE = "no such job or queue on this stack: pick one from the overview or the jobs page."
logger = logging.getLogger("lambdajobs.board")


def _local_path(target: str | None, default: str) -> str:
    """`target` if it is a path on this board (no open redirect), else `default`."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    return target


def _with_query(path: str, **params: str) -> str:
    joiner = "&" if "?" in path else "?"
    return path + joiner + urlencode(params)


def job_path(job: str | None, job_id: str) -> str:
    quoted = quote(job_id, safe="")
    return f"/jobs/{job}/{quoted}" if job else f"/job/{quoted}"


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class BoardBase:
    """The app's state and what every view uses: pages, partials, JSON, forms and actions."""

    def __init__(self, data: BoardData, *, read_only: bool, csrf: Csrf, where: str) -> None:
        self.data = data
        self.read_only = read_only
        self.csrf = csrf
        self.where = where
        self.notices = Notices()
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            trim_blocks=True,
            lstrip_blocks=True,
            # every value a page prints, its control characters shown as escapes (`text.visible`)
            finalize=_shown,
        )
        env.filters.update(
            age=render.age,
            since=render.since,
            when=render.when,
            local_time=render.local_time,
            pretty_json=render.pretty_json,
            duration=render.duration,
            until=render.until,
        )
        # a value a form posts back (an id, a filter): HTML-escaped, its characters as they are,
        # so an action names the real job (what `_shown` prints is for reading, not for sending)
        env.filters["raw"] = markupsafe.escape
        env.globals.update(chart=render.chart, job_path=job_path, quote=quote)
        self.templates = Jinja2Templates(env=env)

    # -- rendering --------------------------------------------------------------------------------

    def page(
        self,
        request: Request,
        name: str,
        context: dict[str, Any],
        *,
        partial: str | None = None,
        status: int = 200,
    ) -> Response:
        """The page `name`, or only its live part `partial` when htmx asks (HX-Request): always
        200 then, so htmx swaps in an error line too."""
        is_partial = partial is not None and request.headers.get("HX-Request") == "true"
        context = {
            "board": self,
            "stack": self.data.config.stack,
            "where": self.where,
            "read_only": self.read_only,
            "csrf_field": Csrf.FIELD,
            "csrf_token": self.csrf.token,
            "notice": self.notices.get(request.query_params.get("notice")),
            "updated": datetime.now(UTC),
            "poll_seconds": POLL_SECONDS,
            "self_url": str(request.url.path) + (f"?{request.url.query}" if request.url.query else ""),
            "error": None,
            **context,
        }
        return self.templates.TemplateResponse(
            request,
            partial if is_partial and partial else name,
            context,
            status_code=200 if is_partial else status,
        )

    def refused(self, request: Request, message: str, status: int = 403) -> Response:
        return self.page(request, "message.html", {"title": "Refused", "message": message}, status=status)

    async def gather(self, build: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], int]:
        """Run `build` (blocking AWS calls) on a worker thread; an error becomes one line."""
        try:
            return await run_in_threadpool(build), 200
        except Exception as exc:
            if _not_found(exc):  # named by the URL: its words are not repeated (a link chose them)
                return {"error": NOT_FOUND_LINE}, 404
            if os.environ.get("LAMBDAJOBS_DEBUG"):
                logger.exception("board: a page failed")
            return {"error": describe_error(exc)}, 502

    async def form(self, request: Request) -> dict[str, list[str]] | Response:
        """The POSTed form, if the board takes actions and the form carries the token; else the
        403 page (nothing is done)."""
        if self.read_only:
            return self.refused(request, "This board is read-only (--read-only): it changes nothing.")
        body = await request.body()
        kind = request.headers.get("content-type", "").split(";")[0].strip()
        if kind != "application/x-www-form-urlencoded" or len(body) > MAX_FORM_BYTES:
            return self.refused(request, "Refused: not a form of this board.")
        fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
        if not self.csrf.valid(_first(fields, Csrf.FIELD)):
            return self.refused(
                request, "Refused: the form's token is missing or stale. Reload the page and try again."
            )
        return fields

    def back(self, path: str, line: str) -> Response:
        """Go to `path` (303) with the one-line outcome `line`, kept here under a key (`Notices`)."""
        return RedirectResponse(_with_query(path, notice=self.notices.put(line)), status_code=303)

    async def act(self, request: Request, do: Callable[[], str], back: str) -> Response:
        """Run an action (blocking) and go back to `back` with its one-line outcome."""
        try:
            line = await run_in_threadpool(do)
        except Exception as exc:
            if _not_found(exc):
                return self.refused(request, NOT_FOUND_LINE, status=404)
            if os.environ.get("LAMBDAJOBS_DEBUG"):
                logger.exception("board: an action failed")
            line = f"error: {describe_error(exc)}"
        return self.back(back, line)

    def json(self, value: Any, status: int = 200) -> Response:
        """`value` as the JSON API answers it: dataclasses as objects, times as RFC 3339 text, sets
        and tuples as lists (every view's `/api/...` twin uses this)."""
        return JSONResponse(_plain(value), status_code=status)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.refused(request, "Nothing here: this board has no such page.", status=404)

    async def failed(self, request: Request, exc: Exception) -> Response:
        logger.error("board: %s %s failed: %s", request.method, request.url.path, describe_error(exc))
        return HTMLResponse(f"<p>error: {html.escape(describe_error(exc))}</p>", status_code=500)


def _not_found(exc: Exception) -> bool:
    """An unknown job or queue (404), not a stack that is missing or AWS refusing (502)."""
    return isinstance(exc, UnknownJobError | QueueNotFoundError) and not isinstance(exc, StackNotFoundError)


def _first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


def _age_of(iso: str) -> float:
    try:
        moment = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return float("inf")
    return (datetime.now(UTC) - moment).total_seconds()


def _shown(value: Any) -> Any:
    """What a page prints of `value`: text with its control characters escaped; markup the board
    built itself (a `Markup`) and every other value as they are."""
    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return visible(value)
    return value


def _plain(value: Any) -> Any:
    """A value the JSON encoder takes: dataclasses, enums, times, sets and tuples converted."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)
