"""runs.job_id: the queue job that runs it, in queue mode (services/queue). Such a run is
resumed by another worker when its worker dies, so the recovery of dead processes' runs
leaves it to the queue instead of marking it interrupted.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable: runs outside the queue (every run of the embedded default) have no job.
    op.add_column("runs", sa.Column("job_id", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("job_id")
