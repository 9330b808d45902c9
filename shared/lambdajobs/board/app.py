"""The board's web app: Starlette routes, Jinja2 pages, htmx polling, CSRF-checked actions.

Every page is a plain GET whose state is all in its URL (a link can be shared); its live part is a
partial template that htmx fetches again every few seconds (the `HX-Request` header asks for the
partial alone). Every action is a POST of a plain form carrying the process's CSRF token, compared
with `hmac.compare_digest`; a POST without it gets 403 and changes nothing, and `read_only` refuses
every POST. Errors (AWS refused, no such stack) render as one line in the page, never a traceback.

Only loopback host names are accepted by default (a web page elsewhere cannot reach the board
through DNS rebinding), pages may not be framed (no clickjacking of the purge button), and the
Content-Security-Policy allows scripts from the board itself only.
"""

from __future__ import annotations

import html
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from lambdajobs.board import render
from lambdajobs.board.data import BoardData, describe_error
from lambdajobs.board.security import LOOPBACK_HOSTS, Csrf, LoopbackHosts, Notices, SecurityHeaders
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.errors import (
    JobIndexOffError,
    QueueNotFoundError,
    StackNotFoundError,
    UnknownJobError,
)
from lambdajobs.runtime.job_record import LISTED_STATES, PARKED_STATES, JobState
from lambdajobs.runtime.spec import JobSpec, ensure_loaded, jobs_in

HERE = Path(__file__).parent
#: How often the live parts of a page are fetched again.
POLL_SECONDS = 5
JOB_POLL_SECONDS = 2
#: A redriven job's page keeps polling until its record changes, for this long at most.
WATCH_SECONDS = 15 * 60
#: The states the jobs page lists, in this order: every state the job index can hold.
LISTED = LISTED_STATES
MAX_FORM_BYTES = 256 * 1024
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


