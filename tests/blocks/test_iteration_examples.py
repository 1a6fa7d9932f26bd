"""The iteration examples (flows/examples/classify_questions.json, revise_answer.json) run
against the scripted model server over real HTTP: a map classifying questions in parallel
with a node retry and an item default, and a repeat revising an answer until a check
passes (or the round limit)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import (
    CompiledFlow,
    Executor,
    ExecutorOptions,
    NodeEvent,
    NodeMessage,
    NodeStarted,
    RunResult,
    build_trace,
    compile_flow,
    iteration_nodes,
    load_flow,
)
from support.models import gateway_for, scripted_server

EXAMPLES = Path(__file__).resolve().parents[2] / "flows" / "examples"


def example(name: str) -> CompiledFlow:
    return compile_flow(load_flow(EXAMPLES / name), Registry.default())


async def run(plan: CompiledFlow, script: dict[str, Any], **inputs: Any) -> RunResult:
    with scripted_server(script) as server:
        executor = Executor(ExecutorOptions(services=BlockServices({MODELS: gateway_for(server)})))
        return await executor.run(plan, inputs)


QUESTIONS = [
    "What is the year-end bonus for Tom?",
    "How many employees work in sales?",
    "Which department has more employees, sales or hr?",
    "Colourless green ideas?",
]

CLASSIFY = {
    "latency_ms": 300,
    "rules": [
        {
            "name": "flaky-once",  # refused once: the node's retry asks again
            "match": r"(?s)^\[classify\].*How many",
            "replies": [{"fault": "bad_request", "message": "try again"}, "aggregate"],
        },
        {"match": r"(?s)^\[classify\].*Which department has more", "reply": "compare"},
        {"match": r"(?s)^\[classify\].*year-end bonus", "reply": "lookup"},
        {
            "name": "always-refused",  # retries spent: the map's item default
            "match": r"(?s)^\[classify\].*Colourless",
            "reply": {"fault": "bad_request", "message": "cannot classify"},
        },
    ],
}


async def test_classify_questions_maps_in_parallel_with_retry_and_default() -> None:
    plan = example("classify_questions.json")
    # A first model call imports the HTTP client on the loop, which holds every item up:
    # made beforehand, so the timing below is the map's.
    await run(example("answer_question.json"), {"default_reply": "warm"})
    started = time.perf_counter()
    result = await run(plan, CLASSIFY, questions=QUESTIONS)
    took = time.perf_counter() - started
    assert result.status == "succeeded", result.error
    assert result.outputs["labels"] == ["lookup", "aggregate", "compare", "unknown"]
    (failure,) = result.outputs["failed"]
    assert failure["index"] == 3
    assert "cannot classify" in failure["error"]
    # Four questions at once: the slowest (three refused calls of 0.3 s, waits of 0.2 and
    # 0.4 s between them) sets the time, not the sum of all the calls.
    assert took < 2.2
    asks = sorted(
        e.t for e in result.events if isinstance(e, NodeStarted) and e.node.endswith("/ask")
    )
    # An ask node's first event after its start comes with a model's answer (or refusal).
    first_answer = min(
        e.t
        for e in result.events
        if isinstance(e, NodeEvent) and e.node.endswith("/ask") and not isinstance(e, NodeStarted)
    )
    assert asks[3] < first_answer  # all asked before the first answer came back
    retries = [e.node for e in result.events if isinstance(e, NodeMessage) and e.kind == "retry"]
    assert retries.count("classify_each[1]/ask") == 1
    assert retries.count("classify_each[3]/ask") == 2
    trace = build_trace(result.events, plan.blocks())
    strip = [(it.index, it.status) for it in trace["classify_each"].iterations]
    assert strip == [(0, "succeeded"), (1, "succeeded"), (2, "succeeded"), (3, "failed")]
    assert iteration_nodes(trace, "classify_each", 2)["ask"].output == "compare"
    assert result.usage.calls >= 3


REVISE = {
    "rules": [
        {"match": r"^\[draft\]", "reply": "Revenue went up."},
        {
            "match": r"^\[revise\]",
            "replies": ["Revenue grew.", "Revenue grew by 42% to 1.2 M."],
        },
        {"match": r"(?s)^\[check\].*42%", "reply": '{"ok": true, "feedback": "has the figure"}'},
        {"match": r"^\[check\]", "reply": '{"ok": false, "feedback": "give the figure"}'},
    ],
}


async def test_revise_answer_repeats_until_the_check_passes() -> None:
    plan = example("revise_answer.json")
    result = await run(plan, REVISE, question="How did revenue change last year?")
    assert result.status == "succeeded", result.error
    assert result.outputs == {
        "answer": "Revenue grew by 42% to 1.2 M.",
        "rounds": 2,
        "stopped": "until",
    }
    trace = build_trace(result.events, plan.blocks())
    assert [(it.index, it.status) for it in trace["refine"].iterations] == [
        (0, "succeeded"),
        (1, "succeeded"),
    ]
    second = iteration_nodes(trace, "refine", 1)
    assert second["improve"].inputs is not None
    assert second["improve"].inputs["answer"] == "Revenue grew."
    assert second["improve"].inputs["round"] == 1
    assert second["check"].output == {"ok": True, "feedback": "has the figure"}
    assert iteration_nodes(trace, "refine", 0)["ok"].output is False


async def test_revise_answer_stops_at_the_round_limit_and_says_so() -> None:
    never = {
        "rules": [
            {"match": r"^\[check\]", "reply": '{"ok": false, "feedback": "no"}'},
        ],
        "default_reply": "Revenue changed.",
    }
    result = await run(example("revise_answer.json"), never)
    assert result.outputs == {"answer": "Revenue changed.", "rounds": 5, "stopped": "max_rounds"}


async def test_a_check_that_answers_no_json_accepts_the_answer() -> None:
    prose = {"default_reply": "Revenue grew by 3%."}  # the check's reply is not JSON
    result = await run(example("revise_answer.json"), prose)
    assert result.outputs["rounds"] == 1
    assert result.outputs["stopped"] == "until"
    trace = build_trace(result.events)
    assert trace["refine[0]/check"].status == "recovered"
