"""Triggers of an app (cron schedules, webhooks): managed with the admin token; a webhook
is called at /api/v1/hooks/{trigger_id}, signed with its trigger's secret and timestamped
(services/webhook_signing.py, docs/security/webhooks.md)."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.routes.access import Admin
from dagwright.api.schemas import Paging
from dagwright.services.triggers import TriggerService
from dagwright.services.webhook_signing import FORMAT, SIGNATURE_HEADER, TIMESTAMP_HEADER
from dagwright.store.paging import Page
from dagwright.store.trigger_models import Trigger, TriggerFiring

router = APIRouter(prefix="/api/v1", tags=["triggers"])


def _service(request: Request) -> TriggerService:
    found: TriggerService = request.app.state.triggers
    return found


class TriggerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["cron", "webhook"]
    name: str = Field(min_length=1, max_length=200)
    enabled: bool = True
    cron: str | None = Field(None, description="Five fields, or six with seconds last.")
    timezone: str = "UTC"
    catch_up: Literal["latest", "skip", "all"] = "latest"
    inputs: dict[str, Any] = Field(default_factory=dict)
    input_map: dict[str, str] = Field(default_factory=dict)
    secret_name: str | None = Field(
        None,
        description="webhook: the secret (set first, PUT /api/v1/secrets/{name}) that signs "
        f"its calls; required for a webhook. Each call sends {FORMAT}",
    )


class TriggerPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, min_length=1, max_length=200)
    enabled: bool | None = None
    cron: str | None = None
    timezone: str | None = None
    catch_up: Literal["latest", "skip", "all"] | None = None
    inputs: dict[str, Any] | None = None
    input_map: dict[str, str] | None = None
    secret_name: str | None = None


def trigger_body(trigger: Trigger) -> dict[str, Any]:
    body = trigger.model_dump(mode="json")
    if trigger.kind == "webhook":
        body["url"] = f"/api/v1/hooks/{trigger.id}"
    return body


def firing_body(firing: TriggerFiring) -> dict[str, Any]:
    data: dict[str, Any] = firing.model_dump(mode="json")
    return data


@router.get("/apps/{app}/triggers", dependencies=[Admin])
async def list_triggers(app: str, request: Request) -> dict[str, Any]:
    found = _service(request).for_app(app)
    return {"items": [trigger_body(t) for t in found]}


@router.post("/apps/{app}/triggers", dependencies=[Admin], status_code=201)
async def create_trigger(app: str, body: TriggerIn, request: Request) -> dict[str, Any]:
    """A cron schedule (`cron`, `timezone`, the fixed `inputs`, `catch_up` for ticks missed
    while no server ran) or a webhook (`input_map` from body paths to inputs, `secret_name`
    to sign its calls; required for a webhook: see call_webhook)."""
    return trigger_body(_service(request).create(app, body.model_dump()))


@router.patch("/triggers/{trigger_id}", dependencies=[Admin])
async def update_trigger(trigger_id: str, body: TriggerPatch, request: Request) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True)
    return trigger_body(_service(request).update(trigger_id, changes))


@router.delete("/triggers/{trigger_id}", dependencies=[Admin], status_code=204)
async def delete_trigger(trigger_id: str, request: Request) -> None:
    _service(request).delete(trigger_id)


@router.get("/triggers/{trigger_id}/firings", dependencies=[Admin])
async def list_firings(trigger_id: str, request: Request, page: Paging) -> Page[dict[str, Any]]:
    """Newest tick first."""
    found = await asyncio.to_thread(_service(request).firings, trigger_id, page.offset, page.limit)
    return found.map(firing_body)


@router.post("/hooks/{trigger_id}", status_code=202, response_model=None)
async def call_webhook(trigger_id: str, request: Request) -> JSONResponse:
    """Fire the webhook: the JSON body (whatever its content type) becomes the run's inputs
    through the trigger's mapping, or its keys are the inputs; a key naming one of the
    trigger's fixed inputs is refused (422). Every call is signed: `X-Dagwright-Timestamp:
    <Unix seconds>` and `X-Dagwright-Signature: sha256=<hex HMAC-SHA256 of
    "<timestamp>.<body>" with the trigger's secret>`. A missing, malformed or wrong
    signature, a timestamp more than DAGWRIGHT_WEBHOOK_TOLERANCE seconds off, or a call
    received before (a replay) is 401; more than DAGWRIGHT_WEBHOOK_RATE_LIMIT firings a
    minute is 429 with Retry-After; inputs that do not fit the published version are 422.
    None of these writes anything. Answers 202 with the run id (a run that could not start
    is a failed firing, 422 with its reason)."""
    body = await request.body()
    headers = request.headers
    firing = await _service(request).receive(
        trigger_id, body, headers.getlist(SIGNATURE_HEADER), headers.getlist(TIMESTAMP_HEADER)
    )
    if firing.error is not None:
        return JSONResponse(
            {"error": {"code": "trigger_run_failed", "message": firing.error}}, status_code=422
        )
    return JSONResponse({"firing_id": firing.id, "run_id": firing.run_id}, status_code=202)
