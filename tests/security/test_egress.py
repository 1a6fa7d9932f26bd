"""Outbound requests against the egress policy (issue 29, item 6).

Before: `http_request` reached loopback services (the server's own editor API, PostgreSQL's
and MariaDB's ports; `localhost`, `2130706433`, `0.0.0.0` too), a published caller steered
the host with a variable in a URL's authority (`http://{{ sub }}.example.com/` with
`sub = "127.0.0.1:PORT/api/v1/apps?"`), and `mcp_tool` and `/api/v1/mcp/tools` connected
anywhere. Now every outbound connection goes through one policy (dagwright/egress.py),
checked on the resolved addresses as the connection is made.

A canary HTTP server on loopback records every request it gets: it must get none of the
refused ones. The server-side cases run against a `dagwright serve` process with the
default policy (no allow list), under the health probe (support.probe).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from dagwright.blocks import tool
from dagwright.data.connectors import HttpJsonConnector
from dagwright.egress import AllowRule, EgressDeniedError, EgressPolicy, why_denied
from dagwright.egress_http import async_client, async_client2
from dagwright.registry import EGRESS, SECRETS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, compile_flow, parse_flow
from dagwright.secrets import MappingSecrets
from support.data_sources import MYSQL_URL
from support.database import POSTGRES_URL
from support.probe import timed
from support.server import Api, ServerProcess, edge, error_of, flow, node

# -- a canary on loopback ----------------------------------------------------------------------


@dataclass
class Canary:
    port: int
    paths: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _RecordingServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        self.server.paths.append(self.path)
        if self.server.redirect_to is not None:
            self.send_response(302)
            self.send_header("Location", self.server.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b'{"secret": "internal"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer


class _RecordingServer(ThreadingHTTPServer):
    daemon_threads = True
    paths: list[str]
    redirect_to: str | None = None


@dataclass
class _Running:
    httpd: _RecordingServer
    thread: threading.Thread


def _start(redirect_to: str | None = None) -> _Running:
    httpd = _RecordingServer(("127.0.0.1", 0), _Recorder)
    httpd.paths = []
    httpd.redirect_to = redirect_to
    thread = threading.Thread(target=httpd.serve_forever, name="canary", daemon=True)
    thread.start()
    return _Running(httpd, thread)


def _stop(running: _Running) -> None:
    running.httpd.shutdown()
    running.httpd.server_close()
    running.thread.join(timeout=5)


@pytest.fixture
def canary() -> Iterator[Canary]:
    running = _start()
    try:
        yield Canary(running.httpd.server_address[1], running.httpd.paths)
    finally:
        _stop(running)


# -- the policy itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("169.254.169.254", "link-local"),  # cloud metadata
        ("fe80::1", "link-local"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "not globally routable"),  # shared address space (CGNAT)
        ("fd00::1", "unique-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback address (inside an IPv6 address)"),
        ("::ffff:169.254.169.254", "link-local"),
        ("::ffff:10.0.0.1", "private address (inside"),
        ("2002:7f00:1::", "loopback address (inside"),  # 6to4
        ("64:ff9b::7f00:1", "loopback address (inside"),  # NAT64
    ],
)
def test_internal_addresses_are_refused_with_their_reason(address: str, reason: str) -> None:
    found = why_denied(ipaddress.ip_address(address))
    assert found is not None
    assert reason in found
    with pytest.raises(EgressDeniedError) as refused:
        EgressPolicy().check_address("target.example", 80, address)
    assert refused.value.code == "egress_denied"
    assert "target.example" in refused.value.message
    assert str(ipaddress.ip_address(address)) in refused.value.message


def test_public_addresses_pass_unless_they_are_the_servers_own() -> None:
    assert why_denied(ipaddress.ip_address("93.184.215.14")) is None
    assert why_denied(ipaddress.ip_address("2606:4700::1111")) is None
    EgressPolicy().check_address("example.com", 443, "93.184.215.14")
    own = EgressPolicy(own_addresses=["93.184.215.14"])
    with pytest.raises(EgressDeniedError, match="this server's own address"):
        own.check_address("example.com", 443, "93.184.215.14")


@pytest.mark.parametrize(
    "spelling", ["2130706433", "0x7f.0.0.1", "0x7f000001", "017700000001", "127.1", "localhost"]
)
def test_numeric_and_named_spellings_of_loopback_resolve_before_the_check(spelling: str) -> None:
    with pytest.raises(EgressDeniedError, match="loopback"):
        EgressPolicy().resolve(spelling, 80)


def test_allow_list_entries() -> None:
    assert AllowRule.parse("api.internal") == AllowRule(name="api.internal")
    assert AllowRule.parse("API.internal.:8443") == AllowRule(name="api.internal", port=8443)
    assert AllowRule.parse("127.0.0.1:5000") == AllowRule(
        network=ipaddress.ip_network("127.0.0.1/32"), port=5000
    )
    assert AllowRule.parse("10.0.0.0/8").network == ipaddress.ip_network("10.0.0.0/8")
    assert AllowRule.parse("[::1]:80") == AllowRule(network=ipaddress.ip_network("::1"), port=80)
    assert AllowRule.parse("fd00::/8").network == ipaddress.ip_network("fd00::/8")
    for bad in ("a b", "host:0", "host:99999", "host:x", "user@host", "http://x/"):
        with pytest.raises(ValueError, match=r"not a host name|the port must be"):
            AllowRule.parse(bad)


def test_a_bad_allow_list_stops_the_start_naming_the_setting() -> None:
    from dagwright.settings import Settings

    with pytest.raises(ValueError, match="egress_allow"):
        Settings(egress_allow="127.0.0.1:notaport")


# -- at connect time --------------------------------------------------------------------------


def _get(policy: EgressPolicy, url: str, **options: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        async with async_client(policy, timeout=5, **options) as client:
            return await client.get(url)

    return asyncio.run(go())


def test_the_allow_list_lets_exactly_the_named_host_through(canary: Canary) -> None:
    policy = EgressPolicy.from_text(f"127.0.0.1:{canary.port}")
    assert _get(policy, canary.base + "/allowed").status_code == 200
    assert canary.paths == ["/allowed"]
    # The same host on another port, and another spelling of it by name, stay refused.
    with pytest.raises(EgressDeniedError):
        _get(policy, f"http://127.0.0.1:{canary.port + 1 if canary.port < 65535 else 1}/x")
    by_name = EgressPolicy.from_text(f"localhost:{canary.port}")
    with pytest.raises(EgressDeniedError):
        _get(by_name, canary.base + "/by-address")  # allowed by name, asked by address
    assert _get(by_name, f"http://localhost:{canary.port}/by-name").status_code == 200
    assert canary.paths == ["/allowed", "/by-name"]


class _Rebinding:
    """A resolver that answers a public address first and loopback afterwards: the name
    passes an early check and then points at this host (DNS rebinding)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, host: str, port: int) -> Sequence[str]:
        self.calls += 1
        return ["93.184.215.14"] if self.calls == 1 else ["127.0.0.1"]


