"""A real MCP server for the tests, built with the official SDK: `python tool_server.py http
PORT` serves streamable HTTP at http://127.0.0.1:PORT/mcp, `python tool_server.py stdio`
speaks over stdin/stdout."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("dagwright-test-tools")


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Shout a text back, with a number of exclamation marks.")
def shout(text: str, marks: int = 1) -> str:
    return text.upper() + "!" * marks


@server.tool(description="Always fails, to show how a tool error looks.")
def explode(reason: str) -> str:
    raise ValueError(f"exploded: {reason}")


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
