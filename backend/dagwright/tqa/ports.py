"""What the orchestrator and the tool flows say to each other, typed. Across an app's
boundary everything is JSON (a published app may be called by URL); these models are that
JSON's shape, validated where it is read:

- the Executor flow's inputs (`request`, `tools`, `context`: built by the orchestrator,
  read by the `autotqa_execute` block) and its outputs (read back by the orchestrator);
- a tool app's outputs (`ToolResult`): rows, SQL, and a failure, read once, whatever app
  the tool runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dagwright.tqa.failures import Failure, ToolChoiceError


class ToolRequest(BaseModel):
    """The Engineer's tool request: the tool's name and its input (a JSON object, or a text
    that stands for the tool's first input)."""

    model_config = ConfigDict(extra="ignore")

    tool: str = ""
    input: dict[str, Any] | str = Field(default_factory=dict)


class ToolEntry(BaseModel):
    """A registered tool as the Executor sees it: its app and its role (tqa/executor.py)."""

    model_config = ConfigDict(extra="ignore")

    app: str = Field(min_length=1)
    role: str | None = None


class ToolContext(BaseModel):
    """What the conversation offers a tool (taken as its role declares)."""

    model_config = ConfigDict(extra="forbid")

    question: str = ""
    hints: str = ""
    feedback: str = ""
    sources: list[str] | None = None  # the dataset's: enforced
    examples: str | None = None  # for a role that reads examples


class ExecutorInputs(BaseModel):
    """The Executor flow's inputs."""

    request: ToolRequest
    tools: dict[str, ToolEntry]
    context: ToolContext = Field(default_factory=ToolContext)

    @classmethod
    def read(
        cls,
        request: Mapping[str, Any],
        tools: Mapping[str, Any],
        context: Mapping[str, Any] | None,
    ) -> ExecutorInputs:
        """The flow's JSON inputs, checked; what does not fit is a `tool_choice` failure."""
        if request.get("input") is not None and not isinstance(request["input"], dict | str):
            raise ToolChoiceError(
                f"the input of tool {request.get('tool')!r} must be a JSON object"
            )
        given = {key: value for key, value in request.items() if value is not None}
        try:
            return cls.model_validate(
                {"request": given, "tools": dict(tools), "context": dict(context or {})}
            )
        except ValidationError as exc:
            raise ToolChoiceError(f"the Executor's inputs do not fit: {exc}") from None


class ExecutorOutputs(BaseModel):
    """The Executor flow's outputs: the tool it chose, the inputs it called it with, the
    tool's outputs, and its failure to call it (a failure the tool reports itself is in the
    tool's outputs)."""

    tool: str | None = None
    app: str | None = None
    inputs: dict[str, Any] = Field(default_factory=dict)
    outputs: dict[str, Any] = Field(default_factory=dict)
    error: Failure | None = None


def reported_failure(value: object) -> Failure | None:
    """The failure a tool reports on its `error` output: `{code, message}`, or a text
    `code: message` (what `sql_query`'s errors-as-output gives); any other text is a
    `tool_error`."""
    if not value:
        return None
    if isinstance(value, Mapping) and "message" in value:
        return {"code": str(value.get("code") or "tool_error"), "message": str(value["message"])}
    text = str(value)
    code, _, message = text.partition(": ")
    if message and code.replace("_", "").isalpha():
        return {"code": code, "message": message}
    return {"code": "tool_error", "message": text}


class ToolResult(BaseModel):
    """A tool app's outputs as the orchestrator reads them: the rows and SQL when it gives
    them, its failure, and everything else it gave (`rest`: a Python result, its program)."""

    rows: list[dict[str, Any]] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    sql: str | None = None
    error: Failure | None = None
    rest: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def read(cls, outputs: Mapping[str, Any]) -> ToolResult:
        """From any app's outputs: what is not rows, SQL or a failure is kept in `rest`."""
        rest = dict(outputs)
        rows = rest.pop("rows", None)
        found = list(rows) if isinstance(rows, list) else []
        sql = rest.pop("sql", None)
        rest.pop("executed_sql", None)
        # Built from checked values: no second validation of every row.
        return cls.model_construct(
            rows=[row for row in found if isinstance(row, dict)],
            columns=[str(c) for c in rest.pop("columns", None) or []],
            row_count=int(rest.pop("row_count", len(found)) or 0),
            truncated=bool(rest.pop("truncated", False)),
            sql=None if sql is None else str(sql),
            error=reported_failure(rest.pop("error", None)),
            rest=rest,
        )
