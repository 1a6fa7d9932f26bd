"""The evaluation API on a live server: import a dataset by path (its tables registered as a
source), run an app over it, read progress, report, results, compare, score without
running; refusals with their codes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from support.server import Api, LiveServer, live_server

from .test_evaluation_service import _flow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", tmp_path_factory.mktemp("server")) as running:
        yield running


def _count_app(api: Api, slug: str, offset: int) -> None:
    """table -> its row count + offset (offset 1: always wrong)."""
    flow = _flow(
        [
            {"id": "table", "block": "text_input", "config": {"name": "table"}},
            {
                "id": "sql",
                "block": "template",
                "config": {"template": f"SELECT COUNT(*) + {offset} AS n FROM {{{{ table }}}}"},
            },
            {"id": "query", "block": "sql_query", "config": {}},
            {"id": "pick", "block": "json_path", "config": {"path": "$[0].n", "first": True}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        [
            ("table", "output", "sql", "table"),
            ("sql", "output", "query", "sql"),
            ("query", "rows", "pick", "data"),
            ("pick", "output", "answer", "value"),
        ],
    )
    api.create_app(slug)
    api.publish(slug, api.save(slug, flow)["id"])


def _dataset(server: LiveServer) -> Path:
    folder = server.settings.data_dir / "sources" / "rows"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "three.csv").write_text("a\n1\n2\n3\n")
    (folder / "two.csv").write_text("a\n1\n2\n")
    records = [
        {"id": "a", "question": "rows?", "table": "three.csv", "answer": "3"},
        {"id": "b", "question": "rows?", "table": "two.csv", "answer": "2"},
        {"id": "c", "question": "rows?", "table": "two.csv", "answer": "7"},
    ]
    path = folder / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _post(api: Api, url: str, body: dict[str, Any], status: int) -> Any:
    response = api.http.post(url, json=body)
    assert response.status_code == status, response.text
    return response.json()


def test_dataset_evaluation_report_compare(server: LiveServer) -> None:
    api = server.api
    path = _dataset(server)
    created = _post(
        api, "/api/v1/datasets", {"name": "rows", "kind": "generic", "path": str(path)}, 201
    )
    assert created["splits"] == {"dev": 3}
    assert created["source"] == "eval_rows"
    examples = api.http.get("/api/v1/datasets/rows/examples").json()
    assert examples["total"] == 3
    assert examples["items"][0]["tables"] == ["eval_rows.tthree"]
    # one page at a time, in the file's order, counting every example
    paged = api.http.get("/api/v1/datasets/rows/examples?offset=1&limit=1").json()
    assert (paged["total"], paged["offset"], paged["limit"]) == (3, 1, 1)
    assert [e["id"] for e in paged["items"]] == [examples["items"][1]["id"]]
    # the tables are a data source the flows (and the query API) can read
    rows = _post(api, "/api/v1/query", {"sql": "SELECT COUNT(*) AS n FROM eval_rows.ttwo"}, 200)
    assert rows["rows"] == [{"n": 2}]

    _count_app(api, "counter", 0)
    _count_app(api, "offbyone", 1)
    report = _post(
        api, "/api/v1/evaluations", {"app": "counter", "dataset": "rows", "wait": True}, 200
    )
    assert report["value"] == pytest.approx(2 / 3)
    assert [f["id"] for f in report["failures"]] == ["c"]
    first = report["evaluation"]["id"]
    run_id = report["failures"][0]["run_id"]
    assert api.get_run(run_id)["outputs"] == {"answer": 2}  # the example's recorded run

    started = _post(api, "/api/v1/evaluations", {"app": "offbyone", "dataset": "rows"}, 202)
    second = started["id"]
    for _ in range(200):
        state = api.http.get(f"/api/v1/evaluations/{second}").json()
        if state["status"] == "completed":
            break
        time.sleep(0.05)
    assert state["status"] == "completed"
    assert state["done"] == 3
    results = api.http.get(f"/api/v1/evaluations/{second}/results").json()
    assert results["total"] == 3
    assert {r["id"]: r["correct"] for r in results["items"]} == {
        "a": False,
        "b": False,
        "c": False,
    }
    # paged in the dataset's order; `failed` counts only the wrong ones
    page = api.http.get(f"/api/v1/evaluations/{first}/results?offset=1&limit=1").json()
    assert (page["total"], [r["id"] for r in page["items"]]) == (3, ["b"])
    wrong = api.http.get(f"/api/v1/evaluations/{first}/results?failed=true").json()
    assert (wrong["total"], [r["id"] for r in wrong["items"]]) == (1, ["c"])

    comparison = api.http.get(f"/api/v1/evaluations/compare?a={first}&b={second}").json()
    assert comparison["difference"] == pytest.approx(-2 / 3)
    assert sorted(comparison["lost"]) == ["a", "b"]
    assert comparison["test"]["name"] == "mcnemar_exact"
    listed = api.http.get("/api/v1/evaluations?app=counter").json()
    assert (listed["total"], [e["id"] for e in listed["items"]]) == (1, [first])
    newest = api.http.get("/api/v1/evaluations?limit=1").json()
    assert (newest["total"], [e["id"] for e in newest["items"]]) == (2, [second])


def test_refusals(server: LiveServer, tmp_path: Path) -> None:
    api = server.api
    outside = tmp_path / "x.jsonl"
    outside.write_text('{"question": "q", "answer": "1"}\n')
    refused = _post(
        api, "/api/v1/datasets", {"name": "x", "kind": "generic", "path": str(outside)}, 400
    )
    assert refused["error"]["code"] == "source_path_forbidden"
    missing = api.http.get("/api/v1/datasets/nothing")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "dataset_not_found"
    bad = _post(api, "/api/v1/score", {"metric": "spider", "items": []}, 422)
    assert bad["error"]["code"] == "invalid_input"


def test_upload_and_score(server: LiveServer) -> None:
    api = server.api
    records = [{"id": "1", "question": "2+2?", "answer": "4"}, {"id": "2", "question": "?"}]
    body = "".join(json.dumps(r) + "\n" for r in records)
    response = api.http.post(
        "/api/v1/datasets/arith/upload?kind=generic&format=jsonl", content=body.encode()
    )
    assert response.status_code == 201, response.text
    assert response.json()["metric"] == "numeric"
    scored = _post(
        api,
        "/api/v1/score",
        {
            "metric": "wikitq",
            "per_example": True,
            "items": [
                {"id": "a", "gold": {"targetValue": "4"}, "prediction": "4.0"},
                {"id": "b", "gold": {"targetValue": "Paris|Rome"}, "prediction": ["rome"]},
            ],
        },
        200,
    )
    assert scored["value"] == 0.5
    assert [e["correct"] for e in scored["examples"]] == [True, False]


def test_publish_gate(server: LiveServer) -> None:
    api = server.api
    path = _dataset(server)
    _post(
        api, "/api/v1/datasets", {"name": "gated_rows", "kind": "generic", "path": str(path)}, 201
    )
    _count_app(api, "gated", 0)  # version 1, published before the gate
    gate = {"dataset": "gated_rows", "tolerance": 0.1}
    assert api.http.put("/api/v1/apps/gated/eval-gate", json=gate).status_code == 200
    assert api.http.get("/api/v1/apps/gated/eval-gate").json()["metric"] == "numeric"

    def save(offset: int) -> str:
        flow = api.http.get("/api/v1/apps/gated/versions/1").json()["flow"]
        for node in flow["nodes"]:
            if node["id"] == "sql":
                node["config"]["template"] = f"SELECT COUNT(*) + {offset} AS n FROM {{{{ table }}}}"
        version_id: str = api.save("gated", flow)["id"]
        return version_id

    worse = save(1)  # version 2: every answer off by one
    refused = api.http.post("/api/v1/apps/gated/publish", json={"version_id": worse})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "eval_gate_refused"
    assert refused.json()["error"]["candidate"] is None  # not evaluated

    for version in ("1", "2"):
        body = {"app": "gated", "version": version, "dataset": "gated_rows", "wait": True}
        _post(api, "/api/v1/evaluations", body, 200)
    refused = api.http.post("/api/v1/apps/gated/publish", json={"version_id": worse})
    assert refused.status_code == 409
    error = refused.json()["error"]
    assert error["candidate"] == 0.0
    assert error["published"] == pytest.approx(2 / 3)
    assert error["threshold"] == pytest.approx(2 / 3 - 0.1)
    check = api.http.get("/api/v1/apps/gated/eval-gate/check?version=2").json()
    assert check["allowed"] is False

    waiver = {"version": "2", "reason": "the counting change is wanted despite the score"}
    _post(api, "/api/v1/apps/gated/eval-gate/waivers", waiver, 201)
    assert (
        api.http.post("/api/v1/apps/gated/publish", json={"version_id": worse}).status_code == 200
    )

    better = save(0)  # version 3: evaluated, at least the published 0.0 - 0.1
    refused = api.http.post("/api/v1/apps/gated/publish", json={"version_id": better})
    assert refused.status_code == 409
    _post(
        api,
        "/api/v1/evaluations",
        {"app": "gated", "version": "3", "dataset": "gated_rows", "wait": True},
        200,
    )
    assert (
        api.http.post("/api/v1/apps/gated/publish", json={"version_id": better}).status_code == 200
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server that needs the admin token (so an app key is not taken for the admin)."""
    with live_server("sqlite", tmp_path_factory.mktemp("secured"), admin_token="t0ken") as running:
        yield running


