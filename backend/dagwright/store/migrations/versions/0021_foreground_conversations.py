"""tqa_conversations.foreground: a conversation whose caller waits for its answer (a sync or
streamed ask, the `autotqa_ask` block) in a server process, which names that process's lease
(`replica`) too. When the lease is missing or stale the sweep ends it failed (`server_lost`)
instead of resuming it: its caller's request died with the process.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    # False for those recorded before: a foreground one named no replica then, so the sweep
    # never finds it.
    op.add_column(
        "tqa_conversations",
        sa.Column("foreground", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    with op.batch_alter_table("tqa_conversations") as batch:
        batch.drop_column("foreground")
