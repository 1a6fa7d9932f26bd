"""A published app as an MCP server (streamable HTTP) at /api/v1/apps/{app}/mcp, guarded by
the app's API keys like its run endpoint. The MCP SDK loads on the first call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from dagwright.api.routes.access import Admin, app_for_key
from dagwright.api.state import Services, services
from dagwright.secrets import check_secret_name
from dagwright.store.models import App

if TYPE_CHECKING:
    from dagwright.mcp.hosting import McpHosting

router = APIRouter(prefix="/api/v1", tags=["mcp"])
Deps = Annotated[Services, Depends(services)]


class _McpExchange(Response):
    """Hands the request to the MCP transport, which writes the answer (JSON or a stream)."""

    def __init__(self, hosting: McpHosting, app: App) -> None:
        super().__init__()
        self._hosting = hosting
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._hosting.handle(self._app, scope, receive, send)


def _hosting(request: Request, s: Services) -> McpHosting:
    hosting: McpHosting | None = getattr(request.app.state, "mcp_hosting", None)
    if hosting is None:
        from dagwright.mcp.hosting import McpHosting

        hosting = request.app.state.mcp_hosting = McpHosting(s)
    return hosting


# POST only: the server is stateless (no session to DELETE) and offers no standalone event
# stream, for which MCP lets a server answer GET with 405 (a GET would otherwise hold an idle
# stream open for good).
@router.post("/apps/{app}/mcp", response_model=None)
async def app_mcp(app: str, request: Request, s: Deps) -> Response:
    """The app's published version as the one tool of an MCP server: its input ports are the
    tool's input schema, a call is a recorded run (mode `mcp`) whose node events come as
    progress notifications. Send the app's API key as `Authorization: Bearer <key>`."""
    found = await app_for_key(request, s, app)
    return _McpExchange(_hosting(request, s), found)


class McpServerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str | None = None
    command: list[str] = Field(default_factory=list)
    token_secret: str | None = None

    @field_validator("token_secret")
    @classmethod
    def _secret(cls, name: str | None) -> str | None:
        return None if name is None else check_secret_name(name)


@router.post("/mcp/tools", dependencies=[Admin])
async def mcp_server_tools(body: McpServerIn, s: Deps) -> dict[str, Any]:
    """The tools of an MCP server (name, title, description, input schema), for the
    `mcp_tool` block's config form. A stdio command must be one the operator allows; a URL
    must pass the egress policy (403 `egress_denied` otherwise)."""
    from dagwright.mcp.client import McpTarget, list_tools

    token = s.secrets.get(body.token_secret) if body.token_secret else None
    target = McpTarget(body.url, tuple(body.command), token)
    return {"tools": await list_tools(target, s.mcp_stdio, s.egress)}


@router.api_route("/apps/{app}/mcp", methods=["GET", "DELETE"], include_in_schema=False)
async def app_mcp_other(app: str) -> JSONResponse:
    """What MCP asks of a server without a standalone stream or sessions: 405."""
    message = "this MCP endpoint is stateless: POST only (no event stream, no session)"
    return JSONResponse(
        {"error": {"code": "method_not_allowed", "message": message}},
        status_code=405,
        headers={"Allow": "POST"},
    )
