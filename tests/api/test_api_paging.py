"""Every listing endpoint pages by the one policy (store/paging.py): an offset or limit out of
bounds is a 422 naming the field, the same bounds everywhere; values at the bounds pass."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dagwright.store.paging import MAX_LIMIT, MAX_OFFSET
from support.server import Api, LiveServer, error_of, live_server

LISTINGS = [
    "/api/v1/apps",
    "/api/v1/apps/some-app/versions",
    "/api/v1/runs",
    "/api/v1/tqa/conversations",
    "/api/v1/triggers/some-trigger/firings",
    "/api/v1/datasets/some-dataset/examples",
    "/api/v1/evaluations",
    "/api/v1/evaluations/some-evaluation/results",
    "/api/v1/human/requests",
]

BAD = [
    ("offset", -1),
    ("offset", MAX_OFFSET + 1),
    ("offset", "first"),
    ("limit", 0),
    ("limit", MAX_LIMIT + 1),
    ("limit", "all"),
]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    # The policy is the API's, not the database's: one database is enough.
    server: LiveServer
    with live_server("sqlite", tmp_path_factory.mktemp("paging")) as server:
        yield server.api


@pytest.mark.parametrize("path", LISTINGS)
@pytest.mark.parametrize(("field", "value"), BAD)
def test_a_bad_window_is_refused_naming_its_field(
    api: Api, path: str, field: str, value: object
) -> None:
    error = error_of(api.http.get(path, params={field: value}), 422)
    assert error["code"] == "invalid_request"
    assert [p["field"] for p in error["problems"]] == [f"query.{field}"]


@pytest.mark.parametrize(("field", "value"), [b for b in BAD if b[0] == "limit"])
def test_a_cursor_listing_has_the_same_limit(api: Api, field: str, value: object) -> None:
    # Examples page by Qdrant's cursor (next_offset), not by an offset: only the limit applies.
    response = api.http.get("/api/v1/namespaces/some-namespace/examples", params={field: value})
    assert [p["field"] for p in error_of(response, 422)["problems"]] == ["query.limit"]


@pytest.mark.parametrize("path", LISTINGS)
def test_the_bounds_themselves_pass(api: Api, path: str) -> None:
    response = api.http.get(path, params={"offset": MAX_OFFSET, "limit": MAX_LIMIT})
    # Past the last item: an empty page, or 404 for the made-up app, trigger or dataset.
    assert response.status_code in (200, 404), response.text
