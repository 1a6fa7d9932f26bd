"""A published app served as an MCP tool over streamable HTTP, driven by the official MCP
client: the tool's schema from the input ports, a call as a recorded run with progress from
its node events, and the app's API keys guarding it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp.client.streamable_http import streamable_http_client

from mcp import Client
from support.server import Api, LiveServer, example, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def _client(server: LiveServer, app: str, key: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30)
    url = f"{server.base_url}/api/v1/apps/{app}/mcp"
    return Client(streamable_http_client(url, http_client=http))


async def test_an_app_is_listed_and_called_as_a_tool(api: Api, server: LiveServer) -> None:
    key = api.published_app("greeter", example("hello"))
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async with _client(server, "greeter", key) as client:
        [tool] = (await client.list_tools()).tools
        assert tool.name == "greeter"
        assert tool.input_schema == {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "Who to greet.", "default": "world"}
            },
        }
        result = await client.call_tool("greeter", {"name": "Ann"}, progress_callback=on_progress)

    assert not result.is_error, result
    assert result.structured_content == {"greeting": "Hello, Ann!"}
    assert result.content[0].text == '{"greeting":"Hello, Ann!"}'  # type: ignore[union-attr]
    assert [p[:2] for p in progress] == [(1, 3), (2, 3), (3, 3)]
    assert {p[2] for p in progress} == {"name finished", "greet finished", "greeting finished"}
    run_id = result.meta["dagwright/run_id"]  # type: ignore[index]
    run = api.get_run(run_id)
    assert run["mode"] == "mcp"
    assert run["status"] == "succeeded"
    assert run["inputs"] == {"name": "Ann"}


async def test_bad_arguments_and_unknown_tools_are_tool_errors(
    api: Api, server: LiveServer
) -> None:
    key = api.published_app("greeter-strict", example("hello"))
    async with _client(server, "greeter-strict", key) as client:
        wrong_type = await client.call_tool("greeter-strict", {"name": {"first": "Ann"}})
        unknown_input = await client.call_tool("greeter-strict", {"nom": "Ann"})
        other_tool = await client.call_tool("someone-else", {})
    for result in (wrong_type, unknown_input, other_tool):
        assert result.is_error
    assert "invalid_input" in wrong_type.content[0].text  # type: ignore[union-attr]
    assert "'nom'" in unknown_input.content[0].text  # type: ignore[union-attr]
    assert "not 'someone-else'" in other_tool.content[0].text  # type: ignore[union-attr]


def test_the_mcp_endpoint_needs_the_apps_key(api: Api, server: LiveServer) -> None:
    api.published_app("guarded-mcp", example("hello"))
    other_key = api.published_app("other-mcp", example("hello"))
    url = f"{server.base_url}/api/v1/apps/guarded-mcp/mcp"
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    anonymous = httpx.post(url, json=body)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "api_key_required"
    wrong = httpx.post(url, json=body, headers={"Authorization": f"Bearer {other_key}"})
    assert wrong.status_code == 403


def test_the_endpoint_is_stateless_post_only(api: Api, server: LiveServer) -> None:
    # No idle event stream held open by a GET, no session to DELETE: 405, as MCP allows.
    url = f"{server.base_url}/api/v1/apps/anything/mcp"
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, url, timeout=5)
        assert answer.status_code == 405
        assert answer.headers["allow"] == "POST"
