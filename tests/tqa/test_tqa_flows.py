"""The AutoTQA flows are valid, and publishing with an examples namespace puts a few_shot
node in the text-to-SQL tool."""

from __future__ import annotations

import pytest

from dagwright.registry import Registry
from dagwright.runtime import analyse, parse_flow
from dagwright.tqa.publish import APP_FLOWS, load_flow


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.default()


@pytest.mark.parametrize("file", sorted(APP_FLOWS.values()))
def test_every_flow_is_valid(registry: Registry, file: str) -> None:
    analysis = analyse(parse_flow(load_flow(file)), registry)
    assert analysis.ok, analysis.problems


def test_an_examples_namespace_adds_few_shot_retrieval(registry: Registry) -> None:
    flow = load_flow("text_to_sql.json", examples_namespace="sql-examples")
    examples = next(n for n in flow["nodes"] if n["id"] == "examples")
    assert examples["block"] == "few_shot"
    assert examples["config"]["namespace"] == "sql-examples"
    assert {"node": "examples", "port": "query"} in [e["target"] for e in flow["edges"]]
    analysis = analyse(parse_flow(flow), registry)
    assert analysis.ok, analysis.problems
    plain = load_flow("text_to_sql.json")
    assert next(n for n in plain["nodes"] if n["id"] == "examples")["block"] == "text_input"
