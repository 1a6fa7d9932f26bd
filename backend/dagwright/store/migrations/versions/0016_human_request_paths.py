"""human_requests: the node as TEXT, one request per (run, node), and when a run's resume was
claimed.

- `node` is the node's path in the run; nested ones (`a[12]/b[3]/approve`, up to 16 levels)
  outgrow VARCHAR(200), as run_nodes.node outgrew VARCHAR(64) (0013).
- A durable run resumed after its worker died runs a `human_input` node again: the unique
  index makes that second ask find the request the first one wrote (HumanInbox.ask) rather
  than write another. Duplicates written before this index are folded into one (an answered
  one wins over a waiting one; else the oldest id).
- `resume_claimed_at`: when a replica claimed the paused run to start its continuation; the
  sweep takes over a claim that started nothing for a while (the replica stopped).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision: str | None = "0015"
branch_labels: str | None = None
depends_on: str | None = None

# Keeps one row per (run, node): a settled one before a waiting one, then the smaller id.
_DUPLICATES = """
DELETE FROM human_requests WHERE EXISTS (
    SELECT 1 FROM human_requests AS other
    WHERE other.run_id = human_requests.run_id AND other.node = human_requests.node
      AND ((other.status <> 'waiting' AND human_requests.status = 'waiting')
           OR ((other.status = 'waiting') = (human_requests.status = 'waiting')
               AND other.id < human_requests.id)))
"""


def upgrade() -> None:
    op.execute(_DUPLICATES)
    with op.batch_alter_table("human_requests") as batch:
        batch.alter_column(
            "node", existing_type=sa.String(200), type_=sa.Text(), existing_nullable=False
        )
        batch.add_column(sa.Column("resume_claimed_at", sa.DateTime(timezone=True)))
        batch.create_unique_constraint("uq_human_requests_run_node", ["run_id", "node"])


def downgrade() -> None:
    # Paths longer than 200 characters do not fit back: PostgreSQL refuses the downgrade then.
    with op.batch_alter_table("human_requests") as batch:
        batch.drop_constraint("uq_human_requests_run_node", type_="unique")
        batch.drop_column("resume_claimed_at")
        batch.alter_column(
            "node", existing_type=sa.Text(), type_=sa.String(200), existing_nullable=False
        )