def test_feedback_from_the_editor_and_from_a_caller(secured: LiveServer) -> None:
    api = secured.api
    key = api.published_app(
        "echo",
        _flow(
            [
                {"id": "question", "block": "text_input", "config": {"name": "question"}},
                {"id": "answer", "block": "output", "config": {"name": "answer"}},
            ],
            [("question", "output", "answer", "value")],
        ),
    )
    ran = api.run("echo", key, {"question": "What is the capital of Peru?"})
    assert ran.status_code == 200, ran.text
    run_id = ran.json()["run_id"]
    # the caller, with its key: a score and the right answer
    given = api.http.post(
        f"/api/v1/runs/{run_id}/feedback",
        json={"score": 0, "correction": "Lima", "comment": "it echoed"},
        headers={"Authorization": f"Bearer {key}"},
    )
    assert given.status_code == 201, given.text
    assert given.json()["given_by"] == "api_key"
    assert given.json()["example_namespace"] == "feedback-echo"
    # the correction is a few-shot example of the app, tagged with its run
    [hit] = _post(
        api, "/api/v1/namespaces/feedback-echo/query", {"text": "capital of Peru", "k": 1}, 200
    )
    payload = hit["payload"]
    assert payload["answer"] == "Lima"
    assert payload["source_run"] == run_id
    # the editor: a score only
    assert api.http.post(f"/api/v1/runs/{run_id}/feedback", json={"score": 1}).status_code == 201
    listed = api.http.get(f"/api/v1/runs/{run_id}/feedback").json()
    assert [f["given_by"] for f in listed] == ["api_key", "admin"]
    # another app's key may not
    other = api.published_app(
        "other",
        _flow(
            [
                {"id": "question", "block": "text_input", "config": {"name": "question"}},
                {"id": "answer", "block": "output", "config": {"name": "answer"}},
            ],
            [("question", "output", "answer", "value")],
        ),
    )
    refused = api.http.post(
        f"/api/v1/runs/{run_id}/feedback",
        json={"score": 1},
        headers={"Authorization": f"Bearer {other}"},
    )
    assert refused.status_code == 403


