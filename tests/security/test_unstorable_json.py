"""JSON that PostgreSQL cannot store, refused at the request boundary (issue 29, item 9):
`NaN`, `Infinity`, `-Infinity` and number literals that overflow to infinity (`1e999`, a
400-digit literal) are read by Python's JSON parser, but the JSON written back is refused by
PostgreSQL. An async call in queue mode carried them into the queue's job and answered 500.
Now every route answers 422 `invalid_request` naming the field, and nothing is recorded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.probe import health_probe
from support.server import (
    Api,
    LiveServer,
    ServerProcess,
    echo_flow,
    error_of,
    key_headers,
    live_server,
)

JSON = {"Content-Type": "application/json"}
UNSTORABLE = ["NaN", "Infinity", "-Infinity", "1e999", "-1E400", "1" * 400 + ".5"]


def runs_total(api: Api) -> int:
    page = api.http.get("/api/v1/runs", params={"limit": 1}).json()
    total: int = page["total"]
    return total


def refused(response: object, field: str) -> None:
    error = error_of(response, 422)
    assert error["code"] == "invalid_request", error
    assert error["problems"][0]["field"] == field, error
    assert "not a finite number" in error["message"]


@pytest.fixture(scope="module")
def queue_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """Queue mode on PostgreSQL with no worker: an async call's run stays queued."""
    with live_server(
        "postgresql", Path(tmp_path_factory.mktemp("queue-json")), queue="procrastinate"
    ) as running:
        assert running.api.http.get("/api/v1/apps").status_code == 200  # start-up done
        yield running


@pytest.mark.parametrize("literal", UNSTORABLE)
def test_an_async_call_in_queue_mode_refuses_numbers_postgresql_cannot_store(
    queue_server: LiveServer, literal: str
) -> None:
    api = queue_server.api
    slug = f"queued-{UNSTORABLE.index(literal)}"
    key = api.published_app(slug, echo_flow())
    before = runs_total(api)
    body = f'{{"inputs": {{"question": {literal}}}, "async": true}}'
    answer = api.http.post(
        f"/api/v1/apps/{slug}/run", content=body.encode(), headers={**JSON, **key_headers(key)}
    )
    # Before: 500 (PostgreSQL refused the job's JSON), or a run queued with a broken job.
    refused(answer, "inputs.question")
    assert runs_total(api) == before
    fine = api.http.post(
        f"/api/v1/apps/{slug}/run",
        content=b'{"inputs": {"question": 1e300}, "async": true}',
        headers={**JSON, **key_headers(key)},
    )
    assert fine.status_code == 202, fine.text  # a large finite number is stored as it is


def test_every_route_refuses_them_not_only_async_calls(
    api: Api, server_process: ServerProcess
) -> None:
    key = api.published_app("unstorable-echo", echo_flow())
    before = runs_total(api)
    attacks = [
        # (method, path, raw body, headers, the field named)
        (
            "POST",
            "/api/v1/apps/unstorable-echo/run",
            '{"inputs": {"question": NaN}}',
            key_headers(key),
            "inputs.question",
        ),
        (
            "POST",
            "/api/v1/apps",
            '{"slug": "n-x", "name": "n", "description": Infinity}',
            {},
            "description",
        ),
        (
            "PATCH",
            "/api/v1/apps/unstorable-echo",
            '{"settings": {"run_timeout_s": 1e999}}',
            {},
            "settings.run_timeout_s",
        ),
        (
            "POST",
            "/v1/chat/completions",
            '{"model": "unstorable-echo", "temperature": NaN, "messages": []}',
            key_headers(key),
            "temperature",
        ),
        # The content type does not matter: the body is JSON all the same.
        (
            "POST",
            "/api/v1/apps",
            '{"slug": "n-y", "name": -Infinity}',
            {"Content-Type": "text/plain"},
            "name",
        ),
    ]
    with health_probe(server_process.base_url):
        for method, path, body, headers, field in attacks:
            response = api.http.request(
                method, path, content=body.encode(), headers={**JSON, **headers}
            )
            refused(response, field)
    assert runs_total(api) == before
    assert api.http.get("/api/v1/apps/n-x").status_code == 404
    settings = api.http.get("/api/v1/apps/unstorable-echo").json().get("settings") or {}
    assert settings.get("run_timeout_s") is None
