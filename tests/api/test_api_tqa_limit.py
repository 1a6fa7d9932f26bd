"""The AutoTQA conversation limit over real HTTP, on SQLite and PostgreSQL: with
`tqa_max_conversations = 2` and two conversations running, a new one — background, sync or
streamed — is refused with 429 `conversations_full` and Retry-After, and nothing is recorded;
once one ends a new one is accepted. A conversation waiting for an approval is not counted,
and going on after the approval is never refused. The scripted model plays the agents
(tests/support/tqa_script.yaml), slowed so that a conversation is held running."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from support.database import DATABASES
from support.server import Api, LiveServer
from support.tqa import HELD_QUESTION, agents_script, tqa_server

LIMIT = 2
# The Critic is never satisfied: the conversation goes on, turn after turn, until cancelled.
FOREVER = {"question": HELD_QUESTION, "max_rounds": 100}
TOTAL_BONUS = "What is the total bonus of all employees?"  # its tool needs approval below


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with tqa_server(
        request.param,
        tmp_path_factory.mktemp("tqa-limit"),
        agents_script(latency_ms=200),
        settings=f"tqa_max_conversations = {LIMIT}\n",
    ) as running:
        yield running


def start(api: Api, body: dict[str, Any]) -> str:
    response = api.http.post("/api/v1/tqa/ask", json={**body, "async": True})
    assert response.status_code == 202, response.text
    conversation_id: str = response.json()["id"]
    return conversation_id


def conversation(api: Api, conversation_id: str) -> dict[str, Any]:
    response = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}")
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def wait_for(
    api: Api, conversation_id: str, done: Callable[[dict[str, Any]], bool], timeout: float = 30
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not done(found := conversation(api, conversation_id)):
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


def cancel(api: Api, conversation_id: str) -> None:
    response = api.http.post(f"/api/v1/tqa/conversations/{conversation_id}/cancel")
    assert response.status_code == 200, response.text
    ended = wait_for(api, conversation_id, lambda c: c["status"] != "running")
    assert ended["error"]["code"] == "cancelled", ended


def recorded(api: Api) -> int:
    total: int = api.http.get("/api/v1/tqa/conversations").json()["total"]
    return total


def assert_refused(response: Any) -> None:
    assert response.status_code == 429, response.text
    assert int(response.headers["Retry-After"]) >= 1
    error = response.json()["error"]
    assert error["code"] == "conversations_full"
    assert f"{LIMIT} AutoTQA conversations are running" in error["message"]
    assert f"DAGWRIGHT_TQA_MAX_CONVERSATIONS={LIMIT}" in error["message"]


def test_a_conversation_beyond_the_limit_is_refused_until_one_ends(api: Api) -> None:
    held = [start(api, FOREVER) for _ in range(LIMIT)]
    try:
        for conversation_id in held:
            assert conversation(api, conversation_id)["status"] == "running"
        before = recorded(api)
        # Background, sync and streamed: each refused at once, nothing recorded.
        assert_refused(api.http.post("/api/v1/tqa/ask", json={**FOREVER, "async": True}))
        assert_refused(api.http.post("/api/v1/tqa/ask", json=FOREVER))
        assert_refused(api.http.post("/api/v1/tqa/ask", json={**FOREVER, "stream": True}))
        assert recorded(api) == before
        # One ends: there is room for one more.
        cancel(api, held.pop(0))
        held.append(start(api, FOREVER))
        assert conversation(api, held[-1])["status"] == "running"
        assert recorded(api) == before + 1
        assert_refused(api.http.post("/api/v1/tqa/ask", json={**FOREVER, "async": True}))
    finally:
        for conversation_id in held:
            cancel(api, conversation_id)


def test_a_waiting_conversation_is_not_counted_and_goes_on_past_the_limit(api: Api) -> None:
    approval = "/api/v1/tqa/tools/python_on_tables/approval"
    assert api.http.put(approval, json={"requires_approval": True}).status_code == 200
    held: list[str] = []
    try:
        waiting_id = start(api, {"question": TOTAL_BONUS})
        wait_for(api, waiting_id, lambda c: c["status"] == "waiting")
        # The waiting one holds nothing: two more may run beside it.
        held = [start(api, FOREVER) for _ in range(LIMIT)]
        assert_refused(api.http.post("/api/v1/tqa/ask", json={**FOREVER, "async": True}))
        # Approved while the limit is running: it exists already, so it goes on.
        params = {"conversation_id": waiting_id}
        [request] = api.http.get("/api/v1/human/requests", params=params).json()["items"]
        answered = api.http.post(
            f"/api/v1/human/requests/{request['id']}/answer", json={"choice": "approve"}
        )
        assert answered.status_code == 202, answered.text
        done = wait_for(api, waiting_id, lambda c: c["status"] not in ("waiting", "running"))
        assert done["status"] == "completed", done
        assert done["answer"]["value"] == 3669
    finally:
        for conversation_id in held:
            cancel(api, conversation_id)
        api.http.put(approval, json={"requires_approval": False})
