"""Calling the tools of other MCP servers with the official SDK: over streamable HTTP, or
over stdio when the operator allows the command (`StdioAllowList`, from the setting
DAGWRIGHT_MCP_STDIO_COMMANDS), since a stdio server is a program started on this machine.
An HTTP server is reached only where the egress policy allows (dagwright/egress.py): its
addresses are checked as each connection is made."""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from dagwright.egress import EgressDeniedError, EgressPolicy
from dagwright.errors import DagwrightError, ForbiddenError

if TYPE_CHECKING:
    from mcp import Client

STDIO_ALLOW_ENV: Final = "DAGWRIGHT_MCP_STDIO_COMMANDS"


class McpError(DagwrightError):
    """An MCP server could not be reached, or answered with an error."""

    code = "mcp_failed"


class McpToolError(McpError):
    """The tool ran and reported a failure (`is_error`)."""

    code = "mcp_tool_error"


@dataclass(frozen=True, slots=True)
class StdioAllowList:
    """The executables stdio MCP servers may be started with (none by default): the
    operator's setting, given by the composition root."""

    commands: frozenset[str] = frozenset()

    def check(self, target: McpTarget) -> None:
        if target.command and target.command[0] not in self.commands:
            raise ForbiddenError(
                f"starting the stdio MCP server {target.command[0]!r} is not allowed on this "
                f"server: an operator lists allowed commands in {STDIO_ALLOW_ENV}",
                "mcp_stdio_not_allowed",
            )


@dataclass(frozen=True, slots=True)
class McpTarget:
    """An MCP server: a streamable HTTP `url` (with an optional bearer `token`), or a stdio
    `command` (program and arguments)."""

    url: str | None = None
    command: tuple[str, ...] = ()
    token: str | None = None

    def __post_init__(self) -> None:
        if (self.url is None) == (not self.command):
            raise McpError("an MCP server is a url or a command, exactly one of them")

    @property
    def where(self) -> str:
        return self.url or shlex.join(self.command)


@asynccontextmanager
async def connect(
    target: McpTarget, allowed: StdioAllowList, egress: EgressPolicy
) -> AsyncIterator[Client]:
    allowed.check(target)
    from mcp.client.stdio import StdioServerParameters
    from mcp.client.streamable_http import streamable_http_client

    from dagwright.egress_http import async_client2
    from mcp import Client

    if target.url is not None:
        # Every connection the SDK makes goes through the guarded transport.
        headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
        http = async_client2(egress, headers=headers)
        client = Client(streamable_http_client(target.url, http_client=http))
    else:
        program, *args = target.command
        client = Client(StdioServerParameters(command=program, args=args))
    async with client:
        yield client


def _denial(exc: BaseException) -> EgressDeniedError | None:
    """The egress refusal inside what the SDK raised (its task groups wrap it, its
    transport may chain it), if any."""
    seen: set[int] = set()
    work: list[BaseException] = [exc]
    while work:
        item = work.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, EgressDeniedError):
            return item
        if isinstance(item, BaseExceptionGroup):
            work.extend(item.exceptions)
        work.extend(e for e in (item.__cause__, item.__context__) if e is not None)
    return None


def _failure(target: McpTarget, exc: BaseException, seconds: float) -> DagwrightError:
    denied = _denial(exc)
    if denied is not None:
        return EgressDeniedError(f"MCP server {target.where}: {denied.message}")
    if isinstance(exc, TimeoutError):
        return McpError(f"MCP server {target.where} did not answer within {seconds:g}s")
    # An ExceptionGroup from the SDK's task groups: its first leaf says what went wrong.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return McpError(f"MCP server {target.where}: {type(exc).__name__}: {exc}")


async def list_tools(
    target: McpTarget, allowed: StdioAllowList, egress: EgressPolicy, seconds: float = 30.0
) -> list[dict[str, Any]]:
    """Each tool's name, title, description and input schema, within `seconds`."""
    try:
        async with asyncio.timeout(seconds), connect(target, allowed, egress) as client:
            listed = await client.list_tools()
    except DagwrightError:
        raise
    except Exception as exc:
        raise _failure(target, exc, seconds) from None
    return [
        {
            "name": tool.name,
            "title": tool.title,
            "description": tool.description or "",
            "input_schema": tool.input_schema,
        }
        for tool in listed.tools
    ]


async def call_tool(
    target: McpTarget,
    tool: str,
    arguments: dict[str, Any],
    allowed: StdioAllowList,
    egress: EgressPolicy,
    seconds: float = 60.0,
) -> Any:
    """The tool's structured result when it gives one, else its text, within `seconds`.
    Raises McpToolError with the tool's message when it reports a failure."""
    try:
        async with asyncio.timeout(seconds), connect(target, allowed, egress) as client:
            result = await client.call_tool(tool, arguments)
    except DagwrightError:
        raise
    except Exception as exc:
        raise _failure(target, exc, seconds) from None
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    if result.is_error:
        raise McpToolError(f"tool {tool!r} of {target.where} failed: {text or 'no message'}")
    return result.structured_content if result.structured_content is not None else text
