"""AutoTQA: ask a question (sync, streamed turn by turn, or in the background), read and
replay conversations, edit the TQA datasets (profiles: sources, versioned SOP, example
namespaces), their hints (written, or learned candidates to confirm, edit or drop) and the
tool registry, publish the agents.

Every turn has the same shape wherever it appears (the sync answer, the `turn` events of a
stream, GET of a conversation): `{seq, agent, text, content, scheduler: {agent, reason, by,
fallback, answer, usage}, tool_call: {tool, app, input, sql, columns, rows, row_count,
truncated, error, hints, run_id}, usage, run_id, error, started, duration}` — what a
conversation view needs to draw each turn, its SQL and result table, the scheduler's choice
and its token cost."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.routes.access import Admin
from dagwright.api.schemas import Paging
from dagwright.api.state import Services, services
from dagwright.api.streaming import sse
from dagwright.services.scripted_guide import refuse_unscripted
from dagwright.store.paging import Page
from dagwright.tqa.conversation import AskRequest, Turn
from dagwright.tqa.recording import ConversationStatus

router = APIRouter(prefix="/api/v1/tqa", tags=["tqa"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class AskIn(AskRequest):
    stream: bool = Field(False, description="Answer with server-sent events, a turn each.")
    async_: bool = Field(
        False, alias="async", description="Answer 202 at once; poll the conversation."
    )


class HintIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str
    text: str


class HintChange(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    status: Literal["confirmed", "candidate", "dropped"] | None = Field(
        None, description="Confirm a learned candidate, drop it (kept, never given) or restore it."
    )


class DatasetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(None, max_length=4000)
    sources: list[str] | None = Field(None, description="The data sources it covers.")
    namespaces: dict[str, str] | None = Field(
        None,
        description="Example namespace per agent or tool: planner {question, plan}, engineer "
        "{question, report}, critic {answer, verdict}, text_to_sql {question, sql}, python "
        "{task, code}.",
    )
    examples_k: int | None = Field(None, ge=0, le=20, description="Examples per question.")
    hints_k: int | None = Field(None, ge=0, le=20, description="Learned hints per question.")
    sop: str | None = Field(None, max_length=50_000, description="A new SOP version if changed.")


class DatasetIn(DatasetSettings):
    name: str = Field(max_length=64)


class DatasetChange(DatasetSettings):
    sop_note: str = Field("", max_length=500, description="What the new SOP version changes.")


class ToolIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str = Field(description="The published app (slug) the tool runs.")
    description: str = Field("", description="What the Engineer reads about the tool.")
    role: str | None = Field(
        None,
        description="What the Executor gives it from the conversation: text_to_sql (question, "
        "hints, feedback, examples, sources), python (the same, the question as `task`), "
        "question (the question only); none: the Engineer's input only.",
    )
    requires_approval: bool | None = Field(
        None,
        description="A person approves each call before it runs (the conversation waits; "
        "the request is listed at GET /api/v1/human/requests). Omitted: as it was.",
    )


class ToolApprovalIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    requires_approval: bool = Field(
        description="Whether each call of the tool waits for a person's approval."
    )


class PublishIn(BaseModel):
    """Nothing to set: per-dataset settings live in the TQA datasets, not in the flows."""

    model_config = ConfigDict(extra="forbid")


async def _stream(s: Services, request: AskRequest) -> AsyncIterator[bytes]:
    queue: asyncio.Queue[Turn | None] = asyncio.Queue()
    conversation = await s.tqa.begin(request)
    yield sse({"id": conversation.id, "question": request.question}, "conversation", "0")

    async def run() -> dict[str, Any]:
        try:
            done = await s.tqa.ask(request, on_turn=queue.put_nowait, conversation=conversation)
            return done.to_dict(turns=False)
        finally:
            queue.put_nowait(None)

    task = asyncio.create_task(run())
    try:
        while (turn := await queue.get()) is not None:
            yield sse(turn.to_dict(), "turn", str(turn.seq + 1))
        yield sse(await task, "result", str(len(conversation.turns) + 1))
    finally:
        if not task.done():
            task.cancel()


@router.post("/ask", response_model=None)
async def ask(body: AskIn, s: Deps) -> Any:
    """Answer a question with the agents. Sync: the whole conversation. `stream: true`:
    server-sent events (`conversation`, one `turn` per turn, then `result`). `async: true`:
    202 with the conversation id to poll at GET /api/v1/tqa/conversations/{id} (on any
    replica); in queue mode a worker runs it, and another resumes it if that one dies."""
    request = AskRequest.model_validate(body.model_dump(exclude={"stream", "async_"}))
    # The offline demo's script knows a few questions: any other is refused now, not after
    # every round of scripted replies that make no sense for it.
    refuse_unscripted(s.gateway, request.question)
    await s.tqa.ensure_published()
    if body.async_:
        conversation_id = await s.tqa.ask_background(request)
        return JSONResponse(
            {
                "id": conversation_id,
                "status": "running",
                "poll": f"/api/v1/tqa/conversations/{conversation_id}",
            },
            status_code=202,
        )
    if body.stream:
        # The conversation limit is checked before the stream starts, so a refusal is a 429
        # (the conversation itself is begun inside the stream: one whose caller is gone
        # before it starts is never recorded).
        await s.tqa.admission.check()
        return EventSourceResponse(_stream(s, request))
    return (await s.tqa.ask(request)).to_dict()


@router.get("/conversations", response_model=Page[dict[str, Any]])
async def list_conversations(
    s: Deps, page: Paging, status: ConversationStatus | None = None
) -> Any:
    """Newest first, without their turns."""
    return await asyncio.to_thread(s.tqa.conversations.list, page.offset, page.limit, status)


@router.get("/conversations/{conversation_id}")
async def get_conversation(conversation_id: str, s: Deps) -> dict[str, Any]:
    """The conversation with every turn, in order (also while it runs)."""
    return await asyncio.to_thread(s.tqa.conversations.get, conversation_id)


@router.post("/conversations/{conversation_id}/cancel")
async def cancel_conversation(conversation_id: str, s: Deps) -> dict[str, Any]:
    """Cancel a background conversation (or one waiting for an approval) wherever it runs:
    the process running it — any replica, or a worker in queue mode — sees the request
    within a second and records it `failed` with the error `cancelled`. A sync or streamed
    conversation ends when its caller disconnects."""
    status = await s.tqa.cancel(conversation_id)
    return {"id": conversation_id, "status": status, "cancel_requested": True}


@router.get("/datasets")
async def list_datasets(s: Deps) -> list[dict[str, Any]]:
    """The TQA datasets (profiles), with their current SOP."""
    return [p.to_dict() for p in await asyncio.to_thread(s.tqa.profiles.all)]


@router.post("/datasets", status_code=201)
async def create_dataset(body: DatasetIn, s: Deps) -> dict[str, Any]:
    settings = body.model_dump(exclude={"name"}, exclude_none=True)
    return (await asyncio.to_thread(s.tqa.create_profile, body.name, **settings)).to_dict()


@router.get("/datasets/{name}")
async def get_dataset(name: str, s: Deps) -> dict[str, Any]:
    return (await asyncio.to_thread(s.tqa.profiles.get, name)).to_dict()


@router.put("/datasets/{name}")
async def update_dataset(name: str, body: DatasetChange, s: Deps) -> dict[str, Any]:
    """Changes what is given; a different `sop` is stored as the next version."""
    settings = body.model_dump(exclude_none=True)
    return (await asyncio.to_thread(s.tqa.update_profile, name, **settings)).to_dict()


@router.delete("/datasets/{name}", status_code=204)
async def delete_dataset(name: str, s: Deps) -> Response:
    """The dataset, its SOP versions and its hints."""
    await asyncio.to_thread(s.tqa.profiles.delete, name)
    return Response(status_code=204)


@router.get("/datasets/{name}/sops")
async def list_sops(name: str, s: Deps) -> list[dict[str, Any]]:
    """Every version of the dataset's SOP, newest first."""
    return await asyncio.to_thread(s.tqa.profiles.sops, name)


