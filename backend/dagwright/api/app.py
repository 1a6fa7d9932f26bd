"""The FastAPI application: routes, error mapping, CORS, the request boundary (body size,
text and nesting checks), and the web editor at /."""

from __future__ import annotations

import importlib
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import Scope

from dagwright import __version__
from dagwright.api import errors
from dagwright.api.boundary import RequestGuard
from dagwright.api.fastpath import FastPath, FastPaths
from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.settings import server_settings
from dagwright.api.startup import HEALTH_PATH, Startup, StartupGate
from dagwright.api.state import serving
from dagwright.settings import Settings

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
# Start-up's first stage (api/startup.py): what a user's first call needs (the editor's app
# list, a published run, runs, keys), ready before the data layer is imported; the rest
# wait for it too.
CORE_ROUTE_MODULES = ROUTE_MODULES[:4]


def api_routers(names: Sequence[str] = ROUTE_MODULES) -> list[APIRouter]:
    """These route modules' routers, in order (importing them, and building their schemas,
    is most of a second: start-up does it in its thread, api/startup.py)."""
    return [importlib.import_module(f"dagwright.api.routes.{name}").router for name in names]


def core_routers() -> list[APIRouter]:
    return api_routers(CORE_ROUTE_MODULES)


def rest_routers() -> list[APIRouter]:
    return api_routers(ROUTE_MODULES[len(CORE_ROUTE_MODULES) :])


class _EditorFiles(Mount):
    """The editor's files at "/", for every path but the API's: a mount at "/" matches any
    path and method, so it would answer an API route called with the wrong method (405) or
    an unknown API path with its own 404 page."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            return Match.NONE, {}
        return super().matches(scope)


class _Routes:
    """The API's routes, added to the app once: by start-up's stages (the core's modules,
    then the rest), or all by the first call for the OpenAPI document of an app that never
    started (its tests)."""

    def __init__(self, app: FastAPI, fast: FastPaths) -> None:
        self.app = app
        self.fast = fast
        self._added: list[APIRouter] = []
        self._front = 0  # how many routes at the table's front are the API's
        self._lock = threading.Lock()

    def add(self, routers: list[APIRouter]) -> list[BaseRoute]:
        """Installs these routers (those not installed yet, in order); returns their routes."""
        with self._lock:
            table = self.app.router.routes
            before = len(table)
            for router in routers:
                if not any(router is added for added in self._added):
                    self.app.include_router(router)
                    self._added.append(router)
            # After the API's routes added before, in front of the health check and the
            # editor's files (the "/" mount matches all).
            added = table[before:]
            del table[before:]
            table[self._front : self._front] = added
            self._front += len(added)
            if self.fast.published_run is None:
                # Imported by now: the published routes are the core's (the first added).
                from dagwright.api.routes import published

                if any(router is published.router for router in routers):
                    self.fast.published_run = published.run_published_fast
            return added

    def install(self) -> None:
        self.add(api_routers())


def create_app(settings: Settings | None = None) -> FastAPI:
    """The server of these settings (a test's); else of the process's, checked
    (api/settings.py)."""
    settings = settings or server_settings()
    startup = Startup()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with serving(app, settings, startup, routes.add, core_routers, rest_routers):
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
    if settings.cors_origin_list:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.cors_origin_list,
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
        editor: BaseRoute = _EditorFiles(
            "/", app=StaticFiles(directory=EDITOR_DIST, html=True), name="editor"
        )
        app.router.routes.append(editor)
    else:

        @app.get("/", include_in_schema=False)
        def home() -> RedirectResponse:
            # Until the editor is built, the API's own documentation is the front page.
            return RedirectResponse("/docs")

        editor = app.router.routes[-1]
    # The editor's files need nothing start-up builds: they load while it works.
    startup.routes(app.router.routes, [editor])

    def openapi() -> dict[str, Any]:
        routes.install()
        return FastAPI.openapi(app)

    app.openapi = openapi  # type: ignore[method-assign]
    return app
