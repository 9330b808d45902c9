"""A job that reports where its function runs: its process, its `sys.path`, its environment."""

from __future__ import annotations

import os
import sys

from pydantic import BaseModel

from lambdajobs import job


class Nothing(BaseModel):
    pass


@job(timeout_seconds=5, uses=("bucket",))
def probe(payload: Nothing) -> dict:
    return {
        "pid": os.getpid(),
        "path": sys.path,
        "environment": dict(os.environ),
        "modules": sorted(
            m
            for m in sys.modules
            if m.split(".")[0] in ("tests", "handlers", "moto", "aws_cdk", "rich", "typer", "jinja2")
        ),
    }
