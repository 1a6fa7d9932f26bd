"""The tool blocks: http_request against a real HTTP server on 127.0.0.1, run through the real
runtime, and now."""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest
from pydantic import BaseModel, ValidationError

from dagwright.blocks import tool
from dagwright.egress import EgressPolicy
from dagwright.errors import BlockConfigError
from dagwright.registry import EGRESS, SECRETS, BlockServices, MissingServiceError, Registry
from dagwright.registry.services import Secrets
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    Flow,
    NodeMessage,
    RunResult,
    compile_flow,
    validate,
)
from dagwright.secrets import MappingSecrets, Redactor
from support.flows import flow_from_tuples

SECRET = "tok-Sup3rS3cret-9f8e7d"
# The test server listens on loopback, which the egress policy refuses by default
# (tests/security/test_egress.py): these tests allow it explicitly, as an operator would.
LOOPBACK_ALLOWED = EgressPolicy.from_text("127.0.0.1")
BIG_BYTES = 2_000_000

# -- a local HTTP server ---------------------------------------------------------------------


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class LocalServer:
    base: str
    received: list[Received] = field(default_factory=list)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep the test output clean

    def _send(self, status: int, content_type: str | None, data: bytes) -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        key = self.headers.get("X-Api-Key")
        if key is not None:  # echoed in a response header too, as some servers do
            self.send_header("X-Echo-Key", f"got {key}")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _json(self, status: int, value: Any, content_type: str = "application/json") -> None:
        self._send(status, content_type, json.dumps(value).encode())

    def _handle(self) -> None:  # noqa: C901, PLR0912
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        self.server.received.append(Received(self.command, self.path, headers, raw))
        url = urlsplit(self.path)
        route = url.path
        try:
            if route == "/fail-echo":
                self._json(500, {k: v for k, v in headers.items() if k.startswith("x-")})
            elif route.startswith("/echo"):
                self._json(
                    200,
                    {
                        "method": self.command,
                        "path": url.path,
                        "query": {k: v[0] for k, v in parse_qs(url.query).items()},
                        "headers": headers,
                        "body": json.loads(raw) if raw else None,
                    },
                )
            elif route == "/text":
                self._send(200, "text/plain; charset=utf-8", "héllo, wörld".encode())
            elif route == "/latin1":
                self._send(200, "text/plain; charset=iso-8859-1", "café".encode("latin-1"))
            elif route == "/text-json":
                self._send(200, "text/plain", b'{"a": 1}')
            elif route == "/problem":
                self._json(200, {"title": "odd"}, content_type="application/problem+json")
            elif route == "/bad-json":
                self._send(200, "application/json", b"<html>not json</html>")
            elif route == "/empty":
                self._send(204, None, b"")
            elif route == "/missing":
                self._send(404, "text/plain", b"no such page: " + url.path.encode())
            elif route == "/long-error":
                self._send(503, "text/plain", b"E" * 1000)
            elif route == "/slow":
                time.sleep(2)
                self._json(200, {"slow": True})
            elif route == "/big":
                self._send(200, "application/octet-stream", b"x" * BIG_BYTES)
            elif route == "/endless":
                # No length: the body runs until the connection closes, which here is never
                # unless the client hangs up. Only a client that stops reading can finish.
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Connection", "close")
                self.end_headers()
                chunk = b"y" * 65536
                while True:
                    self.wfile.write(chunk)
            else:
                self._send(404, "text/plain", b"unknown route")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout, size limit): expected

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a request still sleeping (/slow) must not hold up shutdown
    received: list[Received]

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # connections the client dropped are expected here


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.received = []
    thread = threading.Thread(target=httpd.serve_forever, name="test-http", daemon=True)
    thread.start()
    try:
        yield LocalServer(f"http://127.0.0.1:{httpd.server_address[1]}", httpd.received)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


# -- helpers ---------------------------------------------------------------------------------


