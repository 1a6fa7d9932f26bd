"""Hints of TQA datasets, in the store's repository style (see store/apps.py)."""

from __future__ import annotations

from sqlmodel import Session, col, select

from dagwright.errors import NotFoundError
from dagwright.store.models import TqaHint


class HintRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def all(self, dataset: str | None = None, status: str | None = None) -> list[TqaHint]:
        """By dataset, oldest first; only those of `dataset` and `status` when given."""
        query = select(TqaHint).order_by(col(TqaHint.dataset), col(TqaHint.created_at))
        if dataset is not None:
            query = query.where(col(TqaHint.dataset) == dataset)
        if status is not None:
            query = query.where(col(TqaHint.status) == status)
        return list(self._db.exec(query).all())

    def find(self, hint_id: str) -> TqaHint:
        """The hint (NotFoundError `hint_not_found`)."""
        hint = self._db.get(TqaHint, hint_id)
        if hint is None:
            raise NotFoundError(f"no hint {hint_id!r}", code="hint_not_found")
        return hint

    def with_text(self, dataset: str, text: str) -> TqaHint | None:
        """The dataset's hint of exactly this text, in any status."""
        query = select(TqaHint).where(col(TqaHint.dataset) == dataset, col(TqaHint.text) == text)
        return self._db.exec(query).first()

    def add(self, hint: TqaHint) -> None:
        self._db.add(hint)

    def delete(self, hint: TqaHint) -> None:
        self._db.delete(hint)
