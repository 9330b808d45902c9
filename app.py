#!/usr/bin/env python3
"""CDK entry point: import the jobs (fills the registry), build the stack, synthesize.

Fails (exit 1) when cdk-nag reports an unsuppressed error.
"""

import sys

from infra.app import build_app, nag_errors

if __name__ == "__main__":
    app, _ = build_app()
    errors = nag_errors(app.synth())
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    sys.exit(1 if errors else 0)
