"""Start-up in two steps: the server answers its health check as soon as it listens, and
prepares the rest (the route modules, the database and its migrations, the block registry,
the model gateway, the data layer's native modules) in a thread; every other request waits
for that, without holding up the event loop.

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
from collections.abc import Awaitable
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

from dagwright.api.errors import error_response

HEALTH_PATH: Final = "/api/v1/health"
log = logging.getLogger("uvicorn.error")


class Startup:
    """Where start-up stands. Until `begin()` (an app used without its lifespan) nothing is
    waited for."""

    def __init__(self) -> None:
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None

    @property
    def pending(self) -> bool:
        return self._ready is not None and not self._ready.is_set()

    def begin(self, preparing: Awaitable[None]) -> None:
        """Run `preparing` in the background (from the lifespan, on the server's loop)."""
        self._ready = asyncio.Event()
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
            assert self._ready is not None
            self._ready.set()

    async def wait(self) -> None:
        if self._ready is not None:
            await self._ready.wait()

    async def settled(self) -> None:
        """At shut-down: wait for a start-up still under way (its thread cannot be stopped,
        and what it built must be closed), whatever its outcome."""
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)


class StartupGate:
    """ASGI middleware: the health check passes while the server prepares the rest; every
    other request waits until it is ready. After a failed start-up, all answer 503."""

    def __init__(self, app: ASGIApp, startup: Startup) -> None:
        self.app = app
        self.startup = startup

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        startup = self.startup
        if scope["type"] == "http":
            if startup.pending and scope.get("path") != HEALTH_PATH:
                await startup.wait()
            if startup.failure is not None:
                response = error_response(
                    503, "server_unavailable", f"the server failed to start: {startup.failure}"
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
