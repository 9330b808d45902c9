"""Where a project names its jobs package and keeps its lambdajobs settings: `[tool.lambdajobs]` in
pyproject.toml (or cdk.json's context). The code lives in `lambdajobs.runtime.project`, so that the
job loader can find a project's root too; this is its public name."""

from lambdajobs.runtime.project import (
    HOW,
    jobs_module,
    lambdajobs_root,
    make_importable,
    project_root,
    require_jobs_module,
    tool_settings,
)

__all__ = [
    "HOW",
    "jobs_module",
    "lambdajobs_root",
    "make_importable",
    "project_root",
    "require_jobs_module",
    "tool_settings",
]
