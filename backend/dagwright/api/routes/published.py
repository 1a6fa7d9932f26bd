"""Published apps as endpoints: sync JSON, server-sent events, or async with a run id."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse

from dagwright.api.routes.access import app_for_key
from dagwright.api.schemas import RunIn
from dagwright.api.state import Services, services
from dagwright.api.streaming import result_body, run_events

router = APIRouter(prefix="/api/v1", tags=["published"])
Deps = Annotated[Services, Depends(services)]


@router.post("/apps/{app}/run", response_model=None)
async def run_published(app: str, body: RunIn, request: Request, s: Deps) -> Any:
    """Run the app's published version (or the pinned `version`) with its API key.
    `stream: true` answers with server-sent events (node events, token deltas, then the
    result); `async: true` answers 202 with the run id to poll at GET /api/v1/runs/{id}."""
    found_app = await app_for_key(request, s, app)
    endpoint = await s.endpoints.endpoint(found_app.id, body.version)
    live = await s.runs.start(
        endpoint.plan,
        body.inputs,
        app_id=found_app.id,
        version_id=endpoint.version_id,
        mode="published",
    )
    if body.async_:
        return JSONResponse(
            {"run_id": live.run_id, "status": "running", "poll": f"/api/v1/runs/{live.run_id}"},
            status_code=202,
        )
    if body.stream:
        return EventSourceResponse(run_events(live))
    return result_body(await live.wait())
