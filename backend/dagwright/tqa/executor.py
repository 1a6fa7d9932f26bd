"""The Executor's choice (AutoTQA section 4.3): which tool app the Engineer's request names,
and the inputs to call it with. The Executor is a published flow (flows/autotqa/executor.json,
the `autotqa_execute` block) that makes this choice and calls the app; this module is the
choice alone, so the block and the tests share it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagwright.errors import DagwrightError

# The inputs the built-in tools take from the conversation when the Engineer leaves them out
# (input name -> the conversation's context key). Other tools get the Engineer's input only.
CONTEXT_INPUTS: dict[str, dict[str, str]] = {
    "autotqa-text-to-sql": {
        "question": "question",
        "hints": "hints",
        "feedback": "feedback",
        "examples": "examples",
        "sources": "sources",
    },
    "autotqa-python": {
        "task": "question",
        "hints": "hints",
        "feedback": "feedback",
        "examples": "examples",
        "sources": "sources",
    },
    # The methods' apps (dagwright methods install), so either can be the text-to-SQL or
    # table tool: the Engineer names the database or table, the question comes along.
    **{
        app: {"question": "question"}
        for app in (
            "mac-sql-spider",
            "mac-sql-bird",
            "chain-of-table-wikitq",
            "chain-of-table-tabfact",
            "chain-of-table-fetaqa",
        )
    },
}


# Context inputs the Engineer's request cannot override: the dataset's sources limit what the
# tools see, whatever the model asks for.
ENFORCED = frozenset({"sources"})


class ToolChoiceError(DagwrightError):
    code = "tool_choice"


def choose_tool(
    request: Mapping[str, Any], tools: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[str, str, dict[str, Any]]:
    """(tool name, app, inputs) for the Engineer's `request` ({tool, input}); `tools` maps
    each registered name to {app}. A text input stands for the tool's first context input
    (the question of text-to-SQL, the task of the Python tool)."""
    name = str(request.get("tool") or "")
    entry = tools.get(name)
    if not isinstance(entry, Mapping) or not entry.get("app"):
        known = ", ".join(sorted(tools)) or "none registered"
        raise ToolChoiceError(f"no tool {name!r}; the tools are: {known}")
    app = str(entry["app"])
    fills = CONTEXT_INPUTS.get(app, {})
    given = request.get("input")
    if isinstance(given, str):
        given = {next(iter(fills), "question"): given}
    if given is not None and not isinstance(given, Mapping):
        raise ToolChoiceError(f"the input of tool {name!r} must be a JSON object")
    inputs = dict(given or {})
    for key, source in fills.items():
        value = context.get(source)
        if key in ENFORCED and value is not None:
            inputs[key] = value
        elif value is not None:
            inputs.setdefault(key, value)
    return name, app, inputs
