"""WikiTableQuestions denotation accuracy: a Python 3 port of the official evaluator
(ppasupat/WikiTableQuestions, evaluator.py 1.0.2), behaviour for behaviour.

The official script is Python 2; where Python 3 differs, the port keeps Python 2's behaviour:
- `\\d` in its citation pattern matched ASCII digits only (no re.UNICODE there): `[0-9]`;
- `int()` and `float()` did not accept `_` between digits: such text is not a number;
- `unicode(float)` printed 12 significant digits (`_py2_float_str`);
- files were read with `codecs.open`, whose lines break at every Unicode line boundary
  (`str.splitlines`), not only at `\\n`.

A target item matches a predicted item when their normalised strings are equal, or both are
numbers within 1e-6, or both are dates with equal (year, month, day). A prediction is correct
when it has as many distinct values as the target and every target value matches one of them.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from math import isinf, isnan
from typing import Any

from dagwright.evaluation.metrics.base import ExampleScore, Item, ScoreReport, accuracy_report

_QUOTES = re.compile("[\u2018\u2019\u00b4`]")
_DOUBLE_QUOTES = re.compile("[\u201c\u201d]")
_DASHES = re.compile("[\u2010\u2011\u2012\u2013\u2014\u2212]")
_CITATIONS = re.compile("((?<!^)\\[[^\\]]*\\]|\\[[0-9]+\\]|[\u2022\u2666\u2020\u2021*#+])*$")
_PARENTHESES = re.compile("(?<!^)( \\([^)]*\\))*$")
_OUTER_QUOTES = re.compile('^"([^"]*)"$')
_SPACES = re.compile("\\s+")


def normalize(x: str) -> str:
    """The official string normalisation (diacritics, quotes, dashes, citations, trailing
    parentheses, outer quotes, final period, case and whitespace)."""
    x = "".join(c for c in unicodedata.normalize("NFKD", x) if unicodedata.category(c) != "Mn")
    x = _QUOTES.sub("'", x)
    x = _DOUBLE_QUOTES.sub('"', x)
    x = _DASHES.sub("-", x)
    while True:
        old_x = x
        x = _CITATIONS.sub("", x.strip())
        x = _PARENTHESES.sub("", x.strip())
        x = _OUTER_QUOTES.sub(r"\1", x.strip())
        if x == old_x:
            break
    if x and x[-1] == ".":
        x = x[:-1]
    return _SPACES.sub(" ", x).lower().strip()


def _py2_float_str(amount: float) -> str:
    """What Python 2's `unicode(amount)` printed: 12 significant digits, `.0` kept."""
    text = f"{amount:.12g}"
    if not any(c in text for c in ".eEn"):  # "n": inf and nan
        text += ".0"
    return text


class Value:
    """A denotation item; `normalized` is the normalised string it is compared by."""

    normalized: str

    def match(self, other: Value) -> bool:
        raise NotImplementedError


class StringValue(Value):
    def __init__(self, content: str) -> None:
        self.normalized = normalize(content)
        self._hash = hash(self.normalized)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StringValue) and self.normalized == other.normalized

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "S" + str([self.normalized])

    def match(self, other: Value) -> bool:
        return self.normalized == other.normalized


class NumberValue(Value):
    def __init__(self, amount: int | float, original_string: str | None = None) -> None:
        self.amount: int | float = (
            int(amount) if abs(amount - round(amount)) < 1e-6 else float(amount)
        )
        if not original_string:
            self.normalized = (
                str(self.amount) if isinstance(self.amount, int) else _py2_float_str(self.amount)
            )
        else:
            self.normalized = normalize(original_string)
        self._hash = hash(self.amount)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NumberValue) and self.amount == other.amount

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"N({self.amount:f})" + str([self.normalized])

    def match(self, other: Value) -> bool:
        if self.normalized == other.normalized:
            return True
        if isinstance(other, NumberValue):
            return abs(self.amount - other.amount) < 1e-6
        return False

    @staticmethod
    def parse(text: str) -> int | float | None:
        """The number `text` spells (int first, then a finite float), else None."""
        if "_" in text:  # Python 3 reads "1_000" as 1000; the official Python 2 did not
            return None
        try:
            return int(text)
        except ValueError:
            pass
        try:
            amount = float(text)
        except ValueError:
            return None
        if isnan(amount) or isinf(amount):
            return None
        return amount


