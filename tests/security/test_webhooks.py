"""Hostile webhook calls (issue 29, items 8, 9 and 10), on SQLite and on PostgreSQL: replays,
stale and forged signatures, hostile signature headers, floods, body keys against fixed
inputs, badly typed inputs, bodies of any content type holding what cannot be stored, and
webhooks without a secret. Each is refused with a 4xx and writes nothing: no firing, no
run, no remembered signature (docs/security/webhooks.md)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import count
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.services.runs.service import RunService
from dagwright.services.webhook_signing import (
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    signature,
    signed_headers,
)
from dagwright.store.db import database_url
from support.database import DATABASES
from support.server import LiveServer, error_of, example, live_server

SECRET = "whsec-test-0123456789"
RATE_LIMIT = 5
_names = count()


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with live_server(
        request.param,
        Path(tmp_path_factory.mktemp("webhooks")),
        webhook_rate_limit=RATE_LIMIT,
        webhook_tolerance=300.0,
    ) as running:
        assert (
            running.api.http.put("/api/v1/secrets/hook_key", json={"value": SECRET}).status_code
            == 204
        )
        yield running


def rows(server: LiveServer, table: str, trigger_id: str) -> int:
    """Rows of the trigger in `table`, read from the server's database itself."""
    url = database_url(server.settings.data_dir, server.settings.database_url)
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            found = conn.execute(
                text(f"SELECT count(*) FROM {table} WHERE trigger_id = :id"), {"id": trigger_id}
            ).scalar_one()
            return int(found)
    finally:
        engine.dispose()


def runs_of(server: LiveServer, slug: str) -> int:
    page = server.api.http.get("/api/v1/runs", params={"app": slug, "limit": 200}).json()
    return len(page["items"])


def webhook(server: LiveServer, **spec: Any) -> tuple[str, str, str]:
    """A published hello app and a webhook of it signed with SECRET: (slug, id, url)."""
    slug = f"hook-{next(_names)}"
    server.api.published_app(slug, example("hello"))
    body = {"kind": "webhook", "name": "hostile", "secret_name": "hook_key", **spec}
    created = server.api.http.post(f"/api/v1/apps/{slug}/triggers", json=body)
    assert created.status_code == 201, created.text
    trigger = created.json()
    return slug, trigger["id"], server.base_url + trigger["url"]


def post(url: str, body: bytes, headers: dict[str, Any] | None = None, **kw: Any) -> httpx.Response:
    return httpx.post(url, content=body, headers=headers or {}, timeout=30.0, **kw)


def test_a_signed_call_fires_once_and_its_replay_is_refused(server: LiveServer) -> None:
    slug, trigger_id, url = webhook(server)
    body = json.dumps({"name": "Ann"}).encode()
    headers = signed_headers(SECRET, body)
    first = post(url, body, headers)
    assert first.status_code == 202, first.text
    assert server.api.wait_for_run(first.json()["run_id"])["outputs"] == {"greeting": "Hello, Ann!"}
    # Before: the same request fired again, as often as an eavesdropper sent it.
    replay = post(url, body, headers)
    assert error_of(replay, 401)["code"] == "signature_replayed"
    # Upper-case hex is the same signature: no second firing through another spelling.
    shouted = {
        **headers,
        SIGNATURE_HEADER: headers[SIGNATURE_HEADER].upper().replace("SHA256=", "sha256="),
    }
    assert error_of(post(url, body, shouted), 401)["code"] == "signature_replayed"
    # The old scheme (the body alone signed, no timestamp) is refused.
    old = {SIGNATURE_HEADER: "sha256=" + signature(SECRET, 0, body)[7:]}
    assert error_of(post(url, body, old), 401)["code"] == "invalid_signature"
    assert rows(server, "trigger_firings", trigger_id) == 1
    assert rows(server, "webhook_deliveries", trigger_id) == 1
    assert runs_of(server, slug) == 1
    # Deleting the webhook deletes the signatures it remembered.
    assert server.api.http.delete(f"/api/v1/triggers/{trigger_id}").status_code == 204
    assert rows(server, "webhook_deliveries", trigger_id) == 0


def test_timestamps_outside_the_window_are_refused(server: LiveServer) -> None:
    slug, trigger_id, url = webhook(server)
    body = b'{"name": "Old"}'
    now = int(time.time())
    for at in (now - 301, now + 301, 0):
        refused = post(url, body, signed_headers(SECRET, body, at))
        assert error_of(refused, 401)["code"] == "signature_expired", at
    # A timestamp changed after signing no longer matches its signature.
    headers = signed_headers(SECRET, body, now - 400)
    headers[TIMESTAMP_HEADER] = str(now)
    assert error_of(post(url, body, headers), 401)["code"] == "invalid_signature"
    assert rows(server, "trigger_firings", trigger_id) == 0
    assert runs_of(server, slug) == 0


