"""The examples routes on a small app of their own, over a local example store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from dagwright.api import errors
from dagwright.api.routes.examples import router
from dagwright.embedding.embedder import Embedder
from dagwright.embedding.service import ExampleStore, example_id
from dagwright.settings import Settings
from support.settings import clean_settings_environment


class LetterEmbedder(Embedder):
    """Counts of a, b, c, d, then 1.0 when none occurs: scores can be worked out by hand."""

    def __init__(self, spec: str) -> None:
        self.spec = spec
        self.dimension = 5

    async def embed(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            counts = [float(text.count(c)) for c in "abcd"]
            out.append([*counts, 0.0 if any(counts) else 1.0])
        return out


@dataclass
class FakeServices:
    examples: ExampleStore
    settings: Settings


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TestClient]:
    clean_settings_environment(monkeypatch, tmp_path)
    store = ExampleStore.local(tmp_path / "qdrant", LetterEmbedder)
    app = FastAPI()
    errors.install(app)
    app.include_router(router)
    app.state.services = FakeServices(store, Settings(data_dir=tmp_path))
    with TestClient(app) as test_client:
        yield test_client
    store.close()


NS = {"name": "qa", "embedder": "letters", "key_fields": ["id"], "text_field": "question"}


def test_namespace_routes(client: TestClient) -> None:
    assert client.get("/api/v1/namespaces").json() == []
    created = client.post("/api/v1/namespaces", json=NS)
    assert created.status_code == 201
    assert created.json() == {
        "name": "qa",
        "embedder": "letters",
        "dimension": 5,
        "key_fields": ["id"],
        "text_field": "question",
        "fields": [],
        "count": 0,
    }
    again = client.post("/api/v1/namespaces", json=NS)
    assert again.status_code == 409
    assert again.json()["error"]["code"] == "namespace_exists"
    assert [n["name"] for n in client.get("/api/v1/namespaces").json()] == ["qa"]
    assert client.get("/api/v1/namespaces/qa").json()["count"] == 0

    assert client.delete("/api/v1/namespaces/qa").status_code == 204
    gone = client.get("/api/v1/namespaces/qa")
    assert gone.status_code == 404
    assert gone.json()["error"]["code"] == "namespace_not_found"
    assert client.delete("/api/v1/namespaces/qa").status_code == 404


def test_example_routes(client: TestClient) -> None:
    client.post("/api/v1/namespaces", json=NS)
    examples = [
        {"id": 1, "question": "aaab", "dataset": "sales"},
        {"id": 2, "question": "aabb", "dataset": "sales"},
        {"id": 3, "question": "abbb", "dataset": "hr"},
    ]
    upserted = client.post("/api/v1/namespaces/qa/examples", json={"examples": examples})
    assert upserted.status_code == 200
    ids = upserted.json()["ids"]
    assert ids == [example_id("qa", [i]) for i in (1, 2, 3)]
    info = client.get("/api/v1/namespaces/qa").json()
    assert info["count"] == 3
    assert info["fields"] == ["dataset", "id", "question"]

    first = client.get("/api/v1/namespaces/qa/examples", params={"limit": 2}).json()
    assert len(first["items"]) == 2
    assert first["next_offset"] is not None
    rest = client.get(
        "/api/v1/namespaces/qa/examples", params={"limit": 2, "offset": first["next_offset"]}
    ).json()
    assert len(rest["items"]) == 1
    assert rest["next_offset"] is None
    listed = {item["id"]: item["payload"] for item in first["items"] + rest["items"]}
    assert listed == dict(zip(ids, examples, strict=True))

    hits = client.post("/api/v1/namespaces/qa/query", json={"text": "a", "k": 2}).json()
    assert [h["payload"]["id"] for h in hits] == [1, 2]
    assert hits[0]["score"] == pytest.approx(3 / 10**0.5, abs=1e-5)
    filtered = client.post(
        "/api/v1/namespaces/qa/query",
        json={"text": "a", "filter": {"dataset": "hr"}, "min_score": 0.1},
    ).json()
    assert [h["id"] for h in filtered] == [ids[2]]

    assert client.delete(f"/api/v1/namespaces/qa/examples/{ids[0]}").status_code == 204
    missing = client.delete(f"/api/v1/namespaces/qa/examples/{ids[0]}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "example_not_found"
    assert client.delete("/api/v1/namespaces/qa/examples/garbage").status_code == 404
    assert client.get("/api/v1/namespaces/qa").json()["count"] == 2


def test_errors(client: TestClient) -> None:
    client.post("/api/v1/namespaces", json=NS)

    def error(method: str, url: str, body: object = None) -> tuple[int, str]:
        response = client.request(method, url, json=body)
        return response.status_code, response.json()["error"]["code"]

    assert error("POST", "/api/v1/namespaces", {**NS, "name": "Bad!"}) == (
        422,
        "invalid_namespace",
    )
    assert error("POST", "/api/v1/namespaces", {"name": "x"}) == (422, "invalid_request")
    assert error("POST", "/api/v1/namespaces/nope/examples", {"examples": []}) == (
        404,
        "namespace_not_found",
    )
    assert error("GET", "/api/v1/namespaces/nope/examples") == (404, "namespace_not_found")
    assert error("POST", "/api/v1/namespaces/nope/query", {"text": "a"}) == (
        404,
        "namespace_not_found",
    )
    assert error("POST", "/api/v1/namespaces/qa/examples", {"examples": [{"question": "a"}]}) == (
        422,
        "missing_key_field",
    )
    assert error("POST", "/api/v1/namespaces/qa/query", {"text": " "}) == (422, "empty_text")
    assert error("POST", "/api/v1/namespaces/qa/query", {"text": "a", "k": 0}) == (
        422,
        "invalid_request",
    )
    assert error("POST", "/api/v1/namespaces/qa/query", {"text": "a", "filter": {"x": 1}}) == (
        422,
        "unknown_filter_field",
    )
    assert error("GET", "/api/v1/namespaces/qa/examples?limit=0") == (422, "invalid_request")


def test_admin_token_is_required_off_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    clean_settings_environment(monkeypatch, tmp_path)
    store = ExampleStore.local(tmp_path / "qdrant", LetterEmbedder)
    app = FastAPI()
    errors.install(app)
    app.include_router(router)
    settings = Settings(host="0.0.0.0", data_dir=tmp_path, admin_token="secret")
    app.state.services = FakeServices(store, settings)
    with TestClient(app) as test_client:
        assert test_client.get("/api/v1/namespaces").status_code == 401
        authorised = test_client.get(
            "/api/v1/namespaces", headers={"Authorization": "Bearer secret"}
        )
        assert authorised.status_code == 200
    store.close()