def http_flow(config: dict[str, Any], inputs: dict[str, Any] | None = None) -> Flow:
    """Flow inputs wired into the http node's ports of the same names (text inputs for
    texts, JSON inputs for the rest); its three output ports returned as status, headers
    and body."""
    inputs = inputs or {}
    nodes = [
        (f"in_{name}", "text_input" if isinstance(value, str) else "json_input", {"name": name})
        for name, value in inputs.items()
    ]
    nodes.append(("http", "http_request", config))
    edges = [(f"in_{name}.output", f"http.{name}") for name in inputs]
    for port in ("status", "headers", "body"):
        nodes.append((f"out_{port}", "output", {"name": port}))
        edges.append((f"http.{port}", f"out_{port}.value"))
    return flow_from_tuples(nodes, edges)


async def run_flow(
    flow: Flow,
    inputs: dict[str, Any] | None = None,
    secrets: Secrets | None = None,
    egress: EgressPolicy = LOOPBACK_ALLOWED,
) -> RunResult:
    plan = compile_flow(flow, Registry.default())
    given: dict[Any, object] = {EGRESS: egress}
    if secrets is not None:
        given[SECRETS] = secrets
    services = BlockServices(given)
    # The run timeout only stops a broken test from hanging; no test comes close to it.
    options = ExecutorOptions(services=services, run_timeout=20)
    return await Executor(options).run(plan, inputs or {})


async def request(
    config: dict[str, Any], inputs: dict[str, Any] | None = None, secrets: Secrets | None = None
) -> RunResult:
    return await run_flow(http_flow(config, inputs), inputs, secrets)


def failure(result: RunResult) -> tuple[str, str]:
    """(code, message) of a run that failed at the http node."""
    assert result.status == "failed"
    assert result.error is not None
    assert result.error.node == "http"
    return result.error.code, result.error.message


def config_errors(model: type[BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return str(info.value)


def invalid_config(flow: Flow) -> list[tuple[str | None, str]]:
    return [
        (p.node, p.message)
        for p in validate(flow, Registry.default())
        if p.severity == "error" and p.code == "invalid_config"
    ]


# -- http_request: the block -------------------------------------------------------------------


def test_http_request_spec() -> None:
    spec = Registry.default().get("http_request")
    assert spec.category == "tool"
    assert spec.mode == "async"
    assert list(spec.outputs) == ["status", "headers", "body"]
    assert spec.outputs["headers"].type == dict[str, str]
    assert list(spec.inputs) == ["body"]
    assert not spec.inputs["body"].required
    assert spec.inputs["body"].default is None


def test_url_variables_become_ports() -> None:
    spec = Registry.default().get("http_request")
    config = tool.HttpRequestConfig(
        url="https://api.example.com/{{ owner }}/{{ repo | urlencode }}?page={{ page }}"
    )
    ports = spec.input_ports(config)
    assert list(ports) == ["body", "owner", "page", "repo"]
    assert ports["owner"].required


@pytest.mark.parametrize("name", ["body", "config", "ctx"])
def test_url_variables_cannot_take_reserved_names(name: str) -> None:
    spec = Registry.default().get("http_request")
    config = tool.HttpRequestConfig(url=f"https://example.com/{{{{ {name} }}}}")
    with pytest.raises(BlockConfigError, match=f"port name '{name}' is reserved by the block"):
        spec.input_ports(config)
    flow = http_flow({"url": f"https://example.com/{{{{ {name} }}}}"})
    assert invalid_config(flow) == [("http", f"port name '{name}' is reserved by the block")]


def test_http_config_errors() -> None:
    assert "url does not parse: line 1" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x/{{ id "}
    )
    assert "url 'file:///etc/passwd' is not an http:// or https:// URL" in config_errors(
        tool.HttpRequestConfig, {"url": "file:///etc/passwd"}
    )
    assert "url 'https://' has no host" in config_errors(
        tool.HttpRequestConfig, {"url": "https://"}
    )
    assert "url 'http://[::1' is not a valid URL: Invalid port" in config_errors(
        tool.HttpRequestConfig, {"url": "http://[::1"}
    )
    assert "'X Bad' is not a valid header name" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "headers": {"X Bad": "1"}}
    )
    assert "header 'X-A': a value may hold only printable ASCII" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "headers": {"X-A": "a\r\nInjected: 1"}}
    )
    assert "'a b' is not a valid secret name" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "secret_headers": {"X-Key": "a b"}}
    )
    message = config_errors(
        tool.HttpRequestConfig,
        {
            "url": "https://x",
            "headers": {"authorization": "Basic abc"},
            "secret_headers": {"Authorization": "token"},
        },
    )
    assert "header(s) authorization are in both headers and secret_headers" in message
    assert "timeout\n  Input should be greater than 0" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "timeout": 0}
    )
    assert "timeout\n  Input should be less than or equal to 300" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "timeout": 301}
    )
    assert "max_bytes\n  Input should be greater than 0" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "max_bytes": 0}
    )
    assert "method\n  Input should be 'GET', 'POST', 'PUT', 'PATCH', 'DELETE' or 'HEAD'" in (
        config_errors(tool.HttpRequestConfig, {"url": "https://x", "method": "GOT"})
    )
    assert "verb\n  Extra inputs are not permitted" in config_errors(
        tool.HttpRequestConfig, {"url": "https://x", "verb": "GET"}
    )


