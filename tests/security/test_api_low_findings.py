"""The low findings of issue 29 (item 10) at the API, against a `dagwright serve` process:
an unknown value of an enum-like filter on a list route answered 200 (an empty page that
looks like "nothing there"), `n: 1000` was accepted on the OpenAI-compatible route (and one
choice returned), and `GET /api/v1/tqa/tools` installed the seven AutoTQA apps (a read that
writes). Each is now refused with a 4xx naming the parameter and what it allows, or writes
nothing; the health probe checks nobody else waited."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from support.probe import health_probe
from support.server import Api, ServerProcess, echo_flow, error_of, key_headers


def _apps(api: Api) -> int:
    total: int = api.http.get("/api/v1/apps").json()["total"]
    return total


def _tools(api: Api) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = api.http.get("/api/v1/tqa/tools").json()
    return found


# Runs first in the module: on a fresh server, listing the tools installs nothing.
def test_listing_tqa_tools_on_a_fresh_server_writes_nothing(
    api: Api, server_process: ServerProcess
) -> None:
    before = _apps(api)
    with health_probe(server_process.base_url):
        for _ in range(3):
            assert _tools(api) == []
    assert _apps(api) == before  # it was 7 more: the AutoTQA agents and tools

    # Marking a built-in tool for approval (a write) installs them, as the first question does.
    marked = api.http.put(
        "/api/v1/tqa/tools/python_on_tables/approval", json={"requires_approval": True}
    )
    assert marked.status_code == 200, marked.text
    assert "text_to_sql" in {t["name"] for t in _tools(api)}
    assert _apps(api) > before


@pytest.mark.parametrize(
    ("path", "parameter", "allowed"),
    [
        ("/api/v1/runs?status=nope", "status", "'queued'"),
        ("/api/v1/runs?mode=nope", "mode", "'published'"),
        ("/api/v1/human/requests?status=nope", "status", "'answered'"),
        ("/api/v1/tqa/conversations?status=nope", "status", "'round_limit'"),
        ("/api/v1/tqa/hints?status=nope", "status", "'candidate'"),
    ],
)
def test_an_unknown_filter_value_is_422_naming_the_parameter_and_its_values(
    api: Api, path: str, parameter: str, allowed: str
) -> None:
    error = error_of(api.http.get(path), 422)
    assert error["code"] == "invalid_request"
    assert f"query.{parameter}" in error["message"]
    assert allowed in error["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs?status=succeeded&mode=published",
        "/api/v1/runs?status=waiting&mode=debug",
        "/api/v1/human/requests?status=all",
        "/api/v1/human/requests?status=",
        "/api/v1/human/requests?status=expired",
        "/api/v1/tqa/conversations?status=round_limit",
    ],
)
def test_every_known_filter_value_answers(api: Api, path: str) -> None:
    response = api.http.get(path)
    assert response.status_code == 200, response.text


def test_the_openapi_document_lists_the_allowed_values(api: Api) -> None:
    document = api.http.get("/openapi.json").json()
    parameters = document["paths"]["/api/v1/runs"]["get"]["parameters"]
    [status] = [p for p in parameters if p["name"] == "status"]
    assert "interrupted" in str(status["schema"])


@pytest.fixture(scope="module")
def echo_key(api: Api) -> str:
    return api.published_app("low-echo", echo_flow())


def _chat(api: Api, key: str, **extra: Any) -> httpx.Response:
    body = {"model": "low-echo", "messages": [{"role": "user", "content": "hi"}], **extra}
    return api.http.post("/v1/chat/completions", json=body, headers=key_headers(key))


def _runs(api: Api) -> int:
    total: int = api.http.get("/api/v1/runs").json()["total"]
    return total


@pytest.mark.parametrize(
    ("n", "code"),
    [
        (1000, "integer_above_max_value"),
        (129, "integer_above_max_value"),
        (0, "integer_below_min_value"),
        (-1, "integer_below_min_value"),
        (2, "unsupported_value"),
        (128, "unsupported_value"),
        ("2", "invalid_type"),
        (True, "invalid_type"),
    ],
)
def test_chat_completions_refuses_n_as_openai_does(
    api: Api, echo_key: str, n: object, code: str
) -> None:
    before = _runs(api)
    error = error_of(_chat(api, echo_key, n=n), 400)
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", code, "n")
    assert _runs(api) == before  # nothing ran


def test_chat_completions_with_n_1_answers_one_choice(api: Api, echo_key: str) -> None:
    response = _chat(api, echo_key, n=1)
    assert response.status_code == 200, response.text
    assert len(response.json()["choices"]) == 1


def test_the_openai_client_reads_the_n_refusal(
    server_process: ServerProcess, api: Api, echo_key: str
) -> None:
    client = openai.OpenAI(
        base_url=f"{server_process.base_url}/v1", api_key=echo_key, max_retries=0
    )
    with client, pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(
            model="low-echo", messages=[{"role": "user", "content": "hi"}], n=1000
        )
    assert (refused.value.code, refused.value.param) == ("integer_above_max_value", "n")
    assert "Expected a value <= 128, but got 1000 instead" in refused.value.message
