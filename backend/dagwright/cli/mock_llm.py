"""`dagwright mock-llm`: serve the scripted model over HTTP, for any OpenAI client to call."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
import uvicorn

from dagwright.errors import DagwrightError
from dagwright.llm.scripted.replay import script_from_recording
from dagwright.llm.scripted.runner import GRACEFUL_SHUTDOWN
from dagwright.llm.scripted.script import Script, default_script, load_script
from dagwright.llm.scripted.server import create_app

EXIT_BAD_INPUT = 2


def _load(script: Path | None, replay: Path | None) -> Script:
    if script is not None and replay is not None:
        raise DagwrightError("give --script or --replay, not both")
    if replay is not None:
        return script_from_recording(replay)
    if script is not None:
        return load_script(script)
    return default_script()


def mock_llm(
    script: Annotated[
        Path | None,
        typer.Option(
            help="A script (YAML or JSON) saying what to answer; default: the demo script."
        ),
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="Answer from a recording (JSONL) of a run instead of a script."),
    ] = None,
    host: Annotated[str, typer.Option(help="The address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="The port to listen on.")] = 8765,
) -> None:
    """Serve dagwright's scripted model: OpenAI's API, with scripted (not a model's) answers."""
    try:
        loaded = _load(script, replay)
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT) from None
    url = f"http://{host}:{port}/v1"
    typer.echo(f"scripted model server on {url} — answers are scripted, not a model's")
    uvicorn.run(
        create_app(loaded),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
    )
