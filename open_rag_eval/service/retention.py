"""Removing finished jobs: their row, events, folder and the cached judge replies only they used -- on ``DELETE`` and
by the retention sweeper (``retention_days`` per tenant), which every runner runs every ``retention.every_s``.

A job's usage rows stay (billing: ``GET /v1/usage``). Replies another of the tenant's jobs used stay in the cache.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.service import jobs
from open_rag_eval.service.db import jobs as jobs_table
from open_rag_eval.service.settings import Settings

__all__ = ["remove", "sweep"]

log = logging.getLogger(__name__)


async def remove(engine: AsyncEngine, settings: Settings, tenant: str, row: dict[str, Any]) -> int:
    """Delete a finished job (row, events, folder) and purge the replies only it used; returns the replies purged."""
    from open_rag_eval.service.intake import tenant_dir
    from open_rag_eval.service.replies import job_folders, purge

    if not await jobs.delete_job(engine, tenant, row["id"]):
        return 0
    async with engine.connect() as connection:
        others = (await connection.execute(sa.select(jobs_table.c.request).where(
            jobs_table.c.tenant == tenant))).scalars().all()
    folder = Path(json.loads(row["request"])["prepared"]["job_dir"])
    cache = tenant_dir(settings, tenant) / "judge-cache.sqlite"
    purged = await asyncio.to_thread(purge, cache, folder, job_folders(others))
    await asyncio.to_thread(shutil.rmtree, folder, True)
    return purged


async def sweep(engine: AsyncEngine, settings: Settings, now: float | None = None) -> int:
    """Remove every finished job older than its tenant's ``retention_days`` (by when it finished); returns how many."""
    now = time.time() if now is None else now
    removed = 0
    for tenant, days in settings.retention.tenants.items():
        removed += await _sweep_tenant(engine, settings, tenant, now - days * 86_400)
    if settings.retention.default_days is not None:
        async with engine.connect() as connection:
            tenants = set((await connection.execute(sa.select(jobs_table.c.tenant).distinct())).scalars())
        cutoff = now - settings.retention.default_days * 86_400
        for tenant in sorted(tenants - set(settings.retention.tenants)):
            removed += await _sweep_tenant(engine, settings, tenant, cutoff)
    return removed


async def _sweep_tenant(engine: AsyncEngine, settings: Settings, tenant: str, cutoff: float) -> int:
    async with engine.connect() as connection:
        rows = (await connection.execute(sa.select(jobs_table).where(
            jobs_table.c.tenant == tenant, jobs_table.c.status.in_(jobs.TERMINAL),
            jobs_table.c.finished < cutoff))).mappings().all()
    for row in rows:
        purged = await remove(engine, settings, tenant, dict(row))
        log.info("retention: job %s of %s removed (%d cached replies purged)", row["id"], tenant, purged)
    return len(rows)
