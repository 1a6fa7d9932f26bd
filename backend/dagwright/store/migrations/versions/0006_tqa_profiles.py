"""tqa profiles: AutoTQA "datasets" (sources, versioned SOP, example namespaces per agent),
learned hints (status, source, the question and what happened), and the profile a
conversation used.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "tqa_datasets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("sources", sa.JSON(), nullable=True),
        sa.Column("namespaces", sa.JSON(), nullable=True),
        sa.Column("examples_k", sa.Integer(), nullable=False),
        sa.Column("hints_k", sa.Integer(), nullable=False),
        sa.Column("sop_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    op.create_table(
        "tqa_dataset_sops",
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("note", sa.String(500), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["dataset"], ["tqa_datasets.name"]),
        sa.PrimaryKeyConstraint("dataset", "version"),
    )
    with op.batch_alter_table("tqa_hints") as batch:
        batch.add_column(
            sa.Column("status", sa.String(16), nullable=False, server_default="confirmed")
        )
        batch.add_column(
            sa.Column("source", sa.String(16), nullable=False, server_default="manual")
        )
        batch.add_column(sa.Column("question", sa.Text(), nullable=True))
        batch.add_column(sa.Column("conversation_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("details", sa.JSON(), nullable=True))
    with op.batch_alter_table("tqa_conversations") as batch:
        batch.add_column(sa.Column("profile", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tqa_conversations") as batch:
        batch.drop_column("profile")
    with op.batch_alter_table("tqa_hints") as batch:
        for column in ("details", "conversation_id", "question", "source", "status"):
            batch.drop_column(column)
    op.drop_table("tqa_dataset_sops")
    op.drop_table("tqa_datasets")
