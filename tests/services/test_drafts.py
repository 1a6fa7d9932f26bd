"""An app's draft on SQLite and PostgreSQL: one per app, replaced whole, dropped."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from dagwright.errors import NotFoundError
from dagwright.services.apps import AppService
from dagwright.services.drafts import delete_draft, get_draft, put_draft
from dagwright.store.models import App
from support.database import clear
from support.flows import registry


@pytest.fixture
def app(engine: Engine) -> Iterator[App]:
    yield AppService(engine, registry()).create_app("drafted", "Drafted")
    clear(engine)


def test_a_draft_is_kept_replaced_and_dropped(engine: Engine, app: App) -> None:
    with pytest.raises(NotFoundError) as missing:
        get_draft(engine, app.id)
    assert missing.value.code == "draft_not_found"

    put_draft(engine, app.id, {"nodes": [{"id": "half"}]}, None)
    put_draft(engine, app.id, {"nodes": [{"id": "whole"}]}, "v1")
    draft = get_draft(engine, app.id)
    assert (draft.graph, draft.base_version_id) == ({"nodes": [{"id": "whole"}]}, "v1")

    delete_draft(engine, app.id)
    delete_draft(engine, app.id)  # again: nothing to drop is fine
    with pytest.raises(NotFoundError):
        get_draft(engine, app.id)