def test_a_static_bad_url_is_reported_when_the_flow_is_checked() -> None:
    flow = http_flow({"url": "file:///etc/passwd"})
    assert invalid_config(flow) == [
        (
            "http",
            "config field 'url': Value error, url 'file:///etc/passwd' is not an http:// or "
            "https:// URL",
        )
    ]


# -- http_request: real requests ---------------------------------------------------------------


async def test_get_renders_the_url_from_its_ports(server: LocalServer) -> None:
    config = {
        "url": server.base + "/echo/{{ user | urlencode }}/{{ n }}",
        "query": {"page": "2", "q": "a b&c"},
        "headers": {"X-Plain": "visible"},
    }
    result = await request(config, {"user": "Tom Smith", "n": 7})
    assert result.status == "succeeded", result.error
    assert result.outputs["status"] == 200
    assert result.outputs["headers"]["content-type"] == "application/json"
    echo = result.outputs["body"]
    assert echo["method"] == "GET"
    assert echo["path"] == "/echo/Tom%20Smith/7"
    assert echo["query"] == {"page": "2", "q": "a b&c"}
    assert echo["headers"]["x-plain"] == "visible"
    assert echo["body"] is None
    # The rendered URL is reported while the request is under way.
    messages = [e for e in result.events if isinstance(e, NodeMessage)]
    assert [(m.node, m.kind, m.data) for m in messages] == [
        (
            "http",
            "request",
            {"method": "GET", "url": server.base + "/echo/Tom%20Smith/7?page=2&q=a+b%26c"},
        )
    ]


async def test_query_adds_to_the_query_the_url_wrote(server: LocalServer) -> None:
    config = {
        "url": server.base + "/echo?a={{ a }}&b=url",
        "query": {"b": "config", "c": "3"},
    }
    result = await request(config, {"a": "1"})
    assert result.status == "succeeded", result.error
    assert result.outputs["body"]["query"] == {"a": "1", "b": "config", "c": "3"}


async def test_post_sends_the_body_port_as_json(server: LocalServer) -> None:
    config = {"method": "POST", "url": server.base + "/echo"}
    payload = {"name": "Tom", "tags": ["a", "é"], "n": 1.5}
    result = await request(config, {"body": payload})
    assert result.status == "succeeded", result.error
    echo = result.outputs["body"]
    assert echo["method"] == "POST"
    assert echo["body"] == payload
    assert echo["headers"]["content-type"] == "application/json"
    assert json.loads(server.received[-1].body) == payload


async def test_put_with_own_content_type_and_delete(server: LocalServer) -> None:
    config = {
        "method": "PUT",
        "url": server.base + "/echo",
        "headers": {"Content-Type": "application/merge-patch+json"},
    }
    result = await request(config, {"body": [1, 2]})
    assert result.outputs["body"]["method"] == "PUT"
    assert result.outputs["body"]["headers"]["content-type"] == "application/merge-patch+json"
    assert result.outputs["body"]["body"] == [1, 2]

    result = await request({"method": "DELETE", "url": server.base + "/echo/item/3"})
    assert result.outputs["body"]["method"] == "DELETE"
    assert result.outputs["body"]["path"] == "/echo/item/3"


