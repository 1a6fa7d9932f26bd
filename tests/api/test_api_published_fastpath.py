"""The published run call's fast path (api/fastpath.py) answers as the FastAPI route does:
the same body for the same call, the same typed errors and headers, and every body it does
not take (not JSON, not valid) handed to the route, whose 422s name the field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.server import Api, LiveServer, echo_flow, error_of, key_headers, live_server


@pytest.fixture(scope="module")
def slow_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose keys may make 1 call per second (bursts of 2)."""
    with live_server("sqlite", tmp_path_factory.mktemp("limited"), rate_limit=1.0) as running:
        yield running


@pytest.fixture(scope="module")
def echo_key(server: LiveServer) -> str:
    return server.api.published_app("fast-echo", echo_flow())


def call(api: Api, key: str | None, body: bytes, content_type: str | None) -> httpx.Response:
    headers = key_headers(key)
    if content_type is not None:
        headers["Content-Type"] = content_type
    return api.http.post("/api/v1/apps/fast-echo/run", content=body, headers=headers)


def comparable(answer: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in answer.items() if k not in ("run_id", "duration")}


def test_the_fast_path_and_the_route_answer_alike(api: Api, echo_key: str) -> None:
    body = b'{"inputs": {"question": "same?"}}'
    fast = call(api, echo_key, body, "application/json; charset=utf-8")
    # A JSON content type other than application/json goes the FastAPI route's way.
    routed = call(api, echo_key, body, "application/merged-patch+json")
    assert fast.status_code == routed.status_code == 200, (fast.text, routed.text)
    assert comparable(fast.json()) == comparable(routed.json())
    assert fast.json()["outputs"] == {"answer": "Echo: same?"}
    for answer in (fast, routed):  # both recorded
        assert api.get_run(answer.json()["run_id"])["status"] == "succeeded"


@pytest.mark.parametrize(
    ("body", "content_type", "field"),
    [
        (b'{"inputs": {"question": "x"}, "bogus": 1}', "application/json", "bogus"),
        (b'{"inputs": ["not", "an", "object"]}', "application/json", "inputs"),
        (b'{"inputs": ', "application/json", "11"),  # where the JSON breaks off
        (b"", "application/json", "(body)"),
        (b'{"inputs": {"question": "x"}}', "text/plain", "(body)"),
    ],
)
def test_bodies_the_fast_path_does_not_take_get_the_routes_422(
    api: Api, echo_key: str, body: bytes, content_type: str, field: str
) -> None:
    error = error_of(call(api, echo_key, body, content_type), 422)
    assert error["code"] == "invalid_request"
    fields = [problem["field"] or "(body)" for problem in error["problems"]]
    assert any(found.startswith(field) for found in fields), error


def test_typed_errors_keep_their_status_and_headers(api: Api, echo_key: str) -> None:
    body = b'{"inputs": {"question": "x"}}'
    anonymous = call(api, None, body, "application/json")
    assert error_of(anonymous, 401)["code"] == "api_key_required"
    assert anonymous.headers["www-authenticate"] == "Bearer"
    unknown_input = call(api, echo_key, b'{"inputs": {"qestion": "x"}}', "application/json")
    assert error_of(unknown_input, 422)["code"] == "invalid_input"
    assert "qestion" in unknown_input.json()["error"]["message"]
    not_there = api.http.post(
        "/api/v1/apps/no-such-app/run", json={"inputs": {}}, headers=key_headers(echo_key)
    )
    assert error_of(not_there, 404)["code"] == "app_not_found"
    # Not the fast path's method or shape: FastAPI's answers.
    assert error_of(api.http.get("/api/v1/apps/fast-echo/run"), 405)["code"] == (
        "method_not_allowed"
    )


def test_the_rate_limit_answers_429_with_retry_after(
    slow_limit: LiveServer,
) -> None:
    api = slow_limit.api
    key = api.published_app("limited-echo", echo_flow())
    answers = [
        api.http.post(
            "/api/v1/apps/limited-echo/run",
            json={"inputs": {"question": "q"}},
            headers=key_headers(key),
        )
        for _ in range(4)
    ]
    limited = [answer for answer in answers if answer.status_code == 429]
    assert limited, [answer.status_code for answer in answers]
    assert error_of(limited[0], 429)["code"] == "rate_limited"
    assert int(limited[0].headers["retry-after"]) >= 1
