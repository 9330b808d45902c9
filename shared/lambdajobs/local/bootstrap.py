"""One execution environment of the local stack: run by path in an isolated interpreter
(`python -I -S bootstrap.py <path JSON> <handler> <in fd> <out fd>`), never imported.

Like Lambda's Python runtime it puts the function's code and layers on `sys.path` (nothing else:
`-I -S` leaves out site-packages, PYTHONPATH and the current folder), imports the handler the
template names once (the init phase), then serves invocations one at a time, each with a Lambda
context whose remaining time counts down from the function's timeout and its own `_X_AMZN_TRACE_ID`.
The parent (`lambdajobs.local.functions`) sends one JSON line per invocation on `in fd` and reads one
JSON line per answer on `out fd`; stdout and stderr are the function's log. It imports nothing of
lambdajobs itself: what the function imports comes from its asset, as on Lambda.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback


class LambdaContext:
    """What Lambda's Python runtime passes as `context`."""

    def __init__(self, request: dict, env: os._Environ[str] | dict) -> None:
        self.function_name = env.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = env.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.memory_limit_in_mb = int(env.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.invoked_function_arn = request["function_arn"]
        self.aws_request_id = request["request_id"]
        self.log_group_name = env.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = env.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline = time.monotonic() + request["timeout_ms"] / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _error(exc: BaseException) -> dict:
    return {"type": type(exc).__name__, "message": str(exc)}


def main() -> int:
    paths, handler_name = json.loads(sys.argv[1]), sys.argv[2]
    inbox = os.fdopen(int(sys.argv[3]), "r", encoding="utf-8")
    outbox = os.fdopen(int(sys.argv[4]), "w", encoding="utf-8")

    def answer(message: dict) -> None:
        outbox.write(json.dumps(message) + "\n")
        outbox.flush()

    sys.path[:0] = paths
    started = time.monotonic()
    try:
        module_name, _, attribute = handler_name.rpartition(".")
        module = importlib.import_module(module_name)
        handler = getattr(module, attribute)
    except Exception as exc:  # Lambda: Runtime.ImportModuleError / Runtime.HandlerNotFound
        traceback.print_exc()
        answer({"init": "failed", "error": _error(exc)})
        return 1
    init_error = getattr(module, "init_error", None)
    answer(
        {
            "init": "ok",
            "init_ms": round((time.monotonic() - started) * 1000),
            "init_error": str(init_error) if init_error is not None else None,
        }
    )
    for line in inbox:
        request = json.loads(line)
        os.environ["_X_AMZN_TRACE_ID"] = request["trace_id"]
        try:
            response = handler(request["event"], LambdaContext(request, os.environ))
            text = json.dumps({"response": response})  # Lambda: Runtime.MarshalError if it cannot
        except Exception as exc:  # the invocation fails; the environment stays, as on Lambda
            traceback.print_exc()
            text = json.dumps({"error": _error(exc)})
        sys.stdout.flush()
        sys.stderr.flush()
        outbox.write(text + "\n")
        outbox.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
