"""FinQA reflection as a published app over real HTTP: the three-agent flow, installed as
`dagwright methods install` does, answers a caller with its API key; the scripted model plays
the agents (SCRIPTED answers, written for the test) and the run's trace shows the critics
before the revision."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.llm.scripted.script import Script
from methods.test_finqa import CASES, FLOWS, TWO_CRITICS
from support.server import LiveServer, live_server
from support.tqa import provider_settings


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    model = ScriptedServer(Script.model_validate(TWO_CRITICS)).start()
    try:
        folder: Path = tmp_path_factory.mktemp("finqa")
        (folder / "dagwright.toml").write_text(provider_settings(model.base_url))
        with live_server("sqlite", folder) as running:
            yield running
    finally:
        model.stop()


def test_the_two_critics_app_answers_a_published_call(server: LiveServer) -> None:
    flow = json.loads((FLOWS / "two_critics.json").read_text("utf-8"))
    key = server.api.published_app("finqa-two-critics", flow)
    case = CASES[0]
    inputs = {k: case[k] for k in ("pre_text", "table", "post_text")}
    response = server.api.run(
        "finqa-two-critics", key, {**inputs, "question": case["qa"]["question"]}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    answer = body["outputs"]["answer"]
    assert answer["value"] == case["qa"]["exe_ans"]  # the revision, executed
    assert answer["initial"]["value"] == 0.01613  # the expert's first program
    run = server.api.get_run(body["run_id"])
    started = {node["node"]: node["started"] for node in run["nodes"]}
    assert started["extraction"] < started["calculation"] < started["revise"]
