"""evaluations: datasets and examples, evaluations and their per-example results, publish
gates and their waivers, feedback on runs.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "eval_datasets",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("mapping", sa.JSON(), nullable=False),
        sa.Column("source", sa.String(64), nullable=True),
        sa.Column("folder", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_datasets_name", "eval_datasets", ["name"], unique=True)
    op.create_table(
        "eval_examples",
        sa.Column("dataset_id", sa.String(32), nullable=False),
        sa.Column("split", sa.String(32), nullable=False),
        sa.Column("example_id", sa.String(128), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("gold", sa.JSON(), nullable=False),
        sa.Column("tables", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(["dataset_id"], ["eval_datasets.id"]),
        sa.PrimaryKeyConstraint("dataset_id", "split", "example_id"),
    )
    op.create_index("ix_eval_examples_split", "eval_examples", ["dataset_id", "split", "seq"])
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=True),
        sa.Column("version_id", sa.String(32), nullable=True),
        sa.Column("label", sa.String(200), nullable=False),
        sa.Column("dataset_id", sa.String(32), nullable=False),
        sa.Column("split", sa.String(32), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("aggregate", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["eval_datasets.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_evaluations_app", "evaluations", ["app_id", "created_at"])
    op.create_index("ix_evaluations_dataset_id", "evaluations", ["dataset_id"])
    op.create_table(
        "eval_results",
        sa.Column("evaluation_id", sa.String(32), nullable=False),
        sa.Column("example_id", sa.String(128), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=True),
        sa.Column("prediction", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("latency", sa.Float(), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("correct", sa.Boolean(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["evaluation_id"], ["evaluations.id"]),
        sa.PrimaryKeyConstraint("evaluation_id", "example_id"),
    )
    op.create_table(
        "eval_gates",
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("dataset_id", sa.String(32), nullable=False),
        sa.Column("split", sa.String(32), nullable=False),
        sa.Column("metric", sa.String(16), nullable=False),
        sa.Column("tolerance", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.ForeignKeyConstraint(["dataset_id"], ["eval_datasets.id"]),
        sa.PrimaryKeyConstraint("app_id"),
    )
    op.create_table(
        "eval_waivers",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=False),
        sa.Column("version_id", sa.String(32), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.ForeignKeyConstraint(["version_id"], ["versions.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_waivers_app_id", "eval_waivers", ["app_id"])
    op.create_table(
        "eval_feedback",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("run_id", sa.String(32), nullable=False),
        sa.Column("app_id", sa.String(32), nullable=True),
        sa.Column("score", sa.Float(), nullable=False),
        sa.Column("correction", sa.JSON(), nullable=True),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("given_by", sa.String(16), nullable=False),
        sa.Column("example_namespace", sa.String(64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_eval_feedback_run_id", "eval_feedback", ["run_id"])


def downgrade() -> None:
    op.drop_index("ix_eval_feedback_run_id", table_name="eval_feedback")
    op.drop_table("eval_feedback")
    op.drop_index("ix_eval_waivers_app_id", table_name="eval_waivers")
    op.drop_table("eval_waivers")
    op.drop_table("eval_gates")
    op.drop_table("eval_results")
    op.drop_index("ix_evaluations_dataset_id", table_name="evaluations")
    op.drop_index("ix_evaluations_app", table_name="evaluations")
    op.drop_table("evaluations")
    op.drop_index("ix_eval_examples_split", table_name="eval_examples")
    op.drop_table("eval_examples")
    op.drop_index("ix_eval_datasets_name", table_name="eval_datasets")
    op.drop_table("eval_datasets")
