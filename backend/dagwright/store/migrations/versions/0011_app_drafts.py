"""app drafts: one work-in-progress flow per app, valid or not.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "app_drafts",
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("graph", sa.JSON(), nullable=False),
        sa.Column("base_version_id", sa.String(32), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("app_id"),
    )


def downgrade() -> None:
    op.drop_table("app_drafts")
