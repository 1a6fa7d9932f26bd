"""tqa_conversations.replica and .attempts: the replica lease of the server process running a
conversation in-process (embedded mode), so that when that process dies another resumes it,
and how many such processes took it up, so that one whose processes keep dying ends failed.
The sweep that looks for them reads the running ones by the (status, created_at) index of
0019.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # Nullable: a conversation a queue worker runs, a foreground one, or one recorded before
    # this, names no replica and is never taken over by a server.
    op.add_column("tqa_conversations", sa.Column("replica", sa.String(32), nullable=True))
    op.add_column(
        "tqa_conversations",
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("tqa_conversations") as batch:
        batch.drop_column("attempts")
        batch.drop_column("replica")
