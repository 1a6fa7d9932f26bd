"""AutoTQA conversations and their turns (one aggregate: a turn belongs to its
conversation), in the store's repository style (see store/apps.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.models import TqaConversation, TqaTurn
from dagwright.store.paging import Page, Window, fetch_page


class ConversationRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, conversation: TqaConversation) -> None:
        self._db.add(conversation)

    def add_turn(self, turn: TqaTurn) -> None:
        self._db.add(turn)

    def get(self, conversation_id: str) -> TqaConversation | None:
        return self._db.get(TqaConversation, conversation_id)

    def find(self, conversation_id: str) -> TqaConversation:
        """The conversation (NotFoundError `conversation_not_found`)."""
        found = self.get(conversation_id)
        if found is None:
            raise NotFoundError(
                f"no conversation {conversation_id!r}", code="conversation_not_found"
            )
        return found

    def fail_running(self, conversation_id: str, error: dict[str, str], at: datetime) -> bool:
        """Ends a running conversation failed with `error` (a conditional update: False when
        it was no longer running)."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.status) == "running",
            )
            .values(status="failed", error=error, finished_at=at)
        )
        return bool(done.rowcount == 1)

    def claim(self, conversation_id: str, from_status: str) -> bool:
        """A conditional update from `from_status` to running: True for the one caller whose
        update changed the row."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.status) == from_status,
            )
            .values(status="running")
        )
        return bool(done.rowcount == 1)

    def count_running(self) -> int:
        """How many conversations are running (queued for a worker included): a count over
        the (status, created_at) index."""
        query = (
            select(func.count())
            .select_from(TqaConversation)
            .where(col(TqaConversation.status) == "running")
        )
        return int(self._db.exec(query).one())

    def held_by(self, conversation_id: str, runner: str | None) -> bool:
        """Whether `runner` still runs the conversation (taken up by no other since); the
        row is locked until the transaction ends, so a taker waits for a turn being written."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.runner) == runner,
            )
            .values(runner=runner)
        )
        return bool(done.rowcount == 1)

    def turns(self, conversation_id: str) -> list[TqaTurn]:
        """Its turns, in order."""
        query = (
            select(TqaTurn)
            .where(col(TqaTurn.conversation_id) == conversation_id)
            .order_by(col(TqaTurn.seq))
        )
        return list(self._db.exec(query).all())

    def page(self, at: Window, status: str | None = None) -> Page[TqaConversation]:
        """Newest first; only those of `status` when given."""
        query = select(TqaConversation).order_by(col(TqaConversation.created_at).desc())
        if status is not None:
            query = query.where(col(TqaConversation.status) == status)
        return fetch_page(self._db, query, at)
