"""tqa_conversations (status, created_at) index: the conversation limit counts the running
ones at every new conversation (tqa/admission.py), and lists filter by status.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision: str | None = "0018"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_tqa_conversations_status", "tqa_conversations", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_tqa_conversations_status", table_name="tqa_conversations")
