"""Published apps as MCP tools. One low-level MCP server answers for every app: the HTTP
route (api/routes/mcp.py) checks the app's API key and hands the request on with the app,
and the app is the one tool listed and called there. A call is a recorded run (mode `mcp`);
its node events are sent as MCP progress notifications."""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from starlette.requests import Request

from dagwright import __version__
from dagwright.api.jsontext import SafeJSONResponse
from dagwright.api.routes.published import run_deadline
from dagwright.api.state import Services
from dagwright.errors import DagwrightError
from dagwright.mcp.schema import input_schema
from dagwright.runtime.events import NodeFailed, NodeFinished, NodeSkipped, NodeWaiting
from dagwright.services.inputs import check_input_types
from dagwright.store.models import App

# Where the HTTP route leaves the app it checked the key for, in the ASGI scope's state.
APP_STATE_KEY = "dagwright_mcp_app"

Context = ServerRequestContext[Any, Any]


def _called_app(ctx: Context) -> App:
    request = ctx.request
    if not isinstance(request, Request):
        raise RuntimeError("an MCP request reached the app tools without its HTTP request")
    app: App = request.scope["state"][APP_STATE_KEY]
    return app


def _text(value: Any) -> str:
    return bytes(SafeJSONResponse(value).body).decode()


def _error(message: str) -> types.CallToolResult:
    # Tool errors go in the result (is_error), as MCP asks, so a model can read them.
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def app_tools(services: Services) -> Server[Any]:
    async def list_tools(
        ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        app = _called_app(ctx)
        endpoint = await services.endpoints.endpoint(app.id, None)
        tool = types.Tool(
            name=app.slug,
            title=app.name,
            description=app.description or f"Runs the dagwright app {app.name!r}.",
            input_schema=input_schema(endpoint.plan),
        )
        return types.ListToolsResult(tools=[tool])

    async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
        app = _called_app(ctx)
        if params.name != app.slug:
            return _error(f"this endpoint serves the tool {app.slug!r}, not {params.name!r}")
        arguments = dict(params.arguments or {})
        endpoint = await services.endpoints.endpoint(app.id, None)
        try:
            check_input_types(endpoint.plan, arguments)
            live = await services.runs.start(
                endpoint.plan,
                arguments,
                app_id=app.id,
                version_id=endpoint.version_id,
                mode="mcp",
                deadline=run_deadline(services, app),
                traceparent=ctx.request.headers.get("traceparent")
                if isinstance(ctx.request, Request)
                else None,
            )
        except DagwrightError as exc:
            return _error(f"{exc.code}: {exc.message}")
        total = len(endpoint.plan.nodes)
        settled = 0
        async for event in live.run.stream():
            settles = NodeFinished | NodeFailed | NodeSkipped | NodeWaiting
            if isinstance(event, settles) and "/" not in event.node:
                settled += 1
                verb = {
                    NodeFinished: "finished",
                    NodeFailed: "failed",
                    NodeSkipped: "skipped",
                    NodeWaiting: "waits for a person",
                }
                await ctx.session.report_progress(
                    settled, total, f"{event.node} {verb[type(event)]}"
                )
        record = await live.wait()
        if record.status != "succeeded":
            reason = (record.error or {}).get("message", "no error recorded")
            return _error(f"run {record.id} {record.status}: {reason}")
        outputs = record.outputs or {}
        return types.CallToolResult(
            content=[types.TextContent(text=_text(outputs))],
            structured_content=outputs,
            meta={"dagwright/run_id": record.id},
        )

    return Server(
        "dagwright",
        version=__version__,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
