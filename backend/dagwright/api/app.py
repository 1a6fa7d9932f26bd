"""The FastAPI application: routes, error mapping, CORS, body limit, and the web editor at /."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dagwright import __version__
from dagwright.api import errors
from dagwright.api.routes import (
    apps,
    data,
    examples,
    keys,
    openai_compat,
    published,
    runs,
    tqa,
)
from dagwright.api.settings import ServerSettings
from dagwright.api.state import serving

# The editor's production build (frontend/dist), served by the product itself.
EDITOR_DIST = Path(__file__).resolve().parents[3] / "frontend" / "dist"


class BodyLimit:
    """Refuses a request body over `limit` bytes with the API's error shape (413
    payload_too_large): at once when Content-Length says so, else when the streamed body
    passes the limit. (FastAPI's own max_body_size answers a request with a Content-Length
    over the limit in plain text, replacing any response the app gives.)"""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = Headers(scope=scope).get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            response = errors.error_response(
                413, "payload_too_large", "the request body is larger than the server accepts"
            )
            await response(scope, receive, send)
            return
        received = 0

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    # Inside the routes: the error handler answers (errors.install).
                    raise StarletteHTTPException(413)
            return message

        await self.app(scope, limited, send)


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    settings = settings or ServerSettings.from_env()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with serving(app, settings):
            yield

    app = FastAPI(
        title="dagwright",
        version=__version__,
        summary="LLM applications as typed DAG flows, published as HTTP endpoints.",
        lifespan=lifespan,
    )
    errors.install(app)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    for module in (apps, runs, published, keys, examples, data, openai_compat, tqa):
        app.include_router(module.router)

    @app.get("/api/v1/health", tags=["health"])
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__, "replica": settings.replica}

    if (EDITOR_DIST / "index.html").is_file():
        app.mount("/", StaticFiles(directory=EDITOR_DIST, html=True), name="editor")
    else:

        @app.get("/", include_in_schema=False)
        def home() -> RedirectResponse:
            # Until the editor is built, the API's own documentation is the front page.
            return RedirectResponse("/docs")

    return app
