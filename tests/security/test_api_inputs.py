"""Poisoned inputs at the API's boundary (issue 13, finding 7), against a `dagwright serve`
process: text that cannot be stored (lone surrogates, NUL), nesting bombs, huge bodies and
paging numbers, inputs of the wrong type, chat requests OpenAI would refuse. Each is a 4xx
that names what is wrong, nothing unencodable is stored, nothing answers 5xx afterwards, and
the server keeps answering others (the health probe) while it is attacked."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from support.probe import health_probe
from support.server import (
    Api,
    ServerProcess,
    echo_flow,
    edge,
    error_of,
    flow,
    key_headers,
    node,
)

SURROGATE = "\\ud800"  # as JSON text: the escape of a lone high surrogate
JSON = {"Content-Type": "application/json"}


def typed_flow() -> dict[str, Any]:
    """One input of each kind, each returned as it came."""
    kinds = {"text": "text_input", "count": "number_input", "flag": "boolean_input"}
    kinds |= {"items": "list_input", "data": "json_input"}
    defaults = {"text": "", "count": 0, "flag": False, "items": [], "data": {}}
    nodes = [
        node(f"in_{name}", block, name=name, default=defaults[name])
        for name, block in kinds.items()
    ]
    nodes += [node(f"out_{name}", "output", name=name) for name in kinds]
    return flow(nodes, [edge(f"in_{name}", f"out_{name}") for name in kinds], name="typed")


@pytest.fixture(scope="module")
def echo_key(api: Api) -> str:
    return api.published_app("poison-echo", echo_flow())


@pytest.fixture(scope="module")
def typed_key(api: Api) -> str:
    return api.published_app("poison-typed", typed_flow())


def runs_total(api: Api) -> int:
    response = api.http.get("/api/v1/runs", params={"limit": 1})
    assert response.status_code == 200, response.text
    total: int = response.json()["total"]
    return total


def post_raw(api: Api, path: str, text: str, headers: dict[str, str] | None = None) -> Any:
    return api.http.post(path, content=text.encode(), headers={**JSON, **(headers or {})})


def refused_field(response: httpx.Response) -> str:
    """The field a 422 invalid_request names."""
    error = error_of(response, 422)
    assert error["code"] == "invalid_request", error
    field: str = error["problems"][0]["field"]
    return field


# -- text that cannot be stored -----------------------------------------------------------------


def test_lone_surrogates_are_refused_in_every_kind_of_body(
    api: Api, server_process: ServerProcess, echo_key: str
) -> None:
    before = runs_total(api)
    flow_text = json.dumps(echo_flow(f"Echo {SURROGATE}"), ensure_ascii=True).replace(
        "\\\\ud800", SURROGATE
    )
    attacks = [
        # (method, path, the raw JSON body, extra headers, the field the refusal names)
        (
            "POST",
            "/api/v1/apps/poison-echo/run",
            f'{{"inputs": {{"question": "a{SURROGATE}b"}}}}',
            key_headers(echo_key),
            "inputs.question",
        ),
        ("POST", "/api/v1/apps", f'{{"slug": "s-x", "name": "n{SURROGATE}"}}', {}, "name"),
        (
            "PATCH",
            "/api/v1/apps/poison-echo",
            f'{{"description": "{SURROGATE}"}}',
            {},
            "description",
        ),
        (
            "POST",
            "/api/v1/apps/poison-echo/versions",
            f'{{"flow": {flow_text}}}',
            {},
            "flow.nodes[1].config.template",
        ),
        (
            "PUT",
            "/api/v1/sources/poisoned",
            f'{{"kind": "sqlite", "config": {{"path": "x{SURROGATE}.db"}}}}',
            {},
            "config.path",
        ),
        (
            "POST",
            "/v1/chat/completions",
            f'{{"model": "poison-echo", "messages": [{{"role": "user", "content": "{SURROGATE}"}}]}}',  # noqa: E501
            key_headers(echo_key),
            "messages[0].content",
        ),
        # A key of an object cannot hide one either.
        (
            "POST",
            "/api/v1/apps/poison-echo/run",
            f'{{"inputs": {{"q{SURROGATE}": 1}}}}',
            key_headers(echo_key),
            "inputs.q\ufffd",  # the name itself, made printable
        ),
    ]
    with health_probe(server_process.base_url):
        for method, path, body, headers, field in attacks:
            response = api.http.request(
                method, path, content=body.encode(), headers={**JSON, **headers}
            )
            assert refused_field(response) == field, path
            assert "lone surrogate" in response.json()["error"]["message"]
        # Raw surrogate bytes (UTF-8 encoder output for U+D800) are not UTF-8 either.
        raw = api.http.post(
            "/api/v1/apps",
            content=b'{"slug": "raw-s", "name": "\xed\xa0\x80"}',
            headers=JSON,
        )
        assert "UTF-8" in error_of(raw, 422)["message"]
    # Nothing was recorded, and every list still reads.
    assert runs_total(api) == before
    assert api.http.get("/api/v1/apps").status_code == 200
    assert api.http.get("/api/v1/sources/poisoned").status_code == 404


def test_nul_characters_are_refused_in_bodies_paths_and_queries(
    api: Api, server_process: ServerProcess, echo_key: str
) -> None:
    before = runs_total(api)
    with health_probe(server_process.base_url):
        in_input = post_raw(
            api,
            "/api/v1/apps/poison-echo/run",
            '{"inputs": {"question": "a\\u0000b"}}',
            key_headers(echo_key),
        )
        assert refused_field(in_input) == "inputs.question"
        assert "NUL" in in_input.json()["error"]["message"]
        in_name = post_raw(api, "/api/v1/apps", '{"slug": "nul-app", "name": "a\\u0000"}')
        assert refused_field(in_name) == "name"
        in_path = api.http.get("/api/v1/apps/a%00b")
        assert refused_field(in_path) == "(path)"
        in_query = api.http.get("/api/v1/runs?status=a%00b")
        assert refused_field(in_query) == "(query)"
    assert runs_total(api) == before


def test_a_run_stored_with_a_lone_surrogate_still_reads(
    api: Api, server_process: ServerProcess, echo_key: str
) -> None:
    """A row written before the boundary refused them (SQLite stores the JSON escape as it
    is): the run, the run list and the event stream answer, the surrogate made U+FFFD."""
    response = api.run("poison-echo", echo_key, {"question": "old"})
    assert response.status_code == 200, response.text
    run_id = response.json()["run_id"]
    database = server_process.data_dir / "dagwright.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "UPDATE runs SET inputs = ?, outputs = ? WHERE id = ?",
            (f'{{"question": "old{SURROGATE}"}}', f'{{"answer": "{SURROGATE}"}}', run_id),
        )
        connection.execute(
            "UPDATE run_nodes SET output = ? WHERE run_id = ?", (f'"{SURROGATE}x"', run_id)
        )
    with health_probe(server_process.base_url):
        record = api.get_run(run_id)
        assert record["inputs"] == {"question": "old\ufffd"}
        assert record["outputs"] == {"answer": "\ufffd"}
        listed = api.http.get("/api/v1/runs")
        assert listed.status_code == 200, listed.text
        assert run_id in {item["id"] for item in listed.json()["items"]}
        events = api.http.get(f"/api/v1/runs/{run_id}/events")
        assert events.status_code == 200
        assert "\ufffd" in events.text


# -- nesting bombs and huge bodies --------------------------------------------------------------


@pytest.mark.parametrize("depth", [65, 5_000, 500_000])
def test_json_nesting_bombs_are_422(
    api: Api, server_process: ServerProcess, typed_key: str, depth: int
) -> None:
    bomb = "[" * depth + "]" * depth
    before = runs_total(api)
    with health_probe(server_process.base_url):
        for method, path, headers in (
            ("POST", "/api/v1/validate", {}),
            ("POST", "/api/v1/apps/poison-typed/run", key_headers(typed_key)),
            ("POST", "/api/v1/apps/import", {}),
            ("PUT", "/api/v1/sources/bomb", {}),
        ):
            body = (
                f'{{"inputs": {{"data": {bomb}}}}}'
                if path.endswith("/run")
                else f'{{"flow": {bomb}, "config": {bomb}}}'
            )
            response = api.http.request(
                method, path, content=body.encode(), headers={**JSON, **headers}
            )
            assert "nests deeper than 64" in error_of(response, 422)["message"], path
    assert runs_total(api) == before


def test_nesting_up_to_the_limit_passes(api: Api, typed_key: str) -> None:
    deep: Any = "leaf"
    for _ in range(60):  # with {"inputs": {"data": ...}}: 62 levels
        deep = [deep]
    response = api.run("poison-typed", typed_key, {"data": deep})
    assert response.status_code == 200, response.text
    assert response.json()["outputs"]["data"] == deep


def test_a_body_over_the_limit_is_413(api: Api, server_process: ServerProcess) -> None:
    huge = b'{"flow": "' + b"x" * (3 * 1024 * 1024) + b'"}'

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds on the stream too
        for start in range(0, len(huge), 64 * 1024):
            yield huge[start : start + 64 * 1024]

    with health_probe(server_process.base_url):
        declared = api.http.post("/api/v1/validate", content=huge, headers=JSON)
        assert error_of(declared, 413)["code"] == "payload_too_large"
        streamed = api.http.post("/api/v1/validate", content=chunks(), headers=JSON)
        assert error_of(streamed, 413)["code"] == "payload_too_large"


# -- paging -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/apps",
        "/api/v1/runs",
        "/api/v1/tqa/conversations",
        "/api/v1/apps/poison-echo/versions",
    ],
)
def test_offsets_and_limits_are_bounded(
    api: Api, server_process: ServerProcess, echo_key: str, path: str
) -> None:
    with health_probe(server_process.base_url):
        for params in (
            {"offset": str(10**20)},
            {"offset": str(2**63)},
            {"offset": "1000000001"},
            {"offset": "-1"},
            {"limit": "0"},
            {"limit": str(10**30)},
            {"limit": "201"},
        ):
            response = api.http.get(path, params=params)
            error = error_of(response, 422)
            assert error["problems"][0]["field"] in ("query.offset", "query.limit"), params
        largest = api.http.get(path, params={"offset": "1000000000", "limit": "200"})
        assert largest.status_code == 200, largest.text
        assert largest.json()["items"] == []


# -- published inputs of the wrong type ---------------------------------------------------------


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"text": {"a": 1}}, "input 'text' expects str, got dict"),
        ({"text": [1, 2]}, "input 'text' expects str, got list"),
        ({"count": "three"}, "input 'count' expects float, got str 'three'"),
        ({"count": True}, "input 'count' expects float, got bool"),
        ({"flag": "maybe"}, "input 'flag' expects bool, got str 'maybe'"),
        ({"items": "a,b"}, "input 'items' expects list[Any], got str 'a,b'"),
        ({"items": {"a": 1}}, "input 'items' expects list[Any], got dict"),
    ],
)
def test_wrong_typed_inputs_are_422_and_no_run(
    api: Api, typed_key: str, inputs: dict[str, Any], named: str
) -> None:
    before = runs_total(api)
    response = api.run("poison-typed", typed_key, inputs)
    error = error_of(response, 422)
    assert error["code"] == "invalid_input"
    assert named in error["message"]
    (name,) = inputs
    assert error["problems"] == [{"field": f"inputs.{name}", "message": error["message"]}]
    assert runs_total(api) == before


def test_inputs_of_their_types_run(api: Api, typed_key: str) -> None:
    response = api.run(
        "poison-typed",
        typed_key,
        {"text": 42, "count": 3, "flag": False, "items": [1, "b"], "data": {"any": [None]}},
    )
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["status"] == "succeeded"
    assert result["outputs"] == {
        "text": "42",  # a text input takes a number as its text
        "count": 3.0,
        "flag": False,
        "items": [1, "b"],
        "data": {"any": [None]},
    }


def test_every_wrong_input_is_named_at_once(api: Api, typed_key: str) -> None:
    response = api.run("poison-typed", typed_key, {"count": "x", "flag": 2})
    error = error_of(response, 422)
    assert [p["field"] for p in error["problems"]] == ["inputs.count", "inputs.flag"]


# -- the OpenAI-compatible route ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code", "param"),
    [
        ({"model": "poison-echo", "messages": []}, "empty_array", "messages"),
        ({"model": "poison-echo"}, "missing_required_parameter", "messages"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "missing_required_parameter", "model"),
        (
            {"model": "poison-echo", "messages": [{"role": "wizard", "content": "hi"}]},
            "invalid_value",
            "messages[0].role",
        ),
        (
            {"model": "poison-echo", "messages": [{"role": "user"}]},
            "missing_required_parameter",
            "messages[0].content",
        ),
        (
            {"model": "poison-echo", "messages": [{"role": "user", "content": 5}]},
            "invalid_type",
            "messages[0].content",
        ),
        ({"model": "poison-echo", "messages": "hello"}, "invalid_type", "messages"),
    ],
)
def test_chat_completions_refuses_what_openai_refuses(
    api: Api, echo_key: str, body: dict[str, Any], code: str, param: str
) -> None:
    before = runs_total(api)
    response = api.http.post("/v1/chat/completions", json=body, headers=key_headers(echo_key))
    error = error_of(response, 400)
    assert error["type"] == "invalid_request_error"
    assert error["code"] == code
    assert error["param"] == param
    assert runs_total(api) == before


def test_the_openai_client_reads_the_refusal(
    server_process: ServerProcess, api: Api, echo_key: str
) -> None:
    client = openai.OpenAI(
        base_url=f"{server_process.base_url}/v1", api_key=echo_key, max_retries=0
    )
    with client, pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="poison-echo", messages=[])
    assert refused.value.status_code == 400
    assert refused.value.code == "empty_array"
    assert refused.value.param == "messages"
    assert "empty array" in refused.value.message


# -- names in the URL -----------------------------------------------------------------------------


def test_names_in_the_url_that_cannot_name_anything_are_4xx(
    api: Api, server_process: ServerProcess
) -> None:
    """Two 5xx the fuzzer found: a source name the catalog refuses (a ValueError), and a
    table name SQL cannot even tokenize (an unclosed quote)."""
    with health_probe(server_process.base_url):
        bad_source = api.http.put("/api/v1/sources/Not%20A%20Name", json={"kind": "memory"})
        assert "cannot name a source" in error_of(bad_source, 422)["message"]
        for table in ('a"b', "x'y", "`z", "a.b.c.d.e"):
            response = api.http.get(f"/api/v1/tables/{table}")
            assert error_of(response, 404)["code"] == "table_not_found", table
