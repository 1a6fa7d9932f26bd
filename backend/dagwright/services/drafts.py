"""An app's draft: read, replace, drop. Nothing is validated: a draft is work in progress."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from dagwright.errors import NotFoundError
from dagwright.store.db import session
from dagwright.store.draft_models import AppDraft
from dagwright.store.drafts import DraftRepository


def get_draft(engine: Engine, app_id: str) -> AppDraft:
    with session(engine) as db:
        draft = DraftRepository(db).of_app(app_id)
    if draft is None:
        raise NotFoundError("this app has no draft", code="draft_not_found")
    return draft


def put_draft(
    engine: Engine, app_id: str, graph: dict[str, Any], base_version_id: str | None
) -> AppDraft:
    with session(engine) as db:
        draft = DraftRepository(db).put(app_id, graph, base_version_id)
        db.commit()
    return draft


def delete_draft(engine: Engine, app_id: str) -> None:
    with session(engine) as db:
        DraftRepository(db).delete(app_id)
        db.commit()
