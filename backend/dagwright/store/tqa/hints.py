"""Hints per dataset ("common knowledge", AutoTQA section 4.4): written by hand (confirmed at
once) or learned from a conversation's successful retry (candidates until an operator
confirms them; dropped ones are kept, so the lesson is not learned again)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Engine
from sqlmodel import col, select

from dagwright.errors import InputError, NotFoundError
from dagwright.store.db import session
from dagwright.store.models import TqaHint, utcnow

STATUSES = ("confirmed", "candidate", "dropped")
MAX_TEXT = 4000


class HintError(InputError):
    code = "invalid_hint"


@dataclass(slots=True)
class Hint:
    id: str
    dataset: str
    text: str
    status: str  # confirmed | candidate (learned, unreviewed) | dropped
    source: str  # manual | learned
    question: str | None
    conversation_id: str | None
    details: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "dataset": self.dataset,
            "text": self.text,
            "status": self.status,
            "source": self.source,
            "question": self.question,
            "conversation_id": self.conversation_id,
            "details": self.details,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def _hint(row: TqaHint) -> Hint:
    return Hint(
        row.id,
        row.dataset,
        row.text,
        row.status,
        row.source,
        row.question,
        row.conversation_id,
        row.details,
        row.created_at,
        row.updated_at,
    )


def _check(dataset: str, text: str) -> None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", dataset):
        raise HintError(f"dataset {dataset!r}: 1-64 letters, digits, '_', '.' or '-'")
    if not text.strip() or len(text) > MAX_TEXT:
        raise HintError(f"a hint is 1 to {MAX_TEXT} characters")


def _not_found(hint_id: str) -> NotFoundError:
    return NotFoundError(f"no hint {hint_id!r}", code="hint_not_found")


class HintRepository:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def list(self, dataset: str | None = None, status: str | None = None) -> list[Hint]:
        query = select(TqaHint).order_by(col(TqaHint.dataset), col(TqaHint.created_at))
        if dataset is not None:
            query = query.where(col(TqaHint.dataset) == dataset)
        if status is not None:
            query = query.where(col(TqaHint.status) == status)
        with session(self._engine) as db:
            return [_hint(row) for row in db.exec(query)]

    def add(self, dataset: str, text: str) -> Hint:
        _check(dataset, text)
        row = TqaHint(dataset=dataset, text=text.strip())
        with session(self._engine) as db:
            db.add(row)
            db.commit()
            return _hint(row)

    def learn(
        self,
        dataset: str,
        text: str,
        *,
        question: str,
        conversation_id: str,
        details: dict[str, Any],
    ) -> Hint | None:
        """Records a candidate hint; None when the dataset already has this text (in any
        status: a dropped lesson is not learned again)."""
        text = text[:MAX_TEXT]
        _check(dataset, text)
        with session(self._engine) as db:
            same = db.exec(
                select(TqaHint).where(col(TqaHint.dataset) == dataset, col(TqaHint.text) == text)
            ).first()
            if same is not None:
                return None
            row = TqaHint(
                dataset=dataset,
                text=text,
                status="candidate",
                source="learned",
                question=question,
                conversation_id=conversation_id,
                details=details,
            )
            db.add(row)
            db.commit()
            return _hint(row)

    def update(self, hint_id: str, text: str | None = None, status: str | None = None) -> Hint:
        """Edits the text and/or the status (confirm a candidate, drop it, restore it)."""
        if status is not None and status not in STATUSES:
            raise HintError(f"a hint's status is one of {', '.join(STATUSES)}, not {status!r}")
        with session(self._engine) as db:
            row = db.get(TqaHint, hint_id)
            if row is None:
                raise _not_found(hint_id)
            if text is not None:
                _check(row.dataset, text)
                row.text = text.strip()
            if status is not None:
                row.status = status
            row.updated_at = utcnow()
            db.add(row)
            db.commit()
            return _hint(row)

    def delete(self, hint_id: str) -> None:
        with session(self._engine) as db:
            row = db.get(TqaHint, hint_id)
            if row is None:
                raise _not_found(hint_id)
            db.delete(row)
            db.commit()
