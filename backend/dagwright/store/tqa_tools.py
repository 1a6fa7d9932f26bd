"""The AutoTQA tool registry's rows, in the store's repository style (see store/apps.py)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.models import TqaTool


class ToolRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def all(self) -> list[TqaTool]:
        """By name."""
        return list(self._db.exec(select(TqaTool).order_by(col(TqaTool.name))).all())

    def get(self, name: str) -> TqaTool | None:
        return self._db.get(TqaTool, name)

    def find(self, name: str) -> TqaTool:
        """The tool (NotFoundError `tool_not_found`)."""
        tool = self.get(name)
        if tool is None:
            raise NotFoundError(f"no tool {name!r}", code="tool_not_found")
        return tool

    def add(self, tool: TqaTool) -> None:
        self._db.add(tool)

    def delete(self, tool: TqaTool) -> None:
        self._db.delete(tool)
