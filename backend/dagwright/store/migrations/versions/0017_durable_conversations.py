"""Durable AutoTQA conversations: what a conversation was asked and knew (`request`,
`knowledge`), so any process can resume it from its recorded turns; a cancel request any
replica or worker sees (`cancel_requested_at`); the process running it (`runner`: a worker
taken for dead that still runs stops at its next turn); tools that need a person's approval
before they run (`tqa_tools.requires_approval`), whose requests are human requests of a
conversation (`human_requests.conversation_id`, `run_id` then empty).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision: str | None = "0016"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable: conversations recorded before this keep their columns and are not resumable.
    op.add_column("tqa_conversations", sa.Column("request", sa.JSON(), nullable=True))
    op.add_column("tqa_conversations", sa.Column("knowledge", sa.JSON(), nullable=True))
    op.add_column(
        "tqa_conversations",
        sa.Column("cancel_requested_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.add_column("tqa_conversations", sa.Column("runner", sa.String(32), nullable=True))
    op.add_column(
        "tqa_tools",
        sa.Column("requires_approval", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    with op.batch_alter_table("human_requests") as batch:
        batch.add_column(sa.Column("conversation_id", sa.String(32), nullable=True))
        batch.alter_column("run_id", existing_type=sa.String(32), nullable=True)
    op.create_index("ix_human_requests_conversation_id", "human_requests", ["conversation_id"])


def downgrade() -> None:
    op.drop_index("ix_human_requests_conversation_id", "human_requests")
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_column("conversation_id")
    with op.batch_alter_table("tqa_tools") as batch:
        batch.drop_column("requires_approval")
    with op.batch_alter_table("tqa_conversations") as batch:
        batch.drop_column("runner")
        batch.drop_column("cancel_requested_at")
        batch.drop_column("knowledge")
        batch.drop_column("request")
