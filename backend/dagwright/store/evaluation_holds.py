"""Which process runs an evaluation in-process: the replica lease it names (`replica`, the
mechanism of services/runs/replicas.py, whose heartbeat keeps it fresh). Each statement is one
conditional update, so that of processes claiming or taking over at the same moment exactly
one wins. The lease rows and the evaluations are read in one statement: a lease is committed
before any evaluation names it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import case, or_, update
from sqlalchemy import select as sa_select
from sqlmodel import Session, col, select

from dagwright.store.evaluation_models import Evaluation
from dagwright.store.models import Replica


@dataclass(frozen=True, slots=True)
class Holder:
    """The live process holding an evaluation, as its lease tells it."""

    lease: str
    name: str
    host: str
    pid: int
    heartbeat_at: datetime


@dataclass(frozen=True, slots=True)
class OrphanedEvaluation:
    """A running evaluation whose holder's lease is missing or stale."""

    id: str
    dead: str  # the lease it names
    attempts: int
    resumable: bool
    settings: dict[str, Any]


def _live(cutoff: datetime) -> Any:
    return select(Replica.id).where(col(Replica.heartbeat_at) > cutoff)


class EvaluationHolds:
    def __init__(self, db: Session) -> None:
        self._db = db

    def claim(self, evaluation_id: str, lease: str, cutoff: datetime, resumable: bool) -> bool:
        """Marks the evaluation running under `lease` unless it is complete or another live
        lease (refreshed after `cutoff`) holds it; a claim of another holder's (dead) one
        starts its attempts anew. True when `lease` holds it now."""
        mine = col(Evaluation.replica) == lease
        done = self._db.exec(
            update(Evaluation)
            .where(
                col(Evaluation.id) == evaluation_id,
                col(Evaluation.status) != "completed",
                or_(
                    col(Evaluation.replica).is_(None),
                    mine,
                    col(Evaluation.replica).not_in(_live(cutoff)),
                ),
            )
            .values(
                status="running",
                error=None,
                replica=lease,
                resumable=resumable,
                attempts=case((mine, col(Evaluation.attempts)), else_=1),
            )
        )
        return bool(done.rowcount == 1)

    def holder(self, evaluation_id: str, cutoff: datetime) -> Holder | None:
        """The live process holding the evaluation, if one does."""
        query = sa_select(
            col(Replica.id),
            col(Replica.name),
            col(Replica.host),
            col(Replica.pid),
            col(Replica.heartbeat_at),
        ).where(
            col(Replica.id) == Evaluation.replica,
            col(Evaluation.id) == evaluation_id,
            col(Replica.heartbeat_at) > cutoff,
        )
        row = self._db.connection().execute(query).first()
        return None if row is None else Holder(*row)

    def holds(self, evaluation_id: str, lease: str) -> bool:
        query = select(Evaluation.id).where(
            col(Evaluation.id) == evaluation_id, col(Evaluation.replica) == lease
        )
        return self._db.exec(query).first() is not None

    def release(self, evaluation_id: str, lease: str, status: str | None = None) -> bool:
        """`lease` holds the evaluation no more (and it becomes `status`, when given); False
        when another process took it over meanwhile (then nothing changes)."""
        values: dict[str, Any] = {"replica": None}
        if status is not None:
            values["status"] = status
        done = self._db.exec(
            update(Evaluation)
            .where(col(Evaluation.id) == evaluation_id, col(Evaluation.replica) == lease)
            .values(**values)
        )
        return bool(done.rowcount == 1)

    def orphaned(self, lease: str, cutoff: datetime) -> list[OrphanedEvaluation]:
        """The running evaluations whose lease is missing or was not refreshed since
        `cutoff`; never those of `lease`."""
        query = sa_select(
            col(Evaluation.id),
            col(Evaluation.replica),
            col(Evaluation.attempts),
            col(Evaluation.resumable),
            col(Evaluation.settings),
        ).where(
            col(Evaluation.status) == "running",
            col(Evaluation.replica).is_not(None),
            col(Evaluation.replica) != lease,
            col(Evaluation.replica).not_in(_live(cutoff)),
        )
        return [
            OrphanedEvaluation(row[0], str(row[1]), row[2], bool(row[3]), dict(row[4] or {}))
            for row in self._db.connection().execute(query).all()
        ]

    def take_over(self, evaluation_id: str, dead: str, lease: str) -> bool:
        """A running evaluation of dead lease `dead` to `lease`, one more attempt: True for
        the one caller it changed."""
        done = self._db.exec(
            update(Evaluation)
            .where(
                col(Evaluation.id) == evaluation_id,
                col(Evaluation.status) == "running",
                col(Evaluation.replica) == dead,
            )
            .values(replica=lease, attempts=col(Evaluation.attempts) + 1)
        )
        return bool(done.rowcount == 1)

    def give_up(self, evaluation_id: str, dead: str, status: str, error: dict[str, str]) -> bool:
        """A running evaluation still of dead lease `dead` ends `status` with `error` (its
        results kept: starting it again goes on with the examples left); False when another
        process took it over or it ended."""
        done = self._db.exec(
            update(Evaluation)
            .where(
                col(Evaluation.id) == evaluation_id,
                col(Evaluation.status) == "running",
                col(Evaluation.replica) == dead,
            )
            .values(status=status, error=error, replica=None)
        )
        return bool(done.rowcount == 1)