def test_a_name_that_rebinds_to_loopback_is_refused_at_connect(canary: Canary) -> None:
    resolver = _Rebinding()
    policy = EgressPolicy().with_resolver(resolver)
    url = f"http://rebind.example:{canary.port}/steal"
    policy.resolve("rebind.example", canary.port)  # public: an early check alone would pass
    with pytest.raises(EgressDeniedError, match=r"rebind\.example \(127\.0\.0\.1\)"):
        _get(policy, url)
    assert resolver.calls == 2  # resolved again as the connection was made
    assert canary.paths == []


def test_each_redirect_hop_is_checked(canary: Canary) -> None:
    # An allowed server (on loopback for the test, allowed by its port alone) redirects to
    # the canary, which is not allowed: the client follows, the policy refuses the hop.
    redirector = _start(redirect_to=canary.base + "/via-redirect")
    try:
        port = redirector.httpd.server_address[1]
        policy = EgressPolicy.from_text(f"127.0.0.1:{port}")
        with pytest.raises(EgressDeniedError, match=f"127.0.0.1 port {canary.port}"):
            _get(policy, f"http://127.0.0.1:{port}/start", follow_redirects=True)
        assert redirector.httpd.paths == ["/start"]
    finally:
        _stop(redirector)
    assert canary.paths == []


def test_the_mcp_client_and_the_http_json_connector_are_guarded(canary: Canary) -> None:
    async def mcp_like() -> None:
        async with async_client2(EgressPolicy(), timeout=5) as client:
            await client.post(canary.base + "/mcp", json={})

    with pytest.raises(EgressDeniedError):
        asyncio.run(mcp_like())
    config = {"url": canary.base + "/rows", "tables": {"t": {"columns": {"secret": "string"}}}}
    connector = HttpJsonConnector.from_config("internal", config, MappingSecrets({}))
    with pytest.raises(EgressDeniedError, match="source 'internal'"):
        list(connector.read(connector.splits("main", "t", ["secret"], [])[0]))
    connector.close()
    assert canary.paths == []


# -- blocks run in process ----------------------------------------------------------------------


