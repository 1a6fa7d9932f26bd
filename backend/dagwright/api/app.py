"""The FastAPI application: routes, error mapping, CORS, the request boundary (body size,
text and nesting checks), and the web editor at /."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

from dagwright import __version__
from dagwright.api import errors
from dagwright.api.boundary import RequestGuard
from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.routes import (
    apps,
    charts,
    data,
    data_copilot,
    drafts,
    evaluations,
    examples,
    human,
    keys,
    mcp,
    models,
    openai_compat,
    published,
    runs,
    template_variables,
    templates,
    tqa,
    tqa_guide,
    triggers,
)
from dagwright.api.settings import ServerSettings
from dagwright.api.state import serving

# The editor's production build (frontend/dist), served by the product itself.
EDITOR_DIST = Path(__file__).resolve().parents[3] / "frontend" / "dist"


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
        default_response_class=SafeJSONResponse,
    )
    errors.install(app)
    app.add_middleware(RequestGuard, limit=settings.max_body_bytes)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )
    for module in (
        # First: the published endpoints are the hot path, and routes are matched in order
        # (about 7% of a trivial published call went to trying the other routes first).
        published,
        apps,
        runs,
        keys,
        examples,
        data,
        openai_compat,
        tqa,
        evaluations,
        charts,
        data_copilot,
        mcp,
        models,
        triggers,
        human,
        templates,
        template_variables,
        drafts,
        tqa_guide,
    ):
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
