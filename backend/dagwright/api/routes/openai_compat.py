"""An OpenAI-compatible chat endpoint: `model` names a published app, so any OpenAI client
can call a flow. The app's input takes the conversation, its output is the answer."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict

from dagwright.api.routes.access import app_for_key
from dagwright.api.state import Services, services
from dagwright.api.streaming import jsonable
from dagwright.errors import InputError
from dagwright.runtime import NodeMessage
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.runs import LiveRun

router = APIRouter(tags=["openai-compatible"])
Deps = Annotated[Services, Depends(services)]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if isinstance(p, dict))
        return self.content or ""


class ChatCompletionIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature etc. are accepted and ignored

    model: str
    messages: list[ChatMessage]
    stream: bool = False


def _inputs_for(plan: CompiledFlow, messages: list[ChatMessage]) -> dict[str, Any]:
    """The conversation as the app's inputs: an input named messages/history takes it whole;
    otherwise the single text input takes the last user message."""
    conversation = [m.model_dump(exclude_none=True) for m in messages]
    last_user = next((m.text() for m in reversed(messages) if m.role == "user"), "")
    names = list(plan.inputs)
    for name in ("messages", "history", "conversation"):
        if name in plan.inputs:
            inputs: dict[str, Any] = {name: conversation}
            others = [n for n in names if n != name and plan.inputs[n].required]
            if len(others) == 1:
                inputs[others[0]] = last_user
            return inputs
    required = [n for n in names if plan.inputs[n].required]
    if len(required) == 1:
        return {required[0]: last_user}
    if not required and names:
        return {names[0]: last_user}
    raise InputError(
        f"the app takes inputs {', '.join(names) or 'none'}: to be called as a chat model "
        "it needs exactly one required input (or one named messages or history)"
    )


def _answer_output(plan: CompiledFlow) -> str:
    for name in ("answer", "output", "reply", "response"):
        if name in plan.outputs:
            return name
    if len(plan.outputs) == 1:
        return next(iter(plan.outputs))
    raise InputError(
        f"the app returns {', '.join(plan.outputs)}: name one of them 'answer' to call it "
        "as a chat model"
    )


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(jsonable(value), ensure_ascii=False)


def _completion(model: str, run_id: str, content: str, usage: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": content},
            }
        ],
        "usage": {
            "prompt_tokens": usage.get("prompt_tokens", 0),
            "completion_tokens": usage.get("completion_tokens", 0),
            "total_tokens": usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0),
        },
    }


def _chunk(model: str, run_id: str, delta: dict[str, Any], finish: str | None) -> str:
    body = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


async def _stream(model: str, live: LiveRun, output: str, source: str | None) -> AsyncIterator[str]:
    """Token deltas of the node that feeds the answer, as they come; the answer whole at the
    end when that node streamed nothing (it is not an LLM, say)."""
    yield _chunk(model, live.run_id, {"role": "assistant", "content": ""}, None)
    streamed = False
    async for event in live.run.stream():
        if isinstance(event, NodeMessage) and event.kind == "token" and event.node == source:
            streamed = True
            yield _chunk(model, live.run_id, {"content": event.data["text"]}, None)
    record = await live.wait()
    if record.status != "succeeded":
        message = (record.error or {}).get("message", record.status)
        yield _chunk(model, live.run_id, {"content": f"[run {record.status}: {message}]"}, None)
    elif not streamed:
        answer = _text((record.outputs or {}).get(output))
        yield _chunk(model, live.run_id, {"content": answer}, None)
    yield _chunk(model, live.run_id, {}, "stop")
    yield "data: [DONE]\n\n"


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionIn, request: Request, s: Deps) -> Any:
    app = await app_for_key(request, s, body.model)
    endpoint = await s.endpoints.endpoint(app.id, None)
    plan = endpoint.plan
    output = _answer_output(plan)
    live = await s.runs.start(
        plan,
        _inputs_for(plan, body.messages),
        app_id=app.id,
        version_id=endpoint.version_id,
        mode="published",
    )
    if body.stream:
        source = next(
            (e.source.node for e in plan.flow.edges if e.target.node == plan.outputs[output]), None
        )
        return StreamingResponse(
            _stream(body.model, live, output, source), media_type="text/event-stream"
        )
    record = await live.wait()
    if record.status != "succeeded":
        message = (record.error or {}).get("message", record.status)
        return JSONResponse(
            {
                "error": {
                    "code": "run_failed",
                    "message": f"run {record.id} {record.status}: {message}",
                    "type": "server_error",
                }
            },
            status_code=500,
        )
    answer = _text((record.outputs or {}).get(output))
    return _completion(body.model, record.id, answer, record.usage or {})
