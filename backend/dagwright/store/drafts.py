"""An app's draft, one per app (in the store's repository style: see store/apps.py)."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session

from dagwright.store.draft_models import AppDraft
from dagwright.store.models import utcnow


class DraftRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    def of_app(self, app_id: str) -> AppDraft | None:
        return self._db.get(AppDraft, app_id)

    def put(self, app_id: str, graph: dict[str, Any], base_version_id: str | None) -> AppDraft:
        """Creates the app's draft or replaces it."""
        draft = self._db.get(AppDraft, app_id) or AppDraft(app_id=app_id, graph=graph)
        draft.graph = graph
        draft.base_version_id = base_version_id
        draft.updated_at = utcnow()
        self._db.add(draft)
        return draft

    def delete(self, app_id: str) -> None:
        draft = self._db.get(AppDraft, app_id)
        if draft is not None:
            self._db.delete(draft)
