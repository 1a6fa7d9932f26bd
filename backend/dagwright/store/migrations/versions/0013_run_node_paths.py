"""run_nodes.node as TEXT: inner nodes of sub-flows, maps and repeats are recorded by their
path (`refine[2]/sql_check`, nested deeper), which outgrows VARCHAR(64); PostgreSQL refused
such a row, so the node's result was never recorded.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision: str | None = "0012"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Batch mode: SQLite rebuilds the table (it cannot alter a column's type in place);
    # PostgreSQL widens the column in place, keeping the primary key.
    with op.batch_alter_table("run_nodes") as batch:
        batch.alter_column(
            "node", existing_type=sa.String(64), type_=sa.Text(), existing_nullable=False
        )


def downgrade() -> None:
    # Paths longer than 64 characters do not fit back: PostgreSQL refuses the downgrade then.
    with op.batch_alter_table("run_nodes") as batch:
        batch.alter_column(
            "node", existing_type=sa.Text(), type_=sa.String(64), existing_nullable=False
        )
