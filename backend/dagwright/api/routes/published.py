"""Published apps as endpoints: sync JSON, server-sent events, or async with a run id."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse

from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.routes.access import app_for_key
from dagwright.api.schemas import RunIn
from dagwright.api.state import Services, services
from dagwright.api.streaming import result_body, run_events
from dagwright.services.inputs import check_input_types
from dagwright.services.queue.jobs import Priority
from dagwright.store.models import App

router = APIRouter(prefix="/api/v1", tags=["published"])
Deps = Annotated[Services, Depends(services)]


def run_deadline(s: Services, app: App) -> float:
    """Seconds a published run of the app may take: the app's own setting, else the
    server's default (DAGWRIGHT_RUN_TIMEOUT)."""
    own = (app.settings or {}).get("run_timeout_s")
    return float(own) if own else s.settings.run_timeout


@router.post("/apps/{app}/run", response_model=None)
async def run_published(app: str, body: RunIn, request: Request, s: Deps) -> Any:
    """Run the app's published version (or the pinned `version`) with its API key.
    `stream: true` answers with server-sent events (node events, token deltas, then the
    result); `async: true` answers 202 with the run id to poll at GET /api/v1/runs/{id}
    (in queue mode the run is queued for a worker, and a full queue answers 429 with
    Retry-After; sync and streamed calls run in this process either way).
    Inputs of the wrong type are 422 (naming the input and its type) and no run is
    recorded; a run past the app's deadline fails with `run_timeout`. A W3C `traceparent`
    header puts the run's trace under the caller's span."""
    found_app = await app_for_key(request, s, app)
    endpoint = await s.endpoints.endpoint(found_app.id, body.version)
    check_input_types(endpoint.plan, body.inputs)
    if body.async_ and s.queue is not None:
        # Queue mode: a worker runs it (services/queue); a full queue is 429 + Retry-After.
        run_id = await s.queue.submit(
            endpoint.plan,
            body.inputs,
            app_id=found_app.id,
            version_id=endpoint.version_id,
            mode="published",
            priority=Priority.PUBLISHED,
            deadline=run_deadline(s, found_app),
        )
        return _accepted(run_id, "queued")
    live = await s.runs.start(
        endpoint.plan,
        body.inputs,
        app_id=found_app.id,
        version_id=endpoint.version_id,
        mode="published",
        deadline=run_deadline(s, found_app),
        traceparent=request.headers.get("traceparent"),
    )
    if body.async_:
        return _accepted(live.run_id, "running")
    if body.stream:
        return EventSourceResponse(run_events(live))
    # A response, not a dict: the body is JSON-ready already, and FastAPI's encoder would
    # walk it again (a few % of a published call).
    return SafeJSONResponse(result_body(await live.wait()))


def _accepted(run_id: str, status: str) -> JSONResponse:
    return JSONResponse(
        {"run_id": run_id, "status": status, "poll": f"/api/v1/runs/{run_id}"}, status_code=202
    )
