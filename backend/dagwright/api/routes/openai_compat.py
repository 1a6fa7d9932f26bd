"""An OpenAI-compatible chat endpoint: `model` names a published app, so any OpenAI client
can call a flow. The app's input takes the conversation, its output is the answer.

A request OpenAI would refuse is refused as OpenAI refuses it: 400 with
`{"error": {"message", "type": "invalid_request_error", "param", "code"}}` (an empty
`messages`, an unknown role, a message without its content...)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.jsontext import utf8_bytes
from dagwright.api.routes.access import app_for_key
from dagwright.api.routes.published import run_deadline
from dagwright.api.state import Services, services
from dagwright.api.streaming import jsonable
from dagwright.errors import DagwrightError, InputError
from dagwright.registry import Usage
from dagwright.runtime import NodeMessage
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.inputs import check_input_types
from dagwright.services.runs.recorder import LiveRun

MAX_CHOICES = 128  # OpenAI's largest `n`
ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# Roles whose messages must carry content (an assistant's may hold tool calls instead).
_CONTENT_REQUIRED = ("system", "developer", "user", "tool")


class ChatRequestError(DagwrightError):
    """A chat request OpenAI's API would refuse, in its error shape (HTTP 400: the status
    api/errors.py gives every error it has no other mapping for)."""

    code = "invalid_request_error"

    def __init__(self, message: str, param: str | None, code: str | None) -> None:
        super().__init__(message)
        self.param = param
        if code is not None:
            self.code = code  # OpenAI's: empty_array, invalid_value...

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "message": self.message,
            "type": "invalid_request_error",
            "param": self.param,
        }


def _param(loc: tuple[int | str, ...]) -> str | None:
    """OpenAI's name of a field: messages[0].role (pydantic's union tags left out)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("str", "none", "list[dict[str,any]]") or "[" in part or "-" in part:
            break  # a union member's tag, not a field
        else:
            path += f".{part}" if path else part
    return path or None


def _openai_error(exc: RequestValidationError) -> ChatRequestError:
    """The first problem, worded as OpenAI words it."""
    error = exc.errors()[0]
    kind = error["type"]
    loc = tuple(error["loc"])[1:] if error["loc"][:1] == ("body",) else tuple(error["loc"])
    param = _param(loc)
    if kind == "json_invalid":
        return ChatRequestError(
            "We could not parse the JSON body of your request: the API expects a JSON payload.",
            None,
            None,
        )
    if kind == "missing":
        return ChatRequestError(
            f"Missing required parameter: '{param or 'body'}'.", param, "missing_required_parameter"
        )
    if kind == "too_short":
        return ChatRequestError(
            f"Invalid '{param}': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            param,
            "empty_array",
        )
    if kind == "literal_error":
        supported = ", ".join(f"'{r}'" for r in ROLES)
        return ChatRequestError(
            f"Invalid value: {error.get('input')!r}. Supported values are: {supported}.",
            param,
            "invalid_value",
        )
    if kind in ("less_than_equal", "greater_than_equal"):
        above = kind == "less_than_equal"
        bound = error.get("ctx", {}).get("le" if above else "ge")
        return ChatRequestError(
            f"Invalid '{param}': integer {'above maximum' if above else 'below minimum'} value. "
            f"Expected a value {'<=' if above else '>='} {bound}, but got "
            f"{error.get('input')!r} instead.",
            param,
            "integer_above_max_value" if above else "integer_below_min_value",
        )
    if kind.endswith("_type") or kind == "model_attributes_type":
        return ChatRequestError(
            f"Invalid type for '{param or 'body'}': {error['msg'].lower()}.", param, "invalid_type"
        )
    return ChatRequestError(f"Invalid '{param or 'body'}': {error['msg']}.", param, "invalid_value")


class _OpenAIRoute(APIRoute):
    """Request validation errors leave in OpenAI's shape (400), not the API's own (422)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def openai_shaped(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                raise _openai_error(exc) from None

        return openai_shaped


router = APIRouter(tags=["openai-compatible"], route_class=_OpenAIRoute)
Deps = Annotated[Services, Depends(services)]


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(str(p.get("text", "")) for p in self.content if isinstance(p, dict))
        return self.content or ""


class ChatCompletionIn(BaseModel):
    model_config = ConfigDict(extra="allow")  # temperature etc. are accepted and ignored

    model: str = Field(min_length=1, description="The published app (its slug) to run.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    # OpenAI's bounds (1..128); an app answers once per run, so only 1 is supported (see
    # _check_choices): more would be refused by name rather than silently answered once.
    n: int | None = Field(
        None, ge=1, le=MAX_CHOICES, strict=True, description="Choices to return: only 1."
    )


def _check_choices(n: int | None) -> None:
    """Refused as OpenAI refuses a value a model does not support (o1's `n`)."""
    if n is not None and n != 1:
        raise ChatRequestError(
            f"Unsupported value: 'n' does not support {n} with this model. Only the default "
            "(1) value is supported.",
            "n",
            "unsupported_value",
        )


def _check_messages(messages: list[ChatMessage]) -> None:
    for index, message in enumerate(messages):
        if message.role in _CONTENT_REQUIRED and message.content is None:
            param = f"messages[{index}].content"
            raise ChatRequestError(
                f"Missing required parameter: '{param}'.", param, "missing_required_parameter"
            )


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


def _completion(model: str, run_id: str, content: str, usage: Usage) -> dict[str, Any]:
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
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
        },
    }


def _chunk(model: str, run_id: str, delta: dict[str, Any], finish: str | None) -> bytes:
    body = {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return utf8_bytes(f"data: {json.dumps(body, ensure_ascii=False)}\n\n")


async def _stream(
    model: str, live: LiveRun, output: str, source: str | None
) -> AsyncIterator[bytes]:
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
    yield b"data: [DONE]\n\n"


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionIn, request: Request, s: Deps) -> Any:
    _check_choices(body.n)
    _check_messages(body.messages)
    app = await app_for_key(request, s, body.model)
    endpoint = await s.endpoints.endpoint(app.id, None)
    plan = endpoint.plan
    output = _answer_output(plan)
    inputs = _inputs_for(plan, body.messages)
    check_input_types(plan, inputs)
    live = await s.runs.start(
        plan,
        inputs,
        app_id=app.id,
        version_id=endpoint.version_id,
        mode="published",
        deadline=run_deadline(s, app),
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
    return _completion(body.model, record.id, answer, Usage.from_dict(record.usage or {}))
