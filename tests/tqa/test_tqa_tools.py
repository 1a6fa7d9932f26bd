"""Tools are data: what the Executor gives a tool from the conversation is the role stored
with it, whatever app it runs; databases from before roles keep what their tools were given."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from dagwright.store.db import migrate
from dagwright.tqa.executor import choose_tool
from dagwright.tqa.failures import ToolChoiceError
from dagwright.tqa.ports import (
    ExecutorInputs,
    ExecutorOutputs,
    ToolContext,
    ToolEntry,
    ToolRequest,
    ToolResult,
)
from dagwright.tqa.tools import ToolError, ToolRegistry
from support.database import DATABASES, fresh_engine

CONTEXT = ToolContext(question="Bonus of Tom?", hints="- h", feedback="f", sources=["hr"])


def test_a_role_not_the_app_says_what_the_tool_is_given() -> None:
    tools = {
        "sql": ToolEntry(app="mac-sql-spider", role="text_to_sql"),
        "asker": ToolEntry(app="autotqa-text-to-sql", role="question"),
        "plain": ToolEntry(app="autotqa-text-to-sql"),
        "pandas": ToolEntry(app="my-pandas", role="python"),
    }
    given = choose_tool(ToolRequest(tool="sql", input="tom's bonus"), tools, CONTEXT).inputs
    assert given == {"question": "tom's bonus", "hints": "- h", "feedback": "f", "sources": ["hr"]}
    given = choose_tool(ToolRequest(tool="asker"), tools, CONTEXT).inputs
    assert given == {"question": "Bonus of Tom?"}
    given = choose_tool(ToolRequest(tool="plain", input={"x": 1}), tools, CONTEXT).inputs
    assert given == {"x": 1}
    given = choose_tool(ToolRequest(tool="pandas", input="sum it"), tools, CONTEXT).inputs
    assert given["task"] == "sum it"
    assert "question" not in given


def test_what_the_executor_cannot_call_is_a_typed_failure() -> None:
    tools = {"sql": {"app": "autotqa-text-to-sql", "role": "text_to_sql"}}
    read = ExecutorInputs.read({"tool": "shell"}, tools, {})
    with pytest.raises(ToolChoiceError) as unknown:
        choose_tool(read.request, read.tools, read.context)
    assert unknown.value.code == "tool_choice"
    assert unknown.value.message == "no tool 'shell'; the tools are: sql"
    with pytest.raises(ToolChoiceError, match="must be a JSON object"):
        ExecutorInputs.read({"tool": "sql", "input": [1]}, tools, {})
    with pytest.raises(ToolChoiceError, match="do not fit"):
        ExecutorInputs.read({"tool": "sql"}, {"sql": {"role": "python"}}, {})


def test_a_tools_outputs_are_read_once_into_rows_sql_and_a_failure() -> None:
    failed = ToolResult.read(
        {"rows": [], "sql": "SELECT x", "error": "query_failed: no column x", "code": "p"}
    )
    assert failed.error == {"code": "query_failed", "message": "no column x"}
    assert failed.rest == {"code": "p"}
    typed = ToolResult.read({"error": {"code": "python_failed", "message": "Traceback"}})
    assert typed.error == {"code": "python_failed", "message": "Traceback"}
    assert ToolResult.read({"error": "it broke"}).error == {
        "code": "tool_error",
        "message": "it broke",
    }
    rows = ToolResult.read({"rows": [{"a": 1}], "columns": ["a"], "sql": "SELECT 1 AS a"})
    assert (rows.error, rows.row_count, rows.rows) == (None, 1, [{"a": 1}])
    executed = ExecutorOutputs.model_validate(
        {"tool": None, "error": {"code": "tool_choice", "message": "no tool 'x'"}}
    )
    assert executed.error == {"code": "tool_choice", "message": "no tool 'x'"}


@pytest.fixture(params=DATABASES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    with fresh_engine(request.param, tmp_path) as fresh:
        yield fresh


def test_tools_keep_their_role(engine: Engine) -> None:
    migrate(engine)
    tools = ToolRegistry(engine)
    tools.put("sql", "mac-sql-bird", "MAC-SQL", "text_to_sql")
    assert tools.get("sql").role == "text_to_sql"
    tools.put("sql", "mac-sql-bird", "MAC-SQL", None)
    assert tools.get("sql").to_dict()["role"] is None
    with pytest.raises(ToolError):
        tools.put("Bad-Name", "mac-sql-bird", "", None)


def test_tools_registered_before_roles_keep_what_their_app_gave_them(engine: Engine) -> None:
    migrate(engine, "0013")
    now = datetime.now(UTC)
    with engine.begin() as connection:
        for name, app in (
            ("text_to_sql", "autotqa-text-to-sql"),
            ("python_on_tables", "autotqa-python"),
            ("mac_sql", "mac-sql-spider"),
            ("mine", "my-app"),
        ):
            connection.execute(
                text(
                    "INSERT INTO tqa_tools (name, app, description, created_at, updated_at) "
                    "VALUES (:name, :app, '', :now, :now)"
                ),
                {"name": name, "app": app, "now": now},
            )
    migrate(engine)
    roles = {tool.name: tool.role for tool in ToolRegistry(engine).list()}
    assert roles == {
        "mac_sql": "question",
        "mine": None,
        "python_on_tables": "python",
        "text_to_sql": "text_to_sql",
    }
