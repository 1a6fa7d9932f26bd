"""TQA profiles (AutoTQA's "datasets"): a named set of data sources with its standard
operating procedure (versioned: an edit is a new version), the few-shot example namespace of
each agent and tool, and how many examples and learned hints to retrieve per question. A
question names its profile (`dataset`), so these settings persist per dataset — stored here,
not in whichever flow version was published last.

(Evaluation datasets — `dagwright.evaluation` — are a different thing: an evaluation dataset
can name a TQA profile to ask its questions with.)"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Engine

from dagwright.errors import InputError
from dagwright.store.db import session
from dagwright.store.models import TqaDataset, TqaDatasetSop, utcnow
from dagwright.store.tqa_datasets import DatasetRepository

# Who reads examples, and what one example of theirs holds (its payload fields).
EXAMPLE_ROLES = {
    "planner": ("question", "plan"),
    "engineer": ("question", "report"),
    "critic": ("answer", "verdict"),
    "text_to_sql": ("question", "sql"),
    "python": ("task", "code"),
}
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_NAMESPACE = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")


class ProfileError(InputError):
    code = "invalid_tqa_dataset"


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ProfileError(f"dataset {name!r}: 1-64 letters, digits, '_', '.' or '-'")


@dataclass(slots=True)
class Profile:
    name: str
    description: str = ""
    sources: list[str] = field(default_factory=list)
    namespaces: dict[str, str] = field(default_factory=dict)
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


def check_settings(
    sources: list[str] | None,
    namespaces: dict[str, str] | None,
    examples_k: int | None,
    hints_k: int | None,
) -> None:
    for source in sources or []:
        if not _NAME.fullmatch(source):
            raise ProfileError(f"source {source!r}: 1-64 letters, digits, '_', '.' or '-'")
    for role, namespace in (namespaces or {}).items():
        if role not in EXAMPLE_ROLES:
            raise ProfileError(
                f"no agent or tool {role!r} reads examples; these do: {', '.join(EXAMPLE_ROLES)}"
            )
        if not _NAMESPACE.fullmatch(namespace):
            raise ProfileError(f"namespace {namespace!r} of {role}: not a namespace name")
    for label, k in (("examples_k", examples_k), ("hints_k", hints_k)):
        if k is not None and not 0 <= k <= 20:
            raise ProfileError(f"{label} is 0 to 20, not {k}")


def _profile(row: TqaDataset, sop: TqaDatasetSop | None) -> Profile:
    return Profile(
        row.name,
        row.description,
        list(row.sources or []),
        dict(row.namespaces or {}),
        row.examples_k,
        row.hints_k,
        sop.text if sop is not None else "",
        row.sop_version,
        row.created_at,
        row.updated_at,
    )


class ProfileStore:
    """TQA profiles and their SOP versions, kept by store/tqa_datasets.py."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def all(self) -> list[Profile]:
        with session(self._engine) as db:
            datasets = DatasetRepository(db)
            return [_profile(row, datasets.sop(row)) for row in datasets.all()]

    def get(self, name: str) -> Profile:
        with session(self._engine) as db:
            datasets = DatasetRepository(db)
            row = datasets.find(name)
            return _profile(row, datasets.sop(row))

    def find(self, name: str) -> Profile | None:
        """The profile, or None: a dataset named only by its hints has no profile."""
        with session(self._engine) as db:
            datasets = DatasetRepository(db)
            row = datasets.get(name)
            return None if row is None else _profile(row, datasets.sop(row))

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
            DatasetRepository(db).add(
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
            row = DatasetRepository(db).find(name)
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
            datasets = DatasetRepository(db)
            row = datasets.find(name)
            current = datasets.sop(row)
            if current is not None and current.text == text:
                return row.sop_version
            version = datasets.last_sop_version(row) + 1
            datasets.add_sop(TqaDatasetSop(dataset=name, version=version, text=text, note=note))
            row.sop_version, row.updated_at = version, utcnow()
            db.add(row)
            db.commit()
            return version

    def sops(self, name: str) -> list[dict[str, Any]]:
        """Every SOP version, newest first."""
        with session(self._engine) as db:
            datasets = DatasetRepository(db)
            return [
                {
                    "version": r.version,
                    "text": r.text,
                    "note": r.note,
                    "created_at": r.created_at.isoformat(),
                }
                for r in datasets.sops(datasets.find(name))
            ]

    def delete(self, name: str) -> None:
        """The profile, its SOP versions and its hints."""
        with session(self._engine) as db:
            datasets = DatasetRepository(db)
            datasets.delete(datasets.find(name))
            db.commit()