async def _run(document: dict[str, Any], inputs: dict[str, Any]) -> Any:
    plan = compile_flow(parse_flow(document), Registry.default())
    services = BlockServices({EGRESS: EgressPolicy(), SECRETS: MappingSecrets({"key": "k"})})
    return await Executor(ExecutorOptions(services=services, run_timeout=20)).run(plan, inputs)


async def test_invoke_remote_to_loopback_is_refused(canary: Canary) -> None:
    document = flow(
        [
            node("q", "text_input", name="q"),
            node(
                "remote",
                "invoke_remote",
                url=canary.base,
                app="a",
                api_key_secret="key",
                inputs=["q"],
            ),
            node("out", "output", name="out"),
        ],
        [edge("q", "remote.q"), edge("remote", "out")],
    )
    result = await _run(document, {"q": "hi"})
    assert result.status == "failed"
    assert (result.error.node, result.error.code) == ("remote", "egress_denied")
    assert canary.paths == []


def test_the_rendered_url_must_keep_the_templates_server() -> None:
    # Defence in depth behind the save-time check: a config built without validation.
    config = tool.HttpRequestConfig.model_construct(
        url="https://api.example.com/{{ path }}", variable_host=False
    )
    for rendered in (
        "https://api.example.com@127.0.0.1:5432/",
        "https://127.0.0.1/api",
        "http://api.example.com/",
        "https://api.example.com:8443/",
    ):
        with pytest.raises(EgressDeniedError, match="may not change the scheme, host or port"):
            tool._check_origin(config, httpx.URL(rendered))
    tool._check_origin(config, httpx.URL("https://api.example.com//@127.0.0.1/x"))


# -- against a server process (default policy) ----------------------------------------------------


def _http_flow(url: str, **config: Any) -> dict[str, Any]:
    ports = [name for name in ("sub", "path") if "{{ " + name + " }}" in url]
    nodes = [node(name, "text_input", name=name) for name in ports]
    nodes += [node("http", "http_request", url=url, **config), node("out", "output", name="out")]
    edges = [edge(name, f"http.{name}") for name in ports] + [edge("http.body", "out")]
    return flow(nodes, edges, name="egress")


def _debug_run(
    server: ServerProcess, api: Api, document: dict[str, Any], inputs: dict[str, Any]
) -> dict[str, Any]:
    payload = {"flow": document, "inputs": inputs, "stream": False}
    response, _ = timed(server.base_url, lambda: api.http.post("/api/v1/runs/debug", json=payload))
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _port_of(url: str) -> int:
    port = urlsplit(url).port
    assert port is not None
    return port


def test_http_request_reaches_no_internal_address(
    server_process: ServerProcess, api: Api, canary: Canary
) -> None:
    port = canary.port
    targets = [
        f"http://127.0.0.1:{port}/a",
        f"http://localhost:{port}/a",
        f"http://2130706433:{port}/a",  # decimal
        f"http://0x7f.0.0.1:{port}/a",  # hex
        f"http://017700000001:{port}/a",  # octal
        f"http://127.1:{port}/a",  # short form
        f"http://0.0.0.0:{port}/a",
        f"http://[::ffff:127.0.0.1]:{port}/a",  # IPv4-mapped IPv6
        f"http://[::1]:{port}/a",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.1/",
        "http://192.168.0.1/",
        f"{server_process.base_url}/api/v1/apps",  # the server's own editor API
        f"http://127.0.0.1:{_port_of(POSTGRES_URL)}/",
        f"http://127.0.0.1:{_port_of(MYSQL_URL)}/",
    ]
    for url in targets:
        result = _debug_run(server_process, api, _http_flow(url), {})
        assert result["status"] == "failed", (url, result)
        error = result["error"]
        assert (error["node"], error["code"]) == ("http", "egress_denied"), (url, error)
        assert httpx.URL(url).host in error["message"], error
        assert "is not allowed" in error["message"], error
    assert canary.paths == []


def test_a_variable_in_the_authority_is_refused_when_the_flow_is_saved(
    server_process: ServerProcess, api: Api, canary: Canary
) -> None:
    for url in ("http://{{ sub }}.example.com/", "https://api.example.com{{ path }}"):
        response, _ = timed(
            server_process.base_url,
            lambda url=url: api.http.post("/api/v1/validate", json={"flow": _http_flow(url)}),
        )
        assert response.status_code == 200, response.text
        problems = [p for p in response.json()["problems"] if p["severity"] == "error"]
        assert [(p["node"], p["code"]) for p in problems] == [("http", "invalid_config")]
        expected = "config field 'url': Value error, a template variable sits in the URL's"
        assert expected in problems[0]["message"]
    # The attack of the issue, as a run: refused (422, naming node and field) before anything
    # is sent.
    sub = f"127.0.0.1:{canary.port}/api/v1/apps?"
    payload = {"flow": _http_flow("http://{{ sub }}.example.com/"), "inputs": {"sub": sub}}
    response, _ = timed(
        server_process.base_url, lambda: api.http.post("/api/v1/runs/debug", json=payload)
    )
    error = error_of(response, 422)
    assert error["code"] == "flow_invalid"
    assert [(p["node"], p["code"]) for p in error["problems"]] == [("http", "invalid_config")]
    assert canary.paths == []


