"""Triggers and their firings (one aggregate: a firing belongs to its trigger), in the
store's repository style (see store/apps.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.paging import Page, Window, fetch_page
from dagwright.store.trigger_models import Trigger, TriggerFiring


class TriggerRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, trigger: Trigger) -> None:
        self._db.add(trigger)

    def find(self, trigger_id: str) -> Trigger:
        found = self._db.get(Trigger, trigger_id)
        if found is None:
            raise NotFoundError(f"no trigger {trigger_id!r}")
        return found

    def of_app(self, app_id: str) -> list[Trigger]:
        """Oldest first."""
        query = select(Trigger).where(Trigger.app_id == app_id).order_by(col(Trigger.created_at))
        return list(self._db.exec(query).all())

    def enabled_cron(self) -> list[Trigger]:
        query = select(Trigger).where(Trigger.kind == "cron", col(Trigger.enabled))
        return list(self._db.exec(query).all())

    def delete(self, trigger: Trigger) -> None:
        self._db.delete(trigger)

    def advance(self, trigger_id: str, tick: datetime) -> None:
        """Records `tick` as the trigger's latest claimed tick."""
        self._db.exec(update(Trigger).where(col(Trigger.id) == trigger_id).values(last_tick=tick))

    # -- firings ---------------------------------------------------------------------------

    def claim(self, trigger: Trigger, firing: TriggerFiring) -> bool:
        """Adds the firing of a tick (and, for a schedule, advances it to the tick); False
        (rolled back) when another replica claimed that tick first: a unique constraint on
        (trigger, tick) lets one insert commit."""
        self._db.add(firing)
        try:
            self._db.flush()
        except IntegrityError:
            self._db.rollback()
            return False
        if trigger.kind == "cron":
            self.advance(trigger.id, firing.tick)
        return True

    def settle(self, firing_id: str, run_id: str | None, error: str | None) -> None:
        """The firing's run, or why it could not start."""
        self._db.exec(
            update(TriggerFiring)
            .where(col(TriggerFiring.id) == firing_id)
            .values(run_id=run_id, status="failed" if error else "started", error=error)
        )

    def firings(self, trigger_id: str, at: Window) -> Page[TriggerFiring]:
        """Newest tick first."""
        query = select(TriggerFiring).where(TriggerFiring.trigger_id == trigger_id)
        return fetch_page(self._db, query.order_by(col(TriggerFiring.tick).desc()), at)
