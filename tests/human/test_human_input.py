"""Runs paused at a human_input node, through a real server: the run waits (recorded as
`waiting`), the request is listed with its rendered message and form, an answer (admin API or
signed link) resumes the run down the branch chosen with earlier nodes reused, a timeout takes
the `timeout` branch, and the pause survives a server restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.server import Api, LiveServer, edge, flow, live_server, node


def review_flow(timeout_s: float | None = None) -> dict[str, Any]:
    review = node(
        "review",
        "human_input",
        message="Please review: {{ draft }}",
        inputs=["draft"],
        fields=[
            {"name": "comment", "type": "text", "required": False, "default": "none"},
            {"name": "score", "type": "integer"},
        ],
        choices=["approve", "reject"],
        timeout_s=timeout_s,
    )
    if timeout_s is None:
        del review["config"]["timeout_s"]
    branch = lambda source, target, name: {**edge(source, target), "branch": name}  # noqa: E731
    return flow(
        [
            node("draft", "text_input", name="draft"),
            node("prep", "template", template="Draft: {{ d }}"),
            review,
            node("approved", "template", template="approved ({{ a.score }}): {{ a.comment }}"),
            node("rejected", "template", template="rejected: {{ a.comment }}"),
            node("timed", "template", template="timed out ({{ a.choice }})"),
            node("out", "output", name="verdict"),
        ],
        [
            edge("draft", "prep.d"),
            edge("prep", "review.draft"),
            branch("review", "approved.a", "approve"),
            branch("review", "rejected.a", "reject"),
            branch("review", "timed.a", "timeout"),
            edge("approved", "out"),
            edge("rejected", "out"),
            edge("timed", "out"),
        ],
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
        yield running


@pytest.fixture
def api(server: LiveServer) -> Api:
    return server.api


def _waiting(api: Api, run_id: str) -> dict[str, Any]:
    items = api.http.get("/api/v1/human/requests").json()["items"]
    [request] = [r for r in items if r["run_id"] == run_id]
    return request


def test_a_run_waits_for_an_answer_and_resumes_down_its_branch(api: Api) -> None:
    key = api.published_app("review", review_flow())
    paused = api.run("review", key, {"draft": "hello"}).json()
    assert paused["status"] == "waiting"
    assert paused["error"]["code"] == "waiting_for_human"
    assert paused["error"]["node"] == "review"
    assert api.get_run(paused["run_id"])["status"] == "waiting"

    request = _waiting(api, paused["run_id"])
    assert request["message"] == "Please review: Draft: hello"
    assert [f["name"] for f in request["form"]["fields"]] == ["comment", "score"]
    assert request["form"]["choices"] == ["approve", "reject"]
    answer_url = f"/api/v1/human/requests/{request['id']}/answer"

    wrong = api.http.post(answer_url, json={"values": {"score": "five"}, "choice": "approve"})
    assert wrong.status_code == 422
    assert "'score' must be integer" in wrong.json()["error"]["message"]
    no_choice = api.http.post(answer_url, json={"values": {"score": 5}})
    assert no_choice.status_code == 422

    answered = api.http.post(
        answer_url, json={"values": {"score": 5, "comment": "fine"}, "choice": "approve"}
    )
    assert answered.status_code == 202, answered.text
    resumed = api.wait_for_run(answered.json()["run_id"])
    assert resumed["status"] == "succeeded"
    assert resumed["outputs"] == {"verdict": "approved (5): fine"}
    assert resumed["mode"] == "resume"
    assert resumed["parent_run_id"] == paused["run_id"]
    statuses = {n["node"]: n["status"] for n in resumed["nodes"]}
    assert statuses["prep"] == "reused"  # not run again
    assert statuses["review"] == "reused"  # the answer is its output
    assert statuses["rejected"] == "skipped"
    assert api.get_run(paused["run_id"])["status"] == "resumed"

    again = api.http.post(answer_url, json={"values": {"score": 1}, "choice": "reject"})
    assert again.status_code == 409
    done = api.http.get(f"/api/v1/human/requests/{request['id']}").json()
    assert (done["status"], done["choice"]) == ("answered", "approve")
    assert done["resumed_run_id"] == resumed["id"]


def test_a_signed_link_answers_without_the_admin_token(api: Api, server: LiveServer) -> None:
    key = api.published_app("review-link", review_flow())
    paused = api.run("review-link", key, {"draft": "memo"}).json()
    link = server.base_url + _waiting(api, paused["run_id"])["link"]
    shown = httpx.get(link).json()
    assert shown["message"] == "Please review: Draft: memo"
    assert "link" not in shown
    answered = httpx.post(link, json={"values": {"score": 2}, "choice": "reject"})
    assert answered.status_code == 202, answered.text
    resumed = api.wait_for_run(answered.json()["run_id"])
    assert resumed["outputs"] == {"verdict": "rejected: none"}  # the field's default
    assert httpx.get(server.base_url + "/api/v1/human/links/not-a-token").status_code == 404


def test_no_answer_in_time_takes_the_timeout_branch(api: Api) -> None:
    key = api.published_app("review-timeout", review_flow(timeout_s=0.5))
    paused = api.run("review-timeout", key, {"draft": "late"}).json()
    assert paused["status"] == "waiting"
    deadline = time.monotonic() + 15
    while True:
        found = api.http.get("/api/v1/human/requests", params={"status": "expired"}).json()
        expired = [r for r in found["items"] if r["run_id"] == paused["run_id"]]
        if expired and expired[0]["resumed_run_id"]:
            break
        assert time.monotonic() < deadline, "the request did not time out"
        time.sleep(0.2)
    resumed = api.wait_for_run(expired[0]["resumed_run_id"])
    assert resumed["outputs"] == {"verdict": "timed out (timeout)"}


def test_the_pause_survives_a_restart(tmp_path: Path) -> None:
    with live_server("sqlite", tmp_path) as first:
        key = first.api.published_app("durable", review_flow())
        paused = first.api.run("durable", key, {"draft": "v1"}).json()
        assert paused["status"] == "waiting"
    with live_server("sqlite", tmp_path) as second:  # a new process on the same database
        request = _waiting(second.api, paused["run_id"])
        answered = second.api.http.post(
            f"/api/v1/human/requests/{request['id']}/answer",
            json={"values": {"score": 9}, "choice": "approve"},
        )
        assert answered.status_code == 202, answered.text
        resumed = second.api.wait_for_run(answered.json()["run_id"])
        assert resumed["outputs"] == {"verdict": "approved (9): none"}
