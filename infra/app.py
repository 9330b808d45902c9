"""This project's CDK app, composed from `lambdajobs.cdk` exactly as a user would compose theirs.

Options come from cdk.json's context (stack_name, powertools_version, log_retention_days,
alarm_email, job_index, tracing); the jobs package is named once, in pyproject.toml
(`[tool.lambdajobs] jobs`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from aws_cdk import App, Environment

from lambdajobs.cdk import LambdaJobsStack, check_with_cdk_nag
from lambdajobs.project import require_jobs_module

ROOT = Path(__file__).resolve().parent.parent


def cdk_json_context() -> dict[str, Any]:
    """cdk.json's context (options and feature flags). The CDK CLI passes it to the app itself
    (CDK_CONTEXT_JSON); `python app.py` (make synth, the tests) reads it here, so both synthesize the
    same template."""
    if os.environ.get("CDK_CONTEXT_JSON"):
        return {}
    found: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text()).get("context", {})
    return found


def build_app(
    outdir: str | None = None, context: dict[str, Any] | None = None
) -> tuple[App, LambdaJobsStack]:
    merged = {**cdk_json_context(), **(context or {})}
    app = App(outdir=outdir, context=merged) if outdir else App(context=merged)

    def option(key: str, default: Any = None) -> Any:
        value = app.node.try_get_context(key)
        return default if value in (None, "") else value

    name = option("stack_name", "lambdajobs")
    stack = LambdaJobsStack(
        app,
        name,
        stack_name=name,
        jobs=require_jobs_module(option("jobs"), start=ROOT),
        powertools_version=option("powertools_version"),  # default: the installed Powertools
        log_retention_days=int(option("log_retention_days", 30)),
        alarm_email=option("alarm_email"),
        job_index=option("job_index"),  # default "off": job_stats counts from the worker's metrics
        tracing=str(option("tracing", "false")).lower() in ("1", "true"),  # -c tracing=true: every job
        env=Environment(),  # account/region from the deploying profile
        description="lambdajobs: background jobs on SQS + Lambda",
    )
    # cdk-nag's AwsSolutions rules on every synth (here and in the tests), with lambdajobs'
    # suppressions, each on one resource with its reason.
    check_with_cdk_nag(app, stack.lambdajobs)
    return app, stack
