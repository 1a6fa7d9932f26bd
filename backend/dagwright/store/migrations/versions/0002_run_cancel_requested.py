"""runs.cancel_requested_at: a cancellation asked for through any replica, which the replica
running the run notices and acts on.

Revision ID: 0002
Revises: 0001
Create Date: 2025-01-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable, so existing rows need no value and no table rebuild (SQLite adds it in place).
    op.add_column("runs", sa.Column("cancel_requested_at", sa.DateTime(timezone=True)))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("cancel_requested_at")
