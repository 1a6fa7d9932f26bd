"""The tool registry's records: a published app registered under a name, with the
description the Engineer reads and the role that says what the Executor gives it from the
conversation (dagwright.tqa.executor)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from dagwright.errors import InputError, NotFoundError
from dagwright.store.db import session
from dagwright.store.models import TqaTool, utcnow

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "app": self.app,
            "description": self.description,
            "role": self.role,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _tool(row: TqaTool) -> Tool:
    return Tool(row.name, row.app, row.description, row.created_at, row.updated_at, row.role)


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"no tool {name!r}", code="tool_not_found")


class ToolRepository:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list(self) -> list[Tool]:
        with session(self._engine) as db:
            return [_tool(row) for row in db.exec(select(TqaTool).order_by(col(TqaTool.name)))]

    def get(self, name: str) -> Tool:
        with session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                raise _not_found(name)
            return _tool(row)

    def put(self, name: str, app: str, description: str, role: str | None = None) -> Tool:
        """Registers the tool, or changes its app, description and role."""
        if not _NAME.fullmatch(name):
            raise ToolError(f"tool name {name!r}: lowercase letters, digits and '_', 1-64")
        if not app.strip() or len(app) > 64:
            raise ToolError("a tool names the app (slug) it runs")
        with session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                row = TqaTool(name=name, app=app, description=description, role=role)
            else:
                row.app, row.description, row.role = app, description, role
                row.updated_at = utcnow()
            db.add(row)
            db.commit()
            return _tool(row)

    def delete(self, name: str) -> None:
        with session(self._engine) as db:
            row = db.get(TqaTool, name)
            if row is None:
                raise _not_found(name)
            db.delete(row)
            db.commit()
