"""Commands around the server: serve it, call a published app, export and import apps."""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dagwright.cli.inputs import parse_inputs
from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    # httpx (and the rich it brings) costs `serve` ~0.2 s of CPU at start-up: only `call`
    # needs it.
    import httpx


def serve(
    host: Annotated[str | None, typer.Option(help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option(help="Port to listen on.")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the SQLite database and keys live.")
    ] = None,
    workers: Annotated[int, typer.Option(help="Server processes (SQLite: keep 1).")] = 1,
) -> None:
    """Start the server (API, published endpoints, editor) and print its URL."""
    if workers == 1:
        # No collection while the server imports and builds what lives as long as it does:
        # each full one walked all of it. Its start-up turns the collector back on once it
        # has frozen that (api/state.py). (With workers, this process only supervises.)
        gc.disable()
    import uvicorn

    from dagwright.api.settings import server_settings

    # The environment carries the options to the server processes uvicorn starts, which
    # read their settings again: they must see what this process checked.
    if data_dir is not None:
        os.environ["DAGWRIGHT_DATA_DIR"] = str(data_dir)
    if host:
        os.environ["DAGWRIGHT_HOST"] = host
    if port:
        os.environ["DAGWRIGHT_PORT"] = str(port)
    try:
        settings = server_settings(host=host, port=port)
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    shown = "127.0.0.1" if settings.host in ("0.0.0.0", "::") else settings.host
    typer.echo(
        f"dagwright is serving at http://{shown}:{settings.port}/ "
        f"(API documentation at /docs; data in {settings.data_dir.resolve()})"
    )
    uvicorn.run(
        "dagwright.api.app:create_app",
        factory=True,
        host=settings.host,
        port=settings.port,
        workers=workers,
        log_level="warning",
        timeout_graceful_shutdown=5,
    )


def call(
    app: Annotated[str, typer.Argument(help="The app's slug.")],
    input_: Annotated[
        list[str] | None, typer.Option("--input", "-i", help="key=value (or key=@file).")
    ] = None,
    url: Annotated[str, typer.Option(envvar="DAGWRIGHT_URL", help="The server.")] = (
        "http://127.0.0.1:8000"
    ),
    key: Annotated[
        str | None, typer.Option(envvar="DAGWRIGHT_API_KEY", help="The app's API key.")
    ] = None,
    version: Annotated[str | None, typer.Option(help="Pin a version.")] = None,
    stream: Annotated[bool, typer.Option(help="Show events as the run goes.")] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait.")] = 300.0,
) -> None:
    """Call a published app on a running server and print its outputs."""
    import httpx

    if not key:
        typer.echo("error: give the app's API key with --key or DAGWRIGHT_API_KEY", err=True)
        raise typer.Exit(2)
    body: dict[str, Any] = {"inputs": parse_inputs(input_ or []), "stream": stream}
    if version:
        body["version"] = version
    endpoint = f"{url.rstrip('/')}/api/v1/apps/{app}/run"
    headers = {"Authorization": f"Bearer {key}"}
    try:
        with httpx.Client(timeout=timeout) as client:
            if stream:
                result = _follow(client, endpoint, body, headers)
            else:
                response = client.post(endpoint, json=body, headers=headers)
                result = _json_or_fail(response)
    except httpx.HTTPError as exc:
        typer.echo(f"error: cannot reach {endpoint}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(result.get("outputs"), indent=2, ensure_ascii=False))
    if result.get("status") != "succeeded":
        message = (result.get("error") or {}).get("message")
        typer.echo(f"error: run {result.get('run_id')} {result.get('status')}: {message}", err=True)
        raise typer.Exit(1)


def _json_or_fail(response: httpx.Response) -> dict[str, Any]:
    try:
        payload: dict[str, Any] = response.json()
    except ValueError:
        typer.echo(f"error: HTTP {response.status_code}: {response.text[:200]}", err=True)
        raise typer.Exit(1) from None
    if response.status_code >= 400:
        error = payload.get("error", {})
        typer.echo(
            f"error: HTTP {response.status_code} {error.get('code')}: {error.get('message')}",
            err=True,
        )
        raise typer.Exit(1)
    return payload


def _follow(
    client: httpx.Client, endpoint: str, body: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    """Print node events and tokens from the stream; return the final result."""
    result: dict[str, Any] = {}
    with client.stream("POST", endpoint, json=body, headers=headers) as response:
        if response.status_code >= 400:
            response.read()
            return _json_or_fail(response)
        kind = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data = json.loads(line.partition(":")[2])
                if kind == "node_message" and data.get("kind") == "token":
                    sys.stderr.write(data["data"]["text"])
                elif kind in ("node_finished", "node_skipped", "node_failed", "node_waiting"):
                    sys.stderr.write(f"\n  {kind.removeprefix('node_'):9} {data['node']}\n")
                elif kind == "result":
                    result = data
    return result


def _app_service() -> Any:
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    return Composition(load_settings()).apps()


def export(
    app: Annotated[str, typer.Argument(help="The app's slug.")],
    output: Annotated[
        Path | None, typer.Option("-o", help="File to write (default: stdout).")
    ] = None,
) -> None:
    """Export an app and its versions as JSON (no keys, secrets or runs)."""
    from dagwright.services.porting import export_app

    try:
        document = export_app(_app_service(), app)
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    if output is None:
        typer.echo(text)
    else:
        output.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"exported {app} to {output}", err=True)


def import_(
    file: Annotated[Path, typer.Argument(help="An exported app (JSON).")],
    slug: Annotated[str | None, typer.Option(help="Import under another slug.")] = None,
) -> None:
    """Import an app exported with `dagwright export` (all versions, or nothing)."""
    from dagwright.services.porting import import_app

    try:
        document = json.loads(file.read_text(encoding="utf-8"))
        app = import_app(_app_service(), document, slug=slug)
    except (OSError, ValueError) as exc:
        typer.echo(f"error: {file}: {exc}", err=True)
        raise typer.Exit(2) from None
    except DagwrightError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"imported {app.slug} ({app.id})")