class DateValue(Value):
    def __init__(self, year: int, month: int, day: int, original_string: str | None = None):
        """A date; an unknown field is -1."""
        self.ymd = (year, month, day)
        if not original_string:
            # The official code compares `day` with the string "-1", so an unknown day prints
            # as -1, not xx; kept, since it decides matches against such a string.
            self.normalized = "{}-{}-{}".format(
                year if year != -1 else "xx", month if month != -1 else "xx", day
            )
        else:
            self.normalized = normalize(original_string)
        self._hash = hash(self.ymd)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DateValue) and self.ymd == other.ymd

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return "D({},{},{})".format(*self.ymd) + str([self.normalized])

    def match(self, other: Value) -> bool:
        if self.normalized == other.normalized:
            return True
        if isinstance(other, DateValue):
            return self.ymd == other.ymd
        return False

    @staticmethod
    def parse(text: str) -> tuple[int, int, int] | None:
        """(year, month, day) of `yyyy-mm-dd` where any field may be `xx`, else None."""
        ymd = text.lower().split("-")
        if len(ymd) != 3 or "_" in text:
            return None
        try:
            year = -1 if ymd[0] in ("xx", "xxxx") else int(ymd[0])
            month = -1 if ymd[1] == "xx" else int(ymd[1])
            day = -1 if ymd[2] == "xx" else int(ymd[2])
        except ValueError:
            return None
        if year == month == day == -1:
            return None
        if not (month == -1 or 1 <= month <= 12) or not (day == -1 or 1 <= day <= 31):
            return None
        return (year, month, day)


def to_value(original_string: str, corenlp_value: str | None = None) -> Value:
    """A string as a number, a date (a year alone is a number) or a string; `corenlp_value`
    (the dataset's `targetCanon`) decides the type when given and non-empty."""
    if not corenlp_value:
        corenlp_value = original_string
    amount = NumberValue.parse(corenlp_value)
    if amount is not None:
        return NumberValue(amount, original_string)
    ymd = DateValue.parse(corenlp_value)
    if ymd is not None:
        if ymd[1] == ymd[2] == -1:
            return NumberValue(ymd[0], original_string)
        return DateValue(ymd[0], ymd[1], ymd[2], original_string)
    return StringValue(original_string)


def to_value_list(
    original_strings: Sequence[str], corenlp_values: Sequence[str] | None = None
) -> list[Value]:
    """The distinct values of a list (equal values collapse: the first one is kept)."""
    if corenlp_values is not None:
        if len(original_strings) != len(corenlp_values):
            raise ValueError("targetValue and targetCanon have different numbers of items")
        pairs: Iterable[Value] = (
            to_value(x, y) for x, y in zip(original_strings, corenlp_values, strict=True)
        )
    else:
        pairs = (to_value(x) for x in original_strings)
    # A dict keeps the first of equal keys like the official set, in a stable order.
    return list(dict.fromkeys(pairs))


def check_denotation(target_values: Sequence[Value], predicted_values: Sequence[Value]) -> bool:
    """True when the prediction has as many values and every target value matches one."""
    if len(target_values) != len(predicted_values):
        return False
    return all(any(t.match(p) for p in predicted_values) for t in target_values)


def tsv_unescape(x: str) -> str:
    """The release's TSV escapes: `\\n` newline, `\\p` vertical bar, `\\\\` backslash."""
    return x.replace(r"\n", "\n").replace(r"\p", "|").replace("\\\\", "\\")


def tsv_unescape_list(x: str) -> list[str]:
    """A `|`-separated list of escaped items."""
    return [tsv_unescape(y) for y in x.split("|")]


def official_lines(text: str) -> list[str]:
    """The lines the official script iterates over (codecs' readline: every Unicode line
    boundary ends a line), each without its final `\\n` (a `\\r` stays, as it did)."""
    return [line.rstrip("\n") for line in text.splitlines(keepends=True)]


def targets_from_row(row: dict[str, str]) -> list[Value]:
    """The target values of a dataset row: `targetValue`, typed by `targetCanon` if present
    (the tagged release), else by the raw strings themselves."""
    originals = tsv_unescape_list(row["targetValue"])
    canon = row.get("targetCanon")
    return to_value_list(originals, tsv_unescape_list(canon) if canon is not None else None)


def is_correct(targets: Sequence[Value], predicted_items: Sequence[str]) -> bool:
    """One example: the predicted items (raw strings) against the target values."""
    return check_denotation(targets, to_value_list(list(predicted_items)))


def predicted_items(prediction: Any) -> list[str]:
    """A system's answer as denotation items: a list gives its items, any other value one."""
    if prediction is None:
        return []
    if isinstance(prediction, list | tuple):
        return [str(p) for p in prediction]
    return [str(prediction)]


def score(items: list[Item]) -> ScoreReport:
    """Every item scored (a missing prediction is wrong); gold fields are a dataset row's."""
    examples = []
    for item in items:
        ok = is_correct(targets_from_row(item.gold), predicted_items(item.prediction))
        examples.append(ExampleScore(item.id, float(ok), ok))
    return accuracy_report("wikitq", examples, [])
