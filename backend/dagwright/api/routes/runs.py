"""Runs: debug runs from the editor, reading and cancelling runs, following a live run."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Request
from fastapi.sse import EventSourceResponse

from dagwright.api.routes.access import Admin, may_read_app
from dagwright.api.schemas import DebugRunIn, Paging, RunIn
from dagwright.api.state import Services, services
from dagwright.api.streaming import result_body, run_events, sse
from dagwright.services import editor
from dagwright.services.runs.records import RunMode, RunRecord, RunStatus
from dagwright.store.paging import Page

router = APIRouter(prefix="/api/v1", tags=["runs"])
Deps = Annotated[Services, Depends(services)]


@router.post("/runs/debug", dependencies=[Admin], response_model=None)
async def debug_run(body: DebugRunIn, s: Deps) -> Any:
    """Run a graph as it is on the canvas (saved or not), streaming every event."""
    plan = editor.compile_unsaved(body.flow, s.registry, s.apps)
    app_id = None
    if body.app is not None:
        app_id = (await asyncio.to_thread(s.apps.get_app, body.app)).id
    inputs, reuse = body.inputs, None
    if body.reuse is not None:
        earlier, reuse = await asyncio.to_thread(
            s.runs.reuse_from, plan, body.reuse.run_id, body.reuse.from_node
        )
        inputs = {**earlier, **body.inputs}
    live = await s.runs.start(
        plan, inputs, app_id=app_id, version_id=None, mode="debug", reuse=reuse
    )
    if body.stream:
        return EventSourceResponse(run_events(live))
    return result_body(await live.wait())


@router.post("/apps/{app}/versions/{version}/run", dependencies=[Admin], response_model=None)
async def run_version(app: str, version: str, body: RunIn, s: Deps) -> Any:
    """A debug run of any saved version (published or not)."""
    found = await asyncio.to_thread(s.apps.get_version, app, version)
    live = await s.runs.start(
        s.apps.compiled(found),
        body.inputs,
        app_id=found.app_id,
        version_id=found.id,
        mode="debug",
    )
    if body.stream:
        return EventSourceResponse(run_events(live))
    return result_body(await live.wait())


@router.get("/runs", dependencies=[Admin])
async def list_runs(
    s: Deps,
    page: Paging,
    app: str | None = None,
    status: RunStatus | None = None,
    mode: RunMode | None = None,
    version_id: str | None = None,
) -> Page[dict[str, Any]]:
    app_id = (await asyncio.to_thread(s.apps.get_app, app)).id if app else None
    found = await asyncio.to_thread(
        s.runs.list,
        app_id=app_id,
        status=status,
        mode=mode,
        version_id=version_id,
        offset=page.offset,
        limit=page.limit,
    )
    return found.map(RunRecord.to_dict)


async def _readable(request: Request, s: Services, run_id: str) -> RunRecord:
    record = await asyncio.to_thread(s.runs.get, run_id)
    await may_read_app(request, s, record.app_id)
    return record


@router.get("/runs/{run_id}")
async def get_run(run_id: str, request: Request, s: Deps) -> dict[str, Any]:
    """A run with its per-node trace. An app's API key may read that app's runs (to poll an
    async call)."""
    record = await _readable(request, s, run_id)
    return record.to_dict()


@router.post("/runs/{run_id}/cancel", dependencies=[Admin])
async def cancel_run(run_id: str, s: Deps) -> dict[str, Any]:
    return (await s.runs.cancel(run_id)).to_dict()


@router.get("/runs/{run_id}/events", response_model=None)
async def follow_run(
    run_id: str,
    request: Request,
    s: Deps,
    last_event_id: Annotated[str | None, Header()] = None,
) -> EventSourceResponse:
    """Follow a run live; a client that lost its connection sends Last-Event-ID and gets
    only what it missed. A finished run (or one on another replica) answers with its record."""
    record = await _readable(request, s, run_id)
    live = s.runs.live_runs.get(run_id)
    if live is None:

        async def recorded() -> AsyncIterator[bytes]:
            yield sse(record.to_dict(), "run_record")

        return EventSourceResponse(recorded())
    skip = int(last_event_id) + 1 if last_event_id and last_event_id.isdigit() else 0
    return EventSourceResponse(run_events(live, skip=skip))
