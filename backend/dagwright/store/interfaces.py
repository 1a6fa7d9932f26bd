"""Data-Copilot's interface libraries: every version of each interface of a data source, and
the requests no interface covered (in the store's repository style: see store/apps.py)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from dagwright.store.interface_models import DcInterface, DcUncovered


class InterfaceRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def newest(self, source: str) -> list[DcInterface]:
        """The newest version of each interface of the source, deleted ones included."""
        rows = self._db.exec(
            select(DcInterface)
            .where(DcInterface.source == source)
            .order_by(col(DcInterface.name), col(DcInterface.version).desc())
        ).all()
        newest: dict[str, DcInterface] = {}
        for row in rows:
            newest.setdefault(row.name, row)
        return list(newest.values())

    def sources(self) -> list[str]:
        """Every data source with an interface, by name."""
        return sorted(self._db.exec(select(DcInterface.source).distinct()).all())

    def add_version(self, version: DcInterface) -> None:
        self._db.add(version)

    # -- requests no interface covered -------------------------------------------------------

    def add_uncovered(self, uncovered: DcUncovered) -> None:
        self._db.add(uncovered)

    def open_uncovered(self, source: str) -> list[DcUncovered]:
        """Requests not yet taken into a design round, oldest first."""
        return list(
            self._db.exec(
                select(DcUncovered)
                .where(DcUncovered.source == source, col(DcUncovered.designed).is_(False))
                .order_by(col(DcUncovered.created_at))
            ).all()
        )

    def mark_designed(self, ids: Sequence[str]) -> None:
        for row in self._db.exec(select(DcUncovered).where(col(DcUncovered.id).in_(list(ids)))):
            row.designed = True
