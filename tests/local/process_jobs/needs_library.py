"""A job whose module imports a library this environment has and its function's asset does not:
jinja2 (installed here for the board, never declared in this project's [tool.lambdajobs] dependencies)."""

from __future__ import annotations

import jinja2
from pydantic import BaseModel

from lambdajobs import job


class Mail(BaseModel):
    to: str


@job(timeout_seconds=5, max_attempts=3)
def render_mail(payload: Mail) -> dict:
    return {"body": jinja2.Template("Hello {{ to }}").render(to=payload.to)}
