"""`dagwright mcp`: list and call the tools of an MCP server from the terminal, with the
same client as the `mcp_tool` block (to try a server before using it in a flow)."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Annotated

import typer

from dagwright.cli.inputs import fail
from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.egress import EgressPolicy
    from dagwright.mcp.client import McpTarget, StdioAllowList

mcp_app = typer.Typer(help="MCP: call the tools of MCP servers.", no_args_is_help=True)

Url = Annotated[str | None, typer.Option("--url", help="A streamable HTTP MCP server's URL.")]
Command = Annotated[
    str | None,
    typer.Option(
        "--command",
        help="A stdio MCP server's command line (allowed in DAGWRIGHT_MCP_STDIO_COMMANDS).",
    ),
]
Token = Annotated[
    str | None,
    typer.Option("--token-env", help="An environment variable holding a bearer token."),
]


def _target(url: str | None, command: str | None, token_env: str | None) -> McpTarget:
    import os
    import shlex

    from dagwright.mcp.client import McpTarget

    token = os.environ.get(token_env) if token_env else None
    if token_env and token is None:
        raise fail(f"--token-env {token_env}: the variable is not set")
    return McpTarget(url, tuple(shlex.split(command)) if command else (), token)


def _stdio_allowed() -> StdioAllowList:
    from dagwright.mcp.client import StdioAllowList
    from dagwright.settings import load_settings

    return StdioAllowList(load_settings().stdio_commands)


def _egress() -> EgressPolicy:
    """The server's egress policy: what a flow's mcp_tool could reach, this command can."""
    from dagwright.egress import EgressPolicy, own_addresses
    from dagwright.settings import load_settings

    settings = load_settings()
    return EgressPolicy.from_text(settings.egress_allow, own_addresses(settings.host))


@mcp_app.command("tools")
def tools(url: Url = None, command: Command = None, token_env: Token = None) -> None:
    """List the server's tools with their input schemas (JSON)."""
    from dagwright.mcp.client import list_tools

    try:
        found = asyncio.run(
            list_tools(_target(url, command, token_env), _stdio_allowed(), _egress())
        )
    except DagwrightError as exc:
        raise fail(f"{exc.code}: {exc.message}") from None
    typer.echo(json.dumps(found, indent=2))


@mcp_app.command("call")
def call(
    tool: Annotated[str, typer.Argument(help="The tool's name.")],
    arguments: Annotated[
        str, typer.Option("--arguments", "-a", help="The tool's arguments as a JSON object.")
    ] = "{}",
    url: Url = None,
    command: Command = None,
    token_env: Token = None,
) -> None:
    """Call a tool and print its result (JSON)."""
    from dagwright.mcp.client import call_tool

    try:
        parsed = json.loads(arguments)
    except ValueError as exc:
        raise fail(f"--arguments is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise fail("--arguments must be a JSON object")
    try:
        result = asyncio.run(
            call_tool(_target(url, command, token_env), tool, parsed, _stdio_allowed(), _egress())
        )
    except DagwrightError as exc:
        raise fail(f"{exc.code}: {exc.message}", 1) from None
    typer.echo(json.dumps(result))
