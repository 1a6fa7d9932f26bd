"""FinQA's program language and its execution, as the official evaluator runs it
(czyssrs/FinQA, code/evaluate/evaluate.py: `program_tokenization`, `str_to_num`,
`process_row`, `eval_program`).

A program is steps separated by ", ": `subtract(5829, 5735), divide(#0, 5735)`. Operations:
add, subtract, multiply, divide, exp, greater (yes/no) on two arguments — numbers,
`const_100`-style constants (`const_m1` is -1), `#n` (step n's result) or percentages (`5%`
is 0.05) — and table_max/min/sum/average on a table row named by its first cell (second
argument `none`). The result is rounded to 5 decimals; execution accuracy compares it with
the gold `exe_ans` for equality (no other tolerance: that rounding is the official rule).

The official code's quirks are kept on purpose, so scores match its: a table operation on a
`#n` argument reuses the row of the previous table step (or fails when there is none), a
step with a nested parenthesis is invalid, and any exception makes the program invalid.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

OPERATIONS = (
    "add",
    "subtract",
    "multiply",
    "divide",
    "exp",
    "greater",
    "table_max",
    "table_min",
    "table_sum",
    "table_average",
)
_BINARY = frozenset(OPERATIONS[:6])
NOT_A_NUMBER = "n/a"


@dataclass(frozen=True, slots=True)
class Execution:
    """`value` is a float (rounded to 5 decimals), "yes"/"no" for `greater`, or None when
    the program is invalid (`error` says why)."""

    value: float | str | None
    error: str | None = None

    @property
    def valid(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "error": self.error}


def tokenize(program: str) -> list[str]:
    """The official `program_tokenization`: operation tokens keep their "(", ")" is its
    own token, and the list ends with "EOF"."""
    tokens: list[str] = []
    for piece in program.split(", "):
        current = ""
        for char in piece:
            if char == ")" and current:
                tokens.append(current)
                current = ""
            current += char
            if char in "()":
                tokens.append(current)
                current = ""
        if current:
            tokens.append(current)
    tokens.append("EOF")
    return tokens


def to_number(text: str) -> float | str:
    """The official `str_to_num`: commas dropped; `5%` is 0.05; `const_m1` is -1."""
    text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        pass
    if "%" in text:
        try:
            return float(text.replace("%", "")) / 100.0
        except ValueError:
            return NOT_A_NUMBER
    if "const" in text:
        text = text.replace("const_", "")
        return float("-1" if text == "m1" else text)
    return NOT_A_NUMBER


def _row_numbers(cells: list[str]) -> list[float] | None:
    """The official `process_row`: "$" and anything from "(" on dropped; None when a cell
    is not a number."""
    numbers: list[float] = []
    for cell in cells:
        value = to_number(cell.replace("$", "").strip().split("(")[0].strip())
        if isinstance(value, str):
            return None
        numbers.append(value)
    return numbers


def execute(program: str | list[str], table: list[list[str]]) -> Execution:
    """Runs a program (text, or tokens ending in "EOF") over a table (rows of cells, the
    first cell naming the row)."""
    tokens = tokenize(program) if isinstance(program, str) else list(program)
    try:
        return _execute(tokens[:-1], table)
    except Exception as exc:  # the official evaluator counts any failure as invalid
        return Execution(None, f"{type(exc).__name__}: {exc}")


def _execute(tokens: list[str], table: list[list[str]]) -> Execution:  # noqa: C901, PLR0912
    for index, token in enumerate(tokens):
        if index % 4 == 0 and token.strip("(") not in OPERATIONS:
            return Execution(None, f"token {index} ({token!r}) is not an operation")
        if (index + 1) % 4 == 0 and token != ")":
            return Execution(None, f"token {index} ({token!r}) should close a step")
    results: dict[int, float | str] = {}
    result: float | str = NOT_A_NUMBER
    row: list[float] | None = None
    defined_row = False
    for index, step in enumerate("|".join(tokens).split(")")[:-1]):
        step = step.strip()
        if len(step.split("(")) > 2:
            return Execution(None, f"step {index} nests parentheses")
        operation = step.split("(")[0].strip("|").strip()
        arguments = step.split("(")[1].strip("|").strip()
        first = arguments.split("|")[0].strip()
        second = arguments.split("|")[1].strip()
        if operation in _BINARY:
            a = results[int(first.replace("#", ""))] if "#" in first else to_number(first)
            if a == NOT_A_NUMBER:
                return Execution(None, f"step {index}: {first!r} is not a number")
            b = results[int(second.replace("#", ""))] if "#" in second else to_number(second)
            if b == NOT_A_NUMBER:
                return Execution(None, f"step {index}: {second!r} is not a number")
            result = _binary(operation, a, b)
            results[index] = result
        elif "table" in operation:
            if "#" not in first:
                named = {cells[0]: cells[1:] for cells in table}
                if first not in named:
                    return Execution(None, f"step {index}: no table row named {first!r}")
                row = _row_numbers(named[first])
                defined_row = True
            elif not defined_row:
                # The official code reads a row variable no step has set: a NameError.
                return Execution(None, f"step {index}: a table operation on {first!r}")
            if row is None:
                return Execution(None, f"step {index}: row {first!r} is not all numbers")
            result = _aggregate(operation, row)
            results[index] = result
    if result not in ("yes", "no", NOT_A_NUMBER):
        assert isinstance(result, float)
        return Execution(round(result, 5))
    if result == NOT_A_NUMBER:
        return Execution(None, "the program has no step")
    return Execution(result)


def _binary(operation: str, a: Any, b: Any) -> float | str:
    if operation == "add":
        return float(a + b)
    if operation == "subtract":
        return float(a - b)
    if operation == "multiply":
        return float(a * b)
    if operation == "divide":
        return float(a / b)
    if operation == "exp":
        return float(a**b)
    return "yes" if a > b else "no"


def _aggregate(operation: str, row: list[float]) -> float:
    if operation == "table_max":
        return max(row)
    if operation == "table_min":
        return min(row)
    if operation == "table_sum":
        return float(sum(row))
    return sum(row) / len(row)


_PROGRAM_LINE = re.compile(r"(?im)^\s*\**\s*program\s*\**\s*:\s*\**\s*(?P<program>.+?)\s*$")
_STEP = re.compile(r"\b(?:" + "|".join(OPERATIONS) + r")\(")


def extract_program(answer: str) -> str | None:
    """The program in an agent's answer: the last line starting "Program:" (markdown bold and
    backticks allowed). None when there is none, so a missing program is visible."""
    found = [m.group("program").strip().strip("`").strip() for m in _PROGRAM_LINE.finditer(answer)]
    found = [p for p in found if _STEP.search(p)]
    return found[-1] if found else None
