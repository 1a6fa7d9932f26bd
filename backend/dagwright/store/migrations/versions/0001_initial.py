"""The initial schema: apps, versions, runs, run nodes, API keys, secrets.

Written out rather than generated from the models, so that it stays what it was when later
migrations change the models. runs.cancel_requested_at arrives in 0002.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def _id(name: str = "id", nullable: bool = False) -> sa.Column[str]:
    return sa.Column(name, sa.String(32), nullable=nullable)


def _time(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "apps",
        _id(),
        sa.Column("slug", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        _id("published_version_id", nullable=True),  # its foreign key comes after versions
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_apps_slug", "apps", ["slug"], unique=True)

    op.create_table(
        "versions",
        _id(),
        _id("app_id"),
        sa.Column("number", sa.Integer(), nullable=False),
        _id("parent_id", nullable=True),
        sa.Column("graph", sa.JSON(), nullable=False),
        sa.Column("layout", sa.JSON(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("author", sa.String(200), nullable=False),
        _time("created_at"),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.ForeignKeyConstraint(["parent_id"], ["versions.id"]),
        sa.UniqueConstraint("app_id", "number", name="uq_versions_app_number"),
    )
    op.create_index("ix_versions_app_id", "versions", ["app_id"])

    # apps and versions point at each other. SQLite cannot add a constraint to a table in
    # place: batch mode rebuilds `apps` there (it is empty now); elsewhere it is an ALTER.
    with op.batch_alter_table("apps") as batch:
        batch.create_foreign_key(
            "fk_apps_published_version", "versions", ["published_version_id"], ["id"]
        )

    op.create_table(
        "runs",
        _id(),
        _id("app_id", nullable=True),
        _id("version_id", nullable=True),
        _id("parent_run_id", nullable=True),
        sa.Column("parent_node", sa.String(64), nullable=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=True),
        sa.Column("error", sa.JSON(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.Column("replica", sa.String(64), nullable=False),
        _time("created_at"),
        _time("started_at", nullable=True),
        _time("finished_at", nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
        sa.ForeignKeyConstraint(["version_id"], ["versions.id"]),
    )
    op.create_index("ix_runs_app_created", "runs", ["app_id", "created_at"])
    op.create_index("ix_runs_status", "runs", ["status"])
    op.create_index("ix_runs_parent_run_id", "runs", ["parent_run_id"])

    op.create_table(
        "run_nodes",
        _id("run_id"),
        sa.Column("node", sa.String(64), nullable=False),
        sa.Column("block", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=True),
        sa.Column("output", sa.JSON(), nullable=True),
        sa.Column("branch", sa.String(64), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("started", sa.Float(), nullable=True),
        sa.Column("duration", sa.Float(), nullable=True),
        sa.Column("usage", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "node"),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
    )

    op.create_table(
        "api_keys",
        _id(),
        _id("app_id"),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        _time("created_at"),
        _time("last_used_at", nullable=True),
        _time("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.ForeignKeyConstraint(["app_id"], ["apps.id"]),
    )
    op.create_index("ix_api_keys_app_id", "api_keys", ["app_id"])
    op.create_index("ix_api_keys_hash", "api_keys", ["hash"], unique=True)

    op.create_table(
        "secrets",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("ciphertext", sa.Text(), nullable=False),
        _time("created_at"),
        _time("updated_at"),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
    op.drop_index("ix_api_keys_hash", table_name="api_keys")
    op.drop_index("ix_api_keys_app_id", table_name="api_keys")
    op.drop_table("api_keys")
    op.drop_table("run_nodes")
    op.drop_index("ix_runs_parent_run_id", table_name="runs")
    op.drop_index("ix_runs_status", table_name="runs")
    op.drop_index("ix_runs_app_created", table_name="runs")
    op.drop_table("runs")
    with op.batch_alter_table("apps") as batch:
        batch.drop_constraint("fk_apps_published_version", type_="foreignkey")
    op.drop_index("ix_versions_app_id", table_name="versions")
    op.drop_table("versions")
    op.drop_index("ix_apps_slug", table_name="apps")
    op.drop_table("apps")
