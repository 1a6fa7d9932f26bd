"""API keys of apps (in the store's repository style: see store/apps.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, update
from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.models import ApiKey, App


class KeyRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def add(self, key: ApiKey) -> None:
        if self._db.get(App, key.app_id) is None:
            raise NotFoundError(f"no app {key.app_id!r}", code="app_not_found")
        self._db.add(key)

    def of_app(self, app_id: str) -> list[ApiKey]:
        """The app's keys, revoked ones included, oldest first."""
        query = (
            select(ApiKey)
            .where(ApiKey.app_id == app_id)
            .order_by(col(ApiKey.created_at), col(ApiKey.id))
        )
        return list(self._db.exec(query).all())

    def find(self, app_id: str, key_id: str) -> ApiKey:
        """The app's key (NotFoundError `key_not_found` for another app's)."""
        key = self._db.get(ApiKey, key_id)
        if key is None or key.app_id != app_id:
            raise NotFoundError(f"no API key {key_id!r} for this app", code="key_not_found")
        return key

    def by_hash(self, digest: str) -> ApiKey | None:
        return self._db.exec(select(ApiKey).where(ApiKey.hash == digest)).first()

    def mark_used(self, key: ApiKey, now: datetime, unless_since: datetime) -> None:
        """Sets the key's last use to `now` unless it was used after `unless_since`: a
        conditional write, so replicas verifying the same key at once write it once."""
        self._db.exec(
            update(ApiKey)
            .where(col(ApiKey.id) == key.id)
            .where(
                or_(col(ApiKey.last_used_at).is_(None), col(ApiKey.last_used_at) <= unless_since)
            )
            .values(last_used_at=now)
            .execution_options(synchronize_session=False)
        )
