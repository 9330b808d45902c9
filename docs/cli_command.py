"""The `lambdajobs` CLI as a click command, for the CLI reference page (mkdocs-click renders it)."""

import typer.main

from lambdajobs.cli import app

command = typer.main.get_command(app)
