"""What Lambda gives a function beside its own asset and layers, for cold starts in the tests: the
Powertools layer's packages and the runtime's boto3, linked from this environment into one folder
(`lambdajobs.staging.platform.link_provided`, which the local stack's functions use too)."""

from __future__ import annotations

from pathlib import Path

from lambdajobs.staging.platform import link_provided


def link_lambda_packages(folder: Path) -> Path:
    """Link into `folder` every package of the recorded layer and runtime that is installed here."""
    return link_provided(folder)
