"""Data-Copilot's workflow plan (section 2.2, Appendix E.4), in the paper's own form:

    step1={"arg1": ["2024-01-01", "2024-01-31"], "function1": "cost_by_service",
           "output1": "result1", "description1": "...",
           "arg2": [...], "function2": "...", "output2": "result2"},
    step2={"arg1": ["result1", "bar", "service", "cost_usd"], "function1": "plot_chart", ...} ###

Each step is a set of calls without dependencies between them (they run in parallel); a
later step may name an earlier call's output ("result1") as an argument. Arguments are
positional, in the order of the interface's inputs, or an object by name. The paper's
examples quote with single quotes and write None: both are read.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from dagwright.errors import DagwrightError

# The chart "interface" every library has: a Vega-Lite spec made natively, not in the sandbox.
PLOT = "plot_chart"
PLOT_INPUTS = ("data", "mark", "x", "y", "color", "title")
# The paper's Loop(): loop(entities, function, arg...) calls `function(entity, arg...)` for each
# entity — a list, or an earlier result whose first column lists them — in parallel, and
# joins the tables, each row tagged with its `entity`.
LOOP = "loop"

_STEP = re.compile(r"step\s*(?P<n>\d+)\s*=\s*:?\s*(?P<body>\{)", re.I)
_REFERENCE = re.compile(r"^(?:result|output|input)\d+$")


class PlanError(DagwrightError):
    """The plan cannot be read, or names what it may not (an output not made yet)."""

    code = "plan_invalid"


class StepFailedError(DagwrightError):
    """A call of the plan failed (the message names the interface and the sandbox's error)."""

    code = "workflow_step_failed"


def _object(text: str, start: int) -> tuple[str, int]:
    """The balanced {...} starting at `start` (quotes respected)."""
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start : index + 1], index + 1
        index += 1
    raise PlanError("a step's {...} is not closed")


def _literal(body: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        try:
            value = ast.literal_eval(body)
        except (ValueError, SyntaxError) as exc:
            raise PlanError(f"a step is neither JSON nor a Python literal: {exc}") from None
    if not isinstance(value, dict):
        raise PlanError("a step is not an object")
    return value


def parse(text: str) -> list[list[dict[str, Any]]]:
    """Steps in order, each a list of calls {function, args, output, description}."""
    steps: list[tuple[int, list[dict[str, Any]]]] = []
    for found in _STEP.finditer(text):
        body, _ = _object(text, found.start("body"))
        steps.append((int(found.group("n")), _calls(_literal(body))))
    if not steps:
        raise PlanError("the plan has no step (step1={...})")
    steps.sort(key=lambda pair: pair[0])
    plan = [calls for _, calls in steps]
    _check_references(plan)
    return plan


def _calls(step: Mapping[str, Any]) -> list[dict[str, Any]]:
    suffixes = sorted(
        {key.removeprefix("function") for key in step if key.startswith("function")},
        key=lambda s: int(s) if s.isdigit() else 0,
    )
    calls = []
    for suffix in suffixes:
        function = step.get(f"function{suffix}")
        if not isinstance(function, str) or not function.strip():
            raise PlanError(f"function{suffix} is not an interface name")
        args = step.get(f"arg{suffix}", step.get(f"args{suffix}", []))
        if not isinstance(args, list | dict):
            raise PlanError(f"arg{suffix} of {function} is neither a list nor an object")
        calls.append(
            {
                "function": function.strip(),
                "args": args,
                "output": str(step.get(f"output{suffix}") or f"result_{function}"),
                "description": str(step.get(f"description{suffix}") or ""),
            }
        )
    if not calls:
        raise PlanError("a step calls no function")
    return calls


def _check_references(plan: Sequence[Sequence[Mapping[str, Any]]]) -> None:
    made: set[str] = set()
    for index, calls in enumerate(plan):
        for call in calls:
            values = call["args"].values() if isinstance(call["args"], dict) else call["args"]
            for value in values:
                if isinstance(value, str) and _REFERENCE.match(value) and value not in made:
                    raise PlanError(
                        f"step {index + 1} uses {value!r} before any earlier step made it"
                    )
        made.update(call["output"] for call in calls)


def named_args(
    call: Mapping[str, Any], inputs: Sequence[str], results: Mapping[str, Any]
) -> dict[str, Any]:
    """The call's arguments by input name, with earlier outputs put in for their names."""
    args = call["args"]
    if isinstance(args, list):
        if len(args) > len(inputs):
            raise PlanError(
                f"{call['function']} takes {len(inputs)} argument(s), the plan gives {len(args)}"
            )
        args = dict(zip(inputs, args, strict=False))
    return {
        name: results[value] if isinstance(value, str) and value in results else value
        for name, value in args.items()
    }


def entities_of(value: Any) -> list[Any]:
    """A loop's entities: a list of values, or a table's (records') first column."""
    if isinstance(value, list) and value and all(isinstance(row, dict) for row in value):
        return [next(iter(row.values()), None) for row in value]
    if isinstance(value, list):
        return value
    raise PlanError(f"a loop needs a list of entities or a table, not {value!r}")


def expand(calls: Sequence[Mapping[str, Any]], results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The step's calls with each `loop` replaced by one call per entity (they all run in
    parallel with the step's other calls); each carries `loop` (its output and entity) so
    their results can be joined."""
    expanded: list[dict[str, Any]] = []
    for call in calls:
        if call["function"] != LOOP:
            expanded.append(dict(call))
            continue
        args = call["args"]
        if not isinstance(args, list) or len(args) < 2 or not isinstance(args[1], str):
            raise PlanError("loop takes [entities, function, arg...]")
        source = results.get(args[0], args[0]) if isinstance(args[0], str) else args[0]
        for index, entity in enumerate(entities_of(source)):
            expanded.append(
                {
                    "function": args[1],
                    "args": [entity, *args[2:]],
                    "output": f"{call['output']}[{index}]",
                    "description": call["description"],
                    "loop": {"output": call["output"], "entity": entity},
                }
            )
    return expanded


def join_loops(outputs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Results by output name; a loop's tables joined under the loop's output, each row
    with its `entity` first."""
    results: dict[str, Any] = {}
    for found in outputs:
        loop = found.get("loop")
        if loop is None:
            results[found["output"]] = found["value"]
            continue
        rows = results.setdefault(loop["output"], [])
        rows.extend({"entity": loop["entity"], **row} for row in found["value"] or [])
    return results
