"""The first schema: api_keys, jobs, work_items, events, uploads, sweeps."""

from __future__ import annotations

from alembic import op

from open_rag_eval.service import db

revision = "0001"
down_revision = None


def upgrade() -> None:
    bind = op.get_bind()
    for table in (db.api_keys, db.jobs, db.work_items, db.events, db.uploads, db.sweeps):
        table.create(bind, checkfirst=True)


def downgrade() -> None:
    bind = op.get_bind()
    for table in (db.sweeps, db.uploads, db.events, db.work_items, db.jobs, db.api_keys):
        table.drop(bind, checkfirst=True)
