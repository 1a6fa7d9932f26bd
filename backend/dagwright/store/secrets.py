"""Encrypted secrets by name (in the store's repository style: see store/apps.py). The
repository sees ciphertext only; services/secret_store.py encrypts and decrypts."""

from __future__ import annotations

from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, select

from dagwright.store.models import Secret, utcnow


class SecretRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def ciphertext(self, name: str) -> str | None:
        row = self._db.get(Secret, name)
        return None if row is None else row.ciphertext

    def names(self) -> list[str]:
        return sorted(self._db.exec(select(Secret.name)).all())

    def put(self, name: str, ciphertext: str) -> bool:
        """Creates the secret or replaces its value; False (rolled back) when a concurrent
        call created it since it was looked up: putting it again replaces it."""
        row = self._db.get(Secret, name)
        if row is None:
            self._db.add(Secret(name=name, ciphertext=ciphertext))
        else:
            row.ciphertext = ciphertext
            row.updated_at = utcnow()
        try:
            self._db.flush()
        except IntegrityError:
            self._db.rollback()
            return False
        return True

    def delete(self, name: str) -> bool:
        """False when there was no such secret."""
        row = self._db.get(Secret, name)
        if row is None:
            return False
        self._db.delete(row)
        return True
