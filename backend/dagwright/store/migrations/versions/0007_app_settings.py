"""apps.settings: how an app's published endpoint runs (its run deadline, run_timeout_s).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable: existing apps take the server's defaults, and SQLite adds it in place.
    op.add_column("apps", sa.Column("settings", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("apps") as batch:
        batch.drop_column("settings")
