"""tqa: AutoTQA conversations and their turns, per-dataset hints ("common knowledge") and
the tool registry (published apps the Executor may call).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "tqa_conversations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=True),
        sa.Column("sop", sa.Text(), nullable=False),
        sa.Column("scheduler", sa.String(16), nullable=False),
        sa.Column("max_rounds", sa.Integer(), nullable=False),
        sa.Column("answer_format", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_tqa_conversations_created", "tqa_conversations", ["created_at"])
    op.create_table(
        "tqa_turns",
        sa.Column("conversation_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("agent", sa.String(16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("content", sa.JSON(), nullable=True),
        sa.Column("scheduler", sa.JSON(), nullable=True),
        sa.Column("tool_call", sa.JSON(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("started", sa.Float(), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["conversation_id"], ["tqa_conversations.id"]),
        sa.PrimaryKeyConstraint("conversation_id", "seq"),
    )
    op.create_table(
        "tqa_hints",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_tqa_hints_dataset", "tqa_hints", ["dataset"])
    op.create_table(
        "tqa_tools",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("app", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("tqa_tools")
    op.drop_index("ix_tqa_hints_dataset", table_name="tqa_hints")
    op.drop_table("tqa_hints")
    op.drop_table("tqa_turns")
    op.drop_index("ix_tqa_conversations_created", table_name="tqa_conversations")
    op.drop_table("tqa_conversations")
