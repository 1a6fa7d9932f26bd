"""evaluations.replica, .resumable and .attempts: the replica lease of the process running an
evaluation in-process, so that a second process refuses to run it while that lease is live
and the next server takes it over when it is not (resumed, or marked interrupted when the
command line ran it), and how many processes took it up, so that one whose processes keep
dying ends failed.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision: str | None = "0022"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable: an evaluation queue workers run, or one that ran before this, names none;
    # the sweep never touches it.
    op.add_column("evaluations", sa.Column("replica", sa.String(32), nullable=True))
    op.add_column(
        "evaluations",
        sa.Column("resumable", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "evaluations",
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("evaluations") as batch:
        batch.drop_column("attempts")
        batch.drop_column("resumable")
        batch.drop_column("replica")
