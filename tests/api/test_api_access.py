"""Who may call what, over real HTTP: the admin token for the editor API, app keys for
published endpoints (the admin token is not one), reading runs, the rate limit per key, the
body size limit, and settings that would open the editor API to the network."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright.api.settings import ServerConfigError, admin_required, check, server_settings
from dagwright.settings import Settings
from support.server import Api, LiveServer, error_of, example, key_headers, live_server, slow_flow
from support.settings import clean_settings_environment

ADMIN = "admin-secret"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(
        "sqlite", tmp_path_factory.mktemp("access"), admin_token=ADMIN, rate_limit=2
    ) as running:
        yield running


@pytest.fixture
def admin(server: LiveServer) -> Api:
    return server.api


@pytest.fixture
def anonymous(server: LiveServer) -> Iterator[Api]:
    client = server.client(None)
    yield client
    client.close()


EDITOR_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/v1/apps", None),
    ("POST", "/api/v1/apps", {"slug": "sneaky", "name": "sneaky"}),
    ("GET", "/api/v1/apps/locked", None),
    ("PATCH", "/api/v1/apps/locked", {"name": "renamed"}),
    ("GET", "/api/v1/apps/locked/versions", None),
    ("POST", "/api/v1/apps/locked/versions", {"flow": example("hello")}),
    ("GET", "/api/v1/apps/locked/versions/1", None),
    ("GET", "/api/v1/apps/locked/export", None),
    ("POST", "/api/v1/validate", {"flow": example("hello")}),
    ("GET", "/api/v1/blocks", None),
    ("GET", "/api/v1/apps/locked/keys", None),
    ("POST", "/api/v1/apps/locked/keys", {"name": "stolen"}),
    ("GET", "/api/v1/secrets", None),
    ("PUT", "/api/v1/secrets/planted", {"value": "x"}),
    ("GET", "/api/v1/runs", None),
    ("POST", "/api/v1/runs/debug", {"flow": example("hello"), "stream": False}),
    ("POST", "/api/v1/apps/locked/versions/1/run", {"inputs": {}}),
    ("DELETE", "/api/v1/apps/locked", None),
]


@pytest.mark.parametrize(("method", "path", "body"), EDITOR_CALLS)
def test_editor_api_needs_the_admin_token(
    server: LiveServer, admin: Api, method: str, path: str, body: dict[str, Any] | None
) -> None:
    if admin.http.get("/api/v1/apps/locked").status_code == 404:
        admin.create_app("locked")
        admin.save("locked", example("hello"))
    with httpx.Client(base_url=server.base_url, timeout=10) as raw:
        missing = raw.request(method, path, json=body)
        assert error_of(missing, 401)["code"] == "admin_token_required"
        assert missing.headers["www-authenticate"] == "Bearer"
        wrong = raw.request(method, path, json=body, headers={"Authorization": "Bearer nope"})
        assert error_of(wrong, 403)["code"] == "admin_token_invalid"
    # Nothing was changed by the refused calls.
    assert admin.http.get("/api/v1/apps/locked").json()["name"] == "locked"
    assert admin.http.get("/api/v1/apps/sneaky").status_code == 404
    assert "planted" not in admin.http.get("/api/v1/secrets").json()["names"]


def test_the_admin_token_opens_the_editor_api(admin: Api) -> None:
    assert admin.http.get("/api/v1/apps").status_code == 200
    assert admin.http.get("/api/v1/blocks").status_code == 200
    admin.create_app("admin-made")
    assert admin.http.get("/api/v1/apps/admin-made").status_code == 200
    as_x_api_key = admin.http.get(
        "/api/v1/apps/admin-made", headers={"Authorization": "", "X-API-Key": ADMIN}
    )
    assert as_x_api_key.status_code == 200
    health = httpx.get(f"{admin.base_url}/api/v1/health")  # open to all
    assert health.status_code == 200
    assert health.json()["status"] == "ok"


def test_published_endpoint_needs_the_app_key_not_the_admin_token(
    admin: Api, anonymous: Api
) -> None:
    key = admin.published_app("admin-published", example("hello"))
    with_admin = admin.http.post(
        "/api/v1/apps/admin-published/run", json={"inputs": {"name": "Ann"}}
    )  # the client sends the admin token
    assert error_of(with_admin, 401)["code"] == "invalid_api_key"
    nothing = anonymous.run("admin-published", None, {"name": "Ann"})
    assert error_of(nothing, 401)["code"] == "api_key_required"
    with_key = anonymous.run("admin-published", key, {"name": "Ann"})
    assert with_key.status_code == 200
    assert with_key.json()["outputs"] == {"greeting": "Hello, Ann!"}


def test_runs_are_read_with_the_admin_token_or_the_apps_key(admin: Api, anonymous: Api) -> None:
    key = admin.published_app("read-own", slow_flow(0.3))
    other_key = admin.published_app("read-other", example("hello"))
    started = anonymous.run("read-own", key, {"value": "x"}, **{"async": True})
    assert started.status_code == 202
    run_id = started.json()["run_id"]
    record = anonymous.wait_for_run(run_id, key=key)
    assert record["status"] == "succeeded"
    assert record["outputs"] == {"value": "quick:x"}
    assert admin.get_run(run_id)["id"] == run_id

    with_other_key = anonymous.http.get(f"/api/v1/runs/{run_id}", headers=key_headers(other_key))
    assert error_of(with_other_key, 403)["code"] == "key_for_another_app"
    without = anonymous.http.get(f"/api/v1/runs/{run_id}", headers=key_headers(None))
    assert error_of(without, 401)["code"] == "admin_token_required"
    events = anonymous.http.get(f"/api/v1/runs/{run_id}/events", headers=key_headers(other_key))
    assert error_of(events, 403)["code"] == "key_for_another_app"
    # A key may read runs, not cancel them or list them: that is the editor's.
    cancel = anonymous.http.post(f"/api/v1/runs/{run_id}/cancel", headers=key_headers(key))
    assert error_of(cancel, 403)["code"] == "admin_token_invalid"
    listing = anonymous.http.get("/api/v1/runs", headers=key_headers(key))
    assert error_of(listing, 403)["code"] == "admin_token_invalid"


def test_rate_limit_per_key(admin: Api, anonymous: Api) -> None:
    key = admin.published_app("limited", example("hello"))
    other_key = admin.new_key("limited", "another")
    statuses: list[int] = []
    limited: httpx.Response | None = None
    for _ in range(10):  # far quicker than 2/s: the burst (4) then 429s
        response = anonymous.run("limited", key, {"name": "R"})
        statuses.append(response.status_code)
        if response.status_code == 429:
            limited = response
    assert statuses[:4] == [200] * 4
    assert limited is not None
    assert error_of(limited, 429)["code"] == "rate_limited"
    retry_after = int(limited.headers["retry-after"])
    assert 1 <= retry_after <= 2
    # Another key of the same app has its own bucket.
    assert anonymous.run("limited", other_key, {"name": "R"}).status_code == 200
    # Tokens come back at the rate.
    time.sleep(retry_after)
    assert anonymous.run("limited", key, {"name": "R"}).status_code == 200


def test_oversized_body_is_413(admin: Api) -> None:
    admin.create_app("big-body")
    flow = example("hello")
    flow["description"] = "x" * (3 * 1024 * 1024)
    response = admin.http.post("/api/v1/apps/big-body/versions", json={"flow": flow})
    error = error_of(response, 413)
    assert error["code"] == "payload_too_large"
    assert admin.http.get("/api/v1/apps/big-body/versions").json()["total"] == 0

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        yield b'{"flow": {"description": "'
        for _ in range(3):
            yield b"x" * (1024 * 1024)
        yield b'"}}'

    streamed = admin.http.post(
        "/api/v1/apps/big-body/versions",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    assert error_of(streamed, 413)["code"] == "payload_too_large"
    small = admin.http.post("/api/v1/apps/big-body/versions", json={"flow": example("hello")})
    assert small.status_code == 201


def test_settings_refuse_an_open_editor_api_beyond_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_settings_environment(monkeypatch, tmp_path)
    with pytest.raises(ServerConfigError, match="DAGWRIGHT_ADMIN_TOKEN"):
        check(Settings(host="0.0.0.0", admin_token=None, data_dir=tmp_path))
    with pytest.raises(ServerConfigError, match="DAGWRIGHT_RATE_LIMIT"):
        check(Settings(rate_limit=0, data_dir=tmp_path))
    open_wide = Settings(host="0.0.0.0", admin_token="t", data_dir=tmp_path)
    check(open_wide)
    assert admin_required(open_wide)
    loopback = Settings(host="127.0.0.1", data_dir=tmp_path)
    check(loopback)
    assert not admin_required(loopback)
    assert admin_required(Settings(host="::1", admin_token=ADMIN, data_dir=tmp_path))


def test_serve_options_go_over_the_process_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_settings_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("DAGWRIGHT_PORT", "9100")
    monkeypatch.setenv("DAGWRIGHT_RATE_LIMIT", "7")
    (tmp_path / "dagwright.toml").write_text('admin_token = "from-file"\n')
    assert server_settings().port == 9100
    served = server_settings(host="0.0.0.0", port=9200)
    assert (served.host, served.port) == ("0.0.0.0", 9200)
    # Everything else is the process's, read once: the environment's and the file's.
    assert (served.rate_limit, served.admin_token) == (7.0, "from-file")
    assert served.settings_file == Path("dagwright.toml")
    assert admin_required(served)
    (tmp_path / "dagwright.toml").unlink()
    with pytest.raises(ServerConfigError, match="DAGWRIGHT_ADMIN_TOKEN"):
        server_settings(host="0.0.0.0")
