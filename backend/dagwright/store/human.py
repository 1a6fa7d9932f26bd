"""Human-in-the-loop requests and the runs paused on them, in the store's repository style
(see store/apps.py). The claims are conditional updates, so whichever replica's update
changes the row is the one that acts."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, func, or_, update
from sqlalchemy.orm import aliased
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import Run, TqaConversation, utcnow
from dagwright.store.paging import Page, Window, fetch_page


class HumanRequestRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, request: HumanRequest) -> None:
        self._db.add(request)

    def of_node(self, run_id: str, node: str) -> HumanRequest | None:
        """The run's request for this node (there is at most one)."""
        query = select(HumanRequest).where(HumanRequest.run_id == run_id, HumanRequest.node == node)
        return self._db.exec(query).first()

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
        self,
        status: str | None,
        app_id: str | None,
        run_id: str | None,
        at: Window,
        conversation_id: str | None = None,
    ) -> Page[HumanRequest]:
        """Oldest first (the id breaks ties, so pages neither repeat nor skip a request)."""
        query = select(HumanRequest).order_by(col(HumanRequest.created_at), col(HumanRequest.id))
        if status is not None:
            query = query.where(HumanRequest.status == status)
        if app_id is not None:
            query = query.where(HumanRequest.app_id == app_id)
        if run_id is not None:
            query = query.where(HumanRequest.run_id == run_id)
        if conversation_id is not None:
            query = query.where(HumanRequest.conversation_id == conversation_id)
        return fetch_page(self._db, query, at)

    def claim(
        self,
        request_id: str,
        status: str,
        answer: dict[str, Any],
        choice: str,
        open_at: datetime | None = None,
    ) -> bool:
        """Moves the request from waiting to `status` with its answer; False when another
        answer (or the timeout) did first. With `open_at` (a person's answer), also False
        when the request expires at or before that instant, though the sweep has not yet
        settled it."""
        query = update(HumanRequest).where(
            col(HumanRequest.id) == request_id, col(HumanRequest.status) == "waiting"
        )
        if open_at is not None:
            query = query.where(
                or_(col(HumanRequest.expires_at).is_(None), col(HumanRequest.expires_at) > open_at)
            )
        done = self._db.exec(
            query.values(status=status, answer=answer, choice=choice, answered_at=utcnow())
        )
        return bool(done.rowcount == 1)

    def reopen(self, request_id: str) -> bool:
        """Moves an answered request back to waiting (its run's continuation could not
        start), unless a continuation started after all."""
        done = self._db.exec(
            update(HumanRequest)
            .where(
                col(HumanRequest.id) == request_id,
                col(HumanRequest.status) == "answered",
                col(HumanRequest.resumed_run_id).is_(None),
            )
            .values(status="waiting", answer=None, choice=None, answered_at=None)
        )
        return bool(done.rowcount == 1)

    def cancel_paused(self, error: dict[str, Any], now: datetime) -> int:
        """Ends as cancelled (with `error`) the paused runs a cancel was asked of; how many."""
        done = self._db.exec(
            update(Run)
            .where(col(Run.status) == "waiting", col(Run.cancel_requested_at).is_not(None))
            .values(status="cancelled", error=error, finished_at=now)
        )
        return int(done.rowcount)

    def close_cancelled(self, status: str) -> int:
        """Moves the waiting requests of cancelled runs to `status`; how many."""
        # Each waiting request looks its run up by key: every replica asks every second.
        done = self._db.exec(
            update(HumanRequest)
            .where(
                col(HumanRequest.status) == "waiting",
                exists().where(
                    col(Run.id) == col(HumanRequest.run_id), col(Run.status) == "cancelled"
                ),
            )
            .values(status=status, answered_at=utcnow())
        )
        return int(done.rowcount)

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
        """Waiting requests at or past their expiry instant (no longer answerable)."""
        query = select(HumanRequest).where(
            HumanRequest.status == "waiting", col(HumanRequest.expires_at) <= now
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

    def claim_run(self, run_id: str, now: datetime) -> bool:
        """Moves the paused run from waiting to resumed, stamping its requests with the time
        of the claim; False when it is not waiting (it was resumed by another, or it is still
        being recorded)."""
        done = self._db.exec(
            update(Run)
            .where(col(Run.id) == run_id, col(Run.status) == "waiting")
            .values(status="resumed")
        )
        if done.rowcount != 1:
            return False
        self._db.exec(
            update(HumanRequest)
            .where(col(HumanRequest.run_id) == run_id)
            .values(resume_claimed_at=now)
        )
        return True

    def _unnamed(self, run_id: str) -> Any:
        """No request of the run names a continuation."""
        named = aliased(HumanRequest)
        return ~exists().where(col(named.run_id) == run_id, col(named.resumed_run_id).is_not(None))

    def release_run(self, run_id: str) -> bool:
        """Moves a claimed run back to waiting (its claimer could not start the
        continuation), unless a continuation of it is named after all."""
        done = self._db.exec(
            update(Run)
            .where(col(Run.id) == run_id, col(Run.status) == "resumed", self._unnamed(run_id))
            .values(status="waiting")
        )
        return bool(done.rowcount == 1)

    def fail_run(self, run_id: str, error: dict[str, Any], now: datetime) -> bool:
        """Ends a claimed run as failed with `error` (its continuation cannot start), unless a
        continuation of it is named after all."""
        done = self._db.exec(
            update(Run)
            .where(col(Run.id) == run_id, col(Run.status) == "resumed", self._unnamed(run_id))
            .values(status="failed", error=error, finished_at=now)
        )
        return bool(done.rowcount == 1)

    def release_stale(self, run_id: str, claimed_before: datetime) -> bool:
        """As release_run, for a claim made before `claimed_before` only (the replica that
        made it stopped, or gave up): a claim being acted on now is left alone. Nor is a run
        from which a continuation started that stopped before it was named: only one that
        could not start (`failed` at once) is no continuation."""
        recent = aliased(HumanRequest)
        child = aliased(Run)
        done = self._db.exec(
            update(Run)
            .where(
                col(Run.id) == run_id,
                col(Run.status) == "resumed",
                self._unnamed(run_id),
                ~exists().where(
                    col(child.parent_run_id) == run_id,
                    col(child.mode) == "resume",
                    col(child.status) != "failed",
                ),
                ~exists().where(
                    col(recent.run_id) == run_id,
                    col(recent.resume_claimed_at) >= claimed_before,
                ),
            )
            .values(status="waiting")
        )
        return bool(done.rowcount == 1)

    def unresumed(self, settled_before: datetime) -> list[tuple[str, str]]:
        """(run, node) of paused runs of saved versions whose requests were all settled, and
        last claimed (if ever), before `settled_before`: `waiting` ones, and `resumed` ones
        no request of which names a continuation (release_stale tells which of those
        started none)."""
        pending = aliased(HumanRequest)
        query = (
            select(col(HumanRequest.run_id), col(HumanRequest.node))
            .join(Run, col(Run.id) == col(HumanRequest.run_id))
            .where(
                or_(
                    col(Run.status) == "waiting",
                    and_(col(Run.status) == "resumed", col(HumanRequest.resumed_run_id).is_(None)),
                ),
                col(Run.version_id).is_not(None),  # an unsaved flow resumes from the editor
                col(HumanRequest.status) != "waiting",
                ~exists().where(
                    col(pending.run_id) == col(HumanRequest.run_id),
                    or_(
                        col(pending.status) == "waiting",
                        col(pending.answered_at) >= settled_before,
                        col(pending.resume_claimed_at) >= settled_before,
                        col(pending.resumed_run_id).is_not(None),
                    ),
                ),
            )
        )
        return [(str(run_id), node) for run_id, node in self._db.exec(query).all()]

    # -- AutoTQA conversations waiting for an approval ---------------------------------------

    def of_conversation(self, conversation_id: str, node: str) -> HumanRequest | None:
        """The latest request of the conversation at `node` (its tool call's turn)."""
        query = (
            select(HumanRequest)
            .where(HumanRequest.conversation_id == conversation_id, HumanRequest.node == node)
            .order_by(col(HumanRequest.created_at).desc())
        )
        return self._db.exec(query).first()

    def close_conversation(self, conversation_id: str) -> None:
        """The conversation's waiting requests closed as `cancelled` (it was cancelled)."""
        self._db.exec(
            update(HumanRequest)
            .where(
                col(HumanRequest.conversation_id) == conversation_id,
                col(HumanRequest.status) == "waiting",
            )
            .values(status="cancelled", answered_at=utcnow())
        )

    def unresumed_conversations(self, settled_before: datetime) -> list[str]:
        """Conversations still waiting though their approvals were all settled before
        `settled_before` (the answering process stopped before letting them go on)."""
        pending = aliased(HumanRequest)
        query = (
            select(col(HumanRequest.conversation_id))
            .join(TqaConversation, col(TqaConversation.id) == col(HumanRequest.conversation_id))
            .where(
                col(TqaConversation.status) == "waiting",
                col(HumanRequest.status) != "waiting",
                ~exists().where(
                    col(pending.conversation_id) == col(HumanRequest.conversation_id),
                    or_(
                        col(pending.status) == "waiting",
                        col(pending.answered_at) >= settled_before,
                    ),
                ),
            )
            .distinct()
        )
        return [str(found) for found in self._db.exec(query).all()]
