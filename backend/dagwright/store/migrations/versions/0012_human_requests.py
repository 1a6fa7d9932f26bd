"""human requests: runs paused at a human_input node, and their answers.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision: str | None = "0011"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "human_requests",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=True),
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("form", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("answer", sa.JSON(), nullable=True),
        sa.Column("choice", sa.String(200), nullable=True),
        sa.Column("link_token", sa.String(64), nullable=False),
        sa.Column("resumed_run_id", sa.String(32), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("link_token"),
    )
    op.create_index("ix_human_requests_run_id", "human_requests", ["run_id"])
    op.create_index("ix_human_requests_app_id", "human_requests", ["app_id"])
    op.create_index("ix_human_requests_status", "human_requests", ["status"])


def downgrade() -> None:
    op.drop_index("ix_human_requests_status", "human_requests")
    op.drop_index("ix_human_requests_app_id", "human_requests")
    op.drop_index("ix_human_requests_run_id", "human_requests")
    op.drop_table("human_requests")
