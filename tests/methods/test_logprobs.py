"""Token log-probabilities through the OpenAI API: the scripted server sends them when asked
(as tokens summing to the scripted value), the gateway sums them per answer, streamed or
not, and the `chat_scored` block returns them. All answers here are SCRIPTED."""

from __future__ import annotations

from typing import Any

import pytest

from dagwright.llm.gateway import ChatRequest
from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, compile_flow, parse_flow
from support.models import gateway_for, scripted_server

SCRIPT: dict[str, Any] = {
    "rules": [
        {
            "name": "votes",
            "reply": {
                "choices": ["f_row([row 1, row 3])", "f_row([row 2])", "no answer at all"],
                "logprobs": [-0.25, -1.5, -4.0],
            },
        }
    ]
}


def _request(**extra: Any) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": "rows?"}], n=3, **extra)


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_gateway_sums_token_logprobs_per_answer(streamed: bool) -> None:
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        try:
            deltas: list[str] = []
            on_delta = (lambda _i, text: deltas.append(text)) if streamed else None
            result = await gateway.chat(None, _request(logprobs=True, top_logprobs=2), on_delta)
        finally:
            await gateway.aclose()
    assert result.choices == ["f_row([row 1, row 3])", "f_row([row 2])", "no answer at all"]
    assert result.logprobs == pytest.approx([-0.25, -1.5, -4.0])
    # The tokens are the answer's pieces: joined, they give the answer back.
    assert ["".join(t["token"] for t in tokens) for tokens in result.token_logprobs] == (
        result.choices
    )
    assert result.scripted


async def test_without_the_option_no_logprobs_are_asked_or_given() -> None:
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        try:
            result = await gateway.chat(None, _request())
        finally:
            await gateway.aclose()
    assert result.logprobs == []
    assert "logprobs" not in _request().parameters()
    assert _request(top_logprobs=3).parameters() == {"top_logprobs": 3, "logprobs": True, "n": 3}


async def test_the_chat_scored_block_gives_each_answer_its_logprob(registry: Registry) -> None:
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "nodes": [
            {"id": "q", "block": "text_input", "config": {"name": "q"}},
            {"id": "ask", "block": "chat_scored", "config": {"prompt": "{{ q }}", "n": 3}},
            {"id": "out", "block": "output", "config": {"name": "answers"}},
        ],
        "edges": [
            {"source": {"node": "q", "port": "output"}, "target": {"node": "ask", "port": "q"}},
            {
                "source": {"node": "ask", "port": "output"},
                "target": {"node": "out", "port": "value"},
            },
        ],
    }
    plan = compile_flow(parse_flow(flow), registry)
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        try:
            executor = Executor(ExecutorOptions(services=BlockServices({MODELS: gateway})))
            result = await executor.run(plan, {"q": "rows?"})
        finally:
            await gateway.aclose()
    answers = result.outputs["answers"]
    assert [a["text"] for a in answers] == [
        "f_row([row 1, row 3])",
        "f_row([row 2])",
        "no answer at all",
    ]
    assert [a["logprob"] for a in answers] == pytest.approx([-0.25, -1.5, -4.0])
