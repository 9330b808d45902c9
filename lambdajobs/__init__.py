"""lambdajobs tools that run outside Lambda: local provisioning, the event source emulator, the CLI.

Not part of the Lambda asset (only `shared/` and `handlers/` are).
"""
