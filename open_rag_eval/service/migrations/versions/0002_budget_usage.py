"""The deployment's judge budget (concurrency slots as leases, request/token buckets per profile endpoint) and the
judge usage of every attempt of every job."""

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
    op.create_table(
        "job_usage",
        sa.Column("job_id", sa.String(32), primary_key=True),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("judge_profile", sa.String(128), nullable=True),
        sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
        sa.Column("prompt_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("completion_tokens", sa.Integer, nullable=False, server_default="0"),
        sa.Column("cost_usd", sa.Float, nullable=True),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("updated", sa.Float, nullable=False),
    )
    op.create_index("ix_job_usage_tenant", "job_usage", ["tenant"])
    op.create_index("ix_job_usage_updated", "job_usage", ["updated"])


def downgrade() -> None:
    op.drop_table("job_usage")
    op.drop_table("judge_buckets")
    op.drop_table("judge_slots")
