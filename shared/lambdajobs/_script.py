"""The `lambdajobs` console script: says which extra to install when the CLI's libraries are missing,
instead of a traceback (the CLI needs `lambdajobs[cli]`; `lambdajobs dev` also `lambdajobs[local]`)."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from lambdajobs.cli import main as cli_main
    except ModuleNotFoundError as exc:
        if exc.name not in ("typer", "rich"):
            raise
        print(
            f"error: the lambdajobs command needs {exc.name}: pip install 'lambdajobs[cli]'",
            file=sys.stderr,
        )
        sys.exit(1)
    cli_main()
