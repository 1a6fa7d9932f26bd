"""The tool registry: any published app registered under a name, with the description the
Engineer reads, its role (tqa/roles.py: what the Executor gives it from the conversation)
and whether a person approves each call before it runs (`requires_approval`:
tqa/approvals.py). The Executor calls a tool by that name. The built-in tools are registered
when the AutoTQA apps are published."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from dagwright.errors import InputError
from dagwright.store.db import session
from dagwright.store.models import TqaTool, utcnow
from dagwright.store.tqa_tools import ToolRepository
from dagwright.tqa.roles import TOOL_ROLES


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A built-in tool: the app it runs, what the Engineer reads, its role."""

    app: str
    description: str
    role: str | None = None


BUILTIN_TOOLS = {
    "text_to_sql": ToolDeclaration(
        "autotqa-text-to-sql",
        "Answers one precise data question with SQL across every registered source (joins "
        "across systems included): finds the tables, writes read-only SQL, runs it and "
        "returns the rows, or the error. Describe the data wanted in words. "
        'Input: {"question": "..."}.',
        "text_to_sql",
    ),
    "python_on_tables": ToolDeclaration(
        "autotqa-python",
        "Computes with Python (pandas) over the tables, in a sandbox, for calculations SQL "
        "makes awkward: describe the task in words; the tool finds the tables, writes the "
        'query and the program, and runs them. Input: {"task": "..."}.',
        "python",
    ),
}
_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class ToolError(InputError):
    code = "invalid_tool"


@dataclass(slots=True)
class Tool:
    name: str
    app: str
    description: str
    created_at: datetime
    updated_at: datetime
    role: str | None = None
    requires_approval: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "app": self.app,
            "description": self.description,
            "role": self.role,
            "requires_approval": self.requires_approval,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _tool(row: TqaTool) -> Tool:
    return Tool(
        row.name,
        row.app,
        row.description,
        row.created_at,
        row.updated_at,
        row.role,
        row.requires_approval,
    )


class ToolRegistry:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list(self) -> list[Tool]:
        with session(self._engine) as db:
            return [_tool(row) for row in ToolRepository(db).all()]

    def get(self, name: str) -> Tool:
        with session(self._engine) as db:
            return _tool(ToolRepository(db).find(name))

    def put(
        self,
        name: str,
        app: str,
        description: str,
        role: str | None = None,
        requires_approval: bool | None = None,
    ) -> Tool:
        """Registers the tool, or changes its app, description and role (None: it gets the
        Engineer's input only), and whether its calls need approval (None: as it was; a new
        tool's do not)."""
        if not _NAME.fullmatch(name):
            raise ToolError(f"tool name {name!r}: lowercase letters, digits and '_', 1-64")
        if not app.strip() or len(app) > 64:
            raise ToolError("a tool names the app (slug) it runs")
        if role is not None and role not in TOOL_ROLES:
            raise ToolError(f"a tool's role is one of {', '.join(TOOL_ROLES)}, not {role!r}")
        with session(self._engine) as db:
            tools = ToolRepository(db)
            row = tools.get(name)
            if row is None:
                row = TqaTool(name=name, app=app, description=description, role=role)
            else:
                row.app, row.description, row.role = app, description, role
                row.updated_at = utcnow()
            if requires_approval is not None:
                row.requires_approval = requires_approval
            tools.add(row)
            db.commit()
            return _tool(row)

    def require_approval(self, name: str, required: bool) -> Tool:
        """Whether each call of the tool waits for a person's approval (NotFoundError)."""
        with session(self._engine) as db:
            tools = ToolRepository(db)
            row = tools.find(name)
            row.requires_approval = required
            row.updated_at = utcnow()
            tools.add(row)
            db.commit()
            return _tool(row)

    def delete(self, name: str) -> None:
        with session(self._engine) as db:
            tools = ToolRepository(db)
            tools.delete(tools.find(name))
            db.commit()
