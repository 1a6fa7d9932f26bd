"""Chain-of-Table flows on real examples of the shared packs (5 per dataset), with the scripted
model playing the model (every model output is SCRIPTED, see the fixture's README): each
case's expected chain, intermediate tables, plans and model-call count are what the OFFICIAL
implementation produced from the same outputs (tests/fixtures/methods/
make_chain_of_table_cases.py), and the final answer is scored by the official metric."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import (
    Executor,
    ExecutorOptions,
    NodeFinished,
    RunResult,
    compile_flow,
    parse_flow,
)
from support.models import gateway_for, scripted_server

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads(
    (ROOT / "tests" / "fixtures" / "methods" / "chain_of_table_cases.json").read_text("utf-8")
)
FLOWS = ROOT / "flows" / "methods" / "chain_of_table"


async def _run(registry: Registry, case: dict[str, Any]) -> RunResult:
    flow = parse_flow(json.loads((FLOWS / f"{case['dataset']}.json").read_text("utf-8")))
    plan = compile_flow(flow, registry)
    with scripted_server({"rules": case["rules"]}) as server:
        gateway = gateway_for(server)
        executor = Executor(ExecutorOptions(services=BlockServices({MODELS: gateway})))
        inputs = {"question": case["question"], "rows": case["rows"]}
        if case["caption"]:
            inputs["caption"] = case["caption"]
        try:
            result = await executor.run(plan, inputs)
        finally:
            await gateway.aclose()
        return result


def _event_data(result: RunResult, kind: str) -> list[dict[str, Any]]:
    return [
        dict(event.data)
        for event in result.events
        if getattr(event, "kind", None) == kind and hasattr(event, "data")
    ]


def _node_outputs(result: RunResult, suffix: str) -> list[Any]:
    """The outputs of the nodes whose path ends with `suffix`, in the order they finished."""
    return [
        event.output
        for event in result.events
        if isinstance(event, NodeFinished) and event.node.endswith(suffix)
    ]


def _rounded(value: Any) -> Any:
    # Votes are sums of exp(log-probability): equal up to the last bits of a float.
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    return value


def _score(case: dict[str, Any], answer: str) -> float:
    from dagwright.evaluation.metrics import fetaqa, tabfact, wikitq
    from dagwright.evaluation.metrics.base import Item

    metric = {"tabfact": tabfact, "wikitq": wikitq, "fetaqa": fetaqa}[case["dataset"]]
    report = metric.score([Item(case["id"], case["gold"], answer)])
    return float(report.examples[0].score)


@pytest.mark.parametrize("case", CASES, ids=[f"{c['dataset']}-{c['pattern']}" for c in CASES])
async def test_the_flow_does_what_the_official_implementation_does(
    registry: Registry, case: dict[str, Any]
) -> None:
    result = await _run(registry, case)
    assert result.status == "succeeded", result.error
    expected = case["expected"]
    state = result.outputs["last_step"]["state"]
    assert state["act_chain"] == expected["act_chain"]
    assert result.outputs["chain"] == [*expected["act_chain"], "f_query()"]
    # Every intermediate table, operation by operation (skipped ones leave it unchanged).
    assert [step["table"] for step in state["steps"]] == expected["tables"]
    assert state["table"] == expected["final_table"]
    assert state["group_sub_table"] == expected["group_sub_table"]
    # Every vote: the ranked arguments with their confidences, operation by operation.
    votes = [
        {"operation": args["operation"], "arguments": args["arguments"]}
        for args in _node_outputs(result, "/args")
        if args["operation"] != "<END>"
    ]
    assert _rounded(votes) == _rounded(expected["votes"])
    # The official final answer, read and scored by the official metric.
    answer = result.outputs["answer"]
    official = expected["answer"].strip()
    if case["dataset"] == "tabfact":
        assert answer == official.lower()
        assert _score(case, answer) == 1.0
    else:
        assert answer == official.removesuffix(".").rstrip()
        assert _score(case, answer) > 0


@pytest.mark.parametrize("case", CASES[:5], ids=[c["pattern"] for c in CASES[:5]])
async def test_model_calls_match_the_official_count(
    registry: Registry, case: dict[str, Any]
) -> None:
    result = await _run(registry, case)
    # No call when one candidate is left (after f_sort_column only <END> is).
    assert result.usage.calls == case["expected"]["model_calls"]
