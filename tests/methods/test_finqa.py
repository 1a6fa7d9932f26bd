"""FinQA reflection: the program language as the official evaluator executes it, the
execution-accuracy metric (and its gold-gated upper bound), and the three flows of the paper
run on the scripted model (every model answer here is SCRIPTED, written for the test) on the
FinQA-format fixture written for these tests (tests/fixtures/finqa/cases.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dagwright.evaluation.metrics import finqa as metric
from dagwright.evaluation.metrics.base import Item
from dagwright.evaluation.scoring import score_items
from dagwright.methods.finqa.program import execute, extract_program, tokenize
from dagwright.registry import MODELS, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions, RunResult, compile_flow, parse_flow
from dagwright.runtime.events import NodeStarted
from support.models import gateway_for, scripted_server

ROOT = Path(__file__).resolve().parents[2]
CASES = json.loads((ROOT / "tests" / "fixtures" / "finqa" / "cases.json").read_text("utf-8"))
FLOWS = ROOT / "flows" / "methods" / "finqa_reflection"
REVENUE = CASES[0]


# -- the program language --------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_gold_programs_execute_to_the_gold_answer(case: dict[str, Any]) -> None:
    result = execute(case["qa"]["program"], case["table"])
    assert result.valid, result.error
    assert result.value == case["qa"]["exe_ans"]


def test_tokens_are_the_official_ones() -> None:
    assert tokenize("subtract(5829, 5735), divide(#0, 5735)") == [
        "subtract(", "5829", "5735", ")", "divide(", "#0", "5735", ")", "EOF",
    ]  # fmt: skip
    assert tokenize("table_max(net income, none)") == [
        "table_max(",
        "net income",
        "none",
        ")",
        "EOF",
    ]


@pytest.mark.parametrize(
    ("program", "value"),
    [
        ("add(1, 2), subtract(#0, const_m1)", 4.0),  # #n and const_m1 (-1)
        ("divide(1, 3)", 0.33333),  # rounded to 5 decimals
        ("multiply(2.5%, const_1000)", 25.0),  # a percentage is a ratio
        ("add(1,000, 1)", 1001.0),  # FinQA splits on ", ": "1,000" is one number
        ("table_sum(dividends paid, none)", 83.0),  # "$ 30 ( 25% )": from "(" on is dropped
        ("table_max(net income, none), table_min(#0, none)", 80.0),  # the official quirk:
        # a table step on #n reuses the previous table step's row
        ("greater(3, 2)", "yes"),
    ],
)
def test_execution_rules(program: str, value: Any) -> None:
    table = CASES[1]["table"]
    result = execute(program, table)
    assert result.value == value, result.error


@pytest.mark.parametrize(
    "program",
    [
        "table_min(#0, none)",  # no table step before: invalid, as the official NameError
        "table_average(gross margin, none)",  # no such row
        "divide(1, 0)",
        "add(abc, 1)",
        "sum(1, 2)",  # not an operation
        "add(1, 2",  # unclosed
        "greater(3, 2), add(#0, 1)",  # "yes" + 1
        "",
    ],
)
def test_invalid_programs(program: str) -> None:
    result = execute(program, CASES[1]["table"])
    assert not result.valid
    assert result.value is None
    assert result.error


def test_the_program_is_read_from_the_last_program_line() -> None:
    answer = (
        "Step 1 ...\nProgram: add(1, 2)\nOn reflection:\n**Program:** `subtract(5, 1)`\nAnswer: 4"
    )
    assert extract_program(answer) == "subtract(5, 1)"
    assert extract_program("The answer is 4.") is None


# -- the metric ------------------------------------------------------------------------------


def _gold(case: dict[str, Any]) -> dict[str, Any]:
    return {"table": case["table"], "exe_ans": case["qa"]["exe_ans"]}


def test_execution_accuracy() -> None:
    items = [
        Item(CASES[0]["id"], _gold(CASES[0]), "subtract(5829, 5735), divide(#0, 5735)"),
        Item(CASES[1]["id"], _gold(CASES[1]), {"program": "table_average(net income, none)"}),
        # 94 / 5829 = 0.01613: a plausible program with the wrong denominator
        Item("wrong", _gold(CASES[0]), "subtract(5829, 5735), divide(#0, 5829)"),
        Item("invalid", _gold(CASES[2]), "greater(1250)"),
        Item("none", _gold(CASES[2]), None),
    ]
    report = score_items("finqa", items)
    assert report.value == pytest.approx(2 / 5)
    assert [e.correct for e in report.examples] == [True, True, False, False, False]
    assert report.examples[2].detail["executed"] == 0.01613


def test_gold_gated_upper_bound_takes_the_revision_only_when_the_first_answer_is_wrong() -> None:
    right, wrong = "subtract(5829, 5735), divide(#0, 5735)", "divide(5829, 5735)"
    gold = _gold(REVENUE)
    items = [
        # first right, revision wrong: still right (the gold says keep the first)
        Item("a", gold, {"program": wrong, "initial": {"program": right}}),
        Item("b", gold, {"program": right, "initial": {"program": wrong}}),
        Item("c", gold, {"program": wrong, "initial": {"program": wrong}}),
    ]
    gated = score_items("finqa_gold_gated", items)
    plain = score_items("finqa", items)
    assert [e.correct for e in gated.examples] == [True, True, False]
    assert [e.correct for e in plain.examples] == [False, True, False]
    assert metric.UPPER_BOUND_NOTE in gated.notes


# -- the flows on the scripted model ---------------------------------------------------------

WRONG = (
    "[scripted] Net revenues rose from 5735 to 5829.\n"
    "Program: subtract(5829, 5735), divide(#0, 5829)\nAnswer: 1.6%"
)
RIGHT = (
    "[scripted] Divide the change by 2018's revenue.\n"
    "Program: subtract(5829, 5735), divide(#0, 5735)\nAnswer: 1.64%"
)
EXTRACTION = "[scripted] The numbers 5829 and 5735 are extracted correctly."
CALCULATION = "[scripted] The change must be divided by the 2018 value, 5735, not 5829."
CRITIQUE = "[scripted] Step 2 divides by the wrong year: use 5735."


def _rules(*rules: tuple[str, str, str]) -> dict[str, Any]:
    return {"rules": [{"name": n, "match": m, "reply": r} for n, m, r in rules]}


EXPERT_RULE = ("expert", r"^\[finqa:expert\]", WRONG)
TWO_CRITICS = _rules(
    EXPERT_RULE,
    ("extraction", r"(?s)^\[finqa:critic-extraction\].*divide\(#0, 5829\)", EXTRACTION),
    # Answered only when the first critic's feedback is in the prompt: the critics are
    # sequential, the second reads the first.
    ("calculation", r"(?s)^\[finqa:critic-calculation\].*extracted correctly", CALCULATION),
    ("revise", r"(?s)^\[finqa:revise\].*extracted correctly.*not 5829", RIGHT),
)
ONE_CRITIC = _rules(
    EXPERT_RULE,
    ("critic", r"(?s)^\[finqa:critic\].*divide\(#0, 5829\)", CRITIQUE),
    ("revise", r"(?s)^\[finqa:revise\].*Feedback from the critic:\n\[scripted\] Step 2", RIGHT),
)


async def _run(
    flow_file: str, script: dict[str, Any], case: dict[str, Any]
) -> tuple[RunResult, Any]:
    flow = parse_flow(json.loads((FLOWS / flow_file).read_text("utf-8")))
    plan = compile_flow(flow, Registry.default())
    inputs = {k: case[k] for k in ("pre_text", "table", "post_text")}
    with scripted_server(script) as server:
        gateway = gateway_for(server)
        try:
            result = await Executor(ExecutorOptions(services=BlockServices({MODELS: gateway}))).run(
                plan, {**inputs, "question": case["qa"]["question"]}
            )
        finally:
            await gateway.aclose()
        return result, server.stats()


def _started(result: RunResult) -> dict[str, NodeStarted]:
    return {e.node: e for e in result.events if isinstance(e, NodeStarted)}


async def test_two_sequential_critics_then_the_revision() -> None:
    result, stats = await _run("two_critics.json", TWO_CRITICS, REVENUE)
    assert result.status == "succeeded", result.error
    # The order of the model calls: expert, extraction critic, calculation critic, revision.
    assert [entry["rule"] for entry in stats["log"]] == [
        "expert", "extraction", "calculation", "revise",
    ]  # fmt: skip
    started = _started(result)
    assert started["calculation"].inputs["extraction"] == EXTRACTION
    assert started["revise"].inputs["calculation"] == CALCULATION
    answer = result.outputs["answer"]
    assert answer["initial"]["value"] == 0.01613  # the expert's first, wrong, program
    assert answer["value"] == 0.01639  # the revision's
    assert result.outputs["extraction_critique"] == EXTRACTION
    item = Item(REVENUE["id"], _gold(REVENUE), answer)
    assert score_items("finqa", [item]).value == 1.0
    first = Item(REVENUE["id"], _gold(REVENUE), answer["initial"])
    assert score_items("finqa", [first]).value == 0.0


async def test_single_critic_then_the_revision() -> None:
    result, stats = await _run("critic.json", ONE_CRITIC, REVENUE)
    assert result.status == "succeeded", result.error
    assert [entry["rule"] for entry in stats["log"]] == ["expert", "critic", "revise"]
    assert result.outputs["critique"] == CRITIQUE
    assert result.outputs["answer"]["value"] == 0.01639
    assert (
        result.outputs["answer"]["initial"]["program"] == "subtract(5829, 5735), divide(#0, 5829)"
    )


async def test_single_agent_answers_once() -> None:
    result, stats = await _run("single_agent.json", ONE_CRITIC, REVENUE)
    assert result.status == "succeeded", result.error
    assert [entry["rule"] for entry in stats["log"]] == ["expert"]
    assert result.outputs["answer"]["value"] == 0.01613


async def test_the_flows_never_see_the_gold_answer() -> None:
    for name in ("single_agent.json", "critic.json", "two_critics.json"):
        document = json.loads((FLOWS / name).read_text("utf-8"))
        inputs = {n["config"]["name"] for n in document["nodes"] if n["block"].endswith("_input")}
        assert inputs == {"question", "pre_text", "table", "post_text"}, name
    # Even when the first answer is right, the critics run and the expert revises: nothing in
    # production mode can know it was right.
    script = _rules(
        ("expert", r"^\[finqa:expert\]", RIGHT),
        ("critic", r"^\[finqa:critic\]", CRITIQUE),
        ("revise", r"^\[finqa:revise\]", WRONG),
    )
    result, stats = await _run("critic.json", script, REVENUE)
    assert [entry["rule"] for entry in stats["log"]] == ["expert", "critic", "revise"]
    answer = result.outputs["answer"]
    assert score_items("finqa", [Item("x", _gold(REVENUE), answer)]).value == 0.0
    # Only the explicitly named upper-bound metric, at evaluation, keeps the first answer.
    assert score_items("finqa_gold_gated", [Item("x", _gold(REVENUE), answer)]).value == 1.0


async def test_an_answer_without_a_program_is_reported_not_guessed() -> None:
    script = _rules(("expert", r"^\[finqa:expert\]", "[scripted] About 1.6%."))
    result, _ = await _run("single_agent.json", script, REVENUE)
    assert result.status == "succeeded", result.error
    answer = result.outputs["answer"]
    assert answer["value"] is None
    assert "Program" in answer["error"]


def test_eval_score_reads_the_official_formats(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from dagwright.cli.eval import eval_app

    predictions = [
        # the official evaluator's input: program tokens ending in EOF
        {"id": case["id"], "predicted": tokenize(case["qa"]["program"])}
        for case in CASES[1:]
    ] + [{"id": CASES[0]["id"], "predicted": "subtract(5829, 5735), divide(#0, 5829)"}]
    file = tmp_path / "predictions.json"
    file.write_text(json.dumps(predictions), "utf-8")
    dataset = ROOT / "tests" / "fixtures" / "finqa" / "cases.json"
    args = ["score", "--metric", "finqa", "--dataset", str(dataset), "--predictions", str(file)]
    result = CliRunner().invoke(eval_app, [*args, "--json", "--per-example"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["value"] == 0.75
    assert [e["correct"] for e in report["examples"]] == [False, True, True, True]
    file.write_text("id\tprogram\n", "utf-8")  # not the official JSON
    broken = CliRunner().invoke(eval_app, args)
    assert broken.exit_code == 2
    assert "invalid_score_input" in broken.output
