"""The tool registry: any published app registered under a name, with a description the
Engineer reads. The Executor calls a tool by that name."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, select
from sqlmodel import Session

from dagwright.errors import InputError, NotFoundError
from dagwright.store.models import TqaTool, utcnow

# Registered when the AutoTQA apps are published.
BUILTIN_TOOLS = {
    "text_to_sql": (
        "autotqa-text-to-sql",
        "Answers one precise data question with SQL across every registered source (joins "
        "across systems included): finds the tables, writes read-only SQL, runs it and "
        "returns the rows, or the error. Describe the data wanted in words. "
        'Input: {"question": "..."}.',
    ),
    "python_on_tables": (
        "autotqa-python",
        "Computes with Python (pandas) over the tables, in a sandbox, for calculations SQL "
        "makes awkward: describe the task in words; the tool finds the tables, writes the "
        'query and the program, and runs them. Input: {"task": "..."}.',
    ),
}


class ToolError(InputError):
    code = "invalid_tool"


@dataclass(slots=True)
class Tool:
    name: str
    app: str
    description: str
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "app": self.app,
            "description": self.description,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _tool(row: TqaTool) -> Tool:
    return Tool(row.name, row.app, row.description, row.created_at, row.updated_at)


class ToolRegistry:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list(self) -> list[Tool]:
        with Session(self._engine) as db:
            query = select(TqaTool).order_by(TqaTool.name)
            return [_tool(row) for row in db.execute(query).scalars()]

    def get(self, name: str) -> Tool:
        with Session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                raise NotFoundError(f"no tool {name!r}", code="tool_not_found")
            return _tool(row)

    def put(self, name: str, app: str, description: str) -> Tool:
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,63}", name):
            raise ToolError(f"tool name {name!r}: lowercase letters, digits and '_', 1-64")
        if not app.strip() or len(app) > 64:
            raise ToolError("a tool names the app (slug) it runs")
        with Session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                row = TqaTool(name=name, app=app, description=description)
            else:
                row.app, row.description, row.updated_at = app, description, utcnow()
            db.add(row)
            db.commit()
            db.refresh(row)
            return _tool(row)

    def delete(self, name: str) -> None:
        with Session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                raise NotFoundError(f"no tool {name!r}", code="tool_not_found")
            db.delete(row)
            db.commit()
