"""Request and response bodies of the HTTP API (they make its OpenAPI document)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Final

from fastapi import Depends, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

from dagwright.store.paging import DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, Window


# Every listing's paging, by the store's one policy (store/paging.py): a bad offset or limit
# is answered 422 naming the field, before a query is built.
def _pagination(
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Items to skip.")] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Items per page.")] = DEFAULT_LIMIT,
) -> Window:
    return Window(offset, limit)


Paging = Annotated[Window, Depends(_pagination)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid")


MAX_RUN_TIMEOUT_S: Final = 24 * 3600.0


class AppSettings(_In):
    """How the app's published endpoint runs. A field left out (or null) takes the server's
    default."""

    run_timeout_s: float | None = Field(
        None,
        gt=0,
        le=MAX_RUN_TIMEOUT_S,
        description="The deadline of a published run, in seconds: a run still going then "
        "fails with `run_timeout`. Null: the server's DAGWRIGHT_RUN_TIMEOUT (300 s).",
    )


class AppCreate(_In):
    slug: str = Field(description="URL name: lowercase letters, digits and '-'.")
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    settings: AppSettings | None = None


class AppUpdate(_In):
    name: str | None = Field(None, min_length=1, max_length=200)
    description: str | None = None
    settings: AppSettings | None = Field(
        None, description="Only the fields given change; a field set to null is reset."
    )


class AppOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    slug: str
    name: str
    description: str
    settings: AppSettings = Field(default_factory=AppSettings)
    published_version_id: str | None
    created_at: datetime
    updated_at: datetime

    @field_validator("settings", mode="before")
    @classmethod
    def _none_is_default(cls, value: Any) -> Any:
        return {} if value is None else value  # apps made before settings existed


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


class PublishIn(_In):
    version_id: str


class ValidateIn(_In):
    flow: dict[str, Any]


# A flow of more nodes than this is asked for in several calls.
MAX_PORTS_NODES: Final = 1000


class NodeConfigIn(_In):
    block: str = Field(description="The node's block.")
    config: dict[str, Any] = Field(default_factory=dict, description="The node's config.")


class NodesPortsIn(_In):
    nodes: dict[str, NodeConfigIn] = Field(
        max_length=MAX_PORTS_NODES, description="Node id -> its block and config."
    )


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
