"""A run's inputs checked against the types its flow declares, before the run is recorded:
a caller who sends a list where the flow takes text gets a 422 naming the input and the
type it takes, and no failed run is left behind for it.

A text input (declared `str`) also takes numbers and booleans, which its block turns into
their text; every other input takes exactly its declared type (an integer fits `float`).
Inputs the flow does not take, and required ones missing, are resolve_inputs' to report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagwright.errors import InputError
from dagwright.registry.types import checker_for, describe_value, strip_annotated, type_name
from dagwright.runtime.plan import CompiledFlow, FlowInput

_TEXT_TAKES = str | int | float | bool


class InputTypeError(InputError):
    """Inputs whose values do not fit their declared types, each named (HTTP 422)."""

    def __init__(self, problems: list[dict[str, str]]) -> None:
        super().__init__("; ".join(p["message"] for p in problems))
        self.problems = problems

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "problems": self.problems}


def _accepted(flow_input: FlowInput) -> Any:
    return _TEXT_TAKES if strip_annotated(flow_input.type) is str else flow_input.type


def check_input_types(plan: CompiledFlow, given: Mapping[str, Any]) -> None:
    """Raise InputTypeError listing every given input whose value does not fit its type."""
    problems: list[dict[str, str]] = []
    for name, value in given.items():
        flow_input = plan.inputs.get(name)
        if flow_input is None:
            continue
        check = checker_for(_accepted(flow_input))
        problem = check(value) if check is not None else None
        if problem is None:
            continue
        expected = type_name(flow_input.type)
        if problem.startswith("expected "):  # the value itself: say what it was
            message = f"input {name!r} expects {expected}, got {describe_value(value)}"
        else:  # an item or key deeper in it
            message = f"input {name!r} expects {expected}: {problem}"
        problems.append({"field": f"inputs.{name}", "message": message})
    if problems:
        raise InputTypeError(problems)
