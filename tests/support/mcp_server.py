"""A real MCP server process for the tests (tests/mcp/tool_server.py, built with the official
SDK), serving streamable HTTP on a loopback port."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from support.server import free_port, subprocess_environment

TOOL_SERVER = Path(__file__).resolve().parents[1] / "mcp" / "tool_server.py"


@contextmanager
def mcp_tool_server() -> Iterator[str]:
    """The server's URL (`http://127.0.0.1:PORT/mcp`) while it runs."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(TOOL_SERVER), "http", str(port)],
        env=subprocess_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the MCP tool server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
