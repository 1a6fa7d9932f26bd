"""`dagwright mcp tools` and `dagwright mcp call` against a real MCP server process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.server import subprocess_environment

STDIO = f"{sys.executable} {Path(__file__).with_name('tool_server.py')} stdio"


def _dagwright(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    # The tool server listens on loopback, which the egress policy refuses unless allowed.
    env.setdefault("DAGWRIGHT_EGRESS_ALLOW", "127.0.0.1")
    return subprocess.run(
        [sys.executable, "-m", "dagwright", "mcp", *args],
        env=subprocess_environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_tools_are_listed_and_called_over_http(tool_server_url: str) -> None:
    listed = _dagwright("tools", "--url", tool_server_url)
    assert listed.returncode == 0, listed.stderr
    assert {tool["name"] for tool in json.loads(listed.stdout)} == {"add", "shout", "explode"}

    called = _dagwright("call", "add", "-a", '{"a": 2, "b": 40}', "--url", tool_server_url)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout) == {"result": 42}

    failed = _dagwright("call", "explode", "-a", '{"reason": "x"}', "--url", tool_server_url)
    assert failed.returncode == 1
    assert "mcp_tool_error: tool 'explode'" in failed.stderr


def test_stdio_servers_run_only_when_allowed() -> None:
    refused = _dagwright("call", "shout", "-a", '{"text": "hi"}', "--command", STDIO)
    assert refused.returncode == 1
    assert "mcp_stdio_not_allowed" in refused.stderr
    allowed = _dagwright(
        "call",
        "shout",
        "-a",
        '{"text": "hi"}',
        "--command",
        STDIO,
        DAGWRIGHT_MCP_STDIO_COMMANDS=sys.executable,
    )
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout) == {"result": "HI!"}