HOSTILE_HEADERS: list[tuple[str, list[tuple[str, bytes]]]] = [
    ("missing", []),
    ("non-ASCII signature", [(SIGNATURE_HEADER, b"sha256=\xff\xfe" + b"a" * 62)]),
    ("non-ASCII timestamp", [(TIMESTAMP_HEADER, ("\uff11\uff17" + "\uff10" * 8).encode())]),
    ("huge signature", [(SIGNATURE_HEADER, b"sha256=" + b"a" * 7000)]),
    ("empty signature", [(SIGNATURE_HEADER, b"")]),
    ("no prefix", [(SIGNATURE_HEADER, b"a" * 64)]),
    ("sha1", [(SIGNATURE_HEADER, b"sha1=" + b"a" * 40)]),
    ("negative timestamp", [(TIMESTAMP_HEADER, b"-5")]),
    ("float timestamp", [(TIMESTAMP_HEADER, b"1e9")]),
    ("huge timestamp", [(TIMESTAMP_HEADER, b"9" * 400)]),
]


@pytest.mark.parametrize(("case", "override"), HOSTILE_HEADERS, ids=[c for c, _ in HOSTILE_HEADERS])
def test_hostile_signature_headers_are_refused_not_crashed(
    server: LiveServer, case: str, override: list[tuple[str, bytes]]
) -> None:
    _slug, trigger_id, url = webhook(server)
    body = b'{"name": "Eve"}'
    good = signed_headers(SECRET, body)
    names = {name for name, _ in override}
    headers = [(k.encode(), v.encode()) for k, v in good.items() if k not in names]
    headers += [(k.encode(), v) for k, v in override]
    if case == "missing":
        headers = []
    answer = post(url, body, headers=headers)  # type: ignore[arg-type]
    # Before: a non-ASCII signature was a 500 (hmac.compare_digest refuses non-ASCII text).
    assert answer.status_code in (400, 401), answer.text
    assert answer.json()["error"]["code"] in ("invalid_signature", "signature_expired")
    assert rows(server, "trigger_firings", trigger_id) == 0


def test_a_duplicated_signature_header_is_refused(server: LiveServer) -> None:
    _slug, trigger_id, url = webhook(server)
    body = b'{"name": "Dup"}'
    good = signed_headers(SECRET, body)
    headers = [(k.encode(), v.encode()) for k, v in good.items()]
    headers.append((SIGNATURE_HEADER.encode(), b"sha256=" + b"0" * 64))
    answer = post(url, body, headers=headers)  # type: ignore[arg-type]
    assert "2 times" in error_of(answer, 401)["message"]
    assert rows(server, "trigger_firings", trigger_id) == 0


def test_an_unauthenticated_flood_writes_nothing_and_a_signed_one_is_rate_limited(
    server: LiveServer,
) -> None:
    slug, trigger_id, url = webhook(server)
    forged = b'{"name": "Flood"}'
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(
                lambda i: (
                    post(
                        url,
                        forged,
                        {
                            SIGNATURE_HEADER: f"sha256={i:064x}",
                            TIMESTAMP_HEADER: str(int(time.time())),
                        },
                    ).status_code
                ),
                range(200),
            )
        )
    # Before: no signature was needed, and 2,000 calls made 1,998 runs.
    assert set(answers) == {401}
    assert rows(server, "trigger_firings", trigger_id) == 0
    assert rows(server, "webhook_deliveries", trigger_id) == 0

    def signed(i: int) -> httpx.Response:
        body = json.dumps({"name": f"n{i}"}).encode()
        return post(url, body, signed_headers(SECRET, body))

    with ThreadPoolExecutor(8) as pool:
        calls = list(pool.map(signed, range(3 * RATE_LIMIT)))
    statuses = sorted(c.status_code for c in calls)
    # Claims of one trigger are taken one at a time: exactly the limit fires, on both databases.
    assert statuses == [202] * RATE_LIMIT + [429] * (2 * RATE_LIMIT), statuses
    limited = next(c for c in calls if c.status_code == 429)
    assert error_of(limited, 429)["code"] == "webhook_rate_limited"
    assert 1 <= int(limited.headers["Retry-After"]) <= 61
    assert rows(server, "trigger_firings", trigger_id) == RATE_LIMIT
    assert runs_of(server, slug) == RATE_LIMIT


def test_body_keys_do_not_override_fixed_inputs(server: LiveServer) -> None:
    slug, trigger_id, url = webhook(server, inputs={"name": "Fixed"})
    body = b'{"name": "Mallory"}'
    answer = post(url, body, signed_headers(SECRET, body))
    # Before: 202, and the run greeted Mallory.
    error = error_of(answer, 422)
    assert error["code"] == "invalid_input"
    assert "'name'" in error["message"]
    assert "fixed" in error["message"]
    assert rows(server, "trigger_firings", trigger_id) == 0
    empty = b"{}"
    fired = post(url, empty, signed_headers(SECRET, empty))
    assert fired.status_code == 202, fired.text
    assert server.api.wait_for_run(fired.json()["run_id"])["outputs"] == {
        "greeting": "Hello, Fixed!"
    }
    # A mapping onto a fixed input is refused when the trigger is made.
    refused = server.api.http.post(
        f"/api/v1/apps/{slug}/triggers",
        json={
            "kind": "webhook",
            "name": "x",
            "secret_name": "hook_key",
            "inputs": {"name": "a"},
            "input_map": {"name": "b"},
        },
    )
    assert "fixed input" in error_of(refused, 400)["message"]