def _held_app(server: LiveServer, name: str, hold: Path, tally: Path) -> None:
    """An app and a dataset of that name; each example's run counts itself in `tally` and
    waits while `hold` exists (created here)."""
    api = server.api
    hold.touch()
    flow = _flow(
        [
            {"id": "table", "block": "text_input", "config": {"name": "table"}},
            {"id": "held", "block": "tally", "config": {"file": str(tally), "hold": str(hold)}},
            {"id": "answer", "block": "output", "config": {"name": "answer"}},
        ],
        [("table", "output", "held", "value"), ("held", "output", "answer", "value")],
    )
    api.create_app(name)
    api.publish(name, api.save(name, flow)["id"])
    path = _dataset(server)
    _post(api, "/api/v1/datasets", {"name": name, "kind": "generic", "path": str(path)}, 201)


def test_waiting_for_the_report_is_bounded(server: LiveServer, tmp_path: Path) -> None:
    # Each example's run waits while the hold file exists: the wait ends first, with 202 and
    # the evaluation as it stands, and the evaluation goes on without its caller.
    api, hold, tally = server.api, tmp_path / "hold", tmp_path / "tally.log"
    _held_app(server, "held", hold, tally)
    body = {"app": "held", "dataset": "held", "wait": True}
    too_long = api.http.post("/api/v1/evaluations", params={"timeout": 3601}, json=body)
    assert [p["field"] for p in too_long.json()["error"]["problems"]] == ["query.timeout"]
    waited = api.http.post("/api/v1/evaluations", params={"timeout": 0.5}, json=body)
    assert waited.status_code == 202, waited.text
    assert (waited.json()["status"], waited.json()["error"]) == ("running", None)
    evaluation_id = waited.json()["id"]
    hold.unlink()
    for _ in range(200):
        state = api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()
        if state["status"] != "running":
            break
        time.sleep(0.05)
    assert (state["status"], state["done"]) == ("completed", 3)


def test_a_wait_that_ends_unscored_answers_with_the_evaluation(
    server: LiveServer, tmp_path: Path
) -> None:
    # Cancelled while its caller waits: the caller gets the evaluation as it ended (not a
    # 409 "not scored", and not a wait until the timeout).
    api, hold, tally = server.api, tmp_path / "hold", tmp_path / "tally.log"
    _held_app(server, "stopped", hold, tally)
    body = {"app": "stopped", "dataset": "stopped", "wait": True}
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(api.http.post, "/api/v1/evaluations", json=body, timeout=60)
        for _ in range(400):  # until its first example's run is held: it runs here
            if tally.exists():
                break
            time.sleep(0.05)
        listed = api.http.get("/api/v1/evaluations", params={"app": "stopped"}).json()
        evaluation_id = listed["items"][0]["id"]
        _post(api, f"/api/v1/evaluations/{evaluation_id}/cancel", {}, 202)
        answer = waiting.result()
    hold.unlink()
    assert answer.status_code == 200, answer.text
    assert (answer.json()["id"], answer.json()["status"]) == (evaluation_id, "interrupted")
