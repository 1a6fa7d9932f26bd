"""The models the editor may offer: every configured provider with its default model, the
scripted one labelled as such (its answers are not a model's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services

router = APIRouter(prefix="/api/v1", tags=["models"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class ModelOption(BaseModel):
    provider: str
    model: str = Field(description="the provider's default model")
    scripted: bool = Field(description="the project's scripted model: answers are not a model's")
    default: bool = Field(description="the provider a block without one uses")


class ModelsOut(BaseModel):
    models: list[ModelOption]
    scripted_only: bool = Field(description="no real model is configured: every answer is scripted")


@router.get("/models", response_model=ModelsOut)
async def list_models(s: Deps) -> ModelsOut:
    settings = s.gateway.settings
    default = settings.get(None).name if settings.providers else None
    options = [
        ModelOption(
            provider=p.name, model=p.default_model, scripted=p.scripted, default=p.name == default
        )
        for p in settings.providers.values()
    ]
    return ModelsOut(models=options, scripted_only=all(o.scripted for o in options))
