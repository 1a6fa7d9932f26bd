"""tqa_tools.role: what the Executor gives a tool from the conversation is declared with the
tool (its role), no longer inferred from the app it runs. Existing tools keep what their app
gave them.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

# The apps whose tools were given context before roles were declared, and the role that
# gives them the same.
_ROLE_OF_APP = {
    "autotqa-text-to-sql": "text_to_sql",
    "autotqa-python": "python",
    **{
        app: "question"
        for app in (
            "mac-sql-spider",
            "mac-sql-bird",
            "chain-of-table-wikitq",
            "chain-of-table-tabfact",
            "chain-of-table-fetaqa",
        )
    },
}


def upgrade() -> None:
    # Nullable, so SQLite adds it in place.
    op.add_column("tqa_tools", sa.Column("role", sa.String(32)))
    tools = sa.table("tqa_tools", sa.column("app", sa.String), sa.column("role", sa.String))
    for app, role in _ROLE_OF_APP.items():
        op.execute(tools.update().where(tools.c.app == app).values(role=role))


def downgrade() -> None:
    with op.batch_alter_table("tqa_tools") as batch:
        batch.drop_column("role")
