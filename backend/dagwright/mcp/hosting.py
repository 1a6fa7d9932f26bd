"""The MCP endpoint's streamable HTTP transport, started on the first MCP request (so a
server nobody calls over MCP never loads the SDK) and stopped with the event loop."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import Receive, Scope, Send

from dagwright.api.state import Services
from dagwright.mcp.server import APP_STATE_KEY, app_tools
from dagwright.store.models import App


class McpHosting:
    def __init__(self, services: Services) -> None:
        # Stateless: any replica answers any request, and nothing is kept between calls.
        self._manager = StreamableHTTPSessionManager(app=app_tools(services), stateless=True)
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    async def _running(self) -> None:
        async with self._lock:
            if self._task is not None:
                return
            started = asyncio.Event()

            async def keep() -> None:
                # The manager's task group lives as long as this task: until the loop ends.
                async with self._manager.run():
                    started.set()
                    await asyncio.Event().wait()

            self._task = asyncio.get_running_loop().create_task(keep(), name="dagwright-mcp")
            await started.wait()

    async def handle(self, app: App, scope: Scope, receive: Receive, send: Send) -> None:
        await self._running()
        state: dict[str, Any] = scope.setdefault("state", {})
        state[APP_STATE_KEY] = app
        await self._manager.handle_request(scope, receive, send)
