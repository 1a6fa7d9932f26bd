"""Conversations in the database, kept by store/tqa_conversations.py: written as they happen
(the conversation when it starts, each turn when it ends, the outcome last), read back whole
for replay, and loaded back into a `Conversation` (request, knowledge, turns) by a process
that resumes it (tqa/durable.py)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from pydantic_core import to_jsonable_python
from sqlalchemy import Connection, Engine

from dagwright.errors import ConflictError
from dagwright.store.db import session
from dagwright.store.models import TqaConversation, TqaTurn, new_id, utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.store.tqa_conversations import ConversationRepository, Orphan
from dagwright.tqa.conversation import AskRequest, Conversation, Turn
from dagwright.tqa.failures import ConversationSuperseded
from dagwright.tqa.knowledge import Knowledge

# Writes, in the transaction that records a new conversation, the queue job that runs it.
Deferral = Callable[[Connection], Any]
# The statuses a conversation takes: what its list may be filtered by.
ConversationStatus = Literal["running", "waiting", "completed", "round_limit", "failed"]


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
        "sources": list((row.knowledge or {}).get("sources") or []),
        "status": row.status,
        "rounds": row.rounds,
        "answer": row.answer,
        "error": row.error,
        "usage": row.usage,
        "created_at": row.created_at.isoformat(),
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
        "cancel_requested_at": (
            row.cancel_requested_at.isoformat() if row.cancel_requested_at else None
        ),
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


def _check_held(conversations: ConversationRepository, conversation: Conversation) -> None:
    if not conversations.held_by(conversation.id, conversation.runner):
        raise ConversationSuperseded(
            f"conversation {conversation.id} was taken up by another process: this one stops"
        )


class ConversationStore:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def create(self, conversation: Conversation, defer: Deferral | None = None) -> None:
        """Records the conversation (no turns yet); `defer` queues its job in the same
        transaction, so it is queued exactly when it is recorded."""
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
            request=request.model_dump(mode="json"),
            knowledge=_json(dataclasses.asdict(conversation.knowledge)),
            runner=conversation.runner,
            replica=conversation.replica,
            foreground=conversation.foreground,
            attempts=0 if conversation.replica is None else 1,
        )
        with session(self._engine) as db:
            ConversationRepository(db).add(row)
            if defer is not None:
                db.flush()
                defer(db.connection())
            db.commit()

    def load(self, conversation_id: str) -> Conversation:
        """The conversation as a process resuming it needs it: its request, knowledge and
        recorded turns, taken up by this process (a new runner token: a process that ran
        it before stops at its next write). NotFoundError; ConflictError `not_resumable`
        for one recorded before requests were kept."""
        with session(self._engine) as db:
            conversations = ConversationRepository(db)
            row = conversations.find(conversation_id)
            if row.request is None or row.knowledge is None:
                raise ConflictError(
                    f"conversation {conversation_id} was recorded without its request: it "
                    "cannot be resumed",
                    "not_resumable",
                )
            found = Conversation(
                row.id,
                AskRequest.model_validate(row.request),
                row.created_at,
                knowledge=Knowledge(**row.knowledge),
            )
            found.status = row.status  # type: ignore[assignment]  # one of Status, as written
            found.turns = [Turn.from_dict(_turn(turn)) for turn in conversations.turns(row.id)]
            found.rounds = max(len(found.turns) - 1, 0)  # every turn after the User's is a round
            found.runner = row.runner = new_id()
            db.add(row)
            db.commit()
            return found

    def request_cancel(self, conversation_id: str) -> str:
        """Marks the conversation to be cancelled by whichever process runs it; returns its
        status (NotFoundError)."""
        with session(self._engine) as db:
            row = ConversationRepository(db).find(conversation_id)
            if row.cancel_requested_at is None:
                row.cancel_requested_at = utcnow()
                db.add(row)
                db.commit()
            return row.status

    def cancel_requested(self, conversation_id: str) -> bool:
        with session(self._engine) as db:
            row = ConversationRepository(db).find(conversation_id)
            return row.cancel_requested_at is not None

    def fail(self, conversation_id: str, code: str, message: str) -> bool:
        """Ends the conversation failed with why, unless it is no longer running (its turns
        are kept); True when it did."""
        with session(self._engine) as db:
            failed = ConversationRepository(db).fail_running(
                conversation_id, {"code": code, "message": message}, utcnow()
            )
            db.commit()
            return failed

    def claim(
        self,
        conversation_id: str,
        from_status: str,
        defer: Deferral | None = None,
        replica: str | None = None,
    ) -> bool:
        """Moves the conversation from `from_status` to running (the one caller it succeeds
        for goes on with it), queueing its job in the same transaction, or run by the server
        process of lease `replica`; False when it was not in `from_status`."""
        with session(self._engine) as db:
            if not ConversationRepository(db).claim(conversation_id, from_status, replica):
                return False
            if defer is not None:
                defer(db.connection())
            db.commit()
            return True

    def orphaned(self, lease: str, stale_after: float) -> list[Orphan]:
        """The conversations left running by server processes whose lease is missing or
        `stale_after` seconds old (never `lease`'s)."""
        cutoff = utcnow() - timedelta(seconds=stale_after)
        with session(self._engine) as db:
            return ConversationRepository(db).orphaned(lease, cutoff)

    def take_over(
        self, conversation_id: str, dead: str, replica: str | None, defer: Deferral | None = None
    ) -> bool:
        """Takes the conversation of dead lease `dead` up for the server process of lease
        `replica`, or queues its job in the same transaction (`defer`, queue mode); False
        when another process took it first or it ended."""
        with session(self._engine) as db:
            if not ConversationRepository(db).take_over(conversation_id, dead, replica):
                return False
            if defer is not None:
                defer(db.connection())
            db.commit()
            return True

    def hand_over(self, lease: str) -> int:
        """Marks the background conversations this server process (lease `lease`) leaves
        running as it stops cleanly as handed over, not lost (their attempts do not count
        it); how many."""
        with session(self._engine) as db:
            handed = ConversationRepository(db).hand_over(lease)
            db.commit()
            return handed

    def end_foreground(self, lease: str, code: str, message: str) -> int:
        """Ends failed with why the foreground conversations this server process (lease
        `lease`) still runs as it stops (their turns kept); how many."""
        with session(self._engine) as db:
            ended = ConversationRepository(db).end_foreground(
                lease, {"code": code, "message": message}, utcnow()
            )
            db.commit()
            return ended

    def give_up(self, conversation_id: str, dead: str, code: str, message: str) -> bool:
        """Ends failed with why a conversation still of dead lease `dead` (its turns kept);
        False when another process took it up or it ended."""
        with session(self._engine) as db:
            failed = ConversationRepository(db).give_up(
                conversation_id, dead, {"code": code, "message": message}, utcnow()
            )
            db.commit()
            return failed

    def add_turn(self, conversation: Conversation, turn: Turn) -> None:
        """Records the turn, if this process still runs the conversation (else
        ConversationSuperseded)."""
        data = turn.to_dict()
        row = TqaTurn(
            conversation_id=conversation.id,
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
            conversations = ConversationRepository(db)
            _check_held(conversations, conversation)
            conversations.add_turn(row)
            db.commit()

    def finish(self, conversation: Conversation) -> None:
        """Records how it ended (or that it waits), if this process still runs it (else
        ConversationSuperseded)."""
        with session(self._engine) as db:
            conversations = ConversationRepository(db)
            _check_held(conversations, conversation)
            row = conversations.get(conversation.id)
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

    def running(self) -> int:
        """How many conversations are running, on any process (tqa/admission.py)."""
        with session(self._engine) as db:
            return ConversationRepository(db).count_running()

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
