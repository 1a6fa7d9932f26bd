"""An app's draft: read, replace, drop. Nothing is validated: a draft is work in progress."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from dagwright.errors import NotFoundError
from dagwright.store.db import session
from dagwright.store.draft_models import AppDraft
from dagwright.store.models import utcnow


def get_draft(engine: Engine, app_id: str) -> AppDraft:
    with session(engine) as db:
        draft = db.get(AppDraft, app_id)
    if draft is None:
        raise NotFoundError("this app has no draft", code="draft_not_found")
    return draft


def put_draft(
    engine: Engine, app_id: str, graph: dict[str, Any], base_version_id: str | None
) -> AppDraft:
    with session(engine) as db:
        draft = db.get(AppDraft, app_id) or AppDraft(app_id=app_id, graph=graph)
        draft.graph = graph
        draft.base_version_id = base_version_id
        draft.updated_at = utcnow()
        db.add(draft)
        db.commit()
    return draft


def delete_draft(engine: Engine, app_id: str) -> None:
    with session(engine) as db:
        draft = db.get(AppDraft, app_id)
        if draft is not None:
            db.delete(draft)
            db.commit()
