"""Data-Copilot's interface library (migration 0009): the interfaces designed for each data
source, one row per version (a change is a new version; the newest one not deleted is the
one in use), and the requests no interface covered, which feed the next design round.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from dagwright.store.models import new_id, utcnow


class DcInterface(SQLModel, table=True):
    __tablename__ = "dc_interfaces"
    __table_args__ = (UniqueConstraint("source", "name", "version"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    source: str = Field(index=True, max_length=64)  # the data source it was designed for
    name: str = Field(max_length=64)
    version: int
    # The interface itself (dagwright.methods.data_copilot.interface.Interface as JSON).
    definition: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    origin: str = Field(default="designed", max_length=16)  # designed | merged | edited
    deleted: bool = False
    created_at: datetime = Field(default_factory=utcnow)


class DcUncovered(SQLModel, table=True):
    __tablename__ = "dc_uncovered_requests"
    __table_args__ = (Index("ix_dc_uncovered_source_time", "source", "created_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    source: str = Field(max_length=64)
    request: str = Field(sa_column=Column(Text, nullable=False))
    reason: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    designed: bool = False  # taken into a design round
    created_at: datetime = Field(default_factory=utcnow)
