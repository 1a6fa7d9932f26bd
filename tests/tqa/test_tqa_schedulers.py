"""The schedulers' transition rules (pure), the LLM scheduler's parsing and fallback, and the
answer forms."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from dagwright.tqa.agents import AgentCaller, AgentCallError, AgentReply
from dagwright.tqa.answers import build_answer
from dagwright.tqa.conversation import AskRequest, Conversation, ToolCall, Turn
from dagwright.tqa.schedulers import (
    LlmScheduler,
    fsm_next,
    parse_agent,
    rolling_next,
)


def turn(agent: str, content: Any = None, error: dict[str, Any] | None = None) -> Turn:
    return Turn(0, agent, "", content, error=error)


def test_rolling_goes_round_the_queue_without_the_user() -> None:
    order = []
    previous = "User"
    for _ in range(9):
        previous = rolling_next(previous).agent
        order.append(previous)
    assert order == ["Planner", "Engineer", "Executor", "Critic"] * 2 + ["Planner"]


@pytest.mark.parametrize(
    ("previous", "expected"),
    [
        (None, "Planner"),
        (turn("User"), "Planner"),
        (turn("Planner"), "Engineer"),
        (turn("Engineer", {"action": "tool", "tool": "text_to_sql"}), "Executor"),
        (turn("Engineer", {"action": "report"}), "Critic"),
        (turn("Engineer", {"action": "tool"}, error={"code": "agent_output"}), "Critic"),
        (turn("Engineer", "not json"), "Critic"),
        (turn("Executor"), "Engineer"),
        (turn("Critic", {"complete": False}), "Planner"),
    ],
)
def test_fsm_transitions(previous: Turn | None, expected: str) -> None:
    choice = fsm_next(previous)
    assert choice.agent == expected
    assert choice.by == "fsm"
    assert "->" in choice.reason


@pytest.mark.parametrize(
    ("answer", "agent"),
    [
        ("Engineer", "Engineer"),
        ("critic.", "Critic"),
        ("**Executor**", "Executor"),
        ("The Executor should run the SQL now.", "Executor"),
        ("Executor\nbecause the Engineer asked for a tool", "Executor"),
        ("Either the Planner or the Critic", None),
        ("User", None),  # never rescheduled
        ("I cannot decide.", None),
        ("", None),
    ],
)
def test_parse_agent(answer: str, agent: str | None) -> None:
    assert parse_agent(answer) == agent


class Answering(AgentCaller):
    def __init__(self, answer: str | None) -> None:
        self.answer = answer
        self.calls: list[Mapping[str, Any]] = []

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        self.calls.append(inputs)
        if self.answer is None:
            raise AgentCallError("the model is down", "provider_error")
        return AgentReply({"agent": self.answer}, {"total_tokens": 7}, "run1", 0.0)


def conversation(*agents: str) -> Conversation:
    done = Conversation("c", AskRequest(question="q", scheduler="llm"), datetime.now(UTC))
    done.turns = [turn(agent) for agent in agents]
    return done


async def test_llm_scheduler_choice_and_fallbacks() -> None:
    caller = Answering("Critic")
    first = await LlmScheduler(caller, lambda c: "").choose(conversation("User"))
    assert first.agent == "Planner"
    assert caller.calls == []  # no model call for the first turn
    chosen = await LlmScheduler(caller, lambda c: "talk").choose(conversation("User", "Planner"))
    assert (chosen.agent, chosen.fallback, chosen.usage) == ("Critic", False, {"total_tokens": 7})
    assert "Planner: decomposes" in caller.calls[0]["agents"]
    assert caller.calls[0]["conversation"] == "talk"

    unsure = await LlmScheduler(Answering("hmm"), lambda c: "").choose(
        conversation("User", "Planner")
    )
    assert (unsure.agent, unsure.fallback, unsure.answer) == ("Engineer", True, "hmm")
    assert "could not read an agent" in unsure.reason

    down = await LlmScheduler(Answering(None), lambda c: "").choose(
        conversation("User", "Planner", "Executor")
    )
    assert (down.agent, down.fallback) == ("Engineer", True)
    assert "provider_error" in down.reason


def test_answer_forms_and_evidence() -> None:
    call = ToolCall(
        "text_to_sql", "a", {}, sql="SELECT 1", columns=["Bonus"], rows=[{"Bonus": 1569}]
    )
    call.row_count = 1
    value = build_answer(
        {"complete": True, "answer": 1569, "summary": "TERMINATE: 1569"}, [call], None
    )
    assert value["form"] == "value"
    assert value["text"] == "1569"
    assert value["grounded"] is True
    assert value["evidence"][0]["sql"] == "SELECT 1"

    table = build_answer({"complete": True, "answer": [{"Bonus": 1569}]}, [call], None)
    assert table["form"] == "table"
    assert table["table"] == {"columns": ["Bonus"], "rows": [{"Bonus": 1569}]}

    text = build_answer(
        {"complete": True, "answer": "Tom earns a bonus of 1569 dollars"}, [call], None
    )
    assert text["form"] == "text"
    assert text["grounded"] is False  # the sentence is not a cell

    filled = build_answer(
        {"complete": True, "answer": 1569, "fields": {"who": "Tom"}},
        [call],
        "{{ who }}: {{ answer }}",
    )
    assert (filled["form"], filled["text"]) == ("template", "Tom: 1569")

    broken = build_answer({"complete": True, "answer": 1}, [], "{{ missing.attr }}")
    assert broken["form"] == "text"
    assert "could not be filled" in broken["value"]
