"""data_sources.catalogue_ttl_s: a source's own catalogue TTL (its tables without a change
stamp are read again past it), NULL for the global DAGWRIGHT_CATALOGUE_TTL_S.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision: str | None = "0023"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.add_column("data_sources", sa.Column("catalogue_ttl_s", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("data_sources") as batch:
        batch.drop_column("catalogue_ttl_s")
