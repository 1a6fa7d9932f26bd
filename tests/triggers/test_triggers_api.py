"""Triggers through a real server: a cron schedule firing runs, signed webhooks, the body
mapped to inputs, and managing triggers (list, disable, delete). Hostile webhook calls are
in tests/security/test_webhooks.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright.services.webhook_signing import signed_headers
from support.server import Api, LiveServer, example, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def _firings(api: Api, trigger_id: str, at_least: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 15
    while True:
        items: list[dict[str, Any]] = api.http.get(f"/api/v1/triggers/{trigger_id}/firings").json()[
            "items"
        ]
        if len(items) >= at_least:
            return items
        assert time.monotonic() < deadline, f"{len(items)} firings, expected {at_least}"
        time.sleep(0.2)


def test_a_cron_schedule_fires_recorded_runs(api: Api) -> None:
    api.published_app("ticking", example("hello"))
    created = api.http.post(
        "/api/v1/apps/ticking/triggers",
        json={
            "kind": "cron",
            "name": "each second",
            "cron": "* * * * * *",
            "inputs": {"name": "Tick"},
        },
    )
    assert created.status_code == 201, created.text
    trigger = created.json()
    firings = _firings(api, trigger["id"], 2)
    run = api.wait_for_run(firings[-1]["run_id"])
    assert run["mode"] == "cron"
    assert run["outputs"] == {"greeting": "Hello, Tick!"}
    assert firings[0]["tick"] > firings[-1]["tick"]  # newest first, one per tick

    paused = api.http.patch(f"/api/v1/triggers/{trigger['id']}", json={"enabled": False})
    assert paused.json()["enabled"] is False
    count = len(_firings(api, trigger["id"], 0))
    time.sleep(2.5)
    assert len(_firings(api, trigger["id"], 0)) <= count + 1  # at most one pass in flight
    listed = api.http.get("/api/v1/apps/ticking/triggers").json()["items"]
    assert [t["name"] for t in listed] == ["each second"]
    assert api.http.delete(f"/api/v1/triggers/{trigger['id']}").status_code == 204
    assert api.http.get("/api/v1/apps/ticking/triggers").json()["items"] == []


def test_bad_triggers_are_refused(api: Api) -> None:
    api.published_app("refusing", example("hello"))
    for body, message in (
        ({"kind": "cron", "name": "x", "cron": "every day"}, "not a valid schedule"),
        (
            {"kind": "cron", "name": "x", "cron": "0 9 * * *", "timezone": "Nowhere/Else"},
            "time zone",
        ),
        ({"kind": "cron", "name": "x"}, "needs a cron schedule"),
    ):
        response = api.http.post("/api/v1/apps/refusing/triggers", json=body)
        assert response.status_code == 400, response.text
        assert message in response.json()["error"]["message"]


def test_a_signed_webhook_maps_its_body_to_inputs(api: Api, server: LiveServer) -> None:
    api.published_app("hooked", example("hello"))
    assert api.http.put("/api/v1/secrets/hook_key", json={"value": "s3cret"}).status_code == 204
    created = api.http.post(
        "/api/v1/apps/hooked/triggers",
        json={
            "kind": "webhook",
            "name": "from the shop",
            "input_map": {"name": "customer.first"},
            "secret_name": "hook_key",
        },
    ).json()
    url = server.base_url + created["url"]
    body = json.dumps({"customer": {"first": "Ann", "last": "Lee"}}).encode()

    unsigned = httpx.post(url, content=body)
    assert unsigned.status_code == 401
    assert unsigned.json()["error"]["code"] == "invalid_signature"
    forged = httpx.post(url, content=body, headers=signed_headers("guess", body))
    assert forged.status_code == 401

    signed = httpx.post(url, content=body, headers=signed_headers("s3cret", body))
    assert signed.status_code == 202, signed.text
    run = api.wait_for_run(signed.json()["run_id"])
    assert run["mode"] == "webhook"
    assert run["outputs"] == {"greeting": "Hello, Ann!"}

    missing = json.dumps({"customer": {}}).encode()
    unmapped = httpx.post(url, content=missing, headers=signed_headers("s3cret", missing))
    assert unmapped.status_code == 422
    assert "customer.first" in unmapped.json()["error"]["message"]
    [firing] = api.http.get(f"/api/v1/triggers/{created['id']}/firings").json()["items"]
    assert firing["run_id"] == signed.json()["run_id"]


def test_a_webhook_without_a_mapping_takes_the_body_as_inputs(api: Api, server: LiveServer) -> None:
    api.published_app("open-hook", example("hello"))
    assert api.http.put("/api/v1/secrets/open_key", json={"value": "k3y"}).status_code == 204
    created = api.http.post(
        "/api/v1/apps/open-hook/triggers",
        json={"kind": "webhook", "name": "open", "secret_name": "open_key"},
    ).json()
    url = server.base_url + created["url"]
    body = json.dumps({"name": "Bo"}).encode()
    answer = httpx.post(url, content=body, headers=signed_headers("k3y", body))
    assert answer.status_code == 202, answer.text
    assert api.wait_for_run(answer.json()["run_id"])["outputs"] == {"greeting": "Hello, Bo!"}
    wrong = json.dumps({"nom": "Bo"}).encode()
    wrong_input = httpx.post(url, content=wrong, headers=signed_headers("k3y", wrong))
    assert wrong_input.status_code == 422
    # Refused before a firing is recorded (tests/security/test_webhooks.py).
    assert wrong_input.json()["error"]["code"] == "invalid_input"
    assert httpx.post(server.base_url + "/api/v1/hooks/nope", json={}).status_code == 404