async def test_head_has_no_body(server: LocalServer) -> None:
    result = await request({"method": "HEAD", "url": server.base + "/echo"})
    assert result.status == "succeeded", result.error
    assert result.outputs["status"] == 200
    assert result.outputs["body"] is None
    assert server.received[-1].method == "HEAD"


async def test_a_body_that_is_not_json_fails(server: LocalServer) -> None:
    result = await request({"method": "POST", "url": server.base + "/echo"}, {"body": 1e400})
    code, message = failure(result)
    assert code == "node_failed"
    assert "input 'body' cannot be sent as JSON: Out of range float values" in message


async def test_secret_header_is_sent_but_never_shown(server: LocalServer) -> None:
    config = {
        "url": server.base + "/echo",
        "secret_headers": {"Authorization": "api_token"},
        "headers": {"X-Plain": "visible"},
    }
    result = await request(config, secrets=MappingSecrets({"api_token": SECRET}))
    assert result.status == "succeeded", result.error
    # The server received the real value...
    assert server.received[-1].headers["authorization"] == SECRET
    # ...which it echoed back; the output shows only where it was.
    echo = result.outputs["body"]
    assert echo["headers"]["authorization"] == "***"
    assert echo["headers"]["x-plain"] == "visible"
    assert SECRET not in json.dumps(result.outputs)
    events = json.dumps([event.to_dict() for event in result.events], default=str)
    assert SECRET not in events


async def test_secret_echoed_in_text_and_headers_is_redacted(server: LocalServer) -> None:
    config = {
        "url": server.base + "/echo",
        "secret_headers": {"X-Api-Key": "key"},
        "response": "text",
    }
    result = await request(config, secrets=MappingSecrets({"key": SECRET}))
    assert result.status == "succeeded", result.error
    text = result.outputs["body"]
    assert isinstance(text, str)
    assert json.loads(text)["headers"]["x-api-key"] == "***"
    assert SECRET not in text
    assert server.received[-1].headers["x-api-key"] == SECRET
    assert result.outputs["headers"]["x-echo-key"] == "got ***"


async def test_secret_echoed_in_an_error_body_is_redacted(server: LocalServer) -> None:
    config = {"url": server.base + "/fail-echo", "secret_headers": {"X-Api-Key": "key"}}
    result = await request(config, secrets=MappingSecrets({"key": SECRET}))
    code, message = failure(result)
    assert code == "node_failed"
    assert f"GET {server.base}/fail-echo returned 500 Internal Server Error: " in message
    assert '"x-api-key": "***"' in message
    assert server.received[-1].headers["x-api-key"] == SECRET
    events = json.dumps([event.to_dict() for event in result.events], default=str)
    assert SECRET not in events


async def test_missing_secret_fails_the_run_naming_it(server: LocalServer) -> None:
    config = {"url": server.base + "/echo", "secret_headers": {"Authorization": "github_token"}}
    count = len(server.received)
    result = await request(config, secrets=MappingSecrets({"other": "value"}))
    code, message = failure(result)
    assert code == "secret_not_found"
    assert message == (
        "node 'http' (http_request) failed: SecretNotFoundError: secret 'github_token' is "
        "not set: add it to the secrets the run is given"
    )
    assert len(server.received) == count  # nothing was sent


async def test_no_secrets_service_fails_the_run(server: LocalServer) -> None:
    config = {"url": server.base + "/echo", "secret_headers": {"Authorization": "github_token"}}
    count = len(server.received)
    # The run fails at its start (before anything is sent), naming the service and the node.
    with pytest.raises(MissingServiceError) as missing:
        await request(config)
    assert missing.value.code == "service_unavailable"
    assert "secrets (secrets) for node 'http'" in missing.value.message
    assert len(server.received) == count


async def test_a_secret_a_header_cannot_carry_is_refused_without_showing_it(
    server: LocalServer,
) -> None:
    config = {"url": server.base + "/echo", "secret_headers": {"X-Key": "multi"}}
    value = "line-one\nInjected: yes"
    code, message = failure(await request(config, secrets=MappingSecrets({"multi": value})))
    assert code == "node_failed"
    assert "secret 'multi' cannot be sent in header 'X-Key': it holds a line break" in message
    assert "line-one" not in message


