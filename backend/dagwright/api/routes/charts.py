"""Charts to images: a chart value (a Vega-Lite spec, as any flow may return) rendered to SVG
or PNG on the server, for callers that cannot run Vega themselves. The spec policy, the
isolated child processes and their pool are dagwright.charts.renderer's."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, Field

from dagwright.api.auth import bearer_token, check_admin
from dagwright.api.settings import admin_required
from dagwright.api.state import Services, services
from dagwright.errors import AuthError

router = APIRouter(prefix="/api/v1", tags=["charts"])
Deps = Annotated[Services, Depends(services)]
MEDIA = {"svg": "image/svg+xml", "png": "image/png"}


class RenderIn(BaseModel):
    spec: dict[str, Any] = Field(description="The chart: a Vega-Lite spec with inline data.")
    format: Literal["svg", "png"] = "svg"
    scale: float = Field(1.0, gt=0, le=4, description="PNG only: pixels per unit.")


async def _may_render(request: Request, s: Services) -> None:
    """The admin token, or any app's API key (rate-limited like its calls): a published
    caller renders the charts its app returned."""
    try:
        check_admin(request, s.settings.admin_token, admin_required(s.settings))
        return
    except AuthError:
        token = bearer_token(request)
        key = await s.endpoints.key(token) if token else None
        if key is None:
            raise
        s.limiter.take(key.id)


@router.post("/charts/render", response_class=Response)
async def render_chart(body: RenderIn, request: Request, s: Deps) -> Response:
    """The chart as an SVG or PNG image."""
    # Inline data only, rendered in an isolated child: 400 chart_invalid, chart_timeout or
    # chart_memory; 429 charts_busy (the docstring is the OpenAPI document's: kept as it was).
    await _may_render(request, s)
    image = await s.charts.render(body.spec, body.format, body.scale)
    return Response(image, media_type=MEDIA[body.format])
