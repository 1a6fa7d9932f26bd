"""The editor API for apps and versions: CRUD, validation, diff, publish, import/export."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from dagwright.api.routes.access import Admin
from dagwright.api.schemas import (
    AppCreate,
    AppOut,
    AppUpdate,
    NodesPortsIn,
    Paging,
    PublishIn,
    ValidateIn,
    VersionCreate,
    VersionDetail,
    VersionOut,
)
from dagwright.api.state import Services, services
from dagwright.services import editor, porting
from dagwright.store.paging import Page

# The editor API: open on loopback, behind the admin token otherwise (as keys and runs are).
router = APIRouter(prefix="/api/v1", tags=["apps"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


@router.get("/apps", response_model=Page[AppOut])
def list_apps(s: Deps, page: Paging) -> Any:
    return s.apps.list_apps(offset=page.offset, limit=page.limit)


@router.post("/apps", response_model=AppOut, status_code=201)
def create_app(body: AppCreate, s: Deps) -> Any:
    settings = body.settings.model_dump(exclude_none=True) if body.settings else None
    return s.apps.create_app(body.slug, body.name, body.description, settings)


@router.get("/apps/{app}", response_model=AppOut)
def get_app(app: str, s: Deps) -> Any:
    return s.apps.get_app(app)


@router.patch("/apps/{app}", response_model=AppOut)
def update_app(app: str, body: AppUpdate, s: Deps) -> Any:
    settings = body.settings.model_dump(exclude_unset=True) if body.settings else None
    return s.apps.update_app(app, name=body.name, description=body.description, settings=settings)


@router.delete("/apps/{app}", status_code=204)
def delete_app(app: str, s: Deps) -> Response:
    s.apps.delete_app(app)
    return Response(status_code=204)


@router.get("/apps/{app}/versions", response_model=Page[VersionOut])
def list_versions(app: str, s: Deps, page: Paging) -> Any:
    return s.apps.list_versions(app, offset=page.offset, limit=page.limit)


@router.post("/apps/{app}/versions", response_model=VersionOut, status_code=201)
def create_version(app: str, body: VersionCreate, s: Deps) -> Any:
    """Save a flow as a new immutable version. An invalid flow is refused (422) with every
    problem listed, and nothing is written."""
    return s.apps.create_version(
        app, body.flow, note=body.note, author=body.author, parent_id=body.parent_id
    )


@router.get("/apps/{app}/versions/{version}", response_model=VersionDetail)
def get_version(app: str, version: str, s: Deps) -> Any:
    """A version by id, number, or `published`, with its flow (layout merged back)."""
    found = s.apps.get_version(app, version)
    return {**VersionOut.model_validate(found).model_dump(), "flow": s.apps.flow_of(found)}


@router.get("/apps/{app}/diff")
def diff_versions(app: str, a: str, b: str, s: Deps) -> dict[str, Any]:
    """What changed from version a to version b: nodes and edges added, removed, changed."""
    return s.apps.diff(app, a, b)


@router.post("/apps/{app}/publish", response_model=AppOut)
def publish(app: str, body: PublishIn, s: Deps) -> Any:
    """Publish a version, unless the app's evaluation gate refuses it (409, with the numbers)."""
    from dagwright.services.evaluation_gates import GateService  # loads the metrics: on use

    return GateService(s.engine, s.apps).publish(app, body.version_id)


@router.get("/apps/{app}/export")
def export_app(app: str, s: Deps) -> dict[str, Any]:
    """The app and its versions as one JSON document (no keys, secrets or runs)."""
    return porting.export_app(s.apps, app)


@router.post("/apps/import", response_model=AppOut, status_code=201)
def import_app(document: dict[str, Any], s: Deps, slug: str | None = None) -> Any:
    return porting.import_app(s.apps, document, slug=slug)


@router.post("/validate")
def validate_flow(body: ValidateIn, s: Deps) -> dict[str, Any]:
    """Check a flow without saving it: every problem, each naming its node and port."""
    return editor.check_flow(body.flow, s.registry, s.apps)


@router.get("/blocks")
def blocks(s: Deps) -> dict[str, Any]:
    """The block registry with JSON Schema for configs and ports (palette, forms, colours)."""
    return s.registry.to_schema()


@router.get("/types")
def port_types(s: Deps) -> dict[str, Any]:
    """Every port type of the registry and whether an edge from one to another is allowed:
    `yes`, `check` (allowed, checked at run time) or `no` (refused at save time) — so the
    editor can refuse a connection while it is being dragged, by the server's own rules."""
    return editor.port_types(s.registry)


@router.post("/blocks/ports")
def nodes_ports(body: NodesPortsIn, s: Deps) -> dict[str, Any]:
    """The ports of several nodes in one call (a flow being opened): `ports` by node id, as
    /blocks/{block}/ports answers each, and `errors` by node id (code and message) for a
    node whose block is unknown or whose config is refused."""
    nodes = {node_id: (n.block, n.config) for node_id, n in body.nodes.items()}
    return editor.nodes_ports(s.registry, nodes)


@router.post("/blocks/{block}/ports")
def block_ports(block: str, config: dict[str, Any], s: Deps) -> dict[str, Any]:
    """The input ports and branches one configuration gives a block (template variables,
    switch cases...), for the editor to draw while a config is edited."""
    return editor.block_ports(s.registry, block, config)
