"""Conversations and their turns in the database: written as they happen (the conversation
when it starts, each turn when it ends, the outcome last), read back whole for replay."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Engine, func, select
from sqlmodel import Session

from dagwright.errors import NotFoundError
from dagwright.store.models import TqaConversation, TqaTurn
from dagwright.tqa.conversation import Conversation, Turn


def _json(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


class ConversationStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create(self, conversation: Conversation) -> None:
        request = conversation.request
        row = TqaConversation(
            id=conversation.id,
            question=request.question,
            dataset=request.dataset,
            sop=conversation.sop,
            profile=_json(conversation.profile),
            scheduler=request.scheduler,
            max_rounds=request.max_rounds,
            answer_format=request.answer_format,
            status=conversation.status,
            created_at=conversation.created_at,
        )
        with Session(self._engine) as db:
            db.add(row)
            db.commit()

    def add_turn(self, conversation_id: str, turn: Turn) -> None:
        data = turn.to_dict()
        row = TqaTurn(
            conversation_id=conversation_id,
            seq=turn.seq,
            agent=turn.agent,
            text=turn.text,
            content=_json(data["content"]),
            scheduler=data["scheduler"],
            tool_call=_json(data["tool_call"]),
            usage=turn.usage,
            run_id=turn.run_id,
            error=turn.error,
            started=turn.started,
            duration=turn.duration,
        )
        with Session(self._engine) as db:
            db.add(row)
            db.commit()

    def finish(self, conversation: Conversation) -> None:
        with Session(self._engine) as db:
            row = db.get(TqaConversation, conversation.id)
            if row is None:
                return
            row.status = conversation.status
            row.rounds = conversation.rounds
            row.answer = _json(conversation.answer)
            row.error = conversation.error
            row.usage = conversation.usage
            row.profile = _json(conversation.profile)
            row.finished_at = conversation.finished_at
            db.add(row)
            db.commit()

    @staticmethod
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

    def get(self, conversation_id: str) -> dict[str, Any]:
        """The conversation with every turn, in order."""
        with Session(self._engine) as db:
            row = db.get(TqaConversation, conversation_id)
            if row is None:
                raise NotFoundError(
                    f"no conversation {conversation_id!r}", code="conversation_not_found"
                )
            data = self._summary(row)
            turns = db.execute(
                select(TqaTurn)
                .where(TqaTurn.conversation_id == conversation_id)  # type: ignore[arg-type]
                .order_by(TqaTurn.seq)  # type: ignore[arg-type]
            ).scalars()
            data["turns"] = [
                {
                    "seq": t.seq,
                    "agent": t.agent,
                    "text": t.text,
                    "content": t.content,
                    "scheduler": t.scheduler,
                    "tool_call": t.tool_call,
                    "usage": t.usage,
                    "run_id": t.run_id,
                    "error": t.error,
                    "started": t.started,
                    "duration": t.duration,
                }
                for t in turns
            ]
            return data

    def list(self, offset: int = 0, limit: int = 50, status: str | None = None) -> dict[str, Any]:
        """Newest first, without turns: {items, total, offset, limit}."""
        with Session(self._engine) as db:
            query = select(TqaConversation)
            count = select(func.count()).select_from(TqaConversation)
            if status is not None:
                query = query.where(TqaConversation.status == status)  # type: ignore[arg-type]
                count = count.where(TqaConversation.status == status)  # type: ignore[arg-type]
            total = int(db.execute(count).scalar_one())
            rows = db.execute(
                query.order_by(TqaConversation.created_at.desc())  # type: ignore[attr-defined]
                .offset(offset)
                .limit(limit)
            ).scalars()
            items = [self._summary(row) for row in rows]
        return {"items": items, "total": total, "offset": offset, "limit": limit}
