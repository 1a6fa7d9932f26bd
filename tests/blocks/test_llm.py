"""LLM blocks through the real runtime and the scripted server: ports from templates, token
events, usage summed per run, JSON parsing errors naming the node, and the sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from dagwright.blocks import llm
from dagwright.llm.gateway import LLMGateway
from dagwright.registry import MODELS, BlockServices, MissingServiceError, Registry
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeMessage,
    NodeUsage,
    RunResult,
    build_trace,
    compile_flow,
    parse_flow,
    validate,
)
from support.flows import edge, flow_doc, node
from support.models import gateway_for, scripted_server

SCRIPT = {
    "rules": [
        {"name": "analyst", "match": "(?i)bonus", "reply": "12,000"},
        {"name": "json", "match": "^extract", "reply": '{"name": "Tom", "year": 2023}'},
        {"name": "badjson", "match": "^broken", "reply": "Sure! Here is JSON: {name: Tom}"},
        {"name": "wrongshape", "match": "^shape", "reply": '{"name": 7}'},
        {"name": "samples", "match": "^vote", "reply": {"choices": ["yes", "no", "yes"]}},
    ],
    "default_reply": "scripted default",
}

REGISTRY = Registry.default()


@pytest.fixture
async def gateway() -> AsyncIterator[LLMGateway]:
    with scripted_server(SCRIPT) as server:
        gateway = gateway_for(server)
        yield gateway
        await gateway.aclose()


def llm_flow(block: str, **config: Any) -> dict[str, Any]:
    return flow_doc(
        [
            node("q", "text_input", name="question"),
            node("ask", block, **config),
            node("out", "output", name="answer"),
        ],
        [edge("q", "ask.question"), edge("ask", "out")],
    )


async def run(doc: dict[str, Any], gateway: LLMGateway | None, **inputs: Any) -> RunResult:
    plan = compile_flow(parse_flow(doc), REGISTRY)
    services = BlockServices({MODELS: gateway} if gateway else {})
    return await Executor(ExecutorOptions(services=services)).run(plan, inputs)


def test_prompt_variables_become_ports() -> None:
    spec = REGISTRY.get("chat")
    config = llm.ChatConfig(system="You answer in {{ lang }}.", prompt="Q: {{ question }}")
    assert sorted(spec.input_ports(config)) == ["history", "lang", "question"]
    assert spec.input_ports(config)["history"].required is False
    assert spec.to_schema()["dynamic_inputs"]["type"] == "Any"


async def test_chat_streams_tokens_and_accounts(gateway: LLMGateway) -> None:
    doc = llm_flow("chat", system="You are an analyst.", prompt="Answer: {{ question }}")
    result = await run(doc, gateway, question="What is the bonus for Tom?")
    assert result.status == "succeeded", result.error
    assert result.outputs == {"answer": "12,000"}
    messages = [e for e in result.events if isinstance(e, NodeMessage)]
    tokens = "".join(e.data["text"] for e in messages if e.kind == "token")
    assert tokens == "12,000"
    usage = next(e for e in result.events if isinstance(e, NodeUsage))
    assert usage.data["scripted"] is True
    assert usage.data["provider"] == "scripted"
    assert usage.data["attempts"] == 1
    assert result.usage.calls == 1
    assert result.usage.prompt_tokens == usage.data["prompt_tokens"] > 0
    trace = build_trace(result.events)
    assert trace["ask"].usage.completion_tokens == result.usage.completion_tokens


async def test_usage_sums_over_parallel_calls(gateway: LLMGateway) -> None:
    doc = flow_doc(
        [
            node("q", "text_input", name="question"),
            node("a", "chat", prompt="bonus? {{ question }}"),
            node("b", "chat", prompt="other {{ question }}", stream=False),
            node("oa", "output", name="a"),
            node("ob", "output", name="b"),
        ],
        [edge("q", "a.question"), edge("q", "b.question"), edge("a", "oa"), edge("b", "ob")],
    )
    result = await run(doc, gateway, question="x")
    assert result.outputs == {"a": "12,000", "b": "scripted default"}
    per_node = build_trace(result.events)
    assert result.usage.calls == 2
    assert (
        result.usage.total_tokens
        == per_node["a"].usage.total_tokens + per_node["b"].usage.total_tokens
    )
    assert not any(
        isinstance(e, NodeMessage) and e.kind == "token" and e.node == "b" for e in result.events
    )


async def test_chat_json_parses_and_checks_the_schema(gateway: LLMGateway) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "year": {"type": "integer"}},
        "required": ["name"],
    }
    doc = llm_flow("chat_json", prompt="{{ question }}", json_schema=schema)
    ok = await run(doc, gateway, question="extract it")
    assert ok.outputs == {"answer": {"name": "Tom", "year": 2023}}
    broken = await run(doc, gateway, question="broken please")
    assert broken.error is not None
    assert broken.error.node == "ask"
    assert broken.error.code == "model_output"
    assert "the model's answer is not valid JSON" in broken.error.message
    assert "'Sure! Here is JSON" in broken.error.message
    assert broken.usage.calls == 1  # the failed parse still counts the call
    wrong = await run(doc, gateway, question="shape it")
    assert wrong.error is not None
    assert "does not match the schema at name: 7 is not of type 'string'" in wrong.error.message


async def test_chat_samples(gateway: LLMGateway) -> None:
    result = await run(
        llm_flow("chat_samples", prompt="vote: {{ question }}", n=3), gateway, question="?"
    )
    assert result.outputs == {"answer": ["yes", "no", "yes"]}


async def test_completion_and_embedding(gateway: LLMGateway) -> None:
    completed = await run(llm_flow("completion", prompt="{{ question }} ->"), gateway, question="x")
    assert completed.outputs == {"answer": "scripted default"}
    doc = flow_doc(
        [
            node("q", "text_input", name="question"),
            node("e", "embedding"),
            node("out", "output", name="v"),
        ],
        [edge("q", "e.text"), edge("e", "out")],
    )
    embedded = await run(doc, gateway, question="year-end bonus")
    vector = embedded.outputs["v"]
    assert len(vector) == 64
    assert sum(x * x for x in vector) == pytest.approx(1.0)
    empty = await run(doc, gateway, question="  ")
    assert empty.error is not None
    assert "cannot embed an empty text" in empty.error.message


async def test_sandbox_refuses_python_internals(gateway: LLMGateway) -> None:
    for probe in (
        "{{ ''.__class__.__mro__ }}",
        "{{ question.__class__.__base__.__subclasses__() }}",
    ):
        result = await run(llm_flow("chat", prompt=probe + "{{ question }}"), gateway, question="q")
        assert result.error is not None
        assert result.error.node == "ask"
        assert "refused by the sandbox" in result.error.message


def test_template_syntax_error_names_the_line() -> None:
    doc = llm_flow("chat", system="fine", prompt="line one\n{{ question }\nline three")
    problems = validate(parse_flow(doc), REGISTRY)
    bad = [p for p in problems if p.code == "invalid_config"]
    assert len(bad) == 1
    assert bad[0].node == "ask"
    assert "prompt does not parse: line 2" in bad[0].message
    assert "line 2 reads: '{{ question }'" in bad[0].message


async def test_without_model_access_the_error_is_clear() -> None:
    # The run fails at its start, before any node runs, naming the service and the node.
    with pytest.raises(MissingServiceError) as missing:
        await run(llm_flow("chat", prompt="{{ question }}"), None, question="q")
    assert missing.value.code == "service_unavailable"
    assert "model providers (the LLM gateway) (models) for node 'ask'" in missing.value.message
