"""The AutoTQA flows are valid, and the same for every dataset: what differs per dataset (SOP,
examples, hints) reaches them as inputs."""

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


@pytest.mark.parametrize(
    "file",
    ["planner.json", "engineer.json", "critic.json", "text_to_sql.json", "python_on_tables.json"],
)
def test_every_agent_and_tool_takes_examples_as_an_input(file: str) -> None:
    flow = load_flow(file)
    examples = next(n for n in flow["nodes"] if n["id"] == "examples")
    assert examples["block"] == "text_input"
    assert examples["config"]["default"] == ""


def test_the_python_tool_takes_a_task_and_writes_its_own_code() -> None:
    flow = load_flow("python_on_tables.json")
    inputs = {n["config"]["name"] for n in flow["nodes"] if n["block"] == "text_input"}
    # `mode`: write the plan alone, or run a given `plan` (the approved one): tqa/roles.py.
    assert inputs == {"task", "hints", "feedback", "examples", "mode"}
    plan = next(n for n in flow["nodes"] if n["id"] == "plan")
    assert (plan["block"], plan["config"]["default"]) == ("json_input", {})
    assert any(n["block"] == "schema_lookup" for n in flow["nodes"])


@pytest.mark.parametrize("file", ["text_to_sql.json", "python_on_tables.json"])
def test_the_tools_sql_runs_under_the_sources_they_are_given(file: str) -> None:
    """The `sources` input (the question's scope, which the Engineer cannot widen:
    tqa/executor.py) reaches the SQL node as well as the schema lookup, so the engine
    refuses tables outside it (data/scope.py), not only the lookup's view."""
    flow = load_flow(file)
    fed = {
        (edge["target"]["node"], edge["target"]["port"])
        for edge in flow["edges"]
        if edge["source"]["node"] == "sources"
    }
    query = next(n["id"] for n in flow["nodes"] if n["block"] == "sql_query")
    assert fed == {("schema", "sources"), (query, "sources")}
