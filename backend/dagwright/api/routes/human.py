"""Human-in-the-loop: the requests runs wait on ("waiting for you"), answered with the admin
token, or by whoever holds a request's signed link."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.routes.access import Admin
from dagwright.api.schemas import Paging
from dagwright.api.state import Services, services
from dagwright.services import editor
from dagwright.services.human import Answered, HumanService, RequestFilter
from dagwright.store.human_models import HumanRequest
from dagwright.store.paging import Page

router = APIRouter(prefix="/api/v1/human", tags=["human"])


def _service(request: Request) -> HumanService:
    found: HumanService = request.app.state.human
    return found


class AnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(default_factory=dict, description="Field name -> value.")
    choice: str | None = Field(None, description="One of the form's choices (its branch).")


class AdminAnswerIn(AnswerIn):
    flow: dict[str, Any] | None = Field(
        None,
        description="For a debug run of an unsaved flow: the flow to go on with (the "
        "editor's canvas), as a debug re-run takes it. Ignored for a saved version's run.",
    )


def request_body(found: HumanRequest, *, with_link: bool) -> dict[str, Any]:
    body: dict[str, Any] = found.model_dump(mode="json", exclude={"link_token"})
    if with_link:  # the link answers without the admin token: shown to admins only
        body["link"] = f"/api/v1/human/links/{found.link_token}"
    return body


def _answered(done: Answered) -> JSONResponse:
    """202 with the continuing run, or (run_id null) the paused run that still waits for
    other answers (`waiting_for`: how many; several map items may wait at once), or (an
    AutoTQA tool call's approval) the conversation that goes on."""
    if done.conversation_id is not None:
        body: dict[str, Any] = {
            "run_id": None,
            "status": "running",
            "conversation_id": done.conversation_id,
            "poll": f"/api/v1/tqa/conversations/{done.conversation_id}",
        }
    elif done.run_id is None:
        body = {
            "run_id": None,
            "status": "waiting",
            "waiting_run_id": done.waiting_run_id,
            "waiting_for": done.waiting_for,
        }
    else:
        body = {"run_id": done.run_id, "status": "running", "poll": f"/api/v1/runs/{done.run_id}"}
    return JSONResponse(body, status_code=202)


@router.get("/requests", dependencies=[Admin])
async def list_requests(
    request: Request,
    page: Paging,
    status: RequestFilter = "waiting",
    app_id: str | None = None,
    run_id: str | None = None,
    conversation_id: str | None = None,
) -> Page[dict[str, Any]]:
    """Requests, oldest first: by default those still waiting (the "waiting for you" list);
    `status=answered`, `expired`, `cancelled`, or `all` (or empty) for all; `run_id`: one
    run's (the debug panel's); `conversation_id`: one AutoTQA conversation's tool-call
    approvals (its page's)."""
    found = await asyncio.to_thread(
        _service(request).requests,
        None if status in ("all", "") else status,
        app_id,
        run_id,
        page.offset,
        page.limit,
        conversation_id,
    )
    return found.map(lambda r: request_body(r, with_link=True))


@router.get("/requests/{request_id}", dependencies=[Admin])
async def get_request(request_id: str, request: Request) -> dict[str, Any]:
    return request_body(_service(request).get(request_id), with_link=True)


@router.post("/requests/{request_id}/answer", dependencies=[Admin], response_model=None)
async def answer_request(
    request_id: str,
    body: AdminAnswerIn,
    request: Request,
    s: Annotated[Services, Depends(services)],
) -> JSONResponse:
    """Answer and resume the run: 202 with the continuing run's id (null while the run still
    waits for other answers). 409 when the request was answered (or timed out) already or
    its run ended otherwise; 422 for values that do not fit the form."""
    draft = None if body.flow is None else editor.compile_unsaved(body.flow, s.registry, s.apps)
    return _answered(await _service(request).answer(request_id, body.values, body.choice, draft))


@router.get("/links/{token}")
async def open_link(token: str, request: Request) -> dict[str, Any]:
    """The request behind a signed link: its message and form (no admin token needed)."""
    return request_body(_service(request).by_link(token), with_link=False)


@router.post("/links/{token}", response_model=None)
async def answer_link(token: str, body: AnswerIn, request: Request) -> JSONResponse:
    """Answer through a signed link, as /requests/{id}/answer does."""
    service = _service(request)
    found = service.by_link(token)
    return _answered(await service.answer(found.id, body.values, body.choice))
