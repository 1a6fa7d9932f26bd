"""The Executor's choice (AutoTQA section 4.3): which tool app the Engineer's request names,
and the inputs to call it with. The Executor is a published flow (flows/autotqa/executor.json,
the `autotqa_execute` block) that makes this choice and calls the app; this module is the
choice alone, so the block and the tests share it.

What a tool takes from the conversation is declared by its **role** (tqa/roles.py), stored
with the tool, never inferred from the app it runs: any app can play the text-to-SQL tool."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagwright.tqa.failures import ToolChoiceError
from dagwright.tqa.ports import ToolContext, ToolEntry, ToolRequest
from dagwright.tqa.roles import tool_role

# Context inputs the Engineer's request cannot override: the dataset's sources limit what the
# tools see, whatever the model asks for.
ENFORCED = frozenset({"sources"})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tool to call, its app and the inputs to call it with."""

    tool: str
    app: str
    inputs: dict[str, Any]


def choose_tool(
    request: ToolRequest, tools: Mapping[str, ToolEntry], context: ToolContext
) -> ToolChoice:
    """The tool the Engineer's `request` names among the registered `tools`, with its inputs:
    the Engineer's, completed from `context` as the tool's role declares. A text input
    stands for the role's first input (the question of text-to-SQL, the task of Python)."""
    entry = tools.get(request.tool)
    if entry is None:
        known = ", ".join(sorted(tools)) or "none registered"
        raise ToolChoiceError(f"no tool {request.tool!r}; the tools are: {known}")
    role = tool_role(entry.role)
    given = request.input
    inputs: dict[str, Any] = {role.text_input: given} if isinstance(given, str) else dict(given)
    available = context.model_dump()
    for key, field in role.fills.items():
        value = available.get(field)
        if key in ENFORCED and value is not None:
            inputs[key] = value
        elif value is not None:
            inputs.setdefault(key, value)
    return ToolChoice(request.tool, entry.app, inputs)
