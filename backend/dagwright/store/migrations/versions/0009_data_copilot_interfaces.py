"""data-copilot interfaces: the interface library per data source (versioned), and the
requests no interface covered.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision: str | None = "0008"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "dc_interfaces",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("source", "name", "version"),
    )
    op.create_index("ix_dc_interfaces_source", "dc_interfaces", ["source"])
    op.create_table(
        "dc_uncovered_requests",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("source", sa.String(64), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("designed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_dc_uncovered_source_time", "dc_uncovered_requests", ["source", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_dc_uncovered_source_time", "dc_uncovered_requests")
    op.drop_table("dc_uncovered_requests")
    op.drop_index("ix_dc_interfaces_source", "dc_interfaces")
    op.drop_table("dc_interfaces")
