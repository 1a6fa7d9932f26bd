"""Cancelling a foreground AutoTQA conversation (sync or streamed) over real HTTP, on SQLite
and PostgreSQL: the cancel, asked through the API while the caller waits, ends it within a
second or two; the caller gets the conversation ended (failed, `cancelled`), as recorded.
The scripted model plays the agents, its Critic never satisfied and slow, so the
conversation would otherwise run until its 100 rounds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.database import DATABASES
from support.server import Api, LiveServer
from support.tqa import HELD_QUESTION, agents_script, tqa_server

FOREVER = {"question": HELD_QUESTION, "max_rounds": 100}


@pytest.fixture(scope="module", params=DATABASES)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    with tqa_server(
        request.param, tmp_path_factory.mktemp("tqa-cancel"), agents_script()
    ) as running:
        yield running


def running_conversation(api: Api, timeout: float = 30) -> str:
    """The id of the one conversation running (the foreground caller does not know it)."""
    deadline = time.monotonic() + timeout
    while True:
        listed = api.http.get("/api/v1/tqa/conversations", params={"status": "running"})
        items = listed.json()["items"]
        if items:
            [conversation] = items
            conversation_id: str = conversation["id"]
            return conversation_id
        assert time.monotonic() < deadline, "no conversation started"
        time.sleep(0.05)


def caller_client(api: Api, server: LiveServer) -> httpx.Client:
    """The waiting caller's own client (the admin's headers), in its own thread."""
    return httpx.Client(base_url=server.base_url, headers=api.http.headers, timeout=120)


def cancel_when_running(api: Api) -> tuple[str, float]:
    conversation_id = running_conversation(api)
    response = api.http.post(f"/api/v1/tqa/conversations/{conversation_id}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "running"
    return conversation_id, time.monotonic()


def assert_cancelled(api: Api, conversation_id: str, ended: dict[str, Any]) -> None:
    assert ended["id"] == conversation_id
    assert ended["status"] == "failed", ended
    assert ended["error"]["code"] == "cancelled", ended
    stored = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
    assert stored["status"] == "failed"
    assert stored["error"]["code"] == "cancelled"
    assert stored["cancel_requested_at"] is not None


def test_a_sync_conversation_is_cancelled_while_its_caller_waits(
    api: Api, server: LiveServer
) -> None:
    answer: dict[str, Any] = {}
    answered_at: list[float] = []

    def ask() -> None:
        with caller_client(api, server) as client:
            response = client.post("/api/v1/tqa/ask", json=FOREVER)
            answered_at.append(time.monotonic())
            assert response.status_code == 200, response.text
            answer.update(response.json())

    caller = threading.Thread(target=ask)
    caller.start()
    conversation_id, cancelled_at = cancel_when_running(api)
    caller.join(timeout=60)
    assert not caller.is_alive(), "the sync ask was not ended by its cancel"
    assert answered_at[0] - cancelled_at < 10  # seen within a second, ended at once
    assert_cancelled(api, conversation_id, answer)


def test_a_streamed_conversation_is_cancelled_and_its_stream_ends_with_it(
    api: Api, server: LiveServer
) -> None:
    events: list[tuple[str, dict[str, Any]]] = []

    def ask() -> None:
        with (
            caller_client(api, server) as client,
            client.stream("POST", "/api/v1/tqa/ask", json={**FOREVER, "stream": True}) as stream,
        ):
            assert stream.status_code == 200
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event:"):
                    kind = line.removeprefix("event:").strip()
                elif line.startswith("data:"):
                    events.append((kind, json.loads(line.removeprefix("data:"))))

    caller = threading.Thread(target=ask)
    caller.start()
    conversation_id, _ = cancel_when_running(api)
    caller.join(timeout=60)
    assert not caller.is_alive(), "the stream was not ended by the cancel"
    assert events[0] == ("conversation", {"id": conversation_id, "question": FOREVER["question"]})
    kind, result = events[-1]
    assert kind == "result"
    assert_cancelled(api, conversation_id, result)
