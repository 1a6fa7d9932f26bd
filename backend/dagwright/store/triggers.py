"""Triggers and their firings (one aggregate: a firing belongs to its trigger), in the
store's repository style (see store/apps.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.paging import Page, Window, fetch_page
from dagwright.store.trigger_models import Trigger, TriggerFiring, WebhookDelivery

RATE_WINDOW = timedelta(minutes=1)  # a webhook's rate limit counts its firings in this window


@dataclass(frozen=True)
class WebhookClaim:
    """What claiming a webhook call came to: `firing` when it fired; else it was a replay, or
    `limited` seconds must pass before the trigger fires again."""

    firing: TriggerFiring | None = None
    replayed: bool = False
    limited: float | None = None


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
        # Its remembered signatures go with it: no later firing would expire them.
        self._db.exec(delete(WebhookDelivery).where(col(WebhookDelivery.trigger_id) == trigger.id))

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

    def claim_webhook(
        self,
        firing: TriggerFiring,
        signature: str,
        expires_at: datetime,
        limit: int,
    ) -> WebhookClaim:
        """Records a signed webhook call's firing and its signature in one transaction (the
        caller commits), unless the signature was seen before its window ended (a replay) or
        the trigger fired `limit` times in the last RATE_WINDOW. Calls of one trigger are
        taken one at a time, on every replica: the first statement writes the trigger's row,
        which holds its lock (PostgreSQL's row lock, SQLite's write lock) to the commit, so
        the count and the replay check see every firing committed before. A tick another
        call took in the same microsecond rolls back (the caller tries the next)."""
        now = firing.tick
        self.advance(firing.trigger_id, now)  # webhooks: the latest call that fired
        self._db.exec(
            delete(WebhookDelivery).where(
                col(WebhookDelivery.trigger_id) == firing.trigger_id,
                col(WebhookDelivery.expires_at) < now,
            )
        )
        if self._db.get(WebhookDelivery, (firing.trigger_id, signature)) is not None:
            self._db.rollback()
            return WebhookClaim(replayed=True)
        count, oldest = self._db.exec(
            select(func.count(), func.min(TriggerFiring.tick)).where(
                TriggerFiring.trigger_id == firing.trigger_id,
                TriggerFiring.tick > now - RATE_WINDOW,
            )
        ).one()
        if count >= limit:
            self._db.rollback()
            if oldest is not None and oldest.tzinfo is None:  # SQLite: naive, in UTC
                oldest = oldest.replace(tzinfo=now.tzinfo)
            wait = (oldest + RATE_WINDOW - now).total_seconds() if oldest else 1.0
            return WebhookClaim(limited=max(wait, 0.001))
        self._db.add(
            WebhookDelivery(
                trigger_id=firing.trigger_id, signature=signature, expires_at=expires_at
            )
        )
        self._db.add(firing)
        try:
            self._db.flush()
        except IntegrityError:
            self._db.rollback()
            return WebhookClaim()
        return WebhookClaim(firing=firing)

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
