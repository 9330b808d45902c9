"""The one Lambda entry point for every job: `handlers.entry.lambda_handler`.

Each worker function serves the job named by its `LAMBDAJOBS_JOB` environment variable (set by CDK).
"""

from __future__ import annotations

from typing import Any

import handlers  # noqa: F401  (declares every job)
from lambdajobs.runtime.worker import Worker, logger

worker = Worker()


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return worker.handle(event, context)
