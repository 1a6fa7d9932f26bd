"""replicas: one lease per server process, kept fresh by a heartbeat, so that the runs of a
process that died (its lease stale or gone) are marked interrupted by the survivors.

From here on runs.replica holds the lease id of the process that ran the run (before: the
replica name). Runs left queued or running under a name have no lease and are taken for
interrupted by the first process that recovers; do not keep servers of an older version
running against the database while upgrading.

Revision ID: 0003
Revises: 0002
Create Date: 2025-01-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid_namespace", sa.String(128), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_replicas_heartbeat_at", "replicas", ["heartbeat_at"])


def downgrade() -> None:
    op.drop_index("ix_replicas_heartbeat_at", table_name="replicas")
    op.drop_table("replicas")