class Board:
    """The app's state, and what answers each route."""

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
            if _not_found(exc):
                return {"error": describe_error(exc)}, 404
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
                return self.refused(request, describe_error(exc), status=404)
            if os.environ.get("LAMBDAJOBS_DEBUG"):
                logger.exception("board: an action failed")
            line = f"error: {describe_error(exc)}"
        return self.back(back, line)

    # -- overview ---------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            jobs, workflows = self.data.overview()
            notes = list(dict.fromkeys(j.counts_note for j in jobs if j.counts_note))
            return {"jobs": jobs, "workflows": workflows, "notes": notes}

        context, status = await self.gather(build)
        return self.page(request, "overview.html", context, partial="_overview.html", status=status)

    # -- jobs ---------------------------------------------------------------------------------------

    async def jobs(self, request: Request) -> Response:
        wanted = request.query_params.get("id", "").strip()
        if wanted:
            return RedirectResponse(job_path(None, wanted), status_code=303)
        return self.page(request, "jobs.html", {"specs": self.data.specs, "states": LISTED})

    async def job_list(self, request: Request) -> Response:
        job = request.path_params["job"]
        state_text = request.query_params.get("state", JobState.DEAD.value)
        cursor = request.query_params.get("cursor") or None
        state = next((s for s in LISTED if s.value == state_text), None)
        if state is None:
            return self.refused(
                request,
                f"state '{state_text}' cannot be listed; choose one of {[s.value for s in LISTED]}.",
                404,
            )

        def build() -> dict[str, Any]:
            spec = self.data.spec(job)
            try:
                listed = self.data.list_jobs(job, state, cursor)
            except JobIndexOffError as exc:
                return {"spec": spec, "items": [], "next_cursor": None, "index_off": str(exc)}
            return {"spec": spec, "items": listed.items, "next_cursor": listed.cursor, "index_off": None}

        context, status = await self.gather(build)
        context.update(job=job, state=state, states=LISTED, cursor=cursor, parked=state in PARKED_STATES)
        return self.page(request, "job_list.html", context, partial="_job_list.html", status=status)

    async def job(self, request: Request) -> Response:
        job = request.path_params.get("job")
        job_id = request.path_params["job_id"]
        watch_since = request.query_params.get("since")

        def build() -> dict[str, Any]:
            status = self.data.status(job_id)
            named = status.job or job
            letter = None
            if status.state is JobState.DEAD and named in self.data.by_name:
                letter = self.data.find_dead_letter(named, job_id)
            watching = bool(
                watch_since
                and status.state is JobState.DEAD
                and (status.updated_at or "") < watch_since
                and _age_of(watch_since) < WATCH_SECONDS
            )
            return {
                "status": status,
                "letter": letter,
                "polling": not status.done or watching,
                "watching": watching,
                "mismatch": bool(job and status.job and status.job != job),
            }

        context, status_code = await self.gather(build)
        context.update(job=job, job_id=job_id, job_poll_seconds=JOB_POLL_SECONDS)
        return self.page(request, "job.html", context, partial="_job.html", status=status_code)

    async def cancel(self, request: Request) -> Response:
        """Cancel the job the form names (`lambdajobs.cancel`), back on its page with the outcome."""
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        job_id = (_first(form, "job_id") or "").strip()
        job = (_first(form, "job") or "").strip() or None

        def do() -> str:
            return self.data.cancel(job_id, job).message

        return await self.act(request, do, job_path(job, job_id) if job_id else "/jobs")

    # -- dead letters -----------------------------------------------------------------------------

    async def dead_letter_queues(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            found: list[tuple[Any, int | None, str | None]] = []
            for queue in self.data.dead_letter_queues():
                try:
                    found.append((queue, self.data.depth(queue.dlq_url), None))
                except Exception as exc:
                    found.append((queue, None, describe_error(exc)))
            return {"queues": found}

        context, status = await self.gather(build)
        return self.page(request, "dead_letters.html", context, partial="_dead_letters.html", status=status)

    async def dead_letters(self, request: Request) -> Response:
        key = request.path_params["key"]
        try:
            limit = max(1, min(int(request.query_params.get("limit", "50")), 500))
        except ValueError:
            limit = 50

        def build() -> dict[str, Any]:
            queue = self.data.queue(key)
            letters = self.data.dead_letters(queue, limit)
            return {"queue": queue, "letters": letters, "depth": self.data.depth(queue.dlq_url)}

        context, status = await self.gather(build)
        context.update(key=key, limit=limit, listed_at=datetime.now(UTC))
        return self.page(request, "dlq.html", context, status=status)

    async def dlq_depth(self, request: Request) -> Response:
        key = request.path_params["key"]

        def build() -> dict[str, Any]:
            queue = self.data.queue(key)
            return {"queue": queue, "depth": self.data.depth(queue.dlq_url)}

        context, status = await self.gather(build)
        context.update(key=key)
        return self.page(request, "_dlq_depth.html", context, partial="_dlq_depth.html", status=status)

    async def redrive(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        key = request.path_params["key"]
        back = _local_path(_first(form, "next"), f"/dead-letters/{quote(key, safe='@')}")
        if form.get("one"):
            ids: list[str] | None = form["one"][:1]
        elif form.get("all"):
            ids = None
        else:
            ids = [i for i in form.get("message_id", []) if i]
            if not ids:
                return self.back(back, "nothing selected: nothing moved")
        if form.get("job_id"):  # from a job's page: watch the redriven run there
            job, job_id = (form.get("job") or [""])[0], form["job_id"][0]
            back = _with_query(job_path(job or None, job_id), since=_now_iso())

        def do() -> str:
            return self.data.redrive(self.data.queue(key), ids)

        return await self.act(request, do, back)

    async def purge_confirm(self, request: Request) -> Response:
        key = request.path_params["key"]
        if self.read_only:
            return self.refused(request, "This board is read-only (--read-only): it changes nothing.")

        def build() -> dict[str, Any]:
            queue = self.data.queue(key)
            return {"queue": queue, "depth": self.data.depth(queue.dlq_url), "changed": None}

        context, status = await self.gather(build)
        context.update(key=key)
        return self.page(request, "purge.html", context, status=status)

    async def purge(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        key = request.path_params["key"]
        try:
            expected = int((form.get("expected") or ["0"])[0])
        except ValueError:
            expected = 0

        def build() -> dict[str, Any]:
            queue = self.data.queue(key)
            done, count, line = self.data.purge(queue, expected)
            return {"queue": queue, "done": done, "depth": count, "line": line}

        context, status = await self.gather(build)
        if status != 200:
            return self.page(request, "purge.html", {**context, "key": key, "depth": None}, status=status)
        if not context["done"]:  # more than the operator agreed to delete: ask again
            return self.page(request, "purge.html", {**context, "key": key, "changed": context["line"]})
        return self.back(f"/dead-letters/{quote(key, safe='@')}", context["line"])

    # -- schedules --------------------------------------------------------------------------------

    async def schedules(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            cron = self.data.cron_jobs()
            try:
                pending, more = self.data.one_time_schedules()
                pending_error = None
            except Exception as exc:
                pending, more, pending_error = [], False, describe_error(exc)
            return {"cron": cron, "pending": pending, "more": more, "pending_error": pending_error}

        context, status = await self.gather(build)
        return self.page(request, "schedules.html", context, partial="_schedules.html", status=status)

    async def trigger(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        job = request.path_params["job"]
        try:
            sent = await run_in_threadpool(self.data.trigger_now, job)
        except Exception as exc:
            if _not_found(exc):
                return self.refused(request, describe_error(exc), status=404)
            line = f"error: {describe_error(exc)}"
            return self.back("/schedules", line)
        line = f"sent {sent}: it runs as soon as a worker takes it"
        return self.back(job_path(job, sent), line)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.refused(request, f"Nothing here: {request.url.path}", status=404)

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


def _configured_jobs(config: StackConfig) -> list[JobSpec]:
    """The jobs of the configured jobs package, loaded once (none when no package is configured)."""
    if not config.jobs:
        return []
    ensure_loaded(config.jobs)
    return jobs_in(config.jobs)


def create_app(
    config: StackConfig,
    specs: list[JobSpec] | None = None,
    *,
    read_only: bool = False,
    secret: bytes | None = None,
    cache_seconds: float | None = None,
    allowed_hosts: list[str] | None = None,
    native_moves: bool | None = None,
) -> Starlette:
    """The board of the stack `config` names (the CLI's StackConfig, with its jobs package).

    `specs`: the jobs (default: those of `config.jobs`). `read_only`: no actions. `secret`: what the
    CSRF token is derived from (default: random per process). `cache_seconds`: how long CloudWatch
    and job-index answers are kept (default: 30 s on AWS, none with an endpoint such as the local
    stack's, where they cost nothing). `allowed_hosts`: Host header values served (default: loopback
    names only; ["*"] for any). `native_moves`: see `BoardData`.
    """
    found = specs if specs is not None else _configured_jobs(config)
    if cache_seconds is None:
        cache_seconds = 0.0 if config.endpoint_url else 30.0
    data = BoardData(config, found, cache_seconds=cache_seconds, native_moves=native_moves)
    where = config.endpoint_url or f"AWS {config.region or 'default region'}" + (
        f" ({config.profile})" if config.profile else ""
    )
    board = Board(data, read_only=read_only, csrf=Csrf(secret), where=where)

    def get(path: str, handler: Callable[[Request], Awaitable[Response]]) -> Route:
        return Route(path, handler, methods=["GET"])

    def post(path: str, handler: Callable[[Request], Awaitable[Response]]) -> Route:
        return Route(path, handler, methods=["POST"])

    routes = [
        get("/", board.overview),
        get("/jobs", board.jobs),
        get("/jobs/{job}", board.job_list),
        get("/jobs/{job}/{job_id:path}", board.job),
        get("/job/{job_id:path}", board.job),
        post("/cancel", board.cancel),
        get("/dead-letters", board.dead_letter_queues),
        get("/dead-letters/{key}", board.dead_letters),
        get("/dead-letters/{key}/depth", board.dlq_depth),
        get("/dead-letters/{key}/purge", board.purge_confirm),
        post("/dead-letters/{key}/purge", board.purge),
        post("/dead-letters/{key}/redrive", board.redrive),
        get("/schedules", board.schedules),
        post("/schedules/{job}/trigger", board.trigger),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(LoopbackHosts, allowed=allowed_hosts or list(LOOPBACK_HOSTS)),
        ],
        exception_handlers={404: board.not_found, 405: board.not_found, Exception: board.failed},
    )
    app.state.board = board
    return app


__all__ = ["Board", "Csrf", "create_app", "job_path"]
