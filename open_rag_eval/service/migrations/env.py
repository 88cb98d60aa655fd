"""Alembic environment: migrations run on the connection the service hands over (``db.migrate``)."""

from __future__ import annotations

from alembic import context

from open_rag_eval.service.db import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
