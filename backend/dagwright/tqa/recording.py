"""A conversation written to the database as it happens: the conversation when it starts,
each turn when it ends, the outcome last (store/tqa/conversations.py keeps the rows)."""

from __future__ import annotations

from typing import Any

from pydantic_core import to_jsonable_python

from dagwright.store.models import TqaConversation, TqaTurn
from dagwright.store.tqa.conversations import ConversationRepository
from dagwright.tqa.conversation import Conversation, Turn


def _json(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


class ConversationRecorder:
    def __init__(self, conversations: ConversationRepository) -> None:
        self._conversations = conversations

    def create(self, conversation: Conversation) -> None:
        request = conversation.request
        self._conversations.create(
            TqaConversation(
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
        )

    def add_turn(self, conversation_id: str, turn: Turn) -> None:
        data = turn.to_dict()
        self._conversations.add_turn(
            TqaTurn(
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
        )

    def finish(self, conversation: Conversation) -> None:
        self._conversations.finish(
            conversation.id,
            status=conversation.status,
            rounds=conversation.rounds,
            answer=_json(conversation.answer),
            error=conversation.error,
            usage=conversation.usage,
            profile=_json(conversation.profile),
            finished_at=conversation.finished_at,
        )
