"""Condition blocks: each sends its input value, unchanged, down one of its named branches.
Nodes wired to the branches not taken are skipped."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dagwright.registry import Route, block
from dagwright.safe_regex import IGNORECASE, INLINE_WORK, UserRegex, compile_user_regex

# -- compare -------------------------------------------------------------------------------

CompareOp = Literal[
    "==",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "contains",
    "starts_with",
    "ends_with",
    "regex",
    "is_empty",
    "is_not_empty",
]

_ORDERING: dict[str, Callable[[Any, Any], bool]] = {
    "<": lambda a, b: bool(a < b),
    "<=": lambda a, b: bool(a <= b),
    ">": lambda a, b: bool(a > b),
    ">=": lambda a, b: bool(a >= b),
}
# Operators that mean nothing without a right-hand side (== and != may compare with None).
_NEEDS_OPERAND = frozenset({*_ORDERING, "contains", "starts_with", "ends_with", "regex"})

_NUMBER_TEXT = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class CompareConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    op: CompareOp = Field("==", description="How the value is compared with the operand.")
    operand: Any = Field(
        None,
        description="The right-hand side of the comparison; an edge into the operand port "
        "overrides it. A regular expression for op 'regex'; unused by is_empty/is_not_empty.",
    )
    case_sensitive: bool = Field(
        True, description="Off, texts are compared ignoring upper and lower case."
    )

    @model_validator(mode="after")
    def _regex_compiles(self) -> CompareConfig:
        if self.op == "regex" and self.operand is not None:
            if not isinstance(self.operand, str):
                raise ValueError(f"operand of op 'regex' must be a text, not {_kind(self.operand)}")
            _compile(self.operand, self.case_sensitive)
        return self


def _kind(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _number_of(text: str) -> int | float | None:
    text = text.strip()
    if not _NUMBER_TEXT.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def _coerce(a: Any, b: Any) -> tuple[Any, Any]:
    """A numeric text compared with a number is read as a number."""
    if _is_number(a) and isinstance(b, str):
        number = _number_of(b)
        return (a, b) if number is None else (a, number)
    if isinstance(a, str) and _is_number(b):
        number = _number_of(a)
        return (a, b) if number is None else (number, b)
    return a, b


def _fold(value: Any) -> Any:
    return value.casefold() if isinstance(value, str) else value


def _equal(a: Any, b: Any) -> bool:
    a, b = _coerce(a, b)
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, bool) != isinstance(b, bool):
        return False  # true is not 1
    return bool(a == b)


def _order(op: str, a: Any, b: Any) -> bool:
    a, b = _coerce(a, b)
    if (_is_number(a) and _is_number(b)) or (isinstance(a, str) and isinstance(b, str)):
        return _ORDERING[op](a, b)
    raise ValueError(
        f"cannot compare {_kind(a)} {op} {_kind(b)}: '{op}' needs two numbers or two texts"
    )


def _compile(pattern: str, case_sensitive: bool) -> UserRegex:
    """A user's pattern, run on RE2 (linear time; compiled patterns and failures are cached).
    A RegexError, a ValueError naming the operand, when it cannot be."""
    flags = 0 if case_sensitive else IGNORECASE
    return compile_user_regex(pattern, flags, label=f"operand {pattern!r}")


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return not value.strip()
    if isinstance(value, list | dict):
        return not value
    return False


def _contains(value: Any, operand: Any, case_sensitive: bool) -> bool:
    if isinstance(value, str):
        if not isinstance(operand, str):
            raise ValueError(f"'contains' on a text needs a text operand, not {_kind(operand)}")
        if case_sensitive:
            return operand in value
        return operand.casefold() in value.casefold()
    if isinstance(value, list):
        if case_sensitive:
            return any(_equal(item, operand) for item in value)
        return any(_equal(_fold(item), _fold(operand)) for item in value)
    if isinstance(value, dict):
        if not isinstance(operand, str):
            raise ValueError(
                f"'contains' on an object looks for a key: it needs a text operand, "
                f"not {_kind(operand)}"
            )
        if case_sensitive:
            return operand in value
        return any(_fold(key) == operand.casefold() for key in value)
    raise ValueError(f"'contains' needs a text, list or object value, not {_kind(value)}")


def _affix(op: str, value: Any, operand: Any, case_sensitive: bool) -> bool:
    if not isinstance(value, str) or not isinstance(operand, str):
        raise ValueError(
            f"'{op}' needs a text value and a text operand, not {_kind(value)} and {_kind(operand)}"
        )
    text, piece = (value, operand) if case_sensitive else (value.casefold(), operand.casefold())
    return text.startswith(piece) if op == "starts_with" else text.endswith(piece)


def _test(op: CompareOp, value: Any, operand: Any, case_sensitive: bool) -> bool:
    if op == "is_empty":
        return _is_empty(value)
    if op == "is_not_empty":
        return not _is_empty(value)
    if op in _NEEDS_OPERAND and operand is None:
        raise ValueError(
            f"op '{op}' needs an operand: set the config field 'operand' or wire the 'operand' port"
        )
    if op == "regex":
        if not isinstance(value, str) or not isinstance(operand, str):
            raise ValueError(
                f"'regex' needs a text value and a text pattern, not {_kind(value)} and "
                f"{_kind(operand)}"
            )
        # compare runs on the event loop: the search is bounded for it (INLINE_WORK).
        return _compile(operand, case_sensitive).contains_match(value, work_limit=INLINE_WORK)
    if op == "contains":
        return _contains(value, operand, case_sensitive)
    if op in ("starts_with", "ends_with"):
        return _affix(op, value, operand, case_sensitive)
    if not case_sensitive:
        value, operand = _fold(value), _fold(operand)
    if op == "==":
        return _equal(value, operand)
    if op == "!=":
        return not _equal(value, operand)
    return _order(op, value, operand)


@block(
    "compare",
    category="condition",
    description="Send the value down 'true' or 'false' by comparing it with an operand.",
    example="op '>', operand 10: 42 -> branch true (value 42)",
    branches=("true", "false"),
    inline=True,
)
def compare(
    config: CompareConfig,
    value: Annotated[Any, "The value tested; it goes down the branch taken unchanged."],
    operand: Annotated[Any, "The right-hand side; when wired, replaces the config's."] = None,
) -> Route[Any]:
    """Compares the value with the operand (the config's, or the value arriving at the
    `operand` port when that is wired) and sends the value, unchanged, down the branch
    `true` or `false`.

    - `==`, `!=`: equality; a number and a numeric text compare as numbers (5 == "5.0"), but
      true/false never equal 1/0. Objects and lists compare by content.
    - `<`, `<=`, `>`, `>=`: between two numbers (a numeric text counts as a number when the
      other side is one) or two texts (alphabetical); anything else is an error.
    - `contains`: a text contains a piece of text, a list contains an item, an object has a
      key.
    - `starts_with`, `ends_with`: texts only.
    - `regex`: the operand is a regular expression searched for anywhere in the text. It is
      written in Python's syntax but runs on RE2, in time linear in the text: backreferences,
      lookahead and lookbehind are refused (code `regex_unsupported`), and `\\b` sees only
      ASCII letters, digits and `_` as word characters. As this block runs on the server's
      event loop, the text may be at most 5,000,000 characters divided by the pattern's
      positions (its atoms, counted repeats expanded: `a.{30}c` has 32); past that the node
      fails with `regex_limit` (regex_extract, run in a worker thread, allows 20 times more).
    - `is_empty`, `is_not_empty`: None, an empty or blank text, an empty list or object
      are empty; the operand is not used.

    With `case_sensitive` off, texts compare ignoring case (also list items and object keys)."""
    right = operand if operand is not None else config.operand
    passed = _test(config.op, value, right, config.case_sensitive)
    return Route("true" if passed else "false", value)


# -- switch --------------------------------------------------------------------------------

DEFAULT_BRANCH = "default"


class SwitchConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cases: list[str] = Field(
        min_length=1,
        description="The texts to match; each is a branch. Any other value goes to 'default'.",
    )
    case_sensitive: bool = Field(
        True, description="Off, a value matches a case ignoring upper and lower case."
    )

    @model_validator(mode="after")
    def _valid_cases(self) -> SwitchConfig:
        seen: dict[str, str] = {}
        for case in self.cases:
            if not case.strip():
                raise ValueError("cases: a case cannot be empty")
            if case != case.strip():
                raise ValueError(f"cases: {case!r} has whitespace around it, which never matches")
            if case == DEFAULT_BRANCH:
                raise ValueError(
                    f"cases: {DEFAULT_BRANCH!r} is the branch for values matching no case; "
                    "it cannot be a case"
                )
            key = case if self.case_sensitive else case.casefold()
            if key in seen:
                if seen[key] == case:
                    raise ValueError(f"cases: {case!r} is given twice")
                raise ValueError(f"cases: {case!r} matches the same values as {seen[key]!r}")
            seen[key] = case
        return self


def _switch_branches(config: SwitchConfig) -> list[str]:
    return [*config.cases, DEFAULT_BRANCH]


def _text_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 3.0 (a number input) matches the case "3"
    return str(value).strip()


@block(
    "switch",
    category="condition",
    description="Send the value down the branch of the case its text equals, else 'default'.",
    example="cases [billing, support]: 'support' -> branch support",
    branches=_switch_branches,
    inline=True,
)
def switch(
    config: SwitchConfig,
    value: Annotated[Any, "The value sent down the branch taken, unchanged."],
    key: Annotated[Any, "When wired (and not null), selects the branch instead of value."] = None,
) -> Route[Any]:
    """Sends the value, unchanged, down the branch named by the case its text equals, or
    down `default` when it equals none. Wire `key` to choose the branch by one value (a
    language code, say) while sending another (the text to translate). The text of a value
    is the text itself without surrounding whitespace, true/false for booleans, null for
    None, and the number as written otherwise (3.0 is "3"). With `case_sensitive` off, case
    is ignored."""
    text = _text_of(value if key is None else key)
    if not config.case_sensitive:
        text = text.casefold()
    for case in config.cases:
        if (case if config.case_sensitive else case.casefold()) == text:
            return Route(case, value)
    return Route(DEFAULT_BRANCH, value)
