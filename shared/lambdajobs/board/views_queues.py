"""The board's views of queues: the overview (pause, resume), dead letters (listed from the job
records without receiving; found, redriven with progress, purged) and schedules (trigger, run now),
each GET page with its JSON twin under /api."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote, urlencode

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
from lambdajobs.board.data import Queue, describe_error
from lambdajobs.runtime.errors import (
    InvalidOptionError,
    QueueNotFoundError,
    StackNotFoundError,
    UnknownJobError,
)

#: How often a redrive's progress page asks again.
PROGRESS_POLL_SECONDS = 1


def _dlq_path(key: str) -> str:
    return f"/dead-letters/{quote(key, safe='@')}"


def parse_age(text: str | None) -> timedelta | None:
    """'90s', '15m', '2h', '3d' (the CLI's --older-than) -> timedelta; empty: None.

    Raises:
        InvalidOptionError: any other text.
    """
    import re

    if not text or not text.strip():
        return None
    match = re.fullmatch(r"\s*(\d{1,6})\s*([smhd])\s*", text)
    if not match:
        raise InvalidOptionError(  # the URL's words are not repeated (a link chose them)
            "this age is not understood; use a number and s, m, h or d, e.g. 30m or 2d."
        )
    unit = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}[match[2]]
    return timedelta(**{unit: int(match[1])})


def queue_json(queue: Queue) -> dict[str, Any]:
    """A queue as the JSON API names it (its URLs are the stack's business)."""
    return {"key": queue.key, "label": queue.label, "kind": queue.kind, "job": queue.job}


class _Filter:
    """A DLQ page's filter, from its query (or a form's fields): error type and age."""

    def __init__(self, error: str | None, older_than: str | None) -> None:
        self.error = (error or "").strip()[:200] or None
        self.older_than_text = (older_than or "").strip()[:20]
        self.older_than = parse_age(self.older_than_text)

    @property
    def active(self) -> bool:
        return bool(self.error) or self.older_than is not None

    def query(self, **more: str) -> str:
        params = {"error": self.error or "", "older_than": self.older_than_text, **more}
        return urlencode({k: v for k, v in params.items() if v})


class QueueViews(BoardBase):
    """The board's views of queues: the overview, dead letters (redrive, purge) and schedules."""

    def _queue(self, key: str) -> Queue:
        """The queue a URL names; an unknown one is one fixed line (no words of the URL in a page)."""
        try:
            return self.data.queue(key)
        except (UnknownJobError, QueueNotFoundError) as exc:
            if isinstance(exc, StackNotFoundError):
                raise
            raise QueueNotFoundError("no such queue on this stack: see the dead letters page.") from None

    # -- overview ---------------------------------------------------------------------------------

    def _overview(self) -> dict[str, Any]:
        jobs, workflows = self.data.overview()
        notes = list(dict.fromkeys(j.counts_note for j in jobs if j.counts_note))
        return {"jobs": jobs, "workflows": workflows, "notes": notes}

    async def overview(self, request: Request) -> Response:
        context, status = await self.gather(self._overview)
        return self.page(request, "overview.html", context, partial="_overview.html", status=status)

    async def api_overview(self, request: Request) -> Response:
        context, status = await self.gather(self._overview)
        return self.json(context, status)

    async def _pause(self, request: Request, paused: bool) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        key = request.path_params["key"]
        back = _local_path(_first(form, "next"), "/")

        def do() -> str:
            return self.data.set_paused(self._queue(key).key, paused)

        return await self.act(request, do, back)

    async def pause(self, request: Request) -> Response:
        return await self._pause(request, True)

    async def resume(self, request: Request) -> Response:
        return await self._pause(request, False)

    # -- dead letters -----------------------------------------------------------------------------

    def _queues(self) -> dict[str, Any]:
        found: list[tuple[Any, int | None, str | None]] = []
        for queue in self.data.dead_letter_queues():
            try:
                found.append((queue, self.data.depth(queue.dlq_url), None))
            except Exception as exc:
                found.append((queue, None, describe_error(exc)))
        return {"queues": found}

    async def dead_letter_queues(self, request: Request) -> Response:
        context, status = await self.gather(self._queues)
        return self.page(request, "dead_letters.html", context, partial="_dead_letters.html", status=status)

    async def api_dead_letter_queues(self, request: Request) -> Response:
        context, status = await self.gather(self._queues)
        if status == 200:
            rows = [{**queue_json(q), "depth": d, "error": e} for q, d, e in context["queues"]]
            context = {"queues": rows}
        return self.json(context, status)

    def _letters(self, request: Request) -> tuple[str, Any, dict[str, Any], int]:
        """(key, filter or None, context, status) of a DLQ page: one page of letters from the
        records, no message received."""
        key = request.path_params["key"]
        query = request.query_params
        try:
            shown = _Filter(query.get("error"), query.get("older_than"))
        except InvalidOptionError as exc:
            return key, None, {"error": str(exc)}, 400
        cursor = query.get("cursor") or None
        return key, shown, {"cursor_in": cursor}, 200

    async def dead_letters(self, request: Request) -> Response:
        key, shown, context, status = self._letters(request)
        if shown is not None:

            def build() -> dict[str, Any]:
                queue = self._queue(key)
                page = self.data.dead_letters(
                    queue, context["cursor_in"], error_type=shown.error, older_than=shown.older_than
                )
                matching = self.data.matching(queue, shown.error, shown.older_than) if shown.active else None
                levels = self.data.job_queues(self.data.spec(queue.job)) if queue.job else []
                return {"queue": queue, "page": page, "matching": matching, "levels": levels}

            context, status = await self.gather(build)
        context.update(key=key, filter=shown, listed_at=datetime.now(UTC), depth=None)
        if context.get("page") is not None:
            context["depth"] = context["page"].depth
        return self.page(request, "dlq.html", context, status=status)

    async def api_dead_letters(self, request: Request) -> Response:
        key, shown, context, status = self._letters(request)
        if shown is None:
            return self.json(context, status)

        def build() -> dict[str, Any]:
            queue = self._queue(key)
            page = self.data.dead_letters(
                queue, context["cursor_in"], error_type=shown.error, older_than=shown.older_than
            )
            return {
                "queue": queue_json(queue),
                "items": page.items,
                "cursor": page.cursor,
                "recorded": page.recorded,
                "depth": page.depth,
                "unrecorded": page.unrecorded,
                "scanned_past": page.scanned,
                "filter": {"error": shown.error, "older_than": shown.older_than_text or None},
            }

        found, status = await self.gather(build)
        return self.json(found, status)

    async def dlq_depth(self, request: Request) -> Response:
        key = request.path_params["key"]

        def build() -> dict[str, Any]:
            queue = self._queue(key)
            return {"queue": queue, "depth": self.data.depth(queue.dlq_url)}

        context, status = await self.gather(build)
        context.update(key=key)
        return self.page(request, "_dlq_depth.html", context, partial="_dlq_depth.html", status=status)

    async def receive(self, request: Request) -> Response:
        """Show what only a receive can: the messages the worker never recorded (or one message, by
        message id or job id). A POST: each message received has its receive count raised by one."""
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        key = request.path_params["key"]
        wanted = (_first(form, "id") or "").strip()

        def build() -> dict[str, Any]:
            queue = self._queue(key)
            if wanted:
                found = self.data.find(queue, wanted)
                letters = [found] if found is not None else []
            else:
                letters = self.data.peek(queue, only_unrecorded=queue.job is not None)
            return {"queue": queue, "letters": letters}

        context, status = await self.gather(build)
        context.update(key=key, wanted=wanted, listed_at=datetime.now(UTC))
        return self.page(request, "dlq_received.html", context, status=status)

    async def redrive(self, request: Request) -> Response:
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        key = request.path_params["key"]
        back = _local_path(_first(form, "next"), _dlq_path(key))
        message_ids: list[str] | None = None
        job_ids: list[str] | None = None
        picked = [i for i in form.get("pick", []) if i]
        if form.get("one"):
            message_ids = form["one"][:1]
        elif form.get("redrive_job"):
            job_ids = form["redrive_job"][:1]
        elif [i for i in form.get("message_id", []) if i] or picked:
            message_ids = [i for i in form.get("message_id", []) if i] or None
            job_ids = picked or None
        elif form.get("job_id"):  # from a job's page: that job's message
            job_ids = form["job_id"][:1]
        elif not form.get("all"):
            return self.back(back, "nothing selected: nothing moved")
        try:
            shown = _Filter(_first(form, "error"), _first(form, "older_than"))
        except InvalidOptionError as exc:
            return self.back(back, f"error: {exc}")
        selection = message_ids is not None or job_ids is not None
        if form.get("job_id"):  # from a job's page: move it now, and watch the redriven run there
            job, job_id = (form.get("job") or [""])[0], form["job_id"][0]
            back = _with_query(job_path(job or None, job_id), since=_now_iso())

            def do() -> str:
                return self.data.redrive(self._queue(key), message_ids, job_ids=job_ids)

            return await self.act(request, do, back)

        def start() -> Any:
            queue = self._queue(key)
            if not selection and not shown.active and queue.url and self.data.native_moves:
                return self.data.redrive(queue)  # SQS's own move task: no progress to follow here
            expected = None
            if selection:
                expected = len(message_ids or ()) + len(job_ids or ())
            elif queue.job is not None:
                expected = self.data.matching(queue, shown.error, shown.older_than)
            return self.data.start_redrive(
                queue,
                message_ids=message_ids,
                job_ids=job_ids,
                error_type=None if selection else shown.error,
                older_than=None if selection else shown.older_than,
                expected=expected,
            )

        try:
            started = await run_in_threadpool(start)
        except Exception as exc:
            if _not_found(exc):
                return self.refused(request, describe_error(exc), status=404)
            return self.back(back, f"error: {describe_error(exc)}")
        if isinstance(started, str):
            return self.back(back, started)
        return self.back(f"/redrives/{started.id}", f"redriving from the DLQ of {started.label}")

    def _progress(self, task_id: str) -> dict[str, Any]:
        found = self.data.redrives.get(task_id)
        if found is None:
            gone = "it ended over an hour ago, or the board restarted"
            return {"error": f"no such redrive on this board ({gone})"}
        return {"task": found}

    async def redrive_progress(self, request: Request) -> Response:
        context = self._progress(request.path_params["task"])
        status = 404 if "task" not in context else 200
        context.update(progress_poll=PROGRESS_POLL_SECONDS)
        return self.page(request, "redrive.html", context, partial="_redrive.html", status=status)

    async def api_redrive(self, request: Request) -> Response:
        context = self._progress(request.path_params["task"])
        return self.json(context.get("task", context), 200 if "task" in context else 404)

    async def purge_confirm(self, request: Request) -> Response:
        key = request.path_params["key"]
        if self.read_only:
            return self.refused(request, "This board is read-only (--read-only): it changes nothing.")

        def build() -> dict[str, Any]:
            queue = self._queue(key)
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
            queue = self._queue(key)
            done, count, line = self.data.purge(queue, expected)
            return {"queue": queue, "done": done, "depth": count, "line": line}

        context, status = await self.gather(build)
        if status != 200:
            return self.page(request, "purge.html", {**context, "key": key, "depth": None}, status=status)
        if not context["done"]:  # more than the operator agreed to delete: ask again
            return self.page(request, "purge.html", {**context, "key": key, "changed": context["line"]})
        return self.back(_dlq_path(key), context["line"])

    # -- schedules --------------------------------------------------------------------------------

    def _schedules(self) -> dict[str, Any]:
        cron = self.data.cron_jobs()
        try:
            pending, more = self.data.one_time_schedules()
            pending_error = None
        except Exception as exc:
            pending, more, pending_error = [], False, describe_error(exc)
        return {"cron": cron, "pending": pending, "more": more, "pending_error": pending_error}

    async def schedules(self, request: Request) -> Response:
        context, status = await self.gather(self._schedules)
        return self.page(request, "schedules.html", context, partial="_schedules.html", status=status)

    async def api_schedules(self, request: Request) -> Response:
        context, status = await self.gather(self._schedules)
        return self.json(context, status)

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

    async def run_now(self, request: Request) -> Response:
        """Run a pending one-time schedule now (`BoardData.run_once_now`)."""
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        name = request.path_params["name"]
        try:
            job, job_id, line = await run_in_threadpool(self.data.run_once_now, name)
        except Exception as exc:
            if _not_found(exc) or type(exc).__name__ == "ResourceNotFoundException":
                return self.back("/schedules", "error: no such pending schedule (it ran, or was deleted)")
            return self.back("/schedules", f"error: {describe_error(exc)}")
        return self.back(job_path(job, job_id), line)


#: (method, path, view name): the routes of these views, in the order they are matched.
ROUTES: list[tuple[str, str, str]] = [
    ("GET", "/", "overview"),
    ("GET", "/api/overview", "api_overview"),
    ("POST", "/queues/{key}/pause", "pause"),
    ("POST", "/queues/{key}/resume", "resume"),
    ("GET", "/dead-letters", "dead_letter_queues"),
    ("GET", "/api/dead-letters", "api_dead_letter_queues"),
    ("GET", "/dead-letters/{key}", "dead_letters"),
    ("GET", "/api/dead-letters/{key}", "api_dead_letters"),
    ("GET", "/dead-letters/{key}/depth", "dlq_depth"),
    ("POST", "/dead-letters/{key}/receive", "receive"),
    ("GET", "/dead-letters/{key}/purge", "purge_confirm"),
    ("POST", "/dead-letters/{key}/purge", "purge"),
    ("POST", "/dead-letters/{key}/redrive", "redrive"),
    ("GET", "/redrives/{task}", "redrive_progress"),
    ("GET", "/api/redrives/{task}", "api_redrive"),
    ("GET", "/schedules", "schedules"),
    ("GET", "/api/schedules", "api_schedules"),
    ("POST", "/schedules/{job}/trigger", "trigger"),
    ("POST", "/schedules/once/{name}/run", "run_now"),
]
