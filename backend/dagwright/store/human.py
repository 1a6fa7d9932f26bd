"""Human-in-the-loop requests and the runs paused on them, in the store's repository style
(see store/apps.py). The claims are conditional updates, so whichever replica's update
changes the row is the one that acts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import exists, func, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import Run, utcnow
from dagwright.store.paging import Page, Window, fetch_page


class HumanRequestRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, request: HumanRequest) -> None:
        self._db.add(request)

    def find(self, request_id: str) -> HumanRequest:
        found = self._db.get(HumanRequest, request_id)
        if found is None:
            raise NotFoundError(f"no human request {request_id!r}")
        return found

    def by_token(self, token: str) -> HumanRequest:
        query = select(HumanRequest).where(HumanRequest.link_token == token)
        found = self._db.exec(query).first()
        if found is None:
            raise NotFoundError("this link is not valid")
        return found

    def listing(
        self, status: str | None, app_id: str | None, run_id: str | None, at: Window
    ) -> Page[HumanRequest]:
        """Oldest first (the id breaks ties, so pages neither repeat nor skip a request)."""
        query = select(HumanRequest).order_by(col(HumanRequest.created_at), col(HumanRequest.id))
        if status is not None:
            query = query.where(HumanRequest.status == status)
        if app_id is not None:
            query = query.where(HumanRequest.app_id == app_id)
        if run_id is not None:
            query = query.where(HumanRequest.run_id == run_id)
        return fetch_page(self._db, query, at)

    def claim(self, request_id: str, status: str, answer: dict[str, Any], choice: str) -> bool:
        """Moves the request from waiting to `status` with its answer; False when another
        answer (or the timeout) did first."""
        done = self._db.exec(
            update(HumanRequest)
            .where(col(HumanRequest.id) == request_id, col(HumanRequest.status) == "waiting")
            .values(status=status, answer=answer, choice=choice, answered_at=utcnow())
        )
        return bool(done.rowcount == 1)

    def waiting_count(self, run_id: str) -> int:
        query = select(func.count()).where(
            col(HumanRequest.run_id) == run_id, col(HumanRequest.status) == "waiting"
        )
        return int(self._db.exec(query).one())

    def settled(self, run_id: str) -> list[HumanRequest]:
        """The run's requests answered or timed out."""
        query = select(HumanRequest).where(
            HumanRequest.run_id == run_id, HumanRequest.status != "waiting"
        )
        return list(self._db.exec(query).all())

    def due(self, now: datetime) -> list[HumanRequest]:
        """Waiting requests past their timeout."""
        query = select(HumanRequest).where(
            HumanRequest.status == "waiting", col(HumanRequest.expires_at) < now
        )
        return list(self._db.exec(query).all())

    def mark_resumed(self, waiting_run_id: str, run_id: str) -> None:
        """Every request of the paused run names the run that went on."""
        self._db.exec(
            update(HumanRequest)
            .where(col(HumanRequest.run_id) == waiting_run_id)
            .values(resumed_run_id=run_id)
        )

    # -- the paused runs -------------------------------------------------------------------

    def app_of_run(self, run_id: str) -> str | None:
        return self._db.exec(select(Run.app_id).where(Run.id == run_id)).first()

    def run_state(self, run_id: str) -> tuple[str, str | None] | None:
        """The run's status and version (None: a run of an unsaved flow)."""
        found = self._db.exec(select(Run.status, Run.version_id).where(Run.id == run_id)).first()
        return None if found is None else (found[0], found[1])

    def claim_run(self, run_id: str) -> bool:
        """Moves the paused run from waiting to resumed; False when it is not waiting (it
        was resumed by another, or it is still being recorded)."""
        done = self._db.exec(
            update(Run)
            .where(col(Run.id) == run_id, col(Run.status) == "waiting")
            .values(status="resumed")
        )
        return bool(done.rowcount == 1)

    def unresumed(self, settled_before: datetime) -> list[tuple[str, str]]:
        """(run, node) of waiting runs of saved versions whose requests were all settled
        before `settled_before`: none waits, and none was answered since."""
        pending = aliased(HumanRequest)
        query = (
            select(col(HumanRequest.run_id), col(HumanRequest.node))
            .join(Run, col(Run.id) == col(HumanRequest.run_id))
            .where(
                col(Run.status) == "waiting",
                col(Run.version_id).is_not(None),  # an unsaved flow resumes from the editor
                col(HumanRequest.status) != "waiting",
                ~exists().where(
                    col(pending.run_id) == col(HumanRequest.run_id),
                    or_(
                        col(pending.status) == "waiting",
                        col(pending.answered_at) >= settled_before,
                    ),
                ),
            )
        )
        return [(run_id, node) for run_id, node in self._db.exec(query).all()]
