"""With no provider configured, the AutoTQA page's questions are answered by the demo script:
the server says so, and a question the script does not know is refused at once (422, with
the questions it knows) instead of fifty rounds of scripted replies that fit nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.server import Api, LiveServer, error_of, live_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", tmp_path_factory.mktemp("offline")) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def test_the_page_is_told_the_model_is_the_demo_script(api: Api, server: LiveServer) -> None:
    assert not (Path(server.settings.data_dir) / "dagwright.toml").exists()
    model = api.http.get("/api/v1/tqa/model").json()
    assert model["scripted"] is True
    assert model["offline_demo"] is True
    assert "What is the year-end bonus for Tom?" in model["questions"]


def test_an_unscripted_question_is_refused_at_once_naming_the_known_ones(api: Api) -> None:
    response = api.http.post("/api/v1/tqa/ask", json={"question": "How many rows has billing?"})
    error = error_of(response, 422)
    assert error["code"] == "scripted_question_unknown"
    assert "configure a provider" in error["message"]
    assert "What is the year-end bonus for Tom?" in error["questions"]
    # Nothing was started for it.
    conversations = api.http.get("/api/v1/tqa/conversations").json()
    assert all(c["question"] != "How many rows has billing?" for c in conversations["items"])


def test_a_demo_question_is_answered_by_the_script(api: Api) -> None:
    response = api.http.post(
        "/api/v1/tqa/ask", json={"question": "What is the year-end bonus for Tom?"}
    )
    assert response.status_code == 200, response.text
    assert response.json()["answer"]
