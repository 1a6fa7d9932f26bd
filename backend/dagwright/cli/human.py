"""`dagwright human`: the requests runs are waiting on, and answering them, on a running
server (with the admin token when it needs one)."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import urlencode

import typer

from dagwright.cli.admin_http import DEFAULT_URL, Token, Url, admin_request
from dagwright.cli.inputs import fail
from dagwright.store.paging import DEFAULT_LIMIT, MAX_LIMIT

human_app = typer.Typer(help="Runs waiting for a person: list and answer.", no_args_is_help=True)


@human_app.command("list")
def list_(
    status: Annotated[
        str, typer.Option(help="waiting, answered, expired, cancelled or all.")
    ] = "waiting",
    offset: Annotated[int, typer.Option(min=0, help="Requests to skip.")] = 0,
    limit: Annotated[
        int, typer.Option(min=1, max=MAX_LIMIT, help="Requests per page.")
    ] = DEFAULT_LIMIT,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """One page of requests (by default those still waiting), oldest first: id, run, node,
    message; the count and the next page's --offset go to stderr."""
    # "all" is sent as it is: left out, the server lists the waiting ones (its default).
    query = {"offset": offset, "limit": limit, "status": status}
    page = admin_request("GET", url, f"/api/v1/human/requests?{urlencode(query)}", token)
    for item in page["items"]:
        waiting = (
            f"run {item['run_id']}"
            if item.get("run_id")
            else f"conversation {item.get('conversation_id')}"
        )
        typer.echo(f"{item['id']}  {waiting}  {item['node']}: {item['message']}")
    shown, total = len(page["items"]), page["total"]
    more = f"; next page: --offset {offset + shown}" if offset + shown < total else ""
    typer.echo(f"{shown} of {total} requests{more}", err=True)


@human_app.command("show")
def show(request_id: str, url: Url = DEFAULT_URL, token: Token = None) -> None:
    """A request's message, form and signed link (JSON)."""
    typer.echo(
        json.dumps(
            admin_request("GET", url, f"/api/v1/human/requests/{request_id}", token), indent=2
        )
    )


@human_app.command("answer")
def answer(
    request_id: str,
    value: Annotated[
        list[str] | None,
        typer.Option("--value", "-v", help="field=JSON value (a bare word is text)."),
    ] = None,
    choice: Annotated[str | None, typer.Option(help="One of the form's choices.")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
) -> None:
    """Answer a request; its run resumes. Prints the id of the run that goes on, or how many
    answers the run still waits for, or (a tool call's approval: --choice approve or reject,
    -v comment=...) the conversation that goes on."""
    values: dict[str, Any] = {}
    for pair in value or []:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise fail(f"--value {pair!r}: expected field=value")
        try:
            values[name] = json.loads(raw)
        except ValueError:
            values[name] = raw
    body = {"values": values, "choice": choice}
    done = admin_request("POST", url, f"/api/v1/human/requests/{request_id}/answer", token, body)
    if done.get("conversation_id"):
        typer.echo(f"conversation {done['conversation_id']} goes on")
    elif done["run_id"] is None:
        typer.echo(f"run {done['waiting_run_id']} waits for {done['waiting_for']} more answer(s)")
    else:
        typer.echo(done["run_id"])
