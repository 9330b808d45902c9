"""`lambdajobs`: the operator CLI (typer + rich), and `lambdajobs dev`, the local stack."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

app = typer.Typer(
    help="lambdajobs: serverless background jobs on AWS.", no_args_is_help=True, add_completion=False
)
console = Console()
err = Console(stderr=True)


@app.callback()
def _root() -> None:
    """lambdajobs: serverless background jobs on AWS."""


def _dev_table(local) -> Table:  # type: ignore[no-untyped-def]
    table = Table(title=f"lambdajobs dev: stack '{local.stack}' on {local.endpoint}")
    for column in ("job", "depth", "in flight", "delayed", "DLQ", "ok", "failed", "invocations"):
        table.add_column(column, justify="left" if column == "job" else "right")
    for job, mapping in sorted(local.mappings.items()):
        health = local.health(job)
        stats = mapping.stats
        table.add_row(
            job,
            str(health.depth),
            str(health.in_flight),
            str(health.delayed),
            str(health.dlq_depth),
            str(stats.succeeded),
            str(stats.failed),
            str(stats.invocations),
        )
    return table


@app.command()
def dev(
    port: int = typer.Option(4580, help="loopback port of the embedded AWS endpoint (0: any free port)"),
    stack: str = typer.Option("local", help="stack name (queue names, manifest)"),
    log_file: Path = typer.Option(Path("build/local/worker.log"), help="where the workers' JSON logs go"),
    refresh_seconds: float = typer.Option(1.0, help="how often the queue lines refresh"),
) -> None:
    """Run every job of handlers/ on a local stack: embedded AWS, Lambda-like polling, cron."""
    from lambdajobs.local import LocalStack

    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    local = LocalStack(stack=stack, port=port, log_file=log_file)
    try:
        local.start()
    except OSError as exc:
        err.print(f"[red]error:[/red] cannot start the local endpoint on port {port} ({exc}); try --port 0.")
        raise typer.Exit(1) from None
    try:
        local.start_workers()
        exports = " ".join(f"{k}={v}" for k, v in local.environment().items())
        console.print(f"lambdajobs local stack on [bold]{local.endpoint}[/bold] (stack '{stack}')")
        console.print("Point boto3, a producer or the CLI at it from another shell:")
        console.print(f"  export {exports}", soft_wrap=True, highlight=False)
        console.print("  lambdajobs queues")
        console.print(
            "  python -c 'from shared import enqueue; "
            'print(enqueue("send_email", {"to": "ada@example.com", "subject": "Hi", "body": "Hello"}))\'',
            soft_wrap=True,
            highlight=False,
        )
        console.print(
            f"Worker logs: {log_file}. Ctrl-C stops (in-flight batches finish first).", soft_wrap=True
        )
        with Live(_dev_table(local), console=console, refresh_per_second=4, transient=False) as live:
            while not stop.wait(refresh_seconds):
                live.update(_dev_table(local))
        console.print("\nstopping: no new polls, waiting for in-flight batches...")
    finally:
        local.stop()
    console.print("stopped.")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
