"""The board's views of jobs: the jobs page (find by id, by state and time, by a searchable field), a
job's list, a job's page (payload, attempts, traceback, logs panel, actions), a workflow's page, and
their JSON twins under /api/.

A job's page reads one record (one GetItem); its logs are a panel that loads after it (`job_logs`),
and its dead letter is looked for only when the operator asks (finding it receives DLQ messages). What
a page shows and what its `/api/` twin answers come from the same masked views (`jobs_data`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from lambdajobs.board.base import (
    JOB_POLL_SECONDS,
    LISTED,
    WATCH_SECONDS,
    BoardBase,
    _age_of,
    _first,
    _not_found,
    job_path,
)
from lambdajobs.board.data import describe_error
from lambdajobs.board.jobs_data import QUEUED_NOTE, JobsData, Listed, parse_time
from lambdajobs.runtime.errors import BadRequestError, JobIndexOffError
from lambdajobs.runtime.job_record import PARKED_STATES, JobState

#: How often the logs panel asks again for a Logs Insights query that still runs.
LOGS_POLL_SECONDS = 1


def _state(text: str) -> JobState:
    found = next((s for s in LISTED if s.value == text), None)
    if found is None:
        # the URL's text is not repeated: a link's own words never reach the page's banner
        raise BadRequestError(f"this state cannot be listed; choose one of {[s.value for s in LISTED]}.", 404)
    return found


def _times(request: Request) -> tuple[Any, Any]:
    try:
        since = parse_time(request.query_params.get("since"))
        until = parse_time(request.query_params.get("until"))
    except ValueError:
        raise BadRequestError(
            "'since' or 'until' is not a time: give 2026-12-02T13:45 (UTC) or RFC 3339."
        ) from None
    if since is not None and until is not None and since >= until:
        raise BadRequestError("'since' must be before 'until'.")
    return since, until


def _query(**params: str | None) -> str:
    kept = {k: v for k, v in params.items() if v}
    return urlencode(kept)


class JobViews(BoardBase):
    """The board's views of jobs: the jobs page, a job's list by state, a job's page, cancel."""

    #: The local stack's worker log (default: `job_logs.local_log_file()`: LAMBDAJOBS_WORKER_LOG, else
    #: build/local/worker.log); set on the board (`app.state.board.worker_log`) to read another.
    worker_log: Path | None = None

    @property
    def jobs_data(self) -> JobsData:
        return JobsData(self.data)

    def _known(self, job: str) -> None:
        """Raises BadRequestError (404) for a job this board does not know."""
        if job not in self.data.by_name:
            raise BadRequestError("no such job in this board's jobs package: see the jobs page.", 404)

    def _declared(self, job: str, field: str) -> None:
        """Raises BadRequestError (400) for a field the job does not declare searchable."""
        declared = self.data.by_name[job].searchable
        if field not in declared:
            raise BadRequestError(
                f"not a searchable field of {job}; it declares: {', '.join(declared) or 'none'} "
                "(@job(searchable=(...)))."
            )

    # -- jobs ---------------------------------------------------------------------------------------

    async def jobs(self, request: Request) -> Response:
        """The jobs page: its search forms send here, and are sent on to the list they ask for."""
        params = request.query_params
        wanted = params.get("id", "").strip()
        if wanted:
            return RedirectResponse(job_path(None, wanted), status_code=303)
        job = params.get("job", "").strip()
        if ":" in params.get("search", ""):  # the search form's "<job>:<field>"
            job, field = params["search"].split(":", 1)
            rest = _query(field=field, value=params.get("value"))
            return RedirectResponse(f"/search/{quote(job, safe='')}?{rest}", status_code=303)
        if job:
            rest = _query(state=params.get("state"), since=params.get("since"), until=params.get("until"))
            return RedirectResponse(f"/jobs/{quote(job, safe='')}?{rest}", status_code=303)
        searchable = [(s.name, f) for s in self.data.specs for f in s.searchable]
        return self.page(
            request,
            "jobs.html",
            {
                "specs": self.data.specs,
                "states": LISTED,
                "searchable": searchable,
                "queued_note": QUEUED_NOTE,
            },
        )

    def _list_context(self, request: Request, job: str) -> tuple[dict[str, Any], Any]:
        """What a job's list needs from the query string, and a build of its page (blocking)."""
        state = _state(request.query_params.get("state", JobState.DEAD.value))
        since, until = _times(request)
        cursor = request.query_params.get("cursor") or None

        def build() -> dict[str, Any]:
            spec = self.data.spec(job)
            try:
                listed = self.jobs_data.list_jobs(job, state, cursor, since=since, until=until)
                index_off = None
            except JobIndexOffError as exc:
                listed, index_off = Listed([], None), str(exc)
            return {"spec": spec, "items": listed.items, "next_cursor": listed.cursor, "index_off": index_off}

        context = {
            "job": job,
            "state": state,
            "states": LISTED,
            "cursor": cursor,
            "since": request.query_params.get("since") or "",
            "until": request.query_params.get("until") or "",
            "parked": state in PARKED_STATES,
        }
        return context, build

    async def job_list(self, request: Request) -> Response:
        job = request.path_params["job"]
        try:
            self._known(job)
            context, build = self._list_context(request, job)
        except BadRequestError as exc:
            return self.refused(request, str(exc), exc.status)

        def build_all() -> dict[str, Any]:
            found = build()
            try:
                found["queued"] = self.jobs_data.queued(job)
            except Exception as exc:  # the list anyway
                found["queued"], found["queued_error"] = [], describe_error(exc)
            return found

        built, status = await self.gather(build_all)
        context.update(built, queued_note=QUEUED_NOTE)
        context["pager"] = _query(
            state=context["state"].value, since=context["since"], until=context["until"]
        )
        return self.page(request, "job_list.html", context, partial="_job_list.html", status=status)

    async def search(self, request: Request) -> Response:
        job = request.path_params["job"]
        field = request.query_params.get("field", "")
        value = request.query_params.get("value", "")
        cursor = request.query_params.get("cursor") or None
        try:
            self._known(job)
            since, until = _times(request)
        except BadRequestError as exc:
            return self.refused(request, str(exc), exc.status)
        try:
            self._declared(job, field)
        except BadRequestError as exc:  # the page anyway: its form names the fields to choose from
            context: dict[str, Any] = {"error": str(exc), "items": [], "next_cursor": None}
            status = exc.status
        else:

            def build() -> dict[str, Any]:
                found = self.jobs_data.search(job, field, value, cursor, since=since, until=until)
                return {"items": found.items, "next_cursor": found.cursor}

            context, status = await self.gather(build)
        context.update(
            job=job,
            field=field,
            value=value,
            cursor=cursor,
            searchable=self._searchable(job),
            since=request.query_params.get("since") or "",
            until=request.query_params.get("until") or "",
        )
        context["pager"] = _query(field=field, value=value, since=context["since"], until=context["until"])
        return self.page(request, "search.html", context, partial="_search.html", status=status)

    def _searchable(self, job: str) -> tuple[str, ...]:
        try:
            return self.jobs_data.searchable(job)
        except Exception:
            return ()

    async def job(self, request: Request) -> Response:
        job = request.path_params.get("job")
        job_id = request.path_params["job_id"]
        watch_since = request.query_params.get("since")

        def build() -> dict[str, Any]:
            view = self.jobs_data.job(job_id, job)
            watching = bool(
                watch_since
                and view.state is JobState.DEAD
                and (view.updated_at or "") < watch_since
                and _age_of(watch_since) < WATCH_SECONDS
            )
            return {
                "view": view,
                "status": view.status,
                "polling": not view.done or watching,
                "watching": watching,
                "mismatch": bool(job and view.job and view.job != job),
            }

        context, status_code = await self.gather(build)
        context.update(
            job=job,
            job_id=job_id,
            job_poll_seconds=JOB_POLL_SECONDS,
            logs_url=f"/logs/{quote(job_id, safe='')}?" + _query(job=job),
        )
        return self.page(request, "job.html", context, partial="_job.html", status=status_code)

    async def logs(self, request: Request) -> Response:
        """A job's logs panel (htmx loads it after the page): the local worker log's lines, or a Logs
        Insights query started, then polled until it ends."""
        job_id = request.path_params["job_id"]
        job = request.query_params.get("job") or None
        query_id = request.query_params.get("query") or None

        def build() -> dict[str, Any]:
            return {"logs": self.jobs_data.logs(job_id, job, query_id, self.worker_log)}

        context, status = await self.gather(build)
        logs = context.get("logs")
        again = None
        if logs is not None and not logs.done:
            again = f"/logs/{quote(job_id, safe='')}?" + _query(job=job, query=logs.query_id)
        fresh = f"/logs/{quote(job_id, safe='')}?" + _query(job=job)  # a new query, or the file read again
        context.update(job=job, job_id=job_id, again=again, fresh=fresh, logs_poll_seconds=LOGS_POLL_SECONDS)
        return self.page(request, "logs.html", context, partial="_logs.html", status=status)

    async def workflow(self, request: Request) -> Response:
        workflow_id = request.path_params["workflow_id"]

        def build() -> dict[str, Any]:
            found = self.jobs_data.workflow(workflow_id)
            return {"wf": found, "wstatus": found.status}

        context, status = await self.gather(build)
        context.update(workflow_id=workflow_id)
        wstatus = context.get("wstatus")
        context["polling"] = wstatus is not None and not wstatus.done and wstatus.state != "unknown"
        if wstatus is not None and wstatus.state == "unknown" and status == 200:
            status = 404
        return self.page(request, "workflow.html", context, partial="_workflow.html", status=status)

    # -- actions ------------------------------------------------------------------------------------

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

    async def signal(self, request: Request) -> Response:
        """Send a signal to a durable job (`lambdajobs.signal`), its data the form's JSON."""
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        job_id = (_first(form, "job_id") or "").strip()
        job = (_first(form, "job") or "").strip() or None
        name = (_first(form, "name") or "").strip()
        text = (_first(form, "data") or "").strip()
        back = job_path(job, job_id) if job_id else "/jobs"
        try:
            data = json.loads(text) if text else None
        except ValueError as exc:
            return self.back(back, f"error: the signal's data is not JSON ({exc}): nothing sent")

        def do() -> str:
            return self.jobs_data.signal(job_id, name, data)

        return await self.act(request, do, back)

    async def enqueue_again(self, request: Request) -> Response:
        """Send a job again under a new id, with its recorded payload (level and tenant kept); the
        new job's page says so."""
        form = await self.form(request)
        if isinstance(form, Response):
            return form
        job_id = (_first(form, "job_id") or "").strip()
        job = (_first(form, "job") or "").strip() or None
        back = job_path(job, job_id) if job_id else "/jobs"
        try:
            new_id, line = await run_in_threadpool(self.jobs_data.enqueue_again, job_id)
        except Exception as exc:
            if _not_found(exc):
                return self.refused(request, describe_error(exc), status=404)
            return self.back(back, f"error: {describe_error(exc)}")
        return self.back(job_path(job, new_id), line)

    # -- the JSON API -------------------------------------------------------------------------------

    async def _api(self, build: Any) -> Response:
        """Run `build` (blocking) and answer its {"value": ...} as JSON, or {"error": "..."} with the
        page's status code (404 unknown, 400 a bad request, 502 AWS refused)."""
        context, status = await self.gather(build)
        if "error" in context:
            return self.json({"error": context["error"]}, context.get("status", status))
        return self.json(context["value"], status)

    async def api_job_specs(self, request: Request) -> Response:
        """The jobs page: the board's jobs, what each can be listed and searched by."""
        jobs = [
            {
                "job": spec.name,
                "priorities": spec.priorities,
                "searchable": spec.searchable,
                "pii_fields": spec.pii_fields,
                "max_attempts": spec.max_attempts,
                "timeout_seconds": spec.timeout_seconds,
                "schedule": {"expression": spec.schedule.expression, "timezone": spec.schedule.timezone}
                if spec.schedule is not None
                else None,
            }
            for spec in self.data.specs
        ]
        return self.json({"jobs": jobs, "states": [s.value for s in LISTED], "queued": QUEUED_NOTE})

    async def api_jobs(self, request: Request) -> Response:
        job = request.path_params["job"]
        try:
            self._known(job)
            state = _state(request.query_params.get("state", JobState.DEAD.value))
            since, until = _times(request)
        except BadRequestError as exc:
            return self.json({"error": str(exc)}, exc.status)
        cursor = request.query_params.get("cursor") or None

        def build() -> dict[str, Any]:
            try:
                found = self.jobs_data.list_jobs(job, state, cursor, since=since, until=until)
            except JobIndexOffError as exc:
                return {
                    "value": {
                        "job": job,
                        "state": state.value,
                        "items": [],
                        "cursor": None,
                        "index_off": str(exc),
                    }
                }
            return {"value": {"job": job, "state": state.value, "items": found.items, "cursor": found.cursor}}

        return await self._api(build)

    async def api_job(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]

        def build() -> dict[str, Any]:
            return {"value": self.jobs_data.job(job_id).plain()}

        return await self._api(build)

    async def api_search(self, request: Request) -> Response:
        job = request.path_params["job"]
        field = request.query_params.get("field", "")
        value = request.query_params.get("value", "")
        cursor = request.query_params.get("cursor") or None
        try:
            self._known(job)
            self._declared(job, field)
            since, until = _times(request)
        except BadRequestError as exc:
            return self.json({"error": str(exc)}, exc.status)

        def build() -> dict[str, Any]:
            found = self.jobs_data.search(job, field, value, cursor, since=since, until=until)
            return {"value": {"job": job, "field": field, "items": found.items, "cursor": found.cursor}}

        return await self._api(build)

    async def api_workflow(self, request: Request) -> Response:
        workflow_id = request.path_params["workflow_id"]

        def build() -> dict[str, Any]:
            found = self.jobs_data.workflow(workflow_id)
            if found.status.state == "unknown":
                return {"error": found.status.note or "no workflow with this id", "status": 404}
            return {"value": found.plain()}

        return await self._api(build)

    async def api_logs(self, request: Request) -> Response:
        job_id = request.path_params["job_id"]
        job = request.query_params.get("job") or None
        query_id = request.query_params.get("query") or None

        def build() -> dict[str, Any]:
            return {"value": self.jobs_data.logs(job_id, job, query_id, self.worker_log)}

        return await self._api(build)


#: (method, path, view name): the routes of these views, in the order they are matched.
ROUTES: list[tuple[str, str, str]] = [
    ("GET", "/jobs", "jobs"),
    ("GET", "/jobs/{job}", "job_list"),
    ("GET", "/jobs/{job}/{job_id:path}", "job"),
    ("GET", "/job/{job_id:path}", "job"),
    ("GET", "/search/{job}", "search"),
    ("GET", "/logs/{job_id:path}", "logs"),
    ("GET", "/workflows/{workflow_id:path}", "workflow"),
    ("POST", "/cancel", "cancel"),
    ("POST", "/signal", "signal"),
    ("POST", "/enqueue-again", "enqueue_again"),
    ("GET", "/api/jobs", "api_job_specs"),
    ("GET", "/api/jobs/{job}", "api_jobs"),
    ("GET", "/api/job/{job_id:path}", "api_job"),
    ("GET", "/api/search/{job}", "api_search"),
    ("GET", "/api/workflows/{workflow_id:path}", "api_workflow"),
    ("GET", "/api/logs/{job_id:path}", "api_logs"),
]
