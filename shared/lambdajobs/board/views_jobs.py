"""The board's views of jobs: the jobs page, a job's list by state, a job's page, cancel."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from lambdajobs.board.base import (
    JOB_POLL_SECONDS,
    LISTED,
    WATCH_SECONDS,
    BoardBase,
    _age_of,
    _first,
    job_path,
)
from lambdajobs.runtime.errors import (
    JobIndexOffError,
)
from lambdajobs.runtime.job_record import PARKED_STATES, JobState


class JobViews(BoardBase):
    """The board's views of jobs: the jobs page, a job's list by state, a job's page, cancel."""

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


#: (method, path, view name): the routes of these views, in the order they are matched.
ROUTES: list[tuple[str, str, str]] = [
    ("GET", "/jobs", "jobs"),
    ("GET", "/jobs/{job}", "job_list"),
    ("GET", "/jobs/{job}/{job_id:path}", "job"),
    ("GET", "/job/{job_id:path}", "job"),
    ("POST", "/cancel", "cancel"),
]
