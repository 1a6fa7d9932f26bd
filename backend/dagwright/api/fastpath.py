"""The published run call (POST /api/v1/apps/{app}/run), the hot path, answered without
FastAPI's routing, dependency solving and request parsing: under load they were about a
third of the server's CPU per call. It still passes every check before it: the request
boundary (api/boundary.py: body size, surrogates, NUL, nesting) and start-up
(api/startup.py). The FastAPI route stays, for the OpenAPI document and for every body the
fast path does not take (those that do not validate: FastAPI answers with its 422s).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

APPS: Final = "/api/v1/apps/"
# (scope, receive, send, app slug, the rest of the app to hand a request on to)
Handler = Callable[[Scope, Receive, Send, str, ASGIApp], Awaitable[None]]


class FastPaths:
    """The handlers, set once the route modules are loaded (start-up's thread)."""

    def __init__(self) -> None:
        self.published_run: Handler | None = None


class FastPath:
    """ASGI middleware (inside the boundary and start-up): POST /api/v1/apps/{app}/run to its
    handler; everything else on to the app."""

    def __init__(self, app: ASGIApp, paths: FastPaths) -> None:
        self.app = app
        self.paths = paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        handler = self.paths.published_run
        if handler is not None and scope["type"] == "http" and scope["method"] == "POST":
            path: str = scope["path"]
            if path.startswith(APPS) and path.endswith("/run"):
                slug = path[len(APPS) : -len("/run")]
                if slug and "/" not in slug:
                    await handler(scope, receive, send, slug, self.app)
                    return
        await self.app(scope, receive, send)
