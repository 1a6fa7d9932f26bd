"""webhook_deliveries: the signatures of webhook calls that fired, each refused again (a
replay) until the end of its timestamp window.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "webhook_deliveries",
        sa.Column("trigger_id", sa.String(32), nullable=False),
        sa.Column("signature", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("trigger_id", "signature"),
    )
    op.create_index("ix_webhook_deliveries_expires_at", "webhook_deliveries", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_webhook_deliveries_expires_at", "webhook_deliveries")
    op.drop_table("webhook_deliveries")
