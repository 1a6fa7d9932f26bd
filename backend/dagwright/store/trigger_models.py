"""Triggers (migration 0010): what starts runs of an app besides calls, and each firing.

`trigger_firings` has one row per (trigger, tick): a replica fires a tick only if it is the
one that inserts that row, so with several replicas on one database each cron tick starts
exactly one run. A webhook firing's tick is the moment it was received.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from dagwright.store.models import new_id, utcnow


class Trigger(SQLModel, table=True):
    __tablename__ = "triggers"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    # No foreign key: deleting an app must not be refused; its triggers stop with it.
    app_id: str = Field(index=True, max_length=32)
    kind: str = Field(max_length=16)  # cron | webhook
    name: str = Field(max_length=200)
    enabled: bool = True
    cron: str | None = Field(default=None, max_length=200)  # cron: five fields
    timezone: str = Field(default="UTC", max_length=64)
    catch_up: str = Field(default="latest", max_length=16)  # missed ticks: latest | skip | all
    # cron: the run's inputs; webhook: inputs given whatever the body says.
    inputs: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # webhook: input name -> dotted path into the JSON body (empty: the body's keys as inputs).
    input_map: dict[str, str] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    secret_name: str | None = Field(default=None, max_length=64)  # webhook HMAC key, by name
    last_tick: datetime | None = None  # cron: the latest tick claimed (by any replica)
    created_at: datetime = Field(default_factory=utcnow)


class TriggerFiring(SQLModel, table=True):
    __tablename__ = "trigger_firings"
    __table_args__ = (UniqueConstraint("trigger_id", "tick"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    trigger_id: str = Field(index=True, max_length=32)
    tick: datetime
    run_id: str | None = Field(default=None, max_length=32)
    status: str = Field(max_length=16)  # started | failed | skipped
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    replica: str = Field(default="", max_length=64)
    created_at: datetime = Field(default_factory=utcnow)


class WebhookDelivery(SQLModel, table=True):
    """A signed webhook call that fired (migration 0022): its signature is refused again
    until `expires_at` (the end of the timestamp window it was valid in), on every replica
    and after restarts. Rows past it are deleted as the trigger fires again."""

    __tablename__ = "webhook_deliveries"

    trigger_id: str = Field(primary_key=True, max_length=32)
    signature: str = Field(primary_key=True, max_length=64)  # the HMAC's hex digest
    expires_at: datetime = Field(index=True)