async def test_error_status_fails_with_status_reason_and_body(server: LocalServer) -> None:
    result = await request({"url": server.base + "/missing"})
    code, message = failure(result)
    assert code == "node_failed"
    assert message == (
        f"node 'http' (http_request) failed: ValueError: GET {server.base}/missing returned "
        "404 Not Found: no such page: /missing"
    )


async def test_error_body_is_cut_to_200_characters(server: LocalServer) -> None:
    _, message = failure(await request({"url": server.base + "/long-error"}))
    assert message.endswith("returned 503 Service Unavailable: " + "E" * 200 + "...")


async def test_error_status_can_be_returned(server: LocalServer) -> None:
    result = await request({"url": server.base + "/missing", "fail_on_error_status": False})
    assert result.status == "succeeded", result.error
    assert result.outputs["status"] == 404
    assert result.outputs["body"] == "no such page: /missing"


async def test_timeout_fails_quickly(server: LocalServer) -> None:
    started = time.perf_counter()
    result = await request({"url": server.base + "/slow", "timeout": 0.3})
    elapsed = time.perf_counter() - started
    code, message = failure(result)
    assert code == "node_failed"
    assert message.endswith(f"ValueError: request to {server.base}/slow timed out after 0.3s")
    assert elapsed < 1.0


async def test_body_over_the_limit_fails(server: LocalServer) -> None:
    _, message = failure(await request({"url": server.base + "/big"}))
    assert message.endswith(
        f"ValueError: the response from {server.base}/big is larger than max_bytes "
        "(1000000 bytes); raise max_bytes or ask for less"
    )


async def test_body_under_a_raised_limit_is_returned(server: LocalServer) -> None:
    result = await request(
        {"url": server.base + "/big", "max_bytes": 3_000_000, "response": "text"}
    )
    assert result.status == "succeeded", result.error
    assert result.outputs["body"] == "x" * BIG_BYTES
    assert result.outputs["headers"]["content-length"] == str(BIG_BYTES)


async def test_the_limit_stops_an_endless_body(server: LocalServer) -> None:
    # A client that downloaded everything before checking would never finish.
    started = time.perf_counter()
    result = await request({"url": server.base + "/endless", "max_bytes": 100_000})
    _, message = failure(result)
    assert "is larger than max_bytes (100000 bytes)" in message
    assert time.perf_counter() - started < 5


async def test_url_that_is_not_http_fails_the_run(server: LocalServer) -> None:
    config = {"url": "{{ target }}", "variable_host": True}
    result = await request(config, {"target": "file:///etc/passwd"})
    code, message = failure(result)
    assert code == "node_failed"
    assert message.endswith(
        "ValueError: url 'file:///etc/passwd' is not an http:// or https:// URL"
    )
    result = await request({"url": "http://{{ host }}/x", "variable_host": True}, {"host": ""})
    assert failure(result)[1].endswith("ValueError: url 'http:///x' has no host")


async def test_undefined_url_value_fails_the_run(server: LocalServer) -> None:
    result = await request({"url": server.base + "/{{ item.id }}"}, {"item": {"name": "x"}})
    _, message = failure(result)
    assert "ValueError: url: undefined value: 'dict object' has no attribute 'id'" in message


async def test_connection_refused_names_the_url() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, and is closed now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x"
    _, message = failure(await request({"url": url}))
    assert f"ValueError: could not connect to {url}: " in message
    assert len(message.split(f"could not connect to {url}: ", 1)[1]) > 0


# -- http_request: reading the response --------------------------------------------------------


@pytest.mark.parametrize(
    ("route", "mode", "expected"),
    [
        ("/text", "auto", "héllo, wörld"),
        ("/text", "text", "héllo, wörld"),
        ("/latin1", "auto", "café"),
        ("/text-json", "auto", '{"a": 1}'),
        ("/text-json", "json", {"a": 1}),
        ("/problem", "auto", {"title": "odd"}),
        ("/problem", "text", '{"title": "odd"}'),
        ("/bad-json", "auto", "<html>not json</html>"),
        ("/empty", "json", None),
        ("/empty", "auto", ""),
    ],
)
async def test_response_modes(server: LocalServer, route: str, mode: str, expected: Any) -> None:
    result = await request({"url": server.base + route, "response": mode})
    assert result.status == "succeeded", result.error
    assert result.outputs["body"] == expected