def test_a_variable_host_the_node_allows_still_meets_the_policy(
    server_process: ServerProcess, api: Api, canary: Canary
) -> None:
    document = _http_flow("http://{{ sub }}.example.com/", variable_host=True)
    sub = f"127.0.0.1:{canary.port}/api/v1/apps?"
    result = _debug_run(server_process, api, document, {"sub": sub})
    assert result["status"] == "failed"
    assert (result["error"]["node"], result["error"]["code"]) == ("http", "egress_denied")
    document = _http_flow("https://api.example.com/{{ path }}")
    path = f"@127.0.0.1:{canary.port}/x"  # only path text after the literal host's "/"
    result = _debug_run(server_process, api, document, {"path": path})
    # The request goes to api.example.com (or fails there), never to the canary.
    assert "connecting to 127.0.0.1" not in (result.get("error") or {}).get("message", "")
    assert canary.paths == []


def test_mcp_targets_on_loopback_are_refused(
    server_process: ServerProcess, api: Api, canary: Canary
) -> None:
    for url in (f"{canary.base}/mcp", f"http://2130706433:{canary.port}/mcp"):
        response, _ = timed(
            server_process.base_url,
            lambda url=url: api.http.post("/api/v1/mcp/tools", json={"url": url}),
        )
        error = error_of(response, 403)
        assert error["code"] == "egress_denied", error
        assert "is not allowed" in error["message"]
    document = flow(
        [
            node("q", "text_input", name="q"),
            node("call", "mcp_tool", url=f"{canary.base}/mcp", tool="t", inputs=["q"]),
            node("out", "output", name="out"),
        ],
        [edge("q", "call.q"), edge("call", "out")],
        name="mcp-egress",
    )
    result = _debug_run(server_process, api, document, {"q": "x"})
    assert result["status"] == "failed"
    assert (result["error"]["node"], result["error"]["code"]) == ("call", "egress_denied")
    assert canary.paths == []


# -- TLS: the socket goes to the checked address, the certificate is checked for the name -----


@dataclass
class _Tls:
    port: int
    client_context: ssl.SSLContext


def _certificates(tmp: Path) -> tuple[Path, Path, Path]:
    """A CA, and a server certificate it signed for the name egress-tls.test only."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def build(subject: str, key: Any, issuer: Any, issuer_key: Any, ca: bool) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False
            )
        return builder.sign(issuer_key, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "egress test CA")])
    ca = build("egress test CA", ca_key, ca_name, ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = build("egress-tls.test", key, ca_name, ca_key, ca=False)
    pem = serialization.Encoding.PEM
    ca_file, cert_file, key_file = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_file.write_bytes(ca.public_bytes(pem))
    cert_file.write_bytes(leaf.public_bytes(pem))
    key_file.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return ca_file, cert_file, key_file


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[_Tls]:
    ca_file, cert_file, key_file = _certificates(tmp_path)
    running = _start()
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert_file, key_file)
    running.httpd.socket = server_context.wrap_socket(running.httpd.socket, server_side=True)
    try:
        yield _Tls(running.httpd.server_address[1], ssl.create_default_context(cafile=ca_file))
    finally:
        _stop(running)


def test_tls_verifies_the_name_asked_for_while_connecting_to_the_checked_address(
    tls_server: _Tls,
) -> None:
    resolved: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        resolved.append(host)
        return ["127.0.0.1"]  # both names point at the test server

    policy = EgressPolicy.from_text(f"127.0.0.1:{tls_server.port}").with_resolver(resolver)

    async def get(name: str) -> httpx.Response:
        async with async_client(policy, tls_server.client_context, timeout=5) as client:
            return await client.get(f"https://{name}:{tls_server.port}/tls")

    assert asyncio.run(get("egress-tls.test")).status_code == 200
    # The same address under a name the certificate does not carry: the check is by name.
    with pytest.raises(httpx.ConnectError, match="certificate verify failed"):
        asyncio.run(get("other-name.test"))
    assert resolved == ["egress-tls.test", "other-name.test"]
