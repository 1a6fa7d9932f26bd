"""Start-up in steps: the server answers its health check as soon as it listens, and
prepares the rest in a thread, in two stages:

1. the core: the database and its migrations, the block registry, the model gateway, the
   services of apps, runs and keys, and the route modules of apps, runs, keys and published
   calls (the routes a user's first call needs: the editor's app list, a published run);
2. the rest: the other route modules (data sources, tables, AutoTQA, Data-Copilot,
   examples...), the services only they use (api/state.py's `LaterServices`, triggers,
   approvals) and the data layer's native modules (DuckDB, Arrow, sqlglot: most of a
   second of CPU).

Readiness is one mechanism: each stage installs its routes when it is done, and the gate
lets a request through once the route that takes it is a finished stage's (the health
check and the editor's files, which need nothing start-up builds, from the start). Any
other request (a data route, /openapi.json, /docs, /api/v1/ready) waits until every stage
is done, so no route runs before what it needs is imported and built, and
`GET /api/v1/ready` still means "everything ready".

Why a thread: those imports and builds cost over a second of CPU, most of it the data
layer's native modules (DuckDB, Arrow, sqlglot). Run on the event loop they would stall
every request (a source request importing them once held the GIL ~1.4 s); in a thread the
longest hold of the GIL is tens of milliseconds, so the health check answers throughout.
A request that needs them waits on an asyncio event, which costs the loop nothing.

If start-up fails, every request (the health check too) answers 503 `server_unavailable`
with the reason, and a server running in the main thread (`dagwright serve`) stops.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Awaitable, Sequence
from typing import Final

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from dagwright.api.errors import error_response

HEALTH_PATH: Final = "/api/v1/health"
log = logging.getLogger("uvicorn.error")


class Startup:
    """Where start-up stands: its stages' routes, and an event set as each stage ends (and
    replaced by the next one's). Until `begin()` (an app used without its lifespan) nothing
    is waited for."""

    def __init__(self) -> None:
        self._pending = False
        self._stage: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._table: Sequence[BaseRoute] = ()  # the app's routes, in the order they match
        self._at_once: tuple[BaseRoute, ...] = ()
        self._served: tuple[BaseRoute, ...] = ()
        self.failure: BaseException | None = None

    def routes(self, table: Sequence[BaseRoute], at_once: Sequence[BaseRoute]) -> None:
        """The app's route table, and the routes that need nothing start-up builds (the
        editor's files): those answer from the start."""
        self._table = table
        self._at_once = tuple(at_once)

    @property
    def pending(self) -> bool:
        return self._pending

    def begin(self, preparing: Awaitable[None]) -> None:
        """Run `preparing` in the background (from the lifespan, on the server's loop)."""
        self._pending = True
        self._stage = asyncio.Event()
        self._served = self._at_once
        self.failure = None
        self._task = asyncio.ensure_future(self._run(preparing))

    async def _run(self, preparing: Awaitable[None]) -> None:
        try:
            await preparing
        except BaseException as exc:
            self.failure = exc
            log.error("dagwright failed to start", exc_info=exc)
            if threading.current_thread() is threading.main_thread():
                # `dagwright serve`: uvicorn shuts down on it (and exits by the signal).
                signal.raise_signal(signal.SIGTERM)
            if not isinstance(exc, Exception):
                raise
        finally:
            self._pending = False
            self._stage_ended()

    def release(self, routes: Sequence[BaseRoute]) -> None:
        """A stage is done: requests its routes match no longer wait for the rest (on the
        loop, once the routes are installed and what they use is built)."""
        self._served = (*self._served, *routes)
        self._stage_ended()

    def _stage_ended(self) -> None:
        ended, self._stage = self._stage, asyncio.Event()
        if ended is not None:
            ended.set()  # its waiters look again: served now, or wait for the next stage

    def serves(self, scope: Scope) -> bool:
        """Whether the route that takes this request (the first to match it fully, as the
        router picks) is a finished stage's. A wrong method is no match: an unfinished
        stage may have the route for it."""
        for route in self._table:
            if route.matches(scope)[0] is Match.FULL:
                return any(route is served for served in self._served)
        return False

    async def admit(self, scope: Scope) -> None:
        """Returns once a finished stage serves this request, or start-up is over."""
        while self._pending and not self.serves(scope):
            assert self._stage is not None
            await self._stage.wait()

    async def settled(self) -> None:
        """At shut-down: wait for a start-up still under way (its thread cannot be stopped,
        and what it built must be closed), whatever its outcome."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


class StartupGate:
    """ASGI middleware: the health check, and the routes of the stages that are done, pass
    while the server prepares the rest; every other request waits until it is all ready.
    After a failed start-up, all answer 503."""

    def __init__(self, app: ASGIApp, startup: Startup) -> None:
        self.app = app
        self.startup = startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        startup = self.startup
        if scope["type"] == "http":
            if startup.pending and scope.get("path") != HEALTH_PATH:
                await startup.admit(scope)
            if startup.failure is not None:
                response = error_response(
                    503, "server_unavailable", f"the server failed to start: {startup.failure}"
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