async def test_echo_as_json_and_as_text(server: LocalServer) -> None:
    as_json = await request({"url": server.base + "/echo?a=1", "response": "json"})
    as_text = await request({"url": server.base + "/echo?a=1", "response": "text"})
    assert isinstance(as_json.outputs["body"], dict)
    assert as_json.outputs["body"]["query"] == {"a": "1"}
    assert isinstance(as_text.outputs["body"], str)
    assert json.loads(as_text.outputs["body"])["query"] == {"a": "1"}


async def test_json_mode_refuses_a_body_that_is_not_json(server: LocalServer) -> None:
    _, message = failure(await request({"url": server.base + "/text", "response": "json"}))
    assert message.endswith(
        f"ValueError: the response from {server.base}/text is not valid JSON: "
        "Expecting value at line 1, column 1"
    )


def test_redact_json_reaches_keys_and_nesting_deeper_than_the_stack() -> None:
    deep: Any = SECRET
    for _ in range(5000):  # recursing through this would pass Python's recursion limit
        deep = [deep]
    data = {SECRET: [1, None, {"k": deep}], "x": f"a {SECRET} b", "n": 2.5}
    value = tool._redact_json(data, Redactor([SECRET]))
    assert list(value) == ["***", "x", "n"]
    assert value["x"] == "a *** b"
    assert value["n"] == 2.5
    assert value["***"][:2] == [1, None]
    inner = value["***"][2]["k"]
    for _ in range(5000):
        inner = inner[0]
    assert inner == "***"
    assert tool._redact_json(f"{SECRET}!", Redactor([SECRET])) == "***!"


# -- now -----------------------------------------------------------------------------------------


def now_flow(config: dict[str, Any]) -> Flow:
    return flow_from_tuples(
        [("now", "now", config), ("out", "output", {"name": "now"})],
        [("now.output", "out.value")],
    )


def test_now_spec() -> None:
    spec = Registry.default().get("now")
    assert spec.category == "tool"
    assert spec.mode == "inline"
    assert list(spec.inputs) == []


async def test_now_with_a_timezone_and_a_format() -> None:
    zone = ZoneInfo("Asia/Tokyo")
    result = await run_flow(now_flow({"timezone": "Asia/Tokyo", "format": "%Y-%m-%d %H:%M"}))
    assert result.status == "succeeded", result.error
    value = result.outputs["now"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", value)
    moment = datetime.strptime(value, "%Y-%m-%d %H:%M").replace(tzinfo=zone)
    assert abs(datetime.now(zone) - moment) < timedelta(minutes=1)


async def test_now_is_iso_8601_by_default() -> None:
    result = await run_flow(now_flow({}))
    value = result.outputs["now"]
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00", value)
    moment = datetime.fromisoformat(value)
    assert abs(datetime.now(ZoneInfo("UTC")) - moment) < timedelta(minutes=1)


def test_now_in_a_zone_carries_its_offset() -> None:
    zone = ZoneInfo("Europe/Paris")
    value = tool.now(tool.NowConfig(timezone="Europe/Paris"))
    moment = datetime.fromisoformat(value)
    assert moment.utcoffset() == datetime.now(zone).utcoffset()
    assert abs(datetime.now(zone) - moment) < timedelta(minutes=1)
    # A cleared format field means ISO 8601.
    assert tool.NowConfig.model_validate({"format": ""}).format is None


def test_now_bad_timezone_is_invalid_config() -> None:
    assert invalid_config(now_flow({"timezone": "Mars/Olympus_Mons"})) == [
        (
            "now",
            "config field 'timezone': Value error, unknown time zone 'Mars/Olympus_Mons': "
            "use an IANA name such as Europe/Paris, or UTC",
        )
    ]
    assert "unknown time zone '../etc/passwd'" in config_errors(
        tool.NowConfig, {"timezone": "../etc/passwd"}
    )
    assert invalid_config(now_flow({"timezone": "Europe/Paris", "format": "%d/%m"})) == []
