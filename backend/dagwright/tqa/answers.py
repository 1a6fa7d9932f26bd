"""The final answer in the paper's forms — a value, a table, natural language, or a filled
predefined format — always with its evidence: the SQL (or other tool call) run and the rows
it returned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dagwright.templating import render
from dagwright.tqa.conversation import ToolCall

FORMS = ("value", "table", "text", "template")


def _is_table(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)


def _grounded(value: Any, evidence: Sequence[ToolCall]) -> bool:
    """Whether the answer's value(s) appear in the rows the tools returned."""

    def same(a: Any, b: Any) -> bool:
        if isinstance(a, bool) or isinstance(b, bool):
            return bool(a == b)
        if isinstance(a, int | float) and isinstance(b, int | float):
            return abs(float(a) - float(b)) < 1e-9
        return str(a).strip() == str(b).strip()

    cells = [cell for call in evidence for row in call.rows for cell in row.values()]
    for call in evidence:  # a tool's other outputs (a Python result) are evidence too
        for output in (call.outputs or {}).values():
            if isinstance(output, list):
                cells += [
                    v
                    for item in output
                    for v in (item.values() if isinstance(item, dict) else [item])
                ]
            elif isinstance(output, dict):
                cells += list(output.values())
            else:
                cells.append(output)
    if _is_table(value):
        return all(any(same(v, c) for c in cells) for row in value for v in row.values())
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return any(same(value, c) for c in cells)
    return False


def build_answer(
    verdict: dict[str, Any], evidence: Sequence[ToolCall], answer_format: str | None
) -> dict[str, Any]:
    """The Critic's verdict (complete) as an answer with its form and evidence."""
    value = verdict.get("answer")
    given = verdict.get("fields")
    fields: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    form = str(verdict.get("form") or "")
    text: str | None = None
    table: dict[str, Any] | None = None
    if answer_format:
        form = "template"
        try:
            text = render(answer_format, {"answer": value, "value": value, **fields})
        except ValueError as exc:
            text = None
            form = "text"
            value = f"{value} (the answer format could not be filled: {exc})"
    elif form not in FORMS:
        if _is_table(value):
            form = "table"
        elif isinstance(value, int | float | bool) or (
            isinstance(value, str) and len(value) <= 64 and "\n" not in value and " " not in value
        ):
            form = "value"
        else:
            form = "text"
    if form == "table" and isinstance(value, list) and _is_table(value):
        columns = list(dict.fromkeys(key for row in value for key in row))
        table = {"columns": columns, "rows": value}
    if text is None:
        # The Critic's report (the Engineer's, reiterated), without its TERMINATE.
        summary = str(verdict.get("report") or verdict.get("summary") or "").strip()
        summary = summary.replace("TERMINATE", "").strip().lstrip(":.- ").strip()
        text = summary or str(value)
    return {
        "form": form,
        "value": value,
        "text": text,
        "table": table,
        "fields": fields or None,
        "grounded": _grounded(value, evidence),
        "evidence": [
            {
                "tool": call.tool,
                "sql": call.sql,
                "columns": call.columns,
                "rows": call.rows,
                "row_count": call.row_count,
                "truncated": call.truncated,
                "outputs": call.outputs,
                "run_id": call.run_id,
            }
            for call in evidence
        ],
    }
