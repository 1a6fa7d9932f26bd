"""Drafts (migration 0011): an app's work in progress, one per app, kept whether the flow is
valid or not, so that a half-built flow survives a closed tab or another browser. Only a
version has to be valid."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column
from sqlmodel import Field, SQLModel

from dagwright.store.models import utcnow


class AppDraft(SQLModel, table=True):
    __tablename__ = "app_drafts"

    # No foreign key, as for triggers: deleting an app must not be refused; its draft goes.
    app_id: str = Field(primary_key=True, max_length=32)
    graph: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    base_version_id: str | None = Field(default=None, max_length=32)  # the version it started from
    updated_at: datetime = Field(default_factory=utcnow)
