"""Published endpoints over real HTTP, on SQLite and PostgreSQL: who may call (API keys), sync,
streamed and async calls, pinned versions, the recorded runs, keys and secrets, and apps
invoking apps."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from dagwright.composition import INVOKE_DEPTH
from support.database import DATABASES
from support.server import (
    Api,
    LiveServer,
    edge,
    error_of,
    example,
    flow,
    key_headers,
    live_server,
    node,
    slow_flow,
    sse_events,
)

# -- who may call -----------------------------------------------------------------------------


def test_keys_decide_who_may_call(api: Api) -> None:
    key = api.published_app("guarded", example("hello"))
    other_key = api.published_app("guarded-other", example("hello"))

    anonymous = api.run("guarded", None, {"name": "Ann"})
    assert error_of(anonymous, 401)["code"] == "api_key_required"
    assert anonymous.headers["www-authenticate"] == "Bearer"

    for unknown in ("dw_" + "x" * 43, "not-even-a-key"):
        response = api.run("guarded", unknown, {"name": "Ann"})
        assert error_of(response, 401)["code"] == "invalid_api_key"
        assert response.headers["www-authenticate"] == "Bearer"

    wrong_app = api.run("guarded", other_key, {"name": "Ann"})
    assert error_of(wrong_app, 403)["code"] == "key_for_another_app"

    no_app = api.run("no-such-app", key, {"name": "Ann"})
    assert error_of(no_app, 404)["code"] == "app_not_found"

    # The key may also come as X-API-Key.
    by_header = api.http.post(
        "/api/v1/apps/guarded/run",
        json={"inputs": {"name": "Ann"}},
        headers={"Authorization": "", "X-API-Key": key},
    )
    assert by_header.status_code == 200
    assert by_header.json()["outputs"] == {"greeting": "Hello, Ann!"}


def test_an_app_with_nothing_published_is_404(api: Api) -> None:
    api.create_app("unpublished")
    api.save("unpublished", example("hello"))
    key = api.new_key("unpublished")
    response = api.run("unpublished", key, {"name": "Ann"})
    assert error_of(response, 404)["code"] == "not_published"
    # A saved version can still be pinned.
    pinned = api.run("unpublished", key, {"name": "Ann"}, version="1")
    assert pinned.status_code == 200
    assert pinned.json()["outputs"] == {"greeting": "Hello, Ann!"}


def test_bad_inputs_are_422_and_record_no_run(api: Api) -> None:
    key = api.published_app("bad-inputs", example("hello"))
    unknown = api.run("bad-inputs", key, {"nmae": "Ann"})
    error = error_of(unknown, 422)
    assert error["code"] == "invalid_input"
    assert "nmae" in error["message"]
    not_an_object = api.http.post(
        "/api/v1/apps/bad-inputs/run", json={"inputs": ["Ann"]}, headers=key_headers(key)
    )
    assert error_of(not_an_object, 422)["code"] == "invalid_request"
    unknown_field = api.http.post(
        "/api/v1/apps/bad-inputs/run", json={"inputz": {}}, headers=key_headers(key)
    )
    assert error_of(unknown_field, 422)["code"] == "invalid_request"
    missing_version = api.run("bad-inputs", key, {"name": "Ann"}, version="7")
    assert error_of(missing_version, 404)["code"] == "version_not_found"
    runs = api.http.get("/api/v1/runs", params={"app": "bad-inputs"}).json()
    assert runs["total"] == 0


# -- calls --------------------------------------------------------------------------------------


def test_sync_call_is_recorded_with_its_trace(api: Api) -> None:
    key = api.published_app("sync-call", example("hello"))
    response = api.run("sync-call", key, {"name": "Ann"})
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"greeting": "Hello, Ann!"}
    assert result["error"] is None
    assert result["duration"] > 0

    default = api.run("sync-call", key)  # the input's default: "world"
    assert default.json()["outputs"] == {"greeting": "Hello, world!"}

    record = api.get_run(result["run_id"])
    assert record["status"] == "succeeded"
    assert record["mode"] == "published"
    assert record["app_id"] == result["app_id"]
    assert record["version_id"] == result["version_id"]
    assert record["inputs"] == {"name": "Ann"}
    assert record["outputs"] == {"greeting": "Hello, Ann!"}
    trace = {n["node"]: n for n in record["nodes"]}
    assert [n["node"] for n in record["nodes"]] == ["name", "greet", "greeting"]
    assert trace["greet"]["block"] == "template"
    assert trace["greet"]["status"] == "succeeded"
    assert trace["greet"]["inputs"] == {"name": "Ann"}
    assert trace["greet"]["output"] == "Hello, Ann!"
    assert trace["greeting"]["output"] == "Hello, Ann!"
    # The app's key may read its own run.
    assert api.get_run(result["run_id"], key=key)["id"] == result["run_id"]


def test_pinned_version(api: Api) -> None:
    key = api.published_app("pinned", example("hello"))
    changed = example("hello")
    changed["nodes"][1]["config"]["template"] = "Bye, {{ name }}."
    two = api.save("pinned", changed)
    assert api.run("pinned", key, {"name": "Ann"}).json()["outputs"]["greeting"] == "Hello, Ann!"
    by_number = api.run("pinned", key, {"name": "Ann"}, version="2").json()
    assert by_number["outputs"]["greeting"] == "Bye, Ann."
    assert by_number["version_id"] == two["id"]
    by_id = api.run("pinned", key, {"name": "Ann"}, version=two["id"]).json()
    assert by_id["outputs"]["greeting"] == "Bye, Ann."
    api.publish("pinned", two["id"])
    assert api.run("pinned", key, {"name": "Ann"}).json()["outputs"]["greeting"] == "Bye, Ann."


def test_streamed_call_event_by_event(api: Api) -> None:
    key = api.published_app("streamed", example("hello"))
    with api.http.stream(
        "POST",
        "/api/v1/apps/streamed/run",
        json={"inputs": {"name": "Bo"}, "stream": True},
        headers=key_headers(key),
    ) as response:
        events = sse_events(response)
    kinds = [e.event for e in events]
    assert kinds[0] == "run_started"
    assert kinds[-2:] == ["run_finished", "result"]
    assert [e.id for e in events] == [str(i) for i in range(len(events))]
    middle = kinds[1:-2]
    assert middle.count("node_started") == 3
    assert middle.count("node_finished") == 3
    # Each node starts before it finishes, and in the flow's order.
    order = [(e.event, e.data["node"]) for e in events[1:-2]]
    for name in ("name", "greet", "greeting"):
        assert order.index(("node_started", name)) < order.index(("node_finished", name))
    assert order.index(("node_finished", "name")) < order.index(("node_started", "greet"))
    finished = events[-2].data
    assert finished["status"] == "succeeded"
    assert finished["outputs"] == {"greeting": "Hello, Bo!"}
    result = events[-1].data
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"greeting": "Hello, Bo!"}
    assert events[0].data["run_id"] == result["run_id"]
    assert api.get_run(result["run_id"])["status"] == "succeeded"


def test_async_call_answers_at_once_and_is_polled(api: Api) -> None:
    key = api.published_app("async-call", slow_flow(0.8))
    started = time.monotonic()
    response = api.run("async-call", key, {"value": "v"}, **{"async": True})
    assert time.monotonic() - started < 0.7  # not after the run
    assert response.status_code == 202
    body = response.json()
    run_id = body["run_id"]
    assert body["status"] == "running"
    assert body["poll"] == f"/api/v1/runs/{run_id}"
    first = api.get_run(run_id, key=key)
    assert first["status"] == "running"
    record = api.wait_for_run(run_id, key=key)
    assert record["status"] == "succeeded"
    assert record["outputs"] == {"value": "quick:v"}
    assert [n["node"] for n in record["nodes"]] == ["inp", "quick", "slow", "out"]
    assert record["nodes"][2]["duration"] >= 0.7


def test_a_failing_run_is_200_with_its_error(api: Api) -> None:
    failing = flow(
        [
            node("inp", "json_input", name="data"),
            node("t", "template", template="{{ data.missing.deeper }}"),
            node("out", "output", name="out"),
        ],
        [edge("inp", "t.data"), edge("t", "out")],
    )
    key = api.published_app("failing", failing)
    response = api.run("failing", key, {"data": {}})
    assert response.status_code == 200
    result = response.json()
    assert result["status"] == "failed"
    assert result["outputs"] in (None, {})
    assert result["error"]["node"] == "t"
    record = api.get_run(result["run_id"])
    assert {n["node"]: n["status"] for n in record["nodes"]}["t"] == "failed"


# -- keys and secrets ---------------------------------------------------------------------------


def test_keys_are_shown_once_and_revocable(api: Api) -> None:
    api.published_app("key-life", example("hello"))
    created = api.http.post("/api/v1/apps/key-life/keys", json={"name": "ci"})
    assert created.status_code == 201
    body = created.json()
    plaintext = body["key"]
    assert plaintext.startswith("dw_")
    assert plaintext.startswith(body["prefix"])
    assert len(plaintext) > len(body["prefix"]) + 20
    assert api.run("key-life", plaintext, {"name": "K"}).status_code == 200

    listed = api.http.get("/api/v1/apps/key-life/keys")
    assert listed.status_code == 200
    assert plaintext not in listed.text
    by_id = {k["id"]: k for k in listed.json()}
    assert by_id[body["id"]]["name"] == "ci"
    assert by_id[body["id"]]["revoked_at"] is None
    assert by_id[body["id"]]["last_used_at"] is not None
    assert all("key" not in k and "hash" not in k for k in listed.json())

    revoked = api.http.delete(f"/api/v1/apps/key-life/keys/{body['id']}")
    assert revoked.status_code == 204
    after = api.run("key-life", plaintext, {"name": "K"})
    assert error_of(after, 401)["code"] == "invalid_api_key"
    listed_after = api.http.get("/api/v1/apps/key-life/keys").json()
    assert {k["id"]: k for k in listed_after}[body["id"]]["revoked_at"] is not None
    missing = api.http.delete("/api/v1/apps/key-life/keys/no-such-key")
    assert error_of(missing, 404)["code"] == "key_not_found"
    empty_name = api.http.post("/api/v1/apps/key-life/keys", json={"name": ""})
    assert error_of(empty_name, 422)["code"] == "invalid_request"

    # Deleting an app takes its keys with it.
    live_key = api.new_key("key-life", "doomed")
    assert api.run("key-life", live_key, {"name": "K"}).status_code == 200
    assert api.http.delete("/api/v1/apps/key-life").status_code == 204
    after_delete = api.run("key-life", live_key, {"name": "K"})
    assert error_of(after_delete, 401)["code"] == "invalid_api_key"


class _EchoAuth(BaseHTTPRequestHandler):
    """Answers whether the Authorization header holds the expected secret (never echoing it)."""

    expected = "Bearer s3cret-value-1234"

    def do_GET(self) -> None:
        body = json.dumps(
            {"authorized": self.headers.get("Authorization") == self.expected, "path": self.path}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def auth_server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _EchoAuth)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, auth_server: str
) -> Iterator[LiveServer]:
    """tests/api/conftest.py's server, allowed to reach the echo server on loopback (the
    egress policy refuses loopback unless the operator allows a host: exactly this one)."""
    allow = auth_server.removeprefix("http://")
    with live_server(request.param, tmp_path_factory.mktemp("server"), egress_allow=allow) as up:
        yield up


def test_secrets_are_write_only_and_reach_blocks(
    api: Api, auth_server: str, server: LiveServer
) -> None:
    value = _EchoAuth.expected
    put = api.http.put("/api/v1/secrets/echo_token", json={"value": value})
    assert put.status_code == 204
    assert put.content == b""
    listed = api.http.get("/api/v1/secrets")
    assert listed.status_code == 200
    assert "echo_token" in listed.json()["names"]
    assert value not in listed.text
    bad_name = api.http.put("/api/v1/secrets/bad name!", json={"value": "x"})
    assert error_of(bad_name, 422)["code"] == "invalid_input"
    empty = api.http.put("/api/v1/secrets/empty_one", json={"value": ""})
    assert error_of(empty, 422)["code"] == "invalid_request"

    calling = flow(
        [
            node("path", "text_input", name="path"),
            node(
                "req",
                "http_request",
                url=auth_server + "/{{ path }}",
                secret_headers={"Authorization": "echo_token"},
            ),
            node("out", "output", name="answer"),
        ],
        [edge("path", "req.path"), edge("req.body", "out")],
    )
    key = api.published_app("secret-user", calling)
    result = api.run("secret-user", key, {"path": "check"})
    assert result.status_code == 200
    assert result.json()["outputs"] == {"answer": {"authorized": True, "path": "/check"}}
    record = api.http.get(f"/api/v1/runs/{result.json()['run_id']}")
    assert value not in record.text
    assert value not in result.text

    assert api.http.delete("/api/v1/secrets/echo_token").status_code == 204
    assert "echo_token" not in api.http.get("/api/v1/secrets").json()["names"]
    without = api.run("secret-user", key, {"path": "check"}).json()
    assert without["status"] == "failed"
    assert "echo_token" in without["error"]["message"]
    gone = api.http.delete("/api/v1/secrets/echo_token")
    assert error_of(gone, 404)["code"] == "secret_not_found"


# -- apps invoking apps ---------------------------------------------------------------------------


def test_invoke_records_the_child_run(api: Api) -> None:
    api.published_app("callee", example("hello"))
    caller = flow(
        [
            node("name", "text_input", name="name"),
            node("call", "invoke_app", app="callee", inputs=["name"], output="greeting"),
            node("out", "output", name="answer"),
        ],
        [edge("name", "call.name"), edge("call", "out")],
    )
    key = api.published_app("caller", caller)
    result = api.run("caller", key, {"name": "Ann"}).json()
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"answer": "Hello, Ann!"}

    children = api.http.get("/api/v1/runs", params={"app": "callee"}).json()
    assert children["total"] == 1
    child = children["items"][0]
    assert child["parent_run_id"] == result["run_id"]
    assert child["parent_node"] == "call"
    assert child["mode"] == "invoke"
    assert child["status"] == "succeeded"
    assert child["outputs"] == {"greeting": "Hello, Ann!"}
    assert api.get_run(child["id"])["nodes"][1]["output"] == "Hello, Ann!"


def test_an_app_invoking_itself_stops_at_the_depth_limit(api: Api) -> None:
    looping = flow(
        [
            node("name", "text_input", name="name"),
            node("again", "invoke_app", app="ouroboros", inputs=["name"]),
            node("out", "output", name="answer"),
        ],
        [edge("name", "again.name"), edge("again", "out")],
    )
    key = api.published_app("ouroboros", looping)
    started = time.monotonic()
    result = api.run("ouroboros", key, {"name": "Ann"}).json()
    assert time.monotonic() - started < 10
    depth = INVOKE_DEPTH
    assert result["status"] == "failed"
    assert result["error"]["code"] == "invoke_failed"
    assert result["error"]["node"] == "again"
    assert f"would nest {depth + 1} runs deep; the limit is {depth}" in result["error"]["message"]
    runs = api.http.get("/api/v1/runs", params={"app": "ouroboros", "limit": 50}).json()
    assert runs["total"] == depth + 1  # the call and its nested runs, no more
    assert {r["status"] for r in runs["items"]} == {"failed"}
    by_id = {r["id"]: r for r in runs["items"]}
    # Each nested run is the child of the one before; the deepest hit the limit.
    deepest = [r for r in runs["items"] if r["error"]["code"] == "invoke_depth"]
    assert len(deepest) == 1
    chain = [deepest[0]]
    while chain[-1]["parent_run_id"] is not None:
        chain.append(by_id[chain[-1]["parent_run_id"]])
    assert len(chain) == depth + 1
    assert chain[-1]["id"] == result["run_id"]
    assert chain[-1]["mode"] == "published"
    assert {r["mode"] for r in chain[:-1]} == {"invoke"}
