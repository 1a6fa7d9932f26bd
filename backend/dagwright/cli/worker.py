"""`dagwright worker`: execute queued runs (queue mode, docs/deploy.md)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Annotated

import typer

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.settings import Settings


def worker(
    concurrency: Annotated[
        int | None,
        typer.Option(help="Runs executed at once (default DAGWRIGHT_WORKER_CONCURRENCY, 16)."),
    ] = None,
) -> None:
    """Execute queued runs until stopped (SIGTERM lets the runs in progress finish within
    DAGWRIGHT_WORKER_SHUTDOWN_GRACE seconds and hands the others back to the queue). Any
    number of workers, on any machines, share the queue in the service's PostgreSQL; a run
    whose worker stops or dies is resumed by another."""
    from dagwright.settings import load_settings

    overrides = {} if concurrency is None else {"worker_concurrency": concurrency}
    try:
        settings = load_settings(**overrides)
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    if settings.queue != "procrastinate":
        typer.echo(
            "error: a worker executes queued runs: set DAGWRIGHT_QUEUE=procrastinate and a "
            "PostgreSQL DAGWRIGHT_DATABASE_URL, as the API processes have",
            err=True,
        )
        raise typer.Exit(2)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # Procrastinate logs every job's start and end at INFO: a line per run is noise here.
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    typer.echo(f"dagwright worker {settings.replica}: {settings.worker_concurrency} runs at once")
    try:
        asyncio.run(_work(settings))
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None


async def _work(settings: Settings) -> None:
    from dagwright.composition import Composition
    from dagwright.services.queue.worker import work

    # The server's palette and block services (Data-Copilot's interfaces as tool blocks, the
    # inbox of human_input nodes): those of the composition's "server" kind.
    process = Composition(settings)
    try:
        runner = process.durable_runner()
        await work(runner, settings.database_url, process.queue_settings(), settings.replica)
    finally:
        await process.aclose()
