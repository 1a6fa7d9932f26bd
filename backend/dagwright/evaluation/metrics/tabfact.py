"""TabFact: binary accuracy of the predicted label (1 entailed, 0 refuted) against the gold
label, as in Chen et al. 2020 (the Table-Fact-Checking release computes the mean of
`prediction == label`). A prediction that is not a recognisable label is wrong."""

from __future__ import annotations

from typing import Any

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report

_TRUE = {"1", "true", "yes", "entailed", "entails", "supported", "support"}
_FALSE = {"0", "false", "no", "refuted", "refutes", "refute", "not entailed"}


def parse_label(value: Any) -> int | None:
    """1, 0 or None: booleans, 0/1 and the usual words (case and spaces ignored)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, list) and len(value) == 1:
        return parse_label(value[0])
    if isinstance(value, str):
        text = " ".join(value.lower().split()).rstrip(".")
        if text in _TRUE:
            return 1
        if text in _FALSE:
            return 0
    return None


def score(items: list[Item]) -> ScoreReport:
    examples = []
    for item in items:
        gold = parse_label(item.gold["label"])
        if gold is None:
            raise ValueError(f"example {item.id}: gold label {item.gold['label']!r} is not 0/1")
        predicted = parse_label(item.prediction)
        ok = predicted == gold
        examples.append(ExampleScore(item.id, float(ok), ok, {"predicted": predicted}))
    return accuracy_report("tabfact", examples, [])
