"""Exact match for numeric answers, with a stated tolerance.

Both sides are read as numbers after removing thousands separators (`,` between digits),
spaces, a leading currency sign (`$ € £ ¥`) and a trailing `%`; words are not numbers. Two
numbers match when |predicted - gold| <= ABS_TOL + REL_TOL * |gold| (1e-9 absolute plus 1e-4
relative: 0.01 %, so 3.14159 matches 3.1416 and 1,000,000 matches 1000000.0, while 0.5 and
0.51 differ). A percentage is compared by its number (`45%` matches `45`, not `0.45`). When the
gold answer is not a number the example is compared as normalised text (case and surrounding
spaces ignored)."""

from __future__ import annotations

import math
import re
from typing import Any

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report

ABS_TOL = 1e-9
REL_TOL = 1e-4
_SEPARATORS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def parse_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, list) and len(value) == 1:
        return parse_number(value[0])
    if not isinstance(value, str):
        return None
    text = _SEPARATORS.sub("", value.strip()).replace(" ", "")
    text = text.lstrip("$\u20ac\u00a3\u00a5").removesuffix("%")
    if not _NUMBER.match(text):
        return None
    return float(text)


def numbers_match(predicted: float, gold: float) -> bool:
    return abs(predicted - gold) <= ABS_TOL + REL_TOL * abs(gold)


def _text(value: Any) -> str:
    if isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    return " ".join(str(value).split()).lower()


def score(items: list[Item]) -> ScoreReport:
    examples = []
    for item in items:
        gold = parse_number(item.gold["answer"])
        if gold is not None:
            predicted = parse_number(item.prediction)
            ok = predicted is not None and numbers_match(predicted, gold)
        else:
            ok = item.prediction is not None and _text(item.prediction) == _text(
                item.gold["answer"]
            )
        examples.append(ExampleScore(item.id, float(ok), ok))
    return accuracy_report("numeric", examples, [])
