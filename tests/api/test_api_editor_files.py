"""The editor's files are served at "/" beside the API, and never answer for the API: an API
route called with the wrong method is a 405, an unknown API path the API's own JSON 404."""

from __future__ import annotations

import pytest

from dagwright.api.app import EDITOR_DIST
from support.server import Api, error_of

pytestmark = pytest.mark.skipif(
    not (EDITOR_DIST / "index.html").is_file(), reason="the editor is not built (make builds it)"
)


def test_the_editor_is_served_and_the_api_keeps_its_own_answers(api: Api) -> None:
    page = api.http.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    wrong_method = api.http.get("/api/v1/apps/any-app/run")
    assert error_of(wrong_method, 405)["code"] == "method_not_allowed"
    unknown = api.http.get("/api/v1/no-such-thing")
    assert error_of(unknown, 404) == {
        "code": "not_found",
        "message": "no route GET /api/v1/no-such-thing",
    }
