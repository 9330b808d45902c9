"""What Lambda gives a function beside its own asset and layers, for cold starts in the tests: the
Powertools layer's packages (as `lambdajobs.cdk.platform` records them for the pinned version) and the
runtime's boto3 with what it needs, linked from this environment into one folder."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def link_lambda_packages(folder: Path) -> Path:
    """Link into `folder` every package of the recorded layer and runtime that is installed here (a
    layer package not installed here is one nothing of ours imports; the import check vouches for the
    rest). Returns `folder`."""
    from lambdajobs.cdk import platform

    folder.mkdir(parents=True, exist_ok=True)
    for name in sorted(platform.layer_modules() | platform.runtime_modules()):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            continue
        origin = Path(spec.origin)
        source = origin.parent if origin.name == "__init__.py" else origin
        (folder / source.name).symlink_to(source)
    return folder
