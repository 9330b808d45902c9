#!/usr/bin/env python3
"""CDK entry point: build this project's stack (infra/app.py) and synthesize.

Fails (exit 1) when cdk-nag reports an unsuppressed error.
"""

import sys

from infra.app import build_app
from lambdajobs.cdk import nag_errors
from lambdajobs.errors import LambdaJobsError

if __name__ == "__main__":
    try:
        app, _ = build_app()
    except LambdaJobsError as exc:  # a bad declaration or option: one line, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    errors = nag_errors(app.synth())
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    sys.exit(1 if errors else 0)
