"""Input and output blocks: the flow's interface. Each input block is one named flow input,
each output block one named flow output; a run takes and returns values by those names."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagwright.registry import block

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"


class _InputConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="The input's name in a run's inputs.")
    description: str = Field("", description="Shown next to the input in run forms.")
    required: bool = Field(True, description="Without a default, a run must give this input.")


class TextInputConfig(_InputConfig):
    default: str | None = None


class NumberInputConfig(_InputConfig):
    default: float | None = None


class BooleanInputConfig(_InputConfig):
    default: bool | None = None


class JsonInputConfig(_InputConfig):
    default: Any = None


class ListInputConfig(_InputConfig):
    default: list[Any] | None = None


class OutputConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAME_PATTERN, description="The output's name in a run's result.")
    description: str = ""


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None


@block(
    "text_input",
    category="input",
    role="flow_input",
    inline=True,
    description="A text the run is given.",
    example='question = "Who is Tom?"',
)
def text_input(config: TextInputConfig, value: str | int | float | bool) -> str:
    """A flow input holding text. Numbers and booleans given to it become their text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@block(
    "number_input",
    category="input",
    role="flow_input",
    inline=True,
    description="A number the run is given.",
    example='limit = 10 (or "10" from the CLI)',
)
def number_input(config: NumberInputConfig, value: float | int | str) -> float:
    """A flow input holding a number. Text such as "3.5" is parsed."""
    if isinstance(value, bool):
        raise ValueError(f"input {config.name!r} takes a number, not a boolean")
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ValueError(f"input {config.name!r} takes a number, not {value!r}") from None
    return float(value)


_TRUE = {"true", "yes", "1", "on"}
_FALSE = {"false", "no", "0", "off"}


@block(
    "boolean_input",
    category="input",
    role="flow_input",
    inline=True,
    description="A yes/no value the run is given.",
    example='verbose = true (or "yes")',
)
def boolean_input(config: BooleanInputConfig, value: bool | str | int) -> bool:
    """A flow input holding true or false; the text true/false, yes/no, on/off, 1/0 is read."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"input {config.name!r} takes true or false, not {value!r}")


@block(
    "json_input",
    category="input",
    role="flow_input",
    inline=True,
    description="Any JSON value the run is given.",
    example='filters = {"year": 2023}',
)
def json_input(config: JsonInputConfig, value: Any) -> Any:
    """A flow input holding any JSON value. Given as text (from the CLI), it is parsed."""
    if isinstance(value, str):
        return _parse_json(value, f"input {config.name!r}")
    return value


@block(
    "list_input",
    category="input",
    role="flow_input",
    inline=True,
    description="A list the run is given.",
    example='names = ["Tom", "Ann"]',
)
def list_input(config: ListInputConfig, value: Any) -> list[Any]:
    """A flow input holding a list. Given as text, a JSON array is parsed, and anything else
    is split on commas."""
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("["):
            value = _parse_json(stripped, f"input {config.name!r}")
        else:
            return [part.strip() for part in stripped.split(",")] if stripped else []
    if not isinstance(value, list):
        raise ValueError(f"input {config.name!r} takes a list, not {type(value).__name__}")
    return value


@block(
    "output",
    category="input",
    role="flow_output",
    inline=True,
    description="A value the run returns under a name.",
    example="answer <- llm.output",
)
def output(config: OutputConfig, value: Any) -> Any:
    """A flow output: the value wired into it is returned by the run under its name. Wire
    several edges into it to return whichever branch ran."""
    return value
