"""`dagwright triggers`: manage an app's cron schedules and webhooks on a running server
(the server fires them), with the admin token when the server needs one."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from dagwright.cli.admin_http import DEFAULT_URL, Token, Url, admin_request
from dagwright.cli.inputs import parse_inputs

triggers_app = typer.Typer(
    help="Cron schedules and webhooks that start runs of an app.", no_args_is_help=True
)


def _echo(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2))


@triggers_app.command("list")
def list_(app: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """The app's triggers (a webhook's URL included)."""
    _echo(admin_request("GET", url, f"/api/v1/apps/{app}/triggers", token)["items"])


@triggers_app.command("add-cron")
def add_cron(
    app: str,
    cron: Annotated[str, typer.Option(help="Five fields (six with seconds last).")],
    name: Annotated[str, typer.Option(help="What the schedule is for.")] = "schedule",
    timezone: Annotated[str, typer.Option(help="IANA time zone of the schedule.")] = "UTC",
    catch_up: Annotated[
        str, typer.Option(help="Ticks missed while down: latest, skip or all.")
    ] = "latest",
    input_: Annotated[list[str] | None, typer.Option("--input", "-i", help="key=value.")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Run the app's published version on a schedule."""
    body = {
        "kind": "cron",
        "name": name,
        "cron": cron,
        "timezone": timezone,
        "catch_up": catch_up,
        "inputs": parse_inputs(input_ or []),
    }
    _echo(admin_request("POST", url, f"/api/v1/apps/{app}/triggers", token, body))


@triggers_app.command("add-webhook")
def add_webhook(
    app: str,
    name: Annotated[str, typer.Option(help="Who calls it.")] = "webhook",
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", "-m", help="input=dotted.path.in.the.body (default: the body)."),
    ] = None,
    secret: Annotated[
        str | None,
        typer.Option(
            help="The name of a secret set first (PUT "
            "/api/v1/secrets/{name}) that signs the calls; required."
        ),
    ] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """A URL that runs the app with its JSON body as inputs. Each call is signed: header
    X-Dagwright-Timestamp: <Unix seconds> and X-Dagwright-Signature: sha256=<hex HMAC-SHA256
    of "<timestamp>.<body>" with the secret>; a stale (300 s) or replayed call is refused."""
    body = {
        "kind": "webhook",
        "name": name,
        "input_map": parse_inputs(map_ or []),
        "secret_name": secret,
    }
    _echo(admin_request("POST", url, f"/api/v1/apps/{app}/triggers", token, body))


@triggers_app.command("enable")
def enable(trigger_id: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Start firing again (a schedule resumes from now)."""
    _echo(admin_request("PATCH", url, f"/api/v1/triggers/{trigger_id}", token, {"enabled": True}))


@triggers_app.command("disable")
def disable(trigger_id: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """Stop firing, keeping the trigger."""
    _echo(admin_request("PATCH", url, f"/api/v1/triggers/{trigger_id}", token, {"enabled": False}))


@triggers_app.command("delete")
def delete(trigger_id: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    admin_request("DELETE", url, f"/api/v1/triggers/{trigger_id}", token)
    typer.echo(f"deleted {trigger_id}")


@triggers_app.command("firings")
def firings(trigger_id: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """The trigger's latest firings, newest first, with their run ids."""
    _echo(admin_request("GET", url, f"/api/v1/triggers/{trigger_id}/firings", token)["items"])
