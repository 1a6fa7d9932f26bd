"""triggers: cron schedules and webhooks per app, and their firings (one row per tick).

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("cron", sa.String(200), nullable=True),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("catch_up", sa.String(16), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("input_map", sa.JSON(), nullable=False),
        sa.Column("secret_name", sa.String(64), nullable=True),
        sa.Column("last_tick", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_triggers_app_id", "triggers", ["app_id"])
    op.create_table(
        "trigger_firings",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("trigger_id", sa.String(32), nullable=False),
        sa.Column("tick", sa.DateTime(timezone=True), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("replica", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("trigger_id", "tick"),
    )
    op.create_index("ix_trigger_firings_trigger_id", "trigger_firings", ["trigger_id"])


def downgrade() -> None:
    op.drop_index("ix_trigger_firings_trigger_id", "trigger_firings")
    op.drop_table("trigger_firings")
    op.drop_index("ix_triggers_app_id", "triggers")
    op.drop_table("triggers")
