"""The service's tables (SQLAlchemy Core), its engine, and the migrations run at start.

Jobs, their work items and their events live here: no broker. ``work_items`` carry the claim (who, since when, last
heartbeat) so that any number of processes sharing a PostgreSQL database take work with ``FOR UPDATE SKIP LOCKED``
and take over claims whose heartbeat went stale. An embedded SQLite file serves one server process, which holds an
exclusive lock on it for its lifetime.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from open_rag_eval.core.errors import StorageError

__all__ = ["api_keys", "events", "jobs", "job_usage", "judge_buckets", "judge_slots", "metadata", "migrate", "open_engine", "sweeps", "uploads", "work_items"]

log = logging.getLogger(__name__)

metadata = sa.MetaData()

api_keys = sa.Table(
    "api_keys", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("tenant", sa.String(128), nullable=False),
    sa.Column("scopes", sa.String(256), nullable=False),
    sa.Column("name", sa.String(256), nullable=False, server_default=""),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("revoked", sa.Float, nullable=True),
)

jobs = sa.Table(
    "jobs", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("tenant", sa.String(128), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),  # eval | sweep
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("request", sa.Text, nullable=False),  # the submitted body as JSON (inline inputs moved to files)
    sa.Column("request_hash", sa.String(64), nullable=False),
    sa.Column("idempotency_key", sa.String(256), nullable=True),
    sa.Column("judge_profile", sa.String(128), nullable=True),
    sa.Column("sweep_id", sa.String(32), nullable=True, index=True),
    sa.Column("n_outputs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("progress", sa.Text, nullable=False, server_default="{}"),
    sa.Column("usage", sa.Text, nullable=False, server_default="{}"),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("results_dir", sa.Text, nullable=True),  # where the run's result files are
    sa.Column("verdict", sa.String(16), nullable=True),  # sweep runs: stable | regression | inconclusive
    sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),  # how many times a runner started it
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("started", sa.Float, nullable=True),
    sa.Column("finished", sa.Float, nullable=True),
    sa.UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_idempotency"),
)

work_items = sa.Table(
    "work_items", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("status", sa.String(16), nullable=False),  # queued | claimed | done
    sa.Column("claimed_by", sa.String(128), nullable=True),
    sa.Column("heartbeat", sa.Float, nullable=True),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created", sa.Float, nullable=False),
)

events = sa.Table(
    "events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(32), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("type", sa.String(32), nullable=False),
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

uploads = sa.Table(
    "uploads", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("tenant", sa.String(128), nullable=False, index=True),
    sa.Column("filename", sa.String(256), nullable=False),
    sa.Column("format", sa.String(8), nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

sweeps = sa.Table(
    "sweeps", metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("tenant", sa.String(128), nullable=False, index=True),
    sa.Column("name", sa.String(256), nullable=False),
    sa.Column("definition", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

judge_slots = sa.Table(  # the deployment's judge budget: one row per concurrency slot of a profile endpoint
    "judge_slots", metadata,
    sa.Column("profile", sa.String(160), primary_key=True),
    sa.Column("slot", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("holder", sa.String(32), nullable=True),  # the lease token of the call holding it
    sa.Column("expires", sa.Float, nullable=True),  # renewed while the call runs
)

judge_buckets = sa.Table(  # requests and tokens per minute of a profile endpoint, drawn by compare-and-set
    "judge_buckets", metadata,
    sa.Column("profile", sa.String(160), primary_key=True),
    sa.Column("kind", sa.String(16), primary_key=True),  # requests | tokens
    sa.Column("level", sa.Float, nullable=False),
    sa.Column("stamp", sa.Float, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
)

job_usage = sa.Table(  # what the judge was paid per attempt of a job; kept when the job is deleted (billing)
    "job_usage", metadata,
    sa.Column("job_id", sa.String(32), primary_key=True),
    sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("tenant", sa.String(128), nullable=False, index=True),
    sa.Column("judge_profile", sa.String(128), nullable=True),
    sa.Column("calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("prompt_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("completion_tokens", sa.Integer, nullable=False, server_default="0"),
    sa.Column("cost_usd", sa.Float, nullable=True),
    sa.Column("data", sa.Text, nullable=False),  # the attempt's whole usage (cache hits, retries, failures...)
    sa.Column("updated", sa.Float, nullable=False, index=True),
)


def open_engine(url: str) -> AsyncEngine:
    """The async engine for ``url`` (SQLite files wait on a busy database instead of failing at once)."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path and path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise StorageError(f"cannot create the service database's folder: {error.strerror}",
                                   path=Path(path).parent) from None
        engine = create_async_engine(url, connect_args={"timeout": 30})

        @sa.event.listens_for(engine.sync_engine, "connect")
        def _pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_async_engine(url, pool_pre_ping=True)


async def migrate(engine: AsyncEngine) -> None:
    """Bring the database to the newest schema (Alembic ``upgrade head``)."""
    logging.getLogger("alembic").setLevel(logging.WARNING)  # its plugins and steps are noise at every start
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))

    def upgrade(connection: sa.Connection) -> None:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")

    async with engine.begin() as connection:
        await connection.run_sync(upgrade)
