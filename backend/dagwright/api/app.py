"""The FastAPI application: routes, error mapping, CORS, the request boundary (body size,
text and nesting checks), and the web editor at /."""

from __future__ import annotations

import importlib
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import Match, Mount
from starlette.types import Scope

from dagwright import __version__
from dagwright.api import errors
from dagwright.api.boundary import RequestGuard
from dagwright.api.fastpath import FastPath, FastPaths
from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.settings import ServerSettings
from dagwright.api.startup import HEALTH_PATH, Startup, StartupGate
from dagwright.api.state import serving

# The editor's production build (frontend/dist), served by the product itself.
EDITOR_DIST = Path(__file__).resolve().parents[3] / "frontend" / "dist"
# The route modules, in the order routes are matched. First: the published endpoints are the
# hot path (about 7% of a trivial published call went to trying the other routes first).
ROUTE_MODULES = (
    "published",
    "apps",
    "runs",
    "keys",
    "examples",
    "data",
    "openai_compat",
    "tqa",
    "evaluations",
    "charts",
    "data_copilot",
    "mcp",
    "models",
    "triggers",
    "human",
    "templates",
    "template_variables",
    "drafts",
    "tqa_guide",
)


def api_routers() -> list[APIRouter]:
    """Every route module's router, in order (importing them, and building their schemas, is
    most of a second: start-up does it in its thread, api/startup.py)."""
    return [
        importlib.import_module(f"dagwright.api.routes.{name}").router for name in ROUTE_MODULES
    ]


class _EditorFiles(Mount):
    """The editor's files at "/", for every path but the API's: a mount at "/" matches any
    path and method, so it would answer an API route called with the wrong method (405) or
    an unknown API path with its own 404 page."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            return Match.NONE, {}
        return super().matches(scope)


class _Routes:
    """The API's routes, added to the app once: by start-up, or by the first call for the
    OpenAPI document of an app that never started (its tests)."""

    def __init__(self, app: FastAPI, fast: FastPaths) -> None:
        self.app = app
        self.fast = fast
        self.installed = False
        self._lock = threading.Lock()

    def install(self, routers: list[APIRouter] | None = None) -> None:
        with self._lock:
            if self.installed:
                return
            table = self.app.router.routes
            before = len(table)
            for router in routers or api_routers():
                self.app.include_router(router)
            # In front of the health check and the editor's files (the "/" mount matches all).
            added = table[before:]
            del table[before:]
            table[:0] = added
            from dagwright.api.routes.published import run_published_fast

            self.fast.published_run = run_published_fast
            self.installed = True


def create_app(settings: ServerSettings | None = None) -> FastAPI:
    settings = settings or ServerSettings.from_env()
    startup = Startup()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with serving(app, settings, startup, routes.install, api_routers):
            yield

    app = FastAPI(
        title="dagwright",
        version=__version__,
        summary="LLM applications as typed DAG flows, published as HTTP endpoints.",
        lifespan=lifespan,
        default_response_class=SafeJSONResponse,
    )
    fast = FastPaths()
    routes = _Routes(app, fast)
    errors.install(app)
    # Innermost first: the fast path sits behind the boundary and start-up like every route.
    app.add_middleware(FastPath, paths=fast)
    app.add_middleware(StartupGate, startup=startup)
    app.add_middleware(RequestGuard, limit=settings.max_body_bytes)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origins,
            allow_methods=["*"],
            allow_headers=["*"],
        )

    @app.get(HEALTH_PATH, tags=["health"])
    async def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__, "replica": settings.replica}

    @app.get("/api/v1/ready", include_in_schema=False)
    async def ready() -> dict[str, str]:
        # Held until start-up is done (503 if it failed, api/startup.py): what a deployment
        # waits for before it sends work or starts workers; the health check answers as soon
        # as the process listens.
        return {"status": "ready", "version": __version__, "replica": settings.replica}

    if (EDITOR_DIST / "index.html").is_file():
        app.router.routes.append(
            _EditorFiles("/", app=StaticFiles(directory=EDITOR_DIST, html=True), name="editor")
        )
    else:

        @app.get("/", include_in_schema=False)
        def home() -> RedirectResponse:
            # Until the editor is built, the API's own documentation is the front page.
            return RedirectResponse("/docs")

    def openapi() -> dict[str, Any]:
        routes.install()
        return FastAPI.openapi(app)

    app.openapi = openapi  # type: ignore[method-assign]
    return app
