"""An app's server-side draft: the editor autosaves the canvas here, valid or not
(GET/PUT/DELETE /api/v1/apps/{app}/draft)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services
from dagwright.services.drafts import delete_draft, get_draft, put_draft

router = APIRouter(prefix="/api/v1", tags=["apps"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class DraftIn(BaseModel):
    flow: dict[str, Any]
    base_version_id: str | None = None


class DraftOut(DraftIn):
    updated_at: datetime


@router.get("/apps/{app}/draft", response_model=DraftOut)
def read_draft(app: str, s: Deps) -> DraftOut:
    draft = get_draft(s.engine, s.apps.get_app(app).id)
    return DraftOut(
        flow=draft.graph, base_version_id=draft.base_version_id, updated_at=draft.updated_at
    )


@router.put("/apps/{app}/draft", response_model=DraftOut)
def save_draft(app: str, body: DraftIn, s: Deps) -> DraftOut:
    draft = put_draft(s.engine, s.apps.get_app(app).id, body.flow, body.base_version_id)
    return DraftOut(
        flow=draft.graph, base_version_id=draft.base_version_id, updated_at=draft.updated_at
    )


@router.delete("/apps/{app}/draft", status_code=204)
def drop_draft(app: str, s: Deps) -> Response:
    delete_draft(s.engine, s.apps.get_app(app).id)
    return Response(status_code=204)
