"""The board's web app: Starlette routes, Jinja2 pages, htmx polling, CSRF-checked actions.

Every page is a plain GET whose state is all in its URL (a link can be shared); its live part is a
partial template that htmx fetches again every few seconds (the `HX-Request` header asks for the
partial alone). Every action is a POST of a plain form carrying the board's CSRF token, compared
with `hmac.compare_digest`; a POST without it gets 403 and changes nothing, and `read_only` refuses
every POST. Errors (AWS refused, no such stack) render as one line in the page, never a traceback.

Only loopback host names, and the names given as `allowed_hosts` (`--allow-host`), are served,
whatever address the board listens on (a web page elsewhere cannot reach it through DNS rebinding);
a POST whose Origin names another site is refused even with a valid token; pages may not be framed
(no clickjacking of the purge button), and the Content-Security-Policy allows scripts from the board
itself only. See `lambdajobs.board.security`.
"""

from __future__ import annotations

from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from lambdajobs.board import views_jobs, views_queues
from lambdajobs.board.base import HERE, BoardBase, job_path
from lambdajobs.board.data import BoardData
from lambdajobs.board.security import (
    Csrf,
    LoopbackHosts,
    SameOrigin,
    SecurityHeaders,
    allowed_host_names,
)
from lambdajobs.board.views_jobs import JobViews
from lambdajobs.board.views_queues import QueueViews
from lambdajobs.runtime.config import StackConfig
from lambdajobs.runtime.spec import JobSpec, ensure_loaded, jobs_in


class Board(JobViews, QueueViews):
    """The board: every view (`views_jobs`, `views_queues`) on the state `BoardBase` holds."""


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
    stack's, where they cost nothing). `allowed_hosts`: host names served besides the loopback names
    (`--allow-host`; there is no wildcard: ValueError for "*" or a name with a port).
    `native_moves`: see `BoardData`.
    """
    hosts = allowed_host_names(allowed_hosts or ())
    found = specs if specs is not None else _configured_jobs(config)
    if cache_seconds is None:
        cache_seconds = 0.0 if config.endpoint_url else 30.0
    data = BoardData(config, found, cache_seconds=cache_seconds, native_moves=native_moves)
    where = config.endpoint_url or f"AWS {config.region or 'default region'}" + (
        f" ({config.profile})" if config.profile else ""
    )
    board = Board(data, read_only=read_only, csrf=Csrf(secret), where=where)

    routes: list[Any] = [
        Route(path, getattr(board, view), methods=[method])
        for method, path, view in [*views_queues.ROUTES, *views_jobs.ROUTES]
    ]
    routes.append(Mount("/static", StaticFiles(directory=HERE / "static"), name="static"))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(LoopbackHosts, allowed=hosts),
            Middleware(SameOrigin),
        ],
        exception_handlers={404: board.not_found, 405: board.not_found, Exception: board.failed},
    )
    app.state.board = board
    return app


__all__ = ["Board", "BoardBase", "create_app", "job_path"]
