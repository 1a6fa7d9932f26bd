"""FinQA reflection (Fatemi and Hu 2024, "Enhancing Financial Question Answering with a
Multi-Agent Reflection Framework") as blocks: `finqa_context` lays out a report's text and
table for the agents' prompts, and `finqa_execute` reads the program out of the expert's
answer and runs it (FinQA's operation language, dagwright.methods.finqa.program). The
agents themselves — expert, critic(s), revision — are `chat` nodes in the flows
(flows/methods/finqa_reflection/), so each prompt and critique is in the run's trace.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from dagwright.registry import NodeContext, block


class _NoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return "\n".join(str(line) for line in value if str(line).strip())
    return str(value)


def _rows(table: Any) -> list[list[str]]:
    if not isinstance(table, list) or not all(isinstance(row, list) for row in table):
        raise ValueError("`table` must be a list of rows, each a list of cells")
    return [[str(cell) for cell in row] for row in table]


@block(
    "finqa_context",
    category="tool",
    description="FinQA: a financial report's text before the table, the table and the text "
    "after it, laid out for a prompt.",
    example="pre_text ['...'], table [['', '2019', '2018'], ['revenue', '$ 5829', '$ 5735']]",
    inline=True,
)
def finqa_context(
    config: _NoConfig, table: Any, pre_text: Any = None, post_text: Any = None
) -> str:
    """The context the paper gives each agent: text (T), then the table (D) one row a line
    with cells separated by " | " (the first cell names the row, as FinQA's table operations
    expect), then the text after the table. Text may be one string or a list of sentences."""
    lines = [" | ".join(row) for row in _rows(table)]
    parts = [_text(pre_text), "Table:\n" + "\n".join(lines), _text(post_text)]
    return "\n\n".join(part for part in parts if part)


@block(
    "finqa_execute",
    category="tool",
    description="FinQA: read the program in an agent's answer and execute it on the table.",
    example="'... Program: subtract(5829, 5735), divide(#0, 5735)' -> value 0.01639",
    inline=True,
)
def finqa_execute(
    config: _NoConfig, ctx: NodeContext, response: str, table: Any, initial: Any = None
) -> dict[str, Any]:
    """Returns {program, value, error, response, initial}. Takes the last "Program:" line of
    the answer and runs it as the official FinQA evaluator does (the result rounded to 5
    decimals; "yes"/"no" for `greater`). An answer without a program, or a program that does
    not run, gives `value` None and the reason in `error`: the flow still answers, so the
    failure is visible instead of guessed. `initial` (the first answer's execution, in a
    reflection flow) is carried along so evaluation can compare the revision with it."""
    from dagwright.methods.finqa.program import execute, extract_program

    program = extract_program(response)
    if program is None:
        result: dict[str, Any] = {"value": None, "error": "the answer has no 'Program:' line"}
    else:
        result = execute(program, _rows(table)).to_dict()
    if result["error"]:
        ctx.emit("finqa_invalid_program", error=result["error"])
    return {
        "program": program,
        "value": result["value"],
        "error": result["error"],
        "response": response,
        "initial": initial if isinstance(initial, dict) else None,
    }
