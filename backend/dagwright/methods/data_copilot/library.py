"""The interface library of each data source, in the database (dagwright.store
.interface_models): what the design phase accepted, what a user edited or deleted, and the
requests no interface covered. Every change is a new version; nothing is overwritten, so a
review can show what an interface was when a run used it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine

from dagwright.errors import NotFoundError
from dagwright.methods.data_copilot.interface import Interface
from dagwright.store.db import session
from dagwright.store.interface_models import DcInterface, DcUncovered
from dagwright.store.interfaces import InterfaceRepository


class InterfaceLibrary:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def _rows(self, source: str) -> list[DcInterface]:
        """The newest version of each interface of the source, deleted ones included."""
        with session(self._engine) as db:
            return InterfaceRepository(db).newest(source)

    def sources(self) -> list[str]:
        with session(self._engine) as db:
            return InterfaceRepository(db).sources()

    def interfaces(self, source: str) -> list[Interface]:
        return [Interface.model_validate(r.definition) for r in self._rows(source) if not r.deleted]

    def listing(self, source: str) -> list[dict[str, Any]]:
        """For review: each interface in use with its version, origin and signature."""
        return [
            {
                "name": row.name,
                "version": row.version,
                "origin": row.origin,
                "signature": Interface.model_validate(row.definition).signature(),
                "interface": row.definition,
                "created_at": row.created_at.isoformat(),
            }
            for row in self._rows(source)
            if not row.deleted
        ]

    def get(self, source: str, name: str) -> Interface:
        for row in self._rows(source):
            if row.name == name and not row.deleted:
                return Interface.model_validate(row.definition)
        raise NotFoundError(f"data source {source!r} has no interface {name!r}")

    def save(self, source: str, interface: Interface, origin: str = "designed") -> int:
        """Stores a new version of the interface; returns its version number."""
        return self._add_version(source, interface, origin, deleted=False)

    def _add_version(self, source: str, interface: Interface, origin: str, deleted: bool) -> int:
        current = {row.name: row.version for row in self._rows(source)}
        version = current.get(interface.name, 0) + 1
        with session(self._engine) as db:
            InterfaceRepository(db).add_version(
                DcInterface(
                    source=source,
                    name=interface.name,
                    version=version,
                    definition=interface.model_dump(mode="json"),
                    origin=origin,
                    deleted=deleted,
                )
            )
            db.commit()
        return version

    def replace(self, source: str, library: Sequence[Interface], origins: dict[str, str]) -> None:
        """Makes `library` the source's interfaces after a design round: new or changed ones
        get a version, the ones merged away are deleted (a deleting version)."""
        before = {i.name: i for i in self.interfaces(source)}
        kept = {i.name for i in library}
        for interface in library:
            if before.get(interface.name) != interface:
                self.save(source, interface, origins.get(interface.name, "designed"))
        for name in sorted(set(before) - kept):
            self.delete(source, name)

    def delete(self, source: str, name: str) -> None:
        """A deleting version: the interface as it was, marked deleted."""
        self._add_version(source, self.get(source, name), "deleted", deleted=True)

    def log_uncovered(self, source: str, request: str, reason: str) -> None:
        with session(self._engine) as db:
            InterfaceRepository(db).add_uncovered(
                DcUncovered(source=source, request=request, reason=reason)
            )
            db.commit()

    def uncovered(self, source: str) -> list[dict[str, Any]]:
        """Requests not yet taken into a design round, oldest first."""
        with session(self._engine) as db:
            rows = InterfaceRepository(db).open_uncovered(source)
        return [{"id": r.id, "request": r.request, "reason": r.reason} for r in rows]

    def mark_designed(self, ids: Sequence[str]) -> None:
        with session(self._engine) as db:
            InterfaceRepository(db).mark_designed(ids)
            db.commit()
