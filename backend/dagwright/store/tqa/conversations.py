"""AutoTQA conversations and their turns: written as they happen (the conversation when it
starts, each turn when it ends, the outcome last), read back whole for replay."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from dagwright.errors import NotFoundError
from dagwright.store.db import session
from dagwright.store.models import TqaConversation, TqaTurn
from dagwright.store.paging import DEFAULT_LIMIT, Page, fetch_page, window


def _summary(row: TqaConversation) -> dict[str, Any]:
    return {
        "id": row.id,
        "question": row.question,
        "dataset": row.dataset,
        "sop": row.sop,
        "profile": row.profile,
        "scheduler": row.scheduler,
        "max_rounds": row.max_rounds,
        "answer_format": row.answer_format,
        "status": row.status,
        "rounds": row.rounds,
        "answer": row.answer,
        "error": row.error,
        "usage": row.usage,
        "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }


def _turn(row: TqaTurn) -> dict[str, Any]:
    return {
        "seq": row.seq,
        "agent": row.agent,
        "text": row.text,
        "content": row.content,
        "scheduler": row.scheduler,
        "tool_call": row.tool_call,
        "usage": row.usage,
        "run_id": row.run_id,
        "error": row.error,
        "started": row.started,
        "duration": row.duration,
    }


class ConversationRepository:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create(self, row: TqaConversation) -> None:
        with session(self._engine) as db:
            db.add(row)
            db.commit()

    def add_turn(self, row: TqaTurn) -> None:
        with session(self._engine) as db:
            db.add(row)
            db.commit()

    def finish(
        self,
        conversation_id: str,
        *,
        status: str,
        rounds: int,
        answer: Any,
        error: Any,
        usage: dict[str, Any],
        profile: Any,
        finished_at: datetime | None,
    ) -> None:
        """Records how the conversation ended (again, when it learned something after)."""
        with session(self._engine) as db:
            row = db.get(TqaConversation, conversation_id)
            if row is None:
                return
            row.status, row.rounds, row.answer, row.error = status, rounds, answer, error
            row.usage, row.profile, row.finished_at = usage, profile, finished_at
            db.add(row)
            db.commit()

    def get(self, conversation_id: str) -> dict[str, Any]:
        """The conversation with every turn, in order."""
        with session(self._engine) as db:
            row = db.get(TqaConversation, conversation_id)
            if row is None:
                raise NotFoundError(
                    f"no conversation {conversation_id!r}", code="conversation_not_found"
                )
            data = _summary(row)
            turns = db.exec(
                select(TqaTurn)
                .where(col(TqaTurn.conversation_id) == conversation_id)
                .order_by(col(TqaTurn.seq))
            )
            data["turns"] = [_turn(turn) for turn in turns]
            return data

    def list(
        self, offset: int = 0, limit: int = DEFAULT_LIMIT, status: str | None = None
    ) -> Page[dict[str, Any]]:
        """Newest first, without turns."""
        at = window(offset, limit)
        query = select(TqaConversation).order_by(col(TqaConversation.created_at).desc())
        if status is not None:
            query = query.where(col(TqaConversation.status) == status)
        with session(self._engine) as db:
            return fetch_page(db, query, at).map(_summary)
