"""Conversations resumed from what the database recorded (tqa/recording.py, tqa/durable.py), on
a real SQLite database, with the agents played by plain functions (these tests' own script,
no model): a conversation loaded back goes on after its last turn without asking the agents
of the finished turns again; a process that took it up before a newer one stops at its next
write; a worker stopping hands it over instead of ending it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine
from test_tqa_orchestrator import TOOLS, Known, Scripted, never_done, plan, rows, tool_request

from dagwright.store.db import make_engine, migrate
from dagwright.tqa.agents import AgentReply
from dagwright.tqa.conversation import AskRequest, SchedulerChoice, ToolCall, Turn
from dagwright.tqa.durable import ConversationRunner
from dagwright.tqa.failures import ConversationSuperseded
from dagwright.tqa.orchestrator import Orchestrator
from dagwright.tqa.recording import ConversationStore


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate(made)
    yield made
    made.dispose()


def done_critic(_: Any) -> dict[str, Any]:
    return {"verdict": {"complete": True, "answer": 1569, "report": "1569"}}


def engineer(inputs: Any) -> dict[str, Any]:
    """A tool call, then a report once rows came back."""
    if "row(s)" in str(inputs.get("conversation")):
        return {"decision": {"action": "report", "report": "1569"}}
    return tool_request(inputs)


def wired(caller: Scripted, store: ConversationStore) -> Orchestrator:
    return Orchestrator(caller, tools=lambda: TOOLS, knowledge=Known(), store=store)


def test_a_recorded_turn_reads_back_as_it_was() -> None:
    call = ToolCall("text_to_sql", "autotqa-text-to-sql", {"question": "q"}, sql="SELECT 1")
    call.rows, call.columns, call.row_count = [{"x": 1}], ["x"], 1
    turn = Turn(3, "Executor", "text", {"a": 1}, SchedulerChoice("Executor", "r", "fsm"), call)
    turn.started, turn.duration, turn.run_id = 1.5, 0.25, "run1"
    assert Turn.from_dict(turn.to_dict()).to_dict() == turn.to_dict()


async def test_a_loaded_conversation_goes_on_after_its_last_turn(engine: Engine) -> None:
    store = ConversationStore(engine)
    request = AskRequest(question="q", dataset="d", max_rounds=10)
    first = Scripted(planner=plan, engineer=tool_request, text_to_sql=rows, critic=never_done)
    began = await wired(first, store).begin(request)
    # A process records the User's and the Planner's turns, then dies (nothing more runs).
    await asyncio.to_thread(store.add_turn, began, Turn(0, "User", "q"))
    planned = Turn(1, "Planner", "1. query", {"plan": "1. query"}, run_id="planner-run")
    await asyncio.to_thread(store.add_turn, began, planned)

    second = Scripted(planner=plan, engineer=engineer, text_to_sql=rows, critic=done_critic)
    status = await ConversationRunner(wired(second, store), store).run(began.id)
    assert status == "completed"
    assert "autotqa-planner" not in second.calls  # its turn was recorded: not asked again
    assert second.calls[0] == "autotqa-engineer"
    found = store.get(began.id)
    assert [t["agent"] for t in found["turns"]] == [
        "User",
        "Planner",
        "Engineer",
        "Executor",
        "Engineer",
        "Critic",
    ]
    assert found["turns"][1]["run_id"] == "planner-run"
    assert found["answer"]["value"] == 1569
    assert found["rounds"] == 5
    # the knowledge gathered when it began is the one it went on with
    assert found["sop"] == "SOP of d"
    # A finished conversation is left as it is.
    assert await ConversationRunner(wired(second, store), store).run(began.id) == "completed"


async def test_a_process_taken_over_stops_at_its_next_write(engine: Engine) -> None:
    store = ConversationStore(engine)
    caller = Scripted(planner=plan)
    began = await wired(caller, store).begin(AskRequest(question="q"))
    old = await asyncio.to_thread(store.load, began.id)
    newer = await asyncio.to_thread(store.load, began.id)
    assert old.runner != newer.runner
    with pytest.raises(ConversationSuperseded):
        await asyncio.to_thread(store.add_turn, old, Turn(0, "User", "q"))
    await asyncio.to_thread(store.add_turn, newer, Turn(0, "User", "q"))
    assert [t["agent"] for t in store.get(began.id)["turns"]] == ["User"]


async def test_a_stopping_worker_hands_the_conversation_over(engine: Engine) -> None:
    store = ConversationStore(engine)
    started = asyncio.Event()

    class Hanging(Scripted):
        async def call(
            self, app: str, inputs: Any, *, time_limit: float | None = None
        ) -> AgentReply:
            started.set()
            await asyncio.sleep(60)
            raise AssertionError

    began = await wired(Hanging(), store).begin(AskRequest(question="q"))
    runner = ConversationRunner(wired(Hanging(), store), store)
    task = asyncio.create_task(runner.run(began.id, hand_over=True))
    await started.wait()
    task.cancel()  # the worker stops: not a cancel of the conversation
    with pytest.raises(asyncio.CancelledError):
        await task
    kept = store.get(began.id)
    assert kept["status"] == "running"  # another worker resumes it
    assert kept["error"] is None
    assert [t["agent"] for t in kept["turns"]] == ["User"]
