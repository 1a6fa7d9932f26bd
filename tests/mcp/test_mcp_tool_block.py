"""The `mcp_tool` block and the tool listing the editor's config form shows, against a real
MCP server process over streamable HTTP and over stdio."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.server import Api, LiveServer, edge, flow, live_server, node

STDIO = [sys.executable, str(Path(__file__).with_name("tool_server.py")), "stdio"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, tool_server_url: str) -> Iterator[LiveServer]:
    # The tool server and the closed port 9 are on loopback, which the egress policy
    # refuses by default (tests/security/test_egress.py): allowed here by name, as an
    # operator would.
    tool_port = httpx.URL(tool_server_url).port
    allow = f"127.0.0.1:{tool_port},127.0.0.1:9"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("DAGWRIGHT_MCP_STDIO_COMMANDS", sys.executable)
        data_dir = Path(tmp_path_factory.mktemp("server"))
        with live_server("sqlite", data_dir, egress_allow=allow) as running:
            yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def _shout_flow(**server: Any) -> dict[str, Any]:
    return flow(
        [
            node("text", "text_input", name="text"),
            node(
                "call",
                "mcp_tool",
                tool="shout",
                arguments={"marks": 3},
                inputs=["text"],
                output="result",
                **server,
            ),
            node("out", "output", name="answer"),
        ],
        [edge("text", "call.text"), edge("call", "out")],
    )


def test_the_tools_of_a_server_are_listed_with_their_schemas(
    api: Api, tool_server_url: str
) -> None:
    for server in ({"url": tool_server_url}, {"command": STDIO}):
        response = api.http.post("/api/v1/mcp/tools", json=server)
        assert response.status_code == 200, response.text
        tools = {tool["name"]: tool for tool in response.json()["tools"]}
        assert set(tools) == {"add", "shout", "explode"}
        assert tools["add"]["description"] == "Add two integers."
        schema = tools["shout"]["input_schema"]
        assert schema["required"] == ["text"]
        assert schema["properties"]["marks"]["type"] == "integer"


def test_a_flow_calls_a_tool_over_http_and_stdio(api: Api, tool_server_url: str) -> None:
    for slug, server in (
        ("shout-http", {"url": tool_server_url}),
        ("shout-stdio", {"command": STDIO}),
    ):
        key = api.published_app(slug, _shout_flow(**server))
        result = api.run(slug, key, {"text": "hello"}).json()
        assert result["status"] == "succeeded", result
        assert result["outputs"] == {"answer": "HELLO!!!"}


def test_a_tool_error_fails_the_node_with_its_message(api: Api, tool_server_url: str) -> None:
    broken = flow(
        [
            node("why", "text_input", name="why"),
            node("call", "mcp_tool", url=tool_server_url, tool="explode", inputs=["reason"]),
            node("out", "output", name="answer"),
        ],
        [edge("why", "call.reason"), edge("call", "out")],
    )
    key = api.published_app("explode", broken)
    result = api.run("explode", key, {"why": "on purpose"}).json()
    assert result["status"] == "failed"
    assert result["error"]["node"] == "call"
    assert "tool 'explode'" in result["error"]["message"]
    assert "failed" in result["error"]["message"]


def test_stdio_commands_need_the_operators_allowance(api: Api) -> None:
    response = api.http.post("/api/v1/mcp/tools", json={"command": ["/bin/sh", "-c", "true"]})
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "mcp_stdio_not_allowed"


def test_an_unreachable_server_is_a_clear_error(api: Api) -> None:
    response = api.http.post("/api/v1/mcp/tools", json={"url": "http://127.0.0.1:9/mcp"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "mcp_failed"
    assert "http://127.0.0.1:9/mcp" in error["message"]
