"""The deadline of published runs (issue 13, finding 8): the server's default
(DAGWRIGHT_RUN_TIMEOUT) and an app's own (settings.run_timeout_s, set through the API). A
run still going at its deadline fails with `run_timeout` at that moment, its slow node
cancelled, whichever way it was called."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.api.settings import ServerConfigError, server_settings
from support.server import Api, LiveServer, error_of, live_server, slow_flow, sse_events
from support.settings import clean_settings_environment

SLOW_S = 30.0  # the node's own wait: far past every deadline below


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # A server-wide default of 3 s; apps below set shorter ones of their own.
    with live_server("sqlite", tmp_path_factory.mktemp("deadline"), run_timeout=3.0) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def set_deadline(api: Api, slug: str, seconds: float | None) -> dict[str, Any]:
    response = api.http.patch(f"/api/v1/apps/{slug}", json={"settings": {"run_timeout_s": seconds}})
    assert response.status_code == 200, response.text
    app: dict[str, Any] = response.json()
    return app


def assert_timed_out(result: dict[str, Any], deadline: float) -> None:
    assert result["status"] == "failed"
    assert result["error"]["code"] == "run_timeout"
    assert f"within {deadline:g}s" in result["error"]["message"]
    assert deadline - 0.05 <= result["duration"] < deadline + 1.0  # the loop's timer granularity


def test_an_apps_own_deadline_ends_a_sync_call(api: Api) -> None:
    key = api.published_app("deadline-sync", slow_flow(SLOW_S))
    assert set_deadline(api, "deadline-sync", 1.0)["settings"] == {"run_timeout_s": 1.0}
    started = time.monotonic()
    response = api.run("deadline-sync", key, {"value": "v"})
    took = time.monotonic() - started
    assert response.status_code == 200, response.text
    result = response.json()
    assert_timed_out(result, 1.0)
    assert took < 2.0
    record = api.get_run(result["run_id"])
    assert record["status"] == "failed"
    assert record["error"]["code"] == "run_timeout"
    nodes = {n["node"]: n["status"] for n in record["nodes"]}
    assert nodes["quick"] == "succeeded"
    assert nodes["slow"] == "cancelled"


def test_the_deadline_ends_streamed_and_async_calls(api: Api) -> None:
    key = api.published_app("deadline-stream", slow_flow(SLOW_S))
    set_deadline(api, "deadline-stream", 0.5)
    started = time.monotonic()
    with api.http.stream(
        "POST",
        "/api/v1/apps/deadline-stream/run",
        json={"inputs": {"value": "v"}, "stream": True},
        headers={"Authorization": f"Bearer {key}"},
    ) as response:
        events = sse_events(response)
    assert time.monotonic() - started < 1.5
    assert events[-1].event == "result"
    assert_timed_out(events[-1].data, 0.5)

    answered = api.run("deadline-stream", key, {"value": "v"}, **{"async": True})
    assert answered.status_code == 202
    record = api.wait_for_run(answered.json()["run_id"], key=key, timeout=5.0)
    assert record["error"]["code"] == "run_timeout"


def test_the_server_default_holds_until_an_app_sets_its_own(api: Api) -> None:
    key = api.published_app("deadline-default", slow_flow(SLOW_S))
    app = api.http.get("/api/v1/apps/deadline-default").json()
    assert app["settings"] == {"run_timeout_s": None}
    started = time.monotonic()
    result = api.run("deadline-default", key, {"value": "v"}).json()
    assert_timed_out(result, 3.0)
    assert time.monotonic() - started < 4.0
    set_deadline(api, "deadline-default", 0.5)
    assert_timed_out(api.run("deadline-default", key, {"value": "v"}).json(), 0.5)
    # null resets it to the server's default
    assert set_deadline(api, "deadline-default", None)["settings"] == {"run_timeout_s": None}
    assert_timed_out(api.run("deadline-default", key, {"value": "v"}).json(), 3.0)


def test_a_run_within_its_deadline_is_untouched(api: Api) -> None:
    key = api.published_app("deadline-quick", slow_flow(0.2))
    set_deadline(api, "deadline-quick", 2.0)
    result = api.run("deadline-quick", key, {"value": "v"}).json()
    assert result["status"] == "succeeded"
    assert result["outputs"] == {"value": "quick:v"}


@pytest.mark.parametrize("seconds", [0, -1, 86401, "soon"])
def test_a_deadline_must_be_a_positive_number_of_seconds(api: Api, seconds: object) -> None:
    api.create_app(f"deadline-bad-{str(seconds).strip('-')}")
    response = api.http.patch(
        f"/api/v1/apps/deadline-bad-{str(seconds).strip('-')}",
        json={"settings": {"run_timeout_s": seconds}},
    )
    assert error_of(response, 422)["problems"][0]["field"] == "settings.run_timeout_s"


def test_an_app_is_created_with_its_deadline(api: Api) -> None:
    response = api.http.post(
        "/api/v1/apps",
        json={"slug": "deadline-created", "name": "x", "settings": {"run_timeout_s": 42}},
    )
    assert response.status_code == 201, response.text
    assert response.json()["settings"] == {"run_timeout_s": 42.0}


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf"])
def test_the_server_default_from_the_environment_is_checked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str
) -> None:
    clean_settings_environment(monkeypatch, tmp_path)
    monkeypatch.setenv("DAGWRIGHT_RUN_TIMEOUT", value)
    with pytest.raises(ServerConfigError, match="DAGWRIGHT_RUN_TIMEOUT"):
        server_settings()


def test_the_server_default_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    clean_settings_environment(monkeypatch, tmp_path)
    assert server_settings().run_timeout == 300.0
    monkeypatch.setenv("DAGWRIGHT_RUN_TIMEOUT", "12.5")
    assert server_settings().run_timeout == 12.5