@router.get("/hints")
async def list_hints(
    s: Deps,
    dataset: str | None = None,
    status: Literal["confirmed", "candidate", "dropped"] | None = None,
) -> list[dict[str, Any]]:
    """Hints, written (`source: manual`) or learned from retries (`source: learned`, with
    the question, the error, the fix and the tables in `details`)."""
    return [h.to_dict() for h in await asyncio.to_thread(s.tqa.hints.list, dataset, status)]


@router.post("/hints", status_code=201)
async def add_hint(body: HintIn, s: Deps) -> dict[str, Any]:
    return (await asyncio.to_thread(s.tqa.hints.add, body.dataset, body.text)).to_dict()


@router.put("/hints/{hint_id}")
async def update_hint(hint_id: str, body: HintChange, s: Deps) -> dict[str, Any]:
    """Edit a hint's text and/or confirm, drop or restore it."""
    change = await asyncio.to_thread(s.tqa.hints.update, hint_id, body.text, body.status)
    return change.to_dict()


@router.delete("/hints/{hint_id}", status_code=204)
async def delete_hint(hint_id: str, s: Deps) -> Response:
    await asyncio.to_thread(s.tqa.hints.delete, hint_id)
    return Response(status_code=204)


@router.get("/tools")
async def list_tools(s: Deps) -> list[dict[str, Any]]:
    """The registered tools. A read writes nothing: the built-in agents and tools are
    installed by the first question (`ask`), `POST /publish`, or marking one for approval."""
    return [t.to_dict() for t in await asyncio.to_thread(s.tqa.tools.list)]


@router.put("/tools/{name}")
async def put_tool(name: str, body: ToolIn, s: Deps) -> dict[str, Any]:
    """Register a published app as a tool (the app must exist), playing a role or none."""
    tool = await asyncio.to_thread(
        s.tqa.register_tool, name, body.app, body.description, body.role, body.requires_approval
    )
    return tool.to_dict()


@router.put("/tools/{name}/approval")
async def put_tool_approval(name: str, body: ToolApprovalIn, s: Deps) -> dict[str, Any]:
    """Whether each call of the tool waits for a person's approval: the Engineer's request
    pauses the conversation (`waiting`) with a human request showing the tool and its input;
    approving runs it, rejecting gives the Engineer a turn with the comment. The built-in
    tools are installed first (a write), so one may be marked before the first question."""
    await s.tqa.ensure_published()
    tool = await asyncio.to_thread(s.tqa.tools.require_approval, name, body.requires_approval)
    return tool.to_dict()


@router.delete("/tools/{name}", status_code=204)
async def delete_tool(name: str, s: Deps) -> Response:
    await asyncio.to_thread(s.tqa.tools.delete, name)
    return Response(status_code=204)


@router.post("/publish")
async def publish(body: PublishIn, s: Deps) -> list[dict[str, Any]]:
    """Create or update and publish the AutoTQA apps from flows/autotqa (the same for every
    dataset: what differs per dataset is in its TQA dataset)."""
    return await asyncio.to_thread(s.tqa.publish)
