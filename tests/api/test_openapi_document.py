"""The editor's API types are generated from the server's OpenAPI document
(frontend/src/api/openapi.json -> frontend/src/api/schema.d.ts): the committed document must
be the one the server builds now, so that the editor's types cannot drift from the API."""

from __future__ import annotations

import json
from pathlib import Path

from dagwright.api.app import create_app

COMMITTED = Path(__file__).resolve().parents[2] / "frontend" / "src" / "api" / "openapi.json"


def test_the_editors_openapi_document_is_the_servers() -> None:
    committed = json.loads(COMMITTED.read_text())
    assert committed == create_app().openapi(), (
        "the API changed: run `cd frontend && npm run api:types` and commit the result"
    )
