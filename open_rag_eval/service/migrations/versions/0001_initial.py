"""The first schema: api_keys, jobs, work_items, events, uploads, sweeps (written out, so that later changes to
``db.py`` come with migrations of their own)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("scopes", sa.String(256), nullable=False),
        sa.Column("name", sa.String(256), nullable=False, server_default=""),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("revoked", sa.Float, nullable=True),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("request", sa.Text, nullable=False),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("judge_profile", sa.String(128), nullable=True),
        sa.Column("sweep_id", sa.String(32), nullable=True),
        sa.Column("n_outputs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("progress", sa.Text, nullable=False, server_default="{}"),
        sa.Column("usage", sa.Text, nullable=False, server_default="{}"),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("results_dir", sa.Text, nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("started", sa.Float, nullable=True),
        sa.Column("finished", sa.Float, nullable=True),
        sa.UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_idempotency"),
    )
    op.create_index("ix_jobs_tenant", "jobs", ["tenant"])
    op.create_index("ix_jobs_sweep_id", "jobs", ["sweep_id"])
    op.create_table(
        "work_items",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("heartbeat", sa.Float, nullable=True),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_index("ix_work_items_job_id", "work_items", ["job_id"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_index("ix_events_job_id", "events", ["job_id"])
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("filename", sa.String(256), nullable=False),
        sa.Column("format", sa.String(8), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_index("ix_uploads_tenant", "uploads", ["tenant"])
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("definition", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_index("ix_sweeps_tenant", "sweeps", ["tenant"])


def downgrade() -> None:
    for table in ("sweeps", "uploads", "events", "work_items", "jobs", "api_keys"):
        op.drop_table(table)
