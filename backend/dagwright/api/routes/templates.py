"""Flow templates for the editor's gallery: the flows shipped in flows/ (the examples, the
AutoTQA agents, the table-QA methods), each with its description and a preview of its shape,
so that a newcomer starts from a working flow in one click instead of an empty canvas."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, Field

from dagwright.api.routes.access import Admin
from dagwright.errors import NotFoundError

router = APIRouter(prefix="/api/v1", tags=["templates"], dependencies=[Admin])

FLOWS = Path(__file__).resolve().parents[4] / "flows"
# (folder under flows/, the gallery's group), in the gallery's order.
GROUPS = (("examples", "Examples"), ("autotqa", "AutoTQA agents"), ("methods", "Table-QA methods"))


class PreviewNode(BaseModel):
    x: float
    y: float
    block: str


class TemplateOut(BaseModel):
    id: str = Field(description='the file under flows/ without ".json", e.g. "examples/hello"')
    group: str
    name: str
    description: str
    nodes: int
    preview: list[PreviewNode]
    edges: list[tuple[int, int]] = Field(description="indexes into preview")


class TemplateDetail(TemplateOut):
    flow: dict[str, Any]


def _summary(template_id: str, group: str, flow: dict[str, Any]) -> TemplateOut:
    nodes = [n for n in flow.get("nodes", []) if isinstance(n, dict)]
    index = {n.get("id"): i for i, n in enumerate(nodes)}
    preview = [
        PreviewNode(
            x=float(n.get("position", {}).get("x", 0)),
            y=float(n.get("position", {}).get("y", 0)),
            block=str(n.get("block", "")),
        )
        for n in nodes
    ]
    edges = [
        (index[e["source"]["node"]], index[e["target"]["node"]])
        for e in flow.get("edges", [])
        if e.get("source", {}).get("node") in index and e.get("target", {}).get("node") in index
    ]
    return TemplateOut(
        id=template_id,
        group=group,
        name=str(flow.get("name") or template_id.rsplit("/", 1)[-1]),
        description=str(flow.get("description") or ""),
        nodes=len(nodes),
        preview=preview,
        edges=edges,
    )


@cache
def _templates() -> dict[str, TemplateDetail]:
    # Read once per process: the shipped flows change with a release, not while serving.
    found: dict[str, TemplateDetail] = {}
    for folder, group in GROUPS:
        for path in sorted((FLOWS / folder).rglob("*.json")):
            flow = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(flow, dict) or flow.get("format") != "dagwright.flow":
                continue
            template_id = path.relative_to(FLOWS).with_suffix("").as_posix()
            found[template_id] = TemplateDetail(
                **_summary(template_id, group, flow).model_dump(), flow=flow
            )
    return found


@router.get("/templates", response_model=list[TemplateOut])
async def list_templates() -> list[TemplateOut]:
    return [TemplateOut(**t.model_dump(exclude={"flow"})) for t in _templates().values()]


@router.get("/templates/{template_id:path}", response_model=TemplateDetail)
async def get_template(template_id: str) -> TemplateDetail:
    try:
        return _templates()[template_id]
    except KeyError:
        raise NotFoundError(f"no template {template_id!r}", code="template_not_found") from None
