"""`human_input` inside map items, repeat rounds and sub-flows, through real servers on SQLite
and PostgreSQL: the run waits under the node's path (`review_each[2]/approve`), a map asks
every item's question at once and resumes once all are answered, the pause survives a killed
server process, and the continuation's trace holds every nested node (reused or run)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from dagwright.services.human import SWEEP_GRACE
from dagwright.store import db
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import utcnow
from support.database import DATABASES
from support.server import (
    Api,
    LiveServer,
    ServerProcess,
    database_url_for,
    edge,
    live_server,
    node,
)

STARTUP = 120.0  # seconds for a server process to answer: the test machine may be loaded


def branch(source: str, target: str, name: str) -> dict[str, Any]:
    return {**edge(source, target), "branch": name}


def document(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], subflows: dict[str, Any]
) -> dict[str, Any]:
    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "nested",
        "nodes": nodes,
        "edges": edges,
        "subflows": subflows,
    }


# One draft -> "Draft: ..." -> a person approves (with a note) or rejects -> a verdict.
REVIEW_ONE: dict[str, Any] = {
    "nodes": [
        node("draft", "text_input", name="draft"),
        node("prep", "template", template="Draft: {{ d }}"),
        node(
            "approve",
            "human_input",
            message="Approve? {{ text }}",
            inputs=["text"],
            fields=[{"name": "note", "type": "text", "required": False, "default": "-"}],
            choices=["approve", "reject"],
        ),
        node("ok", "template", template="ok {{ a.note }}"),
        node("no", "template", template="no {{ a.note }}"),
        node("verdict", "output", name="verdict"),
    ],
    "edges": [
        edge("draft", "prep.d"),
        edge("prep", "approve.text"),
        branch("approve", "ok.a", "approve"),
        branch("approve", "no.a", "reject"),
        edge("ok", "verdict"),
        edge("no", "verdict"),
    ],
}


def map_flow() -> dict[str, Any]:
    """drafts -> a sub-flow node ('check') whose sub-flow maps REVIEW_ONE over the drafts.
    The map's item policy and the node's error policy would absorb a failure: not a pause."""
    each = node("each", "map", subflow="review_one", item="draft", output="verdict", concurrency=2)
    each["config"].update(on_item_error="default", default="absorbed")
    each["on_error"] = {"fallback": "default", "default": {"output": ["x"], "failed": []}}
    review_all = {
        "nodes": [
            node("drafts", "list_input", name="drafts"),
            each,
            node("verdicts", "output", name="verdicts"),
        ],
        "edges": [edge("drafts", "each.items"), edge("each", "verdicts")],
    }
    return document(
        [
            node("drafts", "list_input", name="drafts"),
            node("check", "subflow", subflow="review_all", output="verdicts"),
            node("joined", "template", template="{{ v | join(', ') }}"),
            node("out", "output", name="verdicts"),
        ],
        [edge("drafts", "check.drafts"), edge("check", "joined.v"), edge("joined", "out")],
        {"review_one": REVIEW_ONE, "review_all": review_all},
    )


def repeat_flow() -> dict[str, Any]:
    """A repeat whose every round asks a person for the next text and whether it is done."""
    one_round = {
        "nodes": [
            node("text", "text_input", name="text"),
            node("round", "number_input", name="round"),
            node(
                "ask",
                "human_input",
                message="Round {{ round | int }}: {{ text }}",
                inputs=["text", "round"],
                fields=[
                    {"name": "text", "type": "text"},
                    {"name": "done", "type": "boolean", "required": False, "default": False},
                ],
            ),
            node("next_text", "json_path", path="$.text", first=True),
            node("is_done", "json_path", path="$.done", first=True),
            node("next", "output", name="text"),
            node("done", "output", name="done"),
        ],
        "edges": [
            edge("text", "ask.text"),
            edge("round", "ask.round"),
            branch("ask", "next_text.data", "answered"),
            branch("ask", "is_done.data", "answered"),
            edge("next_text", "next"),
            edge("is_done", "done"),
        ],
    }
    return document(
        [
            node("start", "text_input", name="text"),
            node(
                "refine",
                "repeat",
                subflow="one_round",
                state="text",
                until="done",
                round="round",
                max_rounds=5,
            ),
            node("out", "output", name="text"),
            node("rounds", "output", name="rounds"),
        ],
        [
            edge("start", "refine.text"),
            edge("refine", "out"),
            edge("refine.rounds", "rounds"),
        ],
        {"one_round": one_round},
    )


def waiting_requests(api: Api, run_id: str) -> list[dict[str, Any]]:
    items = api.http.get("/api/v1/human/requests").json()["items"]
    return sorted((r for r in items if r["run_id"] == run_id), key=lambda r: r["node"])


def answer(api: Api, request_id: str, values: dict[str, Any], choice: str | None = None) -> Any:
    response = api.http.post(
        f"/api/v1/human/requests/{request_id}/answer", json={"values": values, "choice": choice}
    )
    assert response.status_code == 202, response.text
    return response.json()


def statuses(run: dict[str, Any]) -> dict[str, str]:
    return {n["node"]: n["status"] for n in run["nodes"]}


@pytest.fixture(params=DATABASES)
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    with database_url_for(request.param) as url:
        yield url


def test_map_items_in_a_subflow_wait_together_and_resume_after_a_killed_server(
    database_url: str | None, tmp_path: Path
) -> None:
    first = ServerProcess(tmp_path, "first", database_url).start(STARTUP)
    try:
        api = first.api()
        key = api.published_app("reviews", map_flow())
        paused = api.run("reviews", key, {"drafts": ["a", "b", "c"]}).json()
        assert paused["status"] == "waiting", paused
        assert paused["error"]["code"] == "waiting_for_human"
        assert paused["error"]["node"] == "check"
        requests = waiting_requests(api, paused["run_id"])
        # Every item asked at once, each under its path and with its own message.
        assert [r["node"] for r in requests] == [f"check/each[{i}]/approve" for i in range(3)]
        assert [r["message"] for r in requests] == [f"Approve? Draft: {d}" for d in "abc"]
        waiting = api.get_run(paused["run_id"])
        assert waiting["status"] == "waiting"
        assert statuses(waiting)["check/each[1]/prep"] == "succeeded"

        still = answer(api, requests[0]["id"], {"note": "fine"}, "approve")
        assert (still["run_id"], still["waiting_for"]) == (None, 2)
        api.close()
    finally:
        first.kill()  # SIGKILL: nothing of the pause may live in the process

    second = ServerProcess(tmp_path, "second", database_url).start(STARTUP)
    try:
        api = second.api()
        left = waiting_requests(api, paused["run_id"])
        assert [r["node"] for r in left] == ["check/each[1]/approve", "check/each[2]/approve"]
        assert answer(api, left[0]["id"], {}, "reject")["run_id"] is None
        resumed_id = answer(api, left[1]["id"], {"note": "good"}, "approve")["run_id"]
        resumed = api.wait_for_run(resumed_id)
        assert resumed["status"] == "succeeded", resumed
        assert resumed["outputs"] == {"verdicts": "ok fine, no -, ok good"}
        assert (resumed["mode"], resumed["parent_run_id"]) == ("resume", paused["run_id"])
        nodes = statuses(resumed)
        for i in range(3):  # the trace is complete: every item's nodes, reused or run
            assert nodes[f"check/each[{i}]/draft"] == "reused"
            assert nodes[f"check/each[{i}]/prep"] == "reused"
            assert nodes[f"check/each[{i}]/approve"] == "reused"  # the answer is its output
        assert nodes["check/each[0]/ok"] == "succeeded"
        assert nodes["check/each[0]/no"] == "skipped"
        assert nodes["check/each[1]/no"] == "succeeded"
        assert (nodes["check/each"], nodes["check"], nodes["out"]) == ("succeeded",) * 3
        outputs = {n["node"]: n for n in resumed["nodes"]}
        assert outputs["check/each[1]/approve"]["output"] == {"note": "-", "choice": "reject"}
        assert outputs["check/each[1]/approve"]["branch"] == "reject"
        assert api.get_run(paused["run_id"])["status"] == "resumed"
        answered = api.http.get("/api/v1/human/requests", params={"status": "answered"}).json()
        mine = [r for r in answered["items"] if r["run_id"] == paused["run_id"]]
        assert {r["resumed_run_id"] for r in mine} == {resumed_id}
        api.close()
    finally:
        second.stop()


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with live_server(request.param, tmp_path_factory.mktemp("server")) as running:
        yield running


def test_each_repeat_round_pauses_and_the_rounds_before_are_reused(server: LiveServer) -> None:
    api = server.api
    key = api.published_app("rounds", repeat_flow())
    paused = api.run("rounds", key, {"text": "v1"}).json()
    assert paused["status"] == "waiting", paused
    [first] = waiting_requests(api, paused["run_id"])
    assert (first["node"], first["message"]) == ("refine[0]/ask", "Round 0: v1")
    # A pause is no failure: the asking node and the repeat around it are waiting.
    paused_nodes = statuses(api.get_run(paused["run_id"]))
    assert (paused_nodes["refine[0]/ask"], paused_nodes["refine"]) == ("waiting", "waiting")

    second_run = api.wait_for_run(answer(api, first["id"], {"text": "v2"})["run_id"])
    assert second_run["status"] == "waiting"  # round 1 asks again, in the continuation
    [second] = waiting_requests(api, second_run["id"])
    assert (second["node"], second["message"]) == ("refine[1]/ask", "Round 1: v2")

    last = api.wait_for_run(answer(api, second["id"], {"text": "v3", "done": True})["run_id"])
    assert last["status"] == "succeeded", last
    assert last["outputs"] == {"text": "v3", "rounds": 2}
    nodes = statuses(last)
    assert nodes["refine[0]/ask"] == nodes["refine[0]/next_text"] == "reused"
    assert nodes["refine[1]/ask"] == "reused"
    assert nodes["refine[1]/next_text"] == "succeeded"
    assert "refine[2]/ask" not in nodes
    assert [api.get_run(r)["status"] for r in (paused["run_id"], second_run["id"])] == [
        "resumed",
        "resumed",
    ]


def test_an_answer_to_a_run_that_failed_meanwhile_is_refused(server: LiveServer) -> None:
    """Item 0 waits, then item 1 fails under the map's `fail` policy: the run failed, and the
    request item 0 left cannot resume it."""
    parse_then_review = {
        "nodes": [
            node("raw", "text_input", name="raw"),
            node("parsed", "from_json"),
            node("ask", "human_input", message="{{ v }}?", inputs=["v"]),
            node("answer", "output", name="answer"),
        ],
        "edges": [
            edge("raw", "parsed.text"),
            edge("parsed", "ask.v"),
            branch("ask", "answer", "answered"),
        ],
    }
    flow = document(
        [
            node("items", "list_input", name="items"),
            node("each", "map", subflow="one", item="raw", concurrency=1),
            node("out", "output", name="out"),
        ],
        [edge("items", "each.items"), edge("each", "out")],
        {"one": parse_then_review},
    )
    api = server.api
    key = api.published_app("half-failed", flow)
    run = api.run("half-failed", key, {"items": ['"fine"', "{not json"]}).json()
    assert run["status"] == "failed", run
    assert "each[1]" in run["error"]["message"]
    [stray] = waiting_requests(api, run["run_id"])
    assert stray["node"] == "each[0]/ask"
    refused = api.http.post(f"/api/v1/human/requests/{stray['id']}/answer", json={"values": {}})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "not_resumable"
    assert api.get_run(run["run_id"])["status"] == "failed"


def test_the_sweep_resumes_a_run_whose_answering_server_stopped(server: LiveServer) -> None:
    """A replica claimed the last request and stopped before the continuation started: the
    run is still `waiting` with nothing left to wait for, and any replica's sweep resumes it
    once the answer is older than the grace it leaves the answering replica."""
    api = server.api
    key = api.published_app("orphaned", repeat_flow())
    paused = api.run("orphaned", key, {"text": "v1"}).json()
    [request] = waiting_requests(api, paused["run_id"])
    settings = server.settings
    engine = db.make_engine(settings.database_url or db.database_url(settings.data_dir))
    try:
        with engine.begin() as connection:  # what the stopped replica's answer had written
            connection.execute(
                update(HumanRequest.__table__)  # type: ignore[arg-type]
                .where(HumanRequest.__table__.c.id == request["id"])  # type: ignore[attr-defined]
                .values(
                    status="answered",
                    answer={"text": "v2", "done": True},
                    choice="answered",
                    answered_at=utcnow() - SWEEP_GRACE - timedelta(seconds=1),
                )
            )
    finally:
        engine.dispose()
    resumed = api.wait_for_run(paused["run_id"], lambda run: run["status"] == "resumed")
    assert resumed["status"] == "resumed"
    deadline = time.monotonic() + 10
    while not (done := api.http.get(f"/api/v1/human/requests/{request['id']}").json())[
        "resumed_run_id"
    ]:
        assert time.monotonic() < deadline, "the continuation was not recorded"
        time.sleep(0.1)
    continuation = api.wait_for_run(done["resumed_run_id"])
    assert continuation["outputs"] == {"text": "v2", "rounds": 1}
    assert continuation["parent_run_id"] == paused["run_id"]


def test_a_debug_run_of_an_unsaved_flow_resumes_with_the_flow_the_editor_sends(
    server: LiveServer,
) -> None:
    api = server.api
    flow = map_flow()
    debug = api.http.post(
        "/api/v1/runs/debug", json={"flow": flow, "inputs": {"drafts": ["x"]}, "stream": False}
    )
    assert debug.status_code == 200, debug.text
    paused = debug.json()
    assert paused["status"] == "waiting", paused
    listed = api.http.get("/api/v1/human/requests", params={"run_id": paused["run_id"]}).json()
    [request] = listed["items"]  # the debug panel asks for its run's requests
    assert request["node"] == "check/each[0]/approve"
    url = f"/api/v1/human/requests/{request['id']}/answer"

    unsent = api.http.post(url, json={"values": {}, "choice": "approve"})
    assert unsent.status_code == 409
    assert unsent.json()["error"]["code"] == "not_resumable"
    assert waiting_requests(api, paused["run_id"]) == [request]  # still waiting: not claimed

    # The canvas changed meanwhile: the continuation runs it as it is now.
    flow["nodes"][2]["config"]["template"] = "verdicts: {{ v | join(', ') }}"
    answered = api.http.post(url, json={"values": {}, "choice": "approve", "flow": flow})
    assert answered.status_code == 202, answered.text
    resumed = api.wait_for_run(answered.json()["run_id"])
    assert resumed["status"] == "succeeded", resumed
    assert resumed["outputs"] == {"verdicts": "verdicts: ok -"}
    assert statuses(resumed)["check/each[0]/prep"] == "reused"
