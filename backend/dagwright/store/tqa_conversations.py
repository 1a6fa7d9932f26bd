"""AutoTQA conversations and their turns (one aggregate: a turn belongs to its
conversation), in the store's repository style (see store/apps.py)."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from sqlalchemy import func, update
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.models import Replica, TqaConversation, TqaTurn
from dagwright.store.paging import Page, Window, fetch_page


class Orphan(NamedTuple):
    """A running conversation of a server process whose lease is missing or stale."""

    id: str
    replica: str  # the dead lease
    attempts: int
    foreground: bool


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

    def claim(self, conversation_id: str, from_status: str, replica: str | None = None) -> bool:
        """A conditional update from `from_status` to running, run by the server process of
        lease `replica` (None: a queue worker): True for the one caller whose update changed
        the row."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.status) == from_status,
            )
            .values(status="running", replica=replica, attempts=0 if replica is None else 1)
        )
        return bool(done.rowcount == 1)

    def orphaned(self, lease: str, cutoff: datetime) -> list[Orphan]:
        """The running conversations of server processes whose lease is missing or was not
        refreshed since `cutoff`; never those of `lease`. One statement, whose subquery sees
        the leases as of the same moment as the conversations: a lease is committed before
        any conversation names it."""
        live = select(Replica.id).where(col(Replica.heartbeat_at) > cutoff)
        query = select(
            TqaConversation.id,
            TqaConversation.replica,
            TqaConversation.attempts,
            TqaConversation.foreground,
        ).where(
            col(TqaConversation.status) == "running",
            col(TqaConversation.replica).is_not(None),
            col(TqaConversation.replica) != lease,
            col(TqaConversation.replica).not_in(live),
        )
        return [
            Orphan(row[0], str(row[1]), row[2], bool(row[3])) for row in self._db.exec(query).all()
        ]

    def take_over(self, conversation_id: str, dead: str, replica: str | None) -> bool:
        """A conditional update of a running conversation of lease `dead` to lease `replica`
        (None: a queue worker's), one more attempt: True for the one caller it changed."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.status) == "running",
                col(TqaConversation.replica) == dead,
            )
            .values(replica=replica, attempts=col(TqaConversation.attempts) + 1)
        )
        return bool(done.rowcount == 1)

    def hand_over(self, lease: str) -> int:
        """The running conversations of lease `lease`, handed over by their process as it
        stops cleanly: one attempt less, as the one that takes each up adds one (a clean
        stop is no death). How many."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.status) == "running",
                col(TqaConversation.replica) == lease,
                col(TqaConversation.foreground).is_(False),
                col(TqaConversation.attempts) > 0,
            )
            .values(attempts=col(TqaConversation.attempts) - 1)
        )
        return int(done.rowcount)

    def end_foreground(self, lease: str, error: dict[str, str], at: datetime) -> int:
        """Ends failed with `error` the foreground conversations of lease `lease` still
        running (their process stops, and their callers' requests with it); how many."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.status) == "running",
                col(TqaConversation.replica) == lease,
                col(TqaConversation.foreground).is_(True),
            )
            .values(status="failed", error=error, finished_at=at)
        )
        return int(done.rowcount)

    def give_up(self, conversation_id: str, dead: str, error: dict[str, str], at: datetime) -> bool:
        """Ends failed with `error` a running conversation still of lease `dead` (a
        conditional update: False when another took it over or it ended)."""
        done = self._db.exec(
            update(TqaConversation)
            .where(
                col(TqaConversation.id) == conversation_id,
                col(TqaConversation.status) == "running",
                col(TqaConversation.replica) == dead,
            )
            .values(status="failed", error=error, finished_at=at)
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