def test_inputs_are_checked_before_any_firing_is_recorded(server: LiveServer) -> None:
    slug, trigger_id, url = webhook(server)
    for body, field in ((b'{"name": ["a", "list"]}', "inputs.name"), (b'{"nom": "x"}', "nom")):
        answer = post(url, body, signed_headers(SECRET, body))
        error = error_of(answer, 422)
        assert error["code"] == "invalid_input"
        assert field.split(".")[-1] in error["message"]
    # Before: each left a failed firing (and the type error a failed run).
    assert rows(server, "trigger_firings", trigger_id) == 0
    assert runs_of(server, slug) == 0


UNSTORABLE = [
    ("NUL", b'{"name": "a\\u0000b"}', "name"),
    ("lone surrogate", b'{"name": "\\ud800"}', "name"),
    ("NaN", b'{"name": NaN}', "name"),
    ("Infinity", b'{"name": -Infinity}', "name"),
    ("overflow", b'{"name": 1e999}', "name"),
    ("deep", b'{"name": ' + b"[" * 100 + b"]" * 100 + b"}", "name"),
]


@pytest.mark.parametrize("content_type", ["text/plain", "application/octet-stream", None])
@pytest.mark.parametrize(("case", "body", "field"), UNSTORABLE, ids=[c for c, _, _ in UNSTORABLE])
def test_any_content_type_goes_through_the_request_boundary(
    server: LiveServer, content_type: str | None, case: str, body: bytes, field: str
) -> None:
    slug, trigger_id, url = webhook(server)
    headers = signed_headers(SECRET, body)
    if content_type:
        headers["Content-Type"] = content_type
    answer = post(url, body, headers)
    # Before: text/plain skipped the boundary; NUL and surrogates were a 500 with a firing
    # left `started` and no run.
    error = error_of(answer, 422)
    assert error["code"] == "invalid_request"
    assert error["problems"][0]["field"].startswith(field)
    assert rows(server, "trigger_firings", trigger_id) == 0
    assert runs_of(server, slug) == 0


def test_raw_surrogate_bytes_are_not_read_as_text(server: LiveServer) -> None:
    _slug, trigger_id, url = webhook(server)
    body = b'{"name": "\xed\xa0\x80"}'  # U+D800 encoded as if it were a character
    answer = post(url, body, {**signed_headers(SECRET, body), "Content-Type": "text/plain"})
    assert error_of(answer, 422)["code"] == "invalid_input"
    assert "UTF-8" in answer.json()["error"]["message"]
    assert rows(server, "trigger_firings", trigger_id) == 0


def test_webhooks_without_a_secret_are_refused(server: LiveServer) -> None:
    slug = f"hook-{next(_names)}"
    server.api.published_app(slug, example("hello"))
    triggers = f"/api/v1/apps/{slug}/triggers"
    for spec, message in (
        ({}, "needs secret_name"),
        ({"secret_name": None}, "needs secret_name"),
        ({"secret_name": "never_set"}, "is not set"),
    ):
        refused = server.api.http.post(triggers, json={"kind": "webhook", "name": "x", **spec})
        # Before: 201, and anyone with the URL started runs.
        assert message in error_of(refused, 400)["message"]
    _, trigger_id, _ = webhook(server)
    patched = server.api.http.patch(f"/api/v1/triggers/{trigger_id}", json={"secret_name": None})
    assert "needs secret_name" in error_of(patched, 400)["message"]
    # A disabled webhook fires nothing: it may be left without one.
    off = server.api.http.patch(
        f"/api/v1/triggers/{trigger_id}", json={"enabled": False, "secret_name": None}
    )
    assert off.status_code == 200, off.text


def test_a_firing_is_settled_whatever_stops_its_run(
    server: LiveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slug, trigger_id, url = webhook(server)

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug after the firing was claimed")

    monkeypatch.setattr(RunService, "start", broken)  # the server runs in this process
    body = b'{"name": "Bug"}'
    answer = post(url, body, signed_headers(SECRET, body))
    assert answer.status_code == 500
    # Before: the firing stayed `started`, with no run, for good.
    [firing] = server.api.http.get(f"/api/v1/triggers/{trigger_id}/firings").json()["items"]
    assert firing["status"] == "failed"
    assert firing["error"] == "internal: RuntimeError"
    assert firing["run_id"] is None
