"""FinQA execution accuracy (Chen et al. 2021; czyssrs/FinQA code/evaluate/evaluate.py): the
predicted program is executed over the example's table (dagwright.methods.finqa.program, a
port of the official `eval_program`) and is correct when the result, rounded to 5 decimals,
equals the gold `exe_ans` exactly. An invalid program is wrong.

Gold fields: `table` (rows of cells, the header first, as FinQA stores it) and `exe_ans` (a
number, or "yes"/"no"). A prediction is a program's text, or an object with `program`.

`finqa_gold_gated` is the paper's evaluation of critic agents (Fatemi and Hu 2024, section
4.1: "critic agents only reassessed questions incorrectly answered in the single-agent
setting"): an example counts as correct when the expert's first program is, and otherwise
when the revised one is. It looks at the gold answer to choose, so it is an UPPER BOUND of
what the flow can do, never what a deployed flow does: the prediction must carry both
programs (`initial.program` and `program`), and the flows never see the gold.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report
from dagwright.methods.finqa.program import execute

UPPER_BOUND_NOTE = (
    "finqa_gold_gated is an upper bound: it keeps the first answer when the gold says it is "
    "right and takes the revision only otherwise, as the paper evaluates critics"
)


def program_of(prediction: Any) -> str | list[str] | None:
    """A program's text, or the official evaluator's token list (ending "EOF")."""
    if isinstance(prediction, str):
        return prediction
    if isinstance(prediction, list) and all(isinstance(t, str) for t in prediction):
        return [str(t) for t in prediction]
    if isinstance(prediction, dict) and isinstance(prediction.get("program"), str):
        return str(prediction["program"])
    return None


def _gold(item: Item) -> tuple[list[list[str]], Any]:
    table, answer = item.gold.get("table"), item.gold.get("exe_ans")
    if not isinstance(table, list) or answer is None:
        raise ValueError(f"example {item.id}: the gold needs `table` and `exe_ans`")
    return table, answer


def _judge(
    program: str | list[str] | None, table: list[list[str]], answer: Any
) -> tuple[bool, Any, Any]:
    if program is None:
        return False, None, "no program"
    execution = execute(program, table)
    return execution.valid and execution.value == answer, execution.value, execution.error


def score(items: list[Item]) -> ScoreReport:
    examples = []
    for item in items:
        table, answer = _gold(item)
        program = program_of(item.prediction)
        ok, value, error = _judge(program, table, answer)
        detail = {"program": program, "executed": value, "error": error}
        examples.append(ExampleScore(item.id, float(ok), ok, detail))
    return accuracy_report("finqa", examples, [])


def score_gold_gated(items: list[Item]) -> ScoreReport:
    examples = []
    for item in items:
        table, answer = _gold(item)
        prediction = item.prediction if isinstance(item.prediction, dict) else {}
        first_ok, first_value, _ = _judge(program_of(prediction.get("initial")), table, answer)
        revised_ok, revised_value, _ = _judge(program_of(prediction), table, answer)
        ok = first_ok or revised_ok
        detail = {"initial_correct": first_ok, "initial": first_value, "revised": revised_value}
        examples.append(ExampleScore(item.id, float(ok), ok, detail))
    return accuracy_report("finqa_gold_gated", examples, [UPPER_BOUND_NOTE])


def score_files(dataset: Path, predictions: Path) -> ScoreReport:
    """`dagwright eval score --metric finqa`: the release's JSON (a list of {id, table, qa:
    {exe_ans}}) and the official predictions file (a list of {id, predicted}: the program's
    tokens, as the official evaluate.py reads them, or its text). Every dataset example is
    scored; one without a prediction is wrong."""
    try:
        gold = json.loads(dataset.read_text("utf-8"))
        predicted = json.loads(predictions.read_text("utf-8"))
        by_id = {str(p["id"]): p.get("predicted") for p in predicted}
        items = [
            Item(
                str(e["id"]),
                {"table": e["table"], "exe_ans": e["qa"]["exe_ans"]},
                by_id.get(str(e["id"])),
            )
            for e in gold
        ]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        from dagwright.evaluation.official import ScoreInputError

        raise ScoreInputError(f"not FinQA's format: {type(exc).__name__}: {exc}") from None
    return score(items)
