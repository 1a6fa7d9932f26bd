"""TQA profiles (AutoTQA's "datasets"): a named set of data sources with its standard
operating procedure (versioned: an edit is a new version), the few-shot example namespace of
each agent and tool, and how many examples and learned hints to retrieve per question.

(Evaluation datasets — `dagwright.evaluation` — are a different thing: an evaluation dataset
can name a TQA profile to ask its questions with.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, func
from sqlmodel import Session, col, select

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.store.db import session
from dagwright.store.models import TqaDataset, TqaDatasetSop, TqaHint, utcnow

_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


class ProfileError(InputError):
    code = "invalid_tqa_dataset"


@dataclass(slots=True)
class Profile:
    name: str
    description: str = ""
    sources: list[str] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)  # agent or tool role -> namespace
    examples_k: int = 3
    hints_k: int = 3
    sop: str = ""
    sop_version: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "sources": self.sources,
            "namespaces": self.namespaces,
            "examples_k": self.examples_k,
            "hints_k": self.hints_k,
            "sop": self.sop,
            "sop_version": self.sop_version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ProfileError(f"dataset {name!r}: 1-64 letters, digits, '_', '.' or '-'")


def check_settings(
    sources: list[str] | None,
    namespaces: dict[str, str] | None,
    examples_k: int | None,
    hints_k: int | None,
) -> None:
    """What a profile may store (which roles read examples is the caller's to check)."""
    for source in sources or []:
        if not _NAME.fullmatch(source):
            raise ProfileError(f"source {source!r}: 1-64 letters, digits, '_', '.' or '-'")
    for role, namespace in (namespaces or {}).items():
        if not _NAMESPACE.fullmatch(namespace):
            raise ProfileError(f"namespace {namespace!r} of {role}: not a namespace name")
    for label, k in (("examples_k", examples_k), ("hints_k", hints_k)):
        if k is not None and not 0 <= k <= 20:
            raise ProfileError(f"{label} is 0 to 20, not {k}")


def _not_found(name: str) -> NotFoundError:
    return NotFoundError(f"no TQA dataset {name!r}", code="tqa_dataset_not_found")


def _get_row(db: Session, name: str) -> TqaDataset:
    row = db.get(TqaDataset, name)
    if row is None:
        raise _not_found(name)
    return row


def _profile(db: Session, row: TqaDataset) -> Profile:
    sop = ""
    if row.sop_version:
        found = db.get(TqaDatasetSop, (row.name, row.sop_version))
        sop = found.text if found is not None else ""
    return Profile(
        row.name,
        row.description,
        list(row.sources or []),
        dict(row.namespaces or {}),
        row.examples_k,
        row.hints_k,
        sop,
        row.sop_version,
        row.created_at,
        row.updated_at,
    )


class ProfileRepository:
    """TQA profiles and their SOP versions."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def all(self) -> list[Profile]:
        with session(self._engine) as db:
            rows = db.exec(select(TqaDataset).order_by(col(TqaDataset.name))).all()
            return [_profile(db, row) for row in rows]

    def get(self, name: str) -> Profile:
        with session(self._engine) as db:
            return _profile(db, _get_row(db, name))

    def find(self, name: str) -> Profile | None:
        """The profile, or None: a dataset named only by its hints has no profile."""
        with session(self._engine) as db:
            row = db.get(TqaDataset, name)
            return None if row is None else _profile(db, row)

    def create(
        self,
        name: str,
        *,
        description: str = "",
        sources: list[str] | None = None,
        namespaces: dict[str, str] | None = None,
        examples_k: int = 3,
        hints_k: int = 3,
        sop: str | None = None,
    ) -> Profile:
        check_name(name)
        check_settings(sources, namespaces, examples_k, hints_k)
        with session(self._engine) as db:
            if db.get(TqaDataset, name) is not None:
                raise ConflictError(f"TQA dataset {name!r} exists", code="tqa_dataset_exists")
            db.add(
                TqaDataset(
                    name=name,
                    description=description,
                    sources=list(sources or []),
                    namespaces=dict(namespaces or {}),
                    examples_k=examples_k,
                    hints_k=hints_k,
                )
            )
            db.commit()
        if sop:
            self.set_sop(name, sop, "the first version")
        return self.get(name)

    def update(
        self,
        name: str,
        *,
        description: str | None = None,
        sources: list[str] | None = None,
        namespaces: dict[str, str] | None = None,
        examples_k: int | None = None,
        hints_k: int | None = None,
        sop: str | None = None,
        sop_note: str = "",
    ) -> Profile:
        """Changes what is given (None: unchanged); a different SOP is a new version."""
        check_settings(sources, namespaces, examples_k, hints_k)
        with session(self._engine) as db:
            row = _get_row(db, name)
            if description is not None:
                row.description = description
            if sources is not None:
                row.sources = list(sources)
            if namespaces is not None:
                row.namespaces = dict(namespaces)
            if examples_k is not None:
                row.examples_k = examples_k
            if hints_k is not None:
                row.hints_k = hints_k
            row.updated_at = utcnow()
            db.add(row)
            db.commit()
        if sop is not None:
            self.set_sop(name, sop, sop_note)
        return self.get(name)

    def set_sop(self, name: str, text: str, note: str = "") -> int:
        """Stores `text` as the SOP's next version (unless it is the current text); returns
        the current version."""
        if len(text) > 50_000 or len(note) > 500:
            raise ProfileError("an SOP is at most 50,000 characters, its note 500")
        with session(self._engine) as db:
            row = _get_row(db, name)
            current = db.get(TqaDatasetSop, (name, row.sop_version)) if row.sop_version else None
            if current is not None and current.text == text:
                return row.sop_version
            latest = db.exec(
                select(func.max(TqaDatasetSop.version)).where(col(TqaDatasetSop.dataset) == name)
            ).one()
            version = int(latest or 0) + 1
            db.add(TqaDatasetSop(dataset=name, version=version, text=text, note=note))
            row.sop_version, row.updated_at = version, utcnow()
            db.add(row)
            db.commit()
            return version

    def sops(self, name: str) -> list[dict[str, Any]]:
        """Every SOP version, newest first."""
        with session(self._engine) as db:
            _get_row(db, name)
            rows = db.exec(
                select(TqaDatasetSop)
                .where(col(TqaDatasetSop.dataset) == name)
                .order_by(col(TqaDatasetSop.version).desc())
            )
            return [
                {
                    "version": r.version,
                    "text": r.text,
                    "note": r.note,
                    "created_at": r.created_at.isoformat(),
                }
                for r in rows
            ]

    def delete(self, name: str) -> None:
        """The profile, its SOP versions and its hints."""
        with session(self._engine) as db:
            row = _get_row(db, name)
            for sop in db.exec(select(TqaDatasetSop).where(col(TqaDatasetSop.dataset) == name)):
                db.delete(sop)
            for hint in db.exec(select(TqaHint).where(col(TqaHint.dataset) == name)):
                db.delete(hint)
            db.flush()
            db.delete(row)
            db.commit()
