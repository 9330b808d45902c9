"""The Lambda entry point of the workflow continuer: `lambdajobs.runtime.continuer_entry.lambda_handler`.

Importing it is the cold start: it builds the continuer from the function's environment, with the
collector paused and what it built frozen (`lambdajobs.runtime.startup`).
"""

from __future__ import annotations

from lambdajobs.runtime.startup import init_phase

with init_phase():
    from lambdajobs.runtime.continuer import from_environment

    lambda_handler = from_environment()
