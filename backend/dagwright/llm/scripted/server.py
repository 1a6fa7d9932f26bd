"""The scripted model server: an HTTP app speaking OpenAI's API, answering from a script.

Endpoints: ``POST /v1/chat/completions``, ``POST /v1/completions``, ``POST /v1/embeddings``,
``GET /v1/models``, and for tests ``GET /_scripted/stats`` and ``POST /_scripted/reset``.
See `dagwright.llm.scripted.script` for what a script says.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dagwright.errors import format_location
from dagwright.llm.scripted.embedding import hashed_embedding, to_base64
from dagwright.llm.scripted.script import (
    DEFAULT_REPLY_NAME,
    DEFAULT_RETRY_AFTER,
    Endpoint,
    Reply,
    Script,
)
from dagwright.llm.scripted.state import Exchange, ScriptedState, shorten
from dagwright.llm.scripted.tokens import count_all
from dagwright.llm.scripted.wire import (
    SCRIPTED_HEADER,
    ChatRequest,
    Completion,
    CompletionRequest,
    EmbeddingRequest,
    embeddings_response,
    error_body,
    model_list,
    new_id,
    sse,
    usage,
)

_ENDPOINTS = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/v1/embeddings": "embeddings",
    "/v1/models": "models",
}
_EXCHANGE_KEY = "dagwright.exchange"
# Azure OpenAI puts the deployment (its name for a model) in the path.
_AZURE_PREFIX = "/openai/deployments/"


def _endpoint_of(path: str) -> str:
    if path.startswith(_AZURE_PREFIX):
        _, _, rest = path[len(_AZURE_PREFIX) :].partition("/")
        path = "/v1/" + rest
    return _ENDPOINTS.get(path, path)


# Status logged for a hanging request whose client left (nginx's "client closed request").
CLIENT_GONE = 499


class ApiError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.code = code
        self.headers = headers

    def response(self) -> JSONResponse:
        body = error_body(self.message, self.type, self.code)
        return JSONResponse(body, status_code=self.status, headers=self.headers)


class _ScriptedMiddleware:
    """Marks every response as scripted, checks the API key, counts and logs requests."""

    def __init__(self, app: ASGIApp, state: ScriptedState, api_key: str | None) -> None:
        self.app = app
        self.state = state
        self.api_key = api_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        counted = not path.startswith("/_scripted/")
        exchange = Exchange(endpoint=_endpoint_of(path))
        started = ended = False

        def end() -> None:
            nonlocal ended
            if counted and not ended:
                ended = True
                self.state.end(exchange)

        async def marked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                exchange.status = message["status"]
                MutableHeaders(scope=message).append(SCRIPTED_HEADER, "1")
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                # Logged before the last byte goes out, so a client that has its answer
                # also finds it in the statistics.
                end()
            await send(message)

        if not counted:
            await self.app(scope, receive, marked_send)
            return
        scope[_EXCHANGE_KEY] = exchange
        self.state.begin()
        try:
            key = self.api_key
            if key is not None and path.startswith("/v1/") and _bearer(scope) != key:
                denied = ApiError(
                    401,
                    "Incorrect API key provided: the scripted server's script sets api_key "
                    "and the request's bearer token differs.",
                    code="invalid_api_key",
                )
                await denied.response()(scope, receive, marked_send)
                return
            await self.app(scope, receive, marked_send)
        except Exception:
            # Still answer in OpenAI's shape (and marked); the error is re-raised to be logged.
            if not started:
                failed = ApiError(500, "the scripted server failed", type_="server_error")
                await failed.response()(scope, receive, marked_send)
            raise
        finally:
            end()


def _bearer(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if scheme.lower() == "bearer" else None
    return None


def _exchange(request: Request) -> Exchange:
    exchange = request.scope.get(_EXCHANGE_KEY)
    return exchange if isinstance(exchange, Exchange) else Exchange(endpoint=request.url.path)


async def _hang(request: Request, seconds: float, closing: asyncio.Event) -> int | None:
    """Wait ``seconds``; ends early with a status to log when the client or server goes."""

    async def client_gone() -> int:
        # The body has been read, so the next message can only be the disconnect.
        while (await request.receive())["type"] != "http.disconnect":
            pass
        return CLIENT_GONE

    async def server_closing() -> int:
        await closing.wait()
        return 503

    waits = [asyncio.ensure_future(client_gone()), asyncio.ensure_future(server_closing())]
    try:
        done, _ = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    return done.pop().result() if done else None


def _retry_headers(seconds: float) -> dict[str, str]:
    # Retry-After takes whole seconds; retry-after-ms (read first by OpenAI's clients) is exact.
    return {"Retry-After": str(math.ceil(seconds)), "retry-after-ms": str(round(seconds * 1000))}


def _malformed(stream: bool) -> Response:
    truncated = f'{{"id": "{new_id()}", "choices": ['
    if stream:
        return StreamingResponse(iter([sse(truncated)]), media_type="text/event-stream")
    return Response(truncated, media_type="application/json")


def _usage(reply: Reply, prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    given = reply.usage
    if given is not None:
        if given.prompt_tokens is not None:
            prompt_tokens = given.prompt_tokens
        if given.completion_tokens is not None:
            completion_tokens = given.completion_tokens
    return usage(prompt_tokens, completion_tokens)


def _event_stream(chunks: Iterator[dict[str, Any]]) -> StreamingResponse:
    # An async generator: Starlette sends each item of a plain iterator from a worker thread,
    # a thread hop per chunk that cost the server 4x the CPU of a whole non-streamed answer.
    async def events() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield sse(chunk)
        yield sse("[DONE]")

    return StreamingResponse(
        events(), media_type="text/event-stream", headers={"cache-control": "no-cache"}
    )


def create_app(  # noqa: C901, PLR0915
    script: Script,
    *,
    state: ScriptedState | None = None,
    closing: asyncio.Event | None = None,
) -> FastAPI:
    """The scripted server's app.

    ``state`` lets the caller read statistics directly (a fresh one by default); setting
    ``closing`` (on the server's loop) ends hanging requests so the server can stop promptly.
    """
    state = state if state is not None else ScriptedState(script)
    closing = closing if closing is not None else asyncio.Event()
    app = FastAPI(
        title="dagwright scripted model server",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.add_middleware(_ScriptedMiddleware, state=state, api_key=script.api_key)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def bad_body(request: Request, exc: RequestValidationError) -> Response:
        problem = exc.errors()[0]
        loc = tuple(problem["loc"])
        message = str(problem["msg"]).removeprefix("Value error, ")
        if problem["type"] == "json_invalid":
            detail = (problem.get("ctx") or {}).get("error", message)
            text = f"the request body is not valid JSON: {detail}"
        elif problem["type"] == "missing" and len(loc) == 1:
            text = "the request body is missing: send a JSON object"
        elif len(loc) == 1:
            text = f"the request body should be a JSON object: {message}"
        else:
            text = f"invalid request body: {format_location(loc[1:])}: {message}"
        return ApiError(400, text, code="invalid_request_body").response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            message = f"Invalid URL ({request.method} {request.url.path})"
            return ApiError(404, message, code="unknown_url").response()
        message = f"{exc.detail} ({request.method} {request.url.path})"
        return ApiError(exc.status_code, message, code=None).response()

    async def decide(
        request: Request, endpoint: Endpoint, model: str, text: str, *, stream: bool
    ) -> Reply | Response:
        """The reply for a request, after its latency; a fault's response or error instead."""
        exchange = _exchange(request)
        exchange.model = model
        exchange.last_message = text
        found = script.find_rule(endpoint, model, text)
        if found is not None:
            index, rule = found
            reply = state.next_reply(index, rule)
            exchange.rule = rule.name
        elif script.default_reply is not None:
            reply = script.default_reply
            exchange.rule = DEFAULT_REPLY_NAME
            state.count_default(DEFAULT_REPLY_NAME)
        else:
            raise ApiError(
                400,
                f"no scripted reply matches this request "
                f"(model '{model}', last message '{shorten(text, 80)}')",
                code="no_scripted_reply",
            )
        exchange.fault = reply.fault
        latency = script.latency_ms if reply.latency_ms is None else reply.latency_ms
        if latency > 0:
            await asyncio.sleep(latency / 1000)
        which = f"scripted fault of rule {exchange.rule!r}"
        if reply.fault == "rate_limit":
            retry_after = DEFAULT_RETRY_AFTER if reply.retry_after is None else reply.retry_after
            raise ApiError(
                429,
                reply.message or f"Rate limit reached ({which}).",
                type_="requests",
                code="rate_limit_exceeded",
                headers=_retry_headers(retry_after),
            )
        if reply.fault == "server_error":
            message = reply.message or f"The server had an error processing your request ({which})."
            raise ApiError(500, message, type_="server_error", code="server_error")
        if reply.fault == "bad_request":
            raise ApiError(400, reply.message or f"Bad request ({which}).", code="bad_request")
        if reply.fault == "malformed":
            return _malformed(stream)
        if reply.fault == "hang":
            interrupted = await _hang(request, reply.hang_seconds, closing)
            if interrupted is not None:
                reason = "the client left" if interrupted == CLIENT_GONE else "it is stopping"
                message = f"the scripted server stopped hanging: {reason}"
                raise ApiError(interrupted, message, type_="server_error", code="interrupted")
        return reply

    @app.post("/v1/chat/completions")
    async def chat_completions(body: ChatRequest, request: Request) -> Response:
        texts = [message.text() for message in body.messages]
        outcome = await decide(request, "chat", body.model, texts[-1], stream=bool(body.stream))
        if isinstance(outcome, Response):
            return outcome
        choices = [outcome.choice(index) for index in range(body.samples)]
        token_usage = _usage(outcome, count_all(texts), count_all(choices))
        logprobs = None
        if body.logprobs or body.top_logprobs is not None:
            logprobs = [outcome.logprob(index) for index in range(body.samples)]
        answer = Completion(body.model, choices, outcome.finish_reason, logprobs)
        if body.stream:
            return _event_stream(answer.chat_chunks(token_usage if body.include_usage else None))
        return JSONResponse(answer.chat(token_usage))

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest, request: Request) -> Response:
        prompts = body.prompt
        outcome = await decide(
            request, "completions", body.model, prompts[0], stream=bool(body.stream)
        )
        if isinstance(outcome, Response):
            return outcome
        # Like OpenAI: choices for prompt p are p*n .. p*n+n-1.
        choices = [outcome.choice(index) for index in range(len(prompts) * body.samples)]
        token_usage = _usage(outcome, count_all(prompts), count_all(choices))
        answer = Completion(body.model, choices, outcome.finish_reason)
        if body.stream:
            return _event_stream(answer.text_chunks(token_usage if body.include_usage else None))
        return JSONResponse(answer.text(token_usage))

    @app.post("/v1/embeddings")
    async def embeddings(body: EmbeddingRequest, request: Request) -> Response:
        texts = body.input
        outcome = await decide(request, "embeddings", body.model, texts[0], stream=False)
        if isinstance(outcome, Response):
            return outcome
        vectors: list[list[float]]
        if outcome.vectors is not None:
            if len(outcome.vectors) != len(texts):
                raise ApiError(
                    400,
                    f"the scripted reply of rule {_exchange(request).rule!r} gives "
                    f"{len(outcome.vectors)} vector(s) for {len(texts)} input(s)",
                    code="scripted_vector_count",
                )
            vectors = outcome.vectors
        else:
            dimensions = body.dimensions or script.embedding_dimensions
            vectors = [hashed_embedding(text, dimensions) for text in texts]
        encoded: list[list[float] | str] = (
            [to_base64(vector) for vector in vectors]
            if body.encoding_format == "base64"
            else list(vectors)
        )
        token_usage = _usage(outcome, count_all(texts), 0)
        return JSONResponse(embeddings_response(body.model, encoded, token_usage["prompt_tokens"]))

    # Azure OpenAI's URL shape (api-version in the query, the key in an api-key header): the
    # same answers, so the Azure client can be tested for real.
    app.post(_AZURE_PREFIX + "{deployment}/chat/completions")(chat_completions)
    app.post(_AZURE_PREFIX + "{deployment}/completions")(completions)
    app.post(_AZURE_PREFIX + "{deployment}/embeddings")(embeddings)

    @app.get("/v1/models")
    async def models() -> Response:
        return JSONResponse(model_list(script.model_names()))

    @app.get("/_scripted/stats")
    async def stats() -> Response:
        return JSONResponse(state.stats())

    @app.post("/_scripted/reset")
    async def reset() -> Response:
        state.reset()
        return JSONResponse(state.stats())

    return app
