#!/usr/bin/env python3
"""CDK entry point: import the jobs (fills the registry), build the stack, synthesize."""

from infra.app import build_app

if __name__ == "__main__":
    app, _ = build_app()
    app.synth()
