"""Published apps as endpoints: sync JSON, server-sent events, or async with a run id."""

from __future__ import annotations

import contextlib
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse
from pydantic import TypeAdapter, ValidationError
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dagwright.api import errors
from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.routes.access import app_for_key
from dagwright.api.schemas import RunIn
from dagwright.api.state import Services, services
from dagwright.api.streaming import result_body, run_events
from dagwright.errors import DagwrightError
from dagwright.services.inputs import check_input_types
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
    # Most calls take the fast path below (api/fastpath.py); this route answers the others.
    return await _run(app, body, request, s)


async def run_published_fast(
    scope: Scope, receive: Receive, send: Send, app: str, rest: ASGIApp
) -> None:
    """`run_published` as a bare ASGI handler (api/fastpath.py): the same checks and answers,
    without FastAPI's routing and dependency machinery. A body that is not JSON, or does not
    validate as RunIn, goes on to the FastAPI route, whose 422s say what is wrong with it."""
    chunks: list[bytes] = []
    more = True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client left
            return
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    raw = b"".join(chunks)
    request = Request(scope)
    kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    body: RunIn | None = None
    if kind == "application/json":
        with contextlib.suppress(ValidationError):
            body = _RUN_IN.validate_json(raw)
    if body is None:
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await rest(scope, replay, send)
        return
    try:
        response = await _run(app, body, request, scope["app"].state.services)
    except DagwrightError as exc:
        response = errors.dagwright_error_response(exc)
    except ValidationError as exc:
        response = errors.invalid_value_response(exc)
    await response(scope, receive, send)


_RUN_IN = TypeAdapter(RunIn)


async def _run(app: str, body: RunIn, request: Request, s: Services) -> Response:
    found_app = await app_for_key(request, s, app)
    endpoint = await s.endpoints.endpoint(found_app.id, body.version)
    check_input_types(endpoint.plan, body.inputs)
    if body.async_ and s.queue is not None:
        from dagwright.services.queue.jobs import Priority

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
    record = await live.wait()
    # The body is JSON-ready already: FastAPI's encoder would walk it again.
    if record.status == "failed" and (record.error or {}).get("code") == "sandbox_busy":
        # The host's sandbox budget was full (docs/security/sandbox.md): the caller's to retry.
        wait = max(1, math.ceil(s.settings.sandbox_queue_wait_s))
        return SafeJSONResponse(result_body(record), 429, headers={"Retry-After": str(wait)})
    return SafeJSONResponse(result_body(record))


def _accepted(run_id: str, status: str) -> JSONResponse:
    return JSONResponse(
        {"run_id": run_id, "status": status, "poll": f"/api/v1/runs/{run_id}"}, status_code=202
    )
