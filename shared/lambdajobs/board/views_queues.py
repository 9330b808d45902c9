"""The board's views of queues: the overview, dead letters (redrive, purge) and schedules."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from lambdajobs.board.base import (
    BoardBase,
    _first,
    _local_path,
    _not_found,
    _now_iso,
    _with_query,
    job_path,
)
from lambdajobs.board.data import describe_error


class QueueViews(BoardBase):
    """The board's views of queues: the overview, dead letters (redrive, purge) and schedules."""

    # -- overview ---------------------------------------------------------------------------------

    async def overview(self, request: Request) -> Response:
        def build() -> dict[str, Any]:
            jobs, workflows = self.data.overview()
            notes = list(dict.fromkeys(j.counts_note for j in jobs if j.counts_note))
            return {"jobs": jobs, "workflows": workflows, "notes": notes}

        context, status = await self.gather(build)
        return self.page(request, "overview.html", context, partial="_overview.html", status=status)

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


#: (method, path, view name): the routes of these views, in the order they are matched.
ROUTES: list[tuple[str, str, str]] = [
    ("GET", "/", "overview"),
    ("GET", "/dead-letters", "dead_letter_queues"),
    ("GET", "/dead-letters/{key}", "dead_letters"),
    ("GET", "/dead-letters/{key}/depth", "dlq_depth"),
    ("GET", "/dead-letters/{key}/purge", "purge_confirm"),
    ("POST", "/dead-letters/{key}/purge", "purge"),
    ("POST", "/dead-letters/{key}/redrive", "redrive"),
    ("GET", "/schedules", "schedules"),
    ("POST", "/schedules/{job}/trigger", "trigger"),
]
