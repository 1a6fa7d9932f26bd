"""Request and response bodies of the HTTP API (they make its OpenAPI document)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AppCreate(_In):
    slug: str = Field(description="URL name: lowercase letters, digits and '-'.")
    name: str = Field(min_length=1, max_length=200)
    description: str = ""


class AppUpdate(_In):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None


class AppOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    slug: str
    name: str
    description: str
    published_version_id: str | None
    created_at: datetime
    updated_at: datetime


class VersionCreate(_In):
    flow: dict[str, Any] = Field(description="The flow document (docs/flow-format.md).")
    note: str = ""
    author: str = ""
    parent_id: str | None = None


class VersionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    app_id: str
    number: int
    parent_id: str | None
    note: str
    author: str
    created_at: datetime


class VersionDetail(VersionOut):
    flow: dict[str, Any]


class Page(BaseModel, Generic[T]):
    items: list[T]
    total: int
    offset: int
    limit: int


class PublishIn(_In):
    version_id: str


class ValidateIn(_In):
    flow: dict[str, Any]


class RunIn(_In):
    """A call of a published app (or a debug run of a version)."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    version: str | None = Field(None, description="Pin a version (number or id).")
    stream: bool = Field(False, description="Answer with server-sent events as the run goes.")
    async_: bool = Field(
        False, alias="async", description="Answer at once with the run id to poll."
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ReuseIn(_In):
    run_id: str
    from_node: str


class DebugRunIn(_In):
    """Run a graph that need not be saved (the editor's current canvas)."""

    flow: dict[str, Any]
    inputs: dict[str, Any] = Field(default_factory=dict)
    app: str | None = Field(None, description="Record the run under this app.")
    stream: bool = True
    reuse: ReuseIn | None = Field(
        None,
        description="Re-run from a node: the nodes before it pass on their outputs of an "
        "earlier run (whose inputs are used unless `inputs` overrides them).",
    )


class KeyCreate(_In):
    name: str = Field(min_length=1, max_length=100)


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    app_id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again.")


class SecretIn(_In):
    value: str = Field(min_length=1, max_length=65536)
