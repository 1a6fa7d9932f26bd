"""Few-shot retrieval with the real local model (all-MiniLM-L6-v2), inside a flow whose LLM
prompt is sent to the scripted model; and storing examples from a flow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dagwright.embedding.embedders import CachedEmbedder, make_embedder
from dagwright.embedding.service import ExampleStore
from dagwright.llm.gateway import LLMGateway
from dagwright.registry import EXAMPLES as EXAMPLE_STORE
from dagwright.registry import MODELS, BlockServices, Registry, Service
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeFinished,
    NodeMessage,
    compile_flow,
    parse_flow,
)
from support.flows import edge, flow_doc, node
from support.models import gateway_for, scripted_server

EXAMPLES = [
    {
        "id": "salary",
        "question": "What is the monthly salary of Ann?",
        "sql": "SELECT salary FROM employees WHERE name = 'Ann'",
    },
    {
        "id": "headcount",
        "question": "How many people work in the sales department?",
        "sql": "SELECT count(*) FROM employees WHERE department = 'sales'",
    },
    {
        "id": "weather",
        "question": "Will it rain in Paris tomorrow?",
        "sql": "SELECT forecast FROM weather WHERE city = 'Paris'",
    },
]
TEMPLATE = "Q: {{ example.question }}\nSQL: {{ example.sql }}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExampleStore]:
    path: Path = tmp_path_factory.mktemp("examples")
    examples = ExampleStore.local(path, lambda spec: CachedEmbedder(make_embedder(spec, None)))
    examples.create_namespace("sql", "minilm", key_fields=["id"], text_field="question")
    yield examples
    examples.close()


async def test_the_local_model_picks_the_example_that_means_the_same(store: ExampleStore) -> None:
    await store.upsert("sql", EXAMPLES)
    hits = await store.query("sql", "How much does Tom earn per month?", k=3)
    assert hits[0].payload["id"] == "salary"
    assert hits[0].score > hits[-1].score
    assert hits[-1].payload["id"] == "weather"
    again = await store.upsert("sql", EXAMPLES)  # idempotent: still three examples
    assert len(again) == 3
    assert store.count("sql") == 3


def run_flow(doc: dict[str, Any], services: dict[Service[Any], object], **inputs: Any) -> Any:
    plan = compile_flow(parse_flow(doc), Registry.default())
    return Executor(ExecutorOptions(services=BlockServices(services))).run(plan, inputs)


async def test_few_shot_examples_reach_the_llm_prompt(store: ExampleStore) -> None:
    await store.upsert("sql", EXAMPLES)
    doc = flow_doc(
        [
            node("q", "text_input", name="question"),
            node("shots", "few_shot", namespace="sql", k=2, template=TEMPLATE),
            node(
                "ask",
                "chat",
                prompt="Examples:\n{{ examples }}\n\nQuestion: {{ question }}\nSQL:",
            ),
            node("out", "output", name="answer"),
        ],
        [
            edge("q", "shots.query"),
            edge("shots", "ask.examples"),
            edge("q", "ask.question"),
            edge("ask", "out"),
        ],
    )
    # The scripted model answers only when the salary example is in the prompt.
    script = {
        "rules": [
            {
                "match": r"SELECT salary FROM employees[\s\S]*Question: What does Tom",
                "reply": "SELECT salary FROM employees WHERE name = 'Tom'",
            }
        ],
        "default_reply": "no examples seen",
    }
    with scripted_server(script) as server:
        gateway: LLMGateway = gateway_for(server)
        try:
            result = await run_flow(
                doc,
                {EXAMPLE_STORE: store, MODELS: gateway},
                question="What does Tom earn each month?",
            )
        finally:
            await gateway.aclose()
    assert result.status == "succeeded", result.error
    assert result.outputs == {"answer": "SELECT salary FROM employees WHERE name = 'Tom'"}
    # (The scripted reply above proves the examples were in the prompt.) Two examples, the
    # most similar last, right before the question.
    shown = next(
        e.output for e in result.events if isinstance(e, NodeFinished) and e.node == "shots"
    )
    assert shown.count("Q: ") == 2
    assert shown.endswith("SQL: SELECT salary FROM employees WHERE name = 'Ann'")
    picked = next(e for e in result.events if isinstance(e, NodeMessage) and e.kind == "examples")
    assert len(picked.data["ids"]) == 2


async def test_examples_are_stored_from_a_flow(store: ExampleStore) -> None:
    doc = flow_doc(
        [
            node("ex", "json_input", name="example"),
            node("save", "example_upsert", namespace="sql"),
            node("out", "output", name="id"),
        ],
        [edge("ex", "save.example"), edge("save", "out")],
    )
    example = {
        "id": "bonus",
        "question": "What is Tom's year-end bonus?",
        "sql": "SELECT bonus FROM bonuses WHERE name = 'Tom'",
    }
    first = await run_flow(doc, {EXAMPLE_STORE: store}, example=example)
    second = await run_flow(doc, {EXAMPLE_STORE: store}, example={**example, "sql": "changed"})
    assert first.outputs["id"] == second.outputs["id"]  # the same key: replaced, not added
    hits = await store.query("sql", "year-end bonus of Tom", k=1)
    assert hits[0].payload["sql"] == "changed"
    missing_key = await run_flow(doc, {EXAMPLE_STORE: store}, example={"question": "no id"})
    assert missing_key.error is not None
    assert missing_key.error.node == "save"
    assert "id" in missing_key.error.message
