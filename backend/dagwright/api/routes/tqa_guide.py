"""What the AutoTQA page should tell a newcomer about the model: whether answers are
scripted, and which questions the offline demo's script knows (GET /api/v1/tqa/model)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services
from dagwright.services.scripted_guide import demo_questions, is_offline_demo

router = APIRouter(prefix="/api/v1/tqa", tags=["tqa"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class TqaModelOut(BaseModel):
    scripted: bool = Field(description="every configured provider is dagwright's scripted model")
    offline_demo: bool = Field(description="no provider configured: the demo script answers")
    questions: list[str] | None = Field(
        description="the questions the demo script answers; None: any question is passed on"
    )


@router.get("/model", response_model=TqaModelOut)
async def tqa_model(s: Deps) -> TqaModelOut:
    settings = s.gateway.settings
    demo = is_offline_demo(s.gateway)
    return TqaModelOut(
        scripted=bool(settings.providers) and all(p.scripted for p in settings.providers.values()),
        offline_demo=demo,
        questions=demo_questions() if demo else None,
    )
