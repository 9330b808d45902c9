"""The Lambda entry point of every job function: `lambdajobs.runtime.entry.lambda_handler`.

Importing this module is the cold start: it reads the function's environment once and builds its
worker (`lambdajobs.runtime.handler.from_environment`) and the client its first record needs
(`handler.warm`), with the collector paused and what it built frozen (`lambdajobs.runtime.startup`).
Import it only in Lambda (or a process that sets the same variables); elsewhere use
`lambdajobs.runtime.handler.make_handler`.

A job module that cannot be imported (a library missing from the function's dependencies) does not
fail the init: the handler starts and dead-letters every record with the error as its reason
(`FunctionInitError`), and `init_error` holds it (None when the job loaded).
"""

from __future__ import annotations

from lambdajobs.runtime.startup import init_phase

with init_phase():
    from lambdajobs.runtime.handler import from_environment, warm

    lambda_handler = from_environment()
    init_error: Exception | None = getattr(lambda_handler, "init_error", None)
    warm(lambda_handler)  # its first record's client, made while the collector is paused
