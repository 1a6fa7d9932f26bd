"""A real MCP server process (tests/mcp/tool_server.py, built with the official SDK)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.mcp_server import mcp_tool_server


@pytest.fixture(scope="module")
def tool_server_url() -> Iterator[str]:
    with mcp_tool_server() as url:
        yield url
