"""The deployment's judge budget: concurrency slots (leases) and request/token buckets per profile endpoint."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "judge_slots",
        sa.Column("profile", sa.String(160), primary_key=True),
        sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("holder", sa.String(32), nullable=True),
        sa.Column("expires", sa.Float, nullable=True),
    )
    op.create_table(
        "judge_buckets",
        sa.Column("profile", sa.String(160), primary_key=True),
        sa.Column("kind", sa.String(16), primary_key=True),
        sa.Column("level", sa.Float, nullable=False),
        sa.Column("stamp", sa.Float, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("judge_buckets")
    op.drop_table("judge_slots")
