"""Conversations in the database, kept by store/tqa_conversations.py: written as they happen
(the conversation when it starts, each turn when it ends, the outcome last), read back whole
for replay."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import Engine

from dagwright.store.db import session
from dagwright.store.models import TqaConversation, TqaTurn
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.store.tqa_conversations import ConversationRepository
from dagwright.tqa.conversation import Conversation, Turn


def _json(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


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
        with session(self._engine) as db:
            ConversationRepository(db).add(row)
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
            error=dict(turn.error) if turn.error else None,
            started=turn.started,
            duration=turn.duration,
        )
        with session(self._engine) as db:
            ConversationRepository(db).add_turn(row)
            db.commit()

    def finish(self, conversation: Conversation) -> None:
        with session(self._engine) as db:
            row = ConversationRepository(db).get(conversation.id)
            if row is None:
                return
            row.status = conversation.status
            row.rounds = conversation.rounds
            row.answer = _json(conversation.answer)
            row.error = dict(conversation.error) if conversation.error else None
            row.usage = conversation.usage
            row.profile = _json(conversation.profile)
            row.finished_at = conversation.finished_at
            db.add(row)
            db.commit()

    def get(self, conversation_id: str) -> dict[str, Any]:
        """The conversation with every turn, in order."""
        with session(self._engine) as db:
            conversations = ConversationRepository(db)
            data = _summary(conversations.find(conversation_id))
            data["turns"] = [_turn(turn) for turn in conversations.turns(conversation_id)]
            return data

    def list(
        self, offset: int = 0, limit: int = DEFAULT_LIMIT, status: str | None = None
    ) -> Page[dict[str, Any]]:
        """Newest first, without turns."""
        with session(self._engine) as db:
            found = ConversationRepository(db).page(window(offset, limit), status)
            return found.map(_summary)
