"""Human-in-the-loop requests (migrations 0012, 0016, 0017): a run paused at a `human_input`
node, or an AutoTQA conversation whose tool call needs approval, waits for one row here to be
answered (or to time out), from any replica, after any restart."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Column, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from dagwright.store.models import new_id, utcnow


class HumanRequest(SQLModel, table=True):
    __tablename__ = "human_requests"
    # One request per node of a run: a node run again (a durable run resumed after its worker
    # died) finds the request it wrote before (HumanInbox.ask).
    __table_args__ = (UniqueConstraint("run_id", "node", name="uq_human_requests_run_node"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    # The waiting run, or (run_id None) the conversation whose tool call awaits approval.
    run_id: str | None = Field(default=None, index=True, max_length=32)
    conversation_id: str | None = Field(default=None, index=True, max_length=32)
    app_id: str | None = Field(default=None, index=True, max_length=32)
    # The node's path in the run: nested ones (`a[12]/b[3]/approve`) are long.
    node: str = Field(sa_column=Column(Text, nullable=False))
    message: str = Field(sa_column=Column(Text, nullable=False))  # the rendered template
    # The form: {"fields": [{name, type, label, required, default}], "choices": [...]}.
    form: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    status: str = Field(
        default="waiting", index=True, max_length=16
    )  # waiting|answered|expired|cancelled
    answer: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    choice: str | None = Field(default=None, max_length=200)  # the branch taken
    # The signed link's token (`/api/v1/human/links/{token}`): whoever has it may answer.
    link_token: str = Field(unique=True, max_length=64)
    resumed_run_id: str | None = Field(default=None, max_length=32)  # the run that went on
    # When a replica claimed the run to start its continuation (every request of the run
    # carries it): a claim that started nothing for a while is the sweep's to take over.
    resume_claimed_at: datetime | None = None
    expires_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    answered_at: datetime | None = None
