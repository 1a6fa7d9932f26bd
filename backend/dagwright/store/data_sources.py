"""Data sources added through the API (in the store's repository style: see store/apps.py).
Sources from the settings file and the demo are not stored: services/data_sources.py
merges them in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlmodel import Session, col, select

from dagwright.store.models import DataSource, utcnow


class DataSourceRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def all(self) -> list[DataSource]:
        """By name."""
        return list(self._db.exec(select(DataSource).order_by(col(DataSource.name))).all())

    def get(self, name: str) -> DataSource | None:
        return self._db.get(DataSource, name)

    def put(
        self,
        name: str,
        kind: str,
        config: Mapping[str, Any],
        description: str,
        catalogue_ttl_s: float | None = None,
    ) -> None:
        """Adds the source or replaces its settings."""
        row = self._db.get(DataSource, name)
        if row is None:
            row = DataSource(name=name, kind=kind, config=dict(config), description=description)
        else:
            row.kind, row.config, row.description = kind, dict(config), description
            row.updated_at = utcnow()
        row.catalogue_ttl_s = catalogue_ttl_s
        self._db.add(row)

    def delete(self, name: str) -> bool:
        """False when there was no such source."""
        row = self._db.get(DataSource, name)
        if row is None:
            return False
        self._db.delete(row)
        return True
