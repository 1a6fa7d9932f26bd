"""Few-shot example namespaces: create them, upsert and page through examples, query them."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel, Field

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services
from dagwright.embedding.service import MAX_K, Hit, Namespace
from dagwright.errors import NotFoundError
from dagwright.store.paging import MAX_LIMIT

router = APIRouter(prefix="/api/v1", tags=["examples"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


class NamespaceIn(BaseModel):
    name: str
    embedder: str = Field(description='an embedder spec, e.g. "hashing:256" or "minilm"')
    key_fields: list[str] = Field(min_length=1)
    text_field: str = Field(min_length=1)


class NamespaceOut(BaseModel):
    name: str
    embedder: str
    dimension: int
    key_fields: list[str]
    text_field: str
    fields: list[str]
    count: int | None = None  # on GET of one namespace only: counting is not free


class ExamplesIn(BaseModel):
    examples: list[dict[str, Any]] = Field(max_length=1000)


class UpsertOut(BaseModel):
    ids: list[str]


class ExampleOut(BaseModel):
    id: str
    payload: dict[str, Any]


class ExamplePage(BaseModel):
    items: list[ExampleOut]
    next_offset: str | None


class QueryIn(BaseModel):
    text: str
    k: int = Field(default=5, ge=1, le=MAX_K)
    filter: dict[str, Any] | None = None
    min_score: float | None = None


class HitOut(BaseModel):
    id: str
    score: float
    payload: dict[str, Any]


def _out(namespace: Namespace, count: int | None = None) -> NamespaceOut:
    return NamespaceOut(**namespace.to_payload(), count=count)


def _hit(hit: Hit) -> HitOut:
    return HitOut(id=hit.id, score=hit.score, payload=hit.payload)


# Sync routes run in FastAPI's thread pool: the store's Qdrant calls block.
@router.get("/namespaces", response_model=list[NamespaceOut])
def list_namespaces(s: Deps) -> Any:
    return [_out(n) for n in s.examples.list_namespaces()]


@router.post("/namespaces", response_model=NamespaceOut, status_code=201)
def create_namespace(body: NamespaceIn, s: Deps) -> Any:
    created = s.examples.create_namespace(
        body.name, body.embedder, body.key_fields, body.text_field
    )
    return _out(created, 0)


@router.get("/namespaces/{ns}", response_model=NamespaceOut)
def get_namespace(ns: str, s: Deps) -> Any:
    return _out(s.examples.get_namespace(ns), s.examples.count(ns))


@router.delete("/namespaces/{ns}", status_code=204)
def delete_namespace(ns: str, s: Deps) -> Response:
    s.examples.delete_namespace(ns)
    return Response(status_code=204)


@router.post("/namespaces/{ns}/examples", response_model=UpsertOut)
async def upsert_examples(ns: str, body: ExamplesIn, s: Deps) -> Any:
    """Insert or replace examples (by their key fields); returns their ids, in order."""
    return UpsertOut(ids=await s.examples.upsert(ns, body.examples))


@router.get("/namespaces/{ns}/examples", response_model=ExamplePage)
def list_examples(
    ns: str,
    s: Deps,
    offset: Annotated[str | None, Query(description="next_offset of the previous page")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")] = 100,
) -> Any:
    page = s.examples.list(ns, offset, limit)
    items = [ExampleOut(id=item.id, payload=item.payload) for item in page.items]
    return ExamplePage(items=items, next_offset=page.next_offset)


@router.delete("/namespaces/{ns}/examples/{example_id}", status_code=204)
def delete_example(ns: str, example_id: str, s: Deps) -> Response:
    if s.examples.delete(ns, [example_id]) == 0:
        raise NotFoundError(f"no example {example_id!r} in {ns!r}", code="example_not_found")
    return Response(status_code=204)


@router.post("/namespaces/{ns}/query", response_model=list[HitOut])
async def query_examples(ns: str, body: QueryIn, s: Deps) -> Any:
    """The k examples nearest to the text, best first."""
    hits = await s.examples.query(ns, body.text, body.k, body.filter, body.min_score)
    return [_hit(h) for h in hits]
