"""Jobs, their work items and their events in the database: create, read, claim, heartbeat, finish.

A job has one work item (the evaluation run). A runner claims it; on PostgreSQL with ``FOR UPDATE SKIP LOCKED`` so
two processes never take the same item, and a claim whose heartbeat is older than ``stale_after_s`` is taken over
(its process died). Every state change appends an event; the events' ids are the SSE ids (``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
import weakref
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from open_rag_eval.service.db import events, job_usage, jobs, work_items

__all__ = ["ACTIVE", "TERMINAL", "WITH_RESULTS", "QuotaFull", "add_event", "claim", "create_job", "finish", "get_job", "heartbeat", "list_jobs",
           "new_id", "read_events", "release_claims"]

TERMINAL = ("completed", "incomplete", "failed", "cancelled")
WITH_RESULTS = ("completed", "incomplete")  # finished with results written (incomplete: see its error, run.status)
ACTIVE = ("queued", "running", "cancelling")


def new_id() -> str:
    return secrets.token_hex(8)


async def add_event(connection: AsyncConnection, job_id: str, kind: str, data: dict[str, Any]) -> None:
    await connection.execute(events.insert().values(job_id=job_id, type=kind, data=json.dumps(data, sort_keys=True),
                                                    created=time.time()))


class QuotaFull(Exception):
    """The tenant already has ``max_active`` queued or running jobs."""


_CREATING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


async def create_job(engine: AsyncEngine, *, job_id: str, tenant: str, kind: str, request: dict[str, Any],
                     request_hash: str, idempotency_key: str | None, judge_profile: str | None, n_outputs: int,
                     sweep_id: str | None = None, max_active: int | None = None) -> None:
    """Queue a job; with ``max_active``, only while the tenant has fewer active jobs (else ``QuotaFull``).

    The count and the insert are one step: in this process a lock orders them (SQLite: one server per file), and on
    PostgreSQL a transaction-scoped advisory lock per tenant orders them across every replica."""
    now = time.time()
    loop = asyncio.get_running_loop()
    async with _CREATING.setdefault(loop, asyncio.Lock()), engine.begin() as connection:
        if max_active is not None:
            if connection.dialect.name == "postgresql":
                await connection.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                                         {"key": f"open-rag-eval quota {tenant}"})
            active = (await connection.execute(sa.select(sa.func.count()).select_from(jobs).where(
                jobs.c.tenant == tenant, jobs.c.status.in_(ACTIVE)))).scalar_one()
            if active >= max_active:
                raise QuotaFull(tenant)
        await connection.execute(jobs.insert().values(
            id=job_id, tenant=tenant, kind=kind, status="queued", request=json.dumps(request, sort_keys=True),
            request_hash=request_hash, idempotency_key=idempotency_key, judge_profile=judge_profile,
            n_outputs=n_outputs, sweep_id=sweep_id, created=now))
        await connection.execute(work_items.insert().values(job_id=job_id, status="queued", created=now))
        await add_event(connection, job_id, "status", {"status": "queued"})


async def get_job(engine: AsyncEngine, tenant: str | None, job_id: str) -> dict[str, Any] | None:
    """The job's row, only when it belongs to ``tenant`` (None: any tenant, for the runner)."""
    query = sa.select(jobs).where(jobs.c.id == job_id)
    if tenant is not None:
        query = query.where(jobs.c.tenant == tenant)
    async with engine.connect() as connection:
        row = (await connection.execute(query)).mappings().first()
    return dict(row) if row is not None else None


async def by_idempotency_key(engine: AsyncEngine, tenant: str, key: str) -> dict[str, Any] | None:
    async with engine.connect() as connection:
        row = (await connection.execute(sa.select(jobs).where(
            jobs.c.tenant == tenant, jobs.c.idempotency_key == key))).mappings().first()
    return dict(row) if row is not None else None


async def list_jobs(engine: AsyncEngine, tenant: str, *, status: str | None = None, sweep_id: str | None = None,
                    limit: int = 100, before: float | None = None) -> list[dict[str, Any]]:
    query = sa.select(jobs).where(jobs.c.tenant == tenant)
    if status is not None:
        query = query.where(jobs.c.status == status)
    if sweep_id is not None:
        query = query.where(jobs.c.sweep_id == sweep_id)
    if before is not None:
        query = query.where(jobs.c.created < before)
    query = query.order_by(jobs.c.created.desc(), jobs.c.id).limit(limit)
    async with engine.connect() as connection:
        return [dict(row) for row in (await connection.execute(query)).mappings().all()]


async def count_active(engine: AsyncEngine, tenant: str) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(sa.select(sa.func.count()).select_from(jobs).where(
            jobs.c.tenant == tenant, jobs.c.status.in_(ACTIVE)))).scalar_one())


async def read_events(engine: AsyncEngine, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
    async with engine.connect() as connection:
        rows = (await connection.execute(sa.select(events).where(events.c.job_id == job_id, events.c.id > after)
                                         .order_by(events.c.id).limit(limit))).mappings().all()
    return [dict(row) for row in rows]


async def claim(engine: AsyncEngine, worker: str, stale_after_s: float) -> dict[str, Any] | None:
    """Take one queued work item (or one whose claim went stale); its job turns ``running``."""
    now = time.time()
    ready = sa.or_(work_items.c.status == "queued",  # or a claim of another process that stopped renewing it
                   sa.and_(work_items.c.status == "claimed", work_items.c.heartbeat < now - stale_after_s,
                           work_items.c.claimed_by != worker))
    query = sa.select(work_items.c.id, work_items.c.job_id, work_items.c.claimed_by, work_items.c.attempts).where(ready)
    query = query.order_by(work_items.c.id).limit(1)
    async with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        item = (await connection.execute(query)).mappings().first()
        if item is None:
            return None
        taken = await connection.execute(work_items.update().where(
            work_items.c.id == item["id"], sa.or_(work_items.c.status == "queued", ready)).values(
            status="claimed", claimed_by=worker, heartbeat=now, attempts=work_items.c.attempts + 1))
        if not taken.rowcount:
            return None
        job = (await connection.execute(sa.select(jobs).where(jobs.c.id == item["job_id"]))).mappings().first()
        if job is None:
            return None
        if job["status"] == "cancelling":
            await _finish(connection, item["job_id"], "cancelled", None)
            return None
        await connection.execute(jobs.update().where(jobs.c.id == item["job_id"]).values(
            status="running", started=sa.func.coalesce(jobs.c.started, _not_before(jobs.c.created, now)),
            runs=jobs.c.runs + 1))
        resumed = item["claimed_by"] is not None
        await add_event(connection, item["job_id"], "status", {"status": "running", "resumed": resumed})
    return {**dict(job), "status": "running", "resumed": resumed, "attempt": item["attempts"] + 1}


def _not_before(earlier: Any, now: float) -> Any:
    """``now``, or ``earlier`` when it is later: timestamps stay monotone (created <= started <= finished) even when
    the clocks of the processes sharing the database disagree, or this one's stepped back."""
    return sa.case((earlier > now, earlier), else_=sa.literal(now, sa.Float))


USAGE_SUMMED = ("calls", "cache_hits", "deduplicated", "retries", "failures", "prompt_tokens", "completion_tokens",
                "cost_usd")


async def record_usage(connection: AsyncConnection, job_id: str, attempt: int, usage: dict[str, Any]) -> str:
    """Store this attempt's judge usage; returns the job's usage, every attempt summed (as JSON)."""
    row = (await connection.execute(sa.select(jobs.c.tenant, jobs.c.judge_profile).where(jobs.c.id == job_id))).first()
    if row is None or not usage:  # no judge opened (yet): nothing paid
        attempts = (await connection.execute(sa.select(job_usage.c.data).where(job_usage.c.job_id == job_id)))
        return json.dumps(sum_usage([json.loads(data) for data in attempts.scalars()]), sort_keys=True)
    values = {"calls": int(usage.get("calls") or 0), "prompt_tokens": int(usage.get("prompt_tokens") or 0),
              "completion_tokens": int(usage.get("completion_tokens") or 0), "cost_usd": usage.get("cost_usd"),
              "data": json.dumps(usage, sort_keys=True), "updated": time.time()}
    changed = await connection.execute(job_usage.update().where(
        job_usage.c.job_id == job_id, job_usage.c.attempt == attempt).values(**values))
    if not changed.rowcount:
        await connection.execute(job_usage.insert().values(job_id=job_id, attempt=attempt, tenant=row.tenant,
                                                           judge_profile=row.judge_profile, **values))
    recorded = (await connection.execute(sa.select(job_usage.c.data).where(job_usage.c.job_id == job_id))).scalars()
    return json.dumps(sum_usage([json.loads(data) for data in recorded]), sort_keys=True)


def sum_usage(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """Attempts' usage added up (a cost stays null only when no attempt knew its cost)."""
    if not attempts:
        return {}
    total: dict[str, Any] = {}
    for name in USAGE_SUMMED:
        known = [a[name] for a in attempts if a.get(name) is not None]
        total[name] = (round(sum(known), 10) if name == "cost_usd" else sum(known)) if known else None
    total["attempts"] = len(attempts)
    return total


async def heartbeat(engine: AsyncEngine, job_id: str, worker: str, progress: dict[str, Any],
                    usage: dict[str, Any], event: dict[str, Any] | None, attempt: int = 1) -> bool:
    """Renew the claim and store the progress and this attempt's usage; False when the claim was lost or a
    cancel was requested."""
    async with engine.begin() as connection:
        renewed = await connection.execute(work_items.update().where(
            work_items.c.job_id == job_id, work_items.c.claimed_by == worker, work_items.c.status == "claimed")
            .values(heartbeat=time.time()))
        summed = await record_usage(connection, job_id, attempt, usage) if renewed.rowcount else None
        await connection.execute(jobs.update().where(jobs.c.id == job_id).values(
            progress=json.dumps(progress, sort_keys=True), **({"usage": summed} if summed else {})))
        if event is not None:
            await add_event(connection, job_id, "progress", event)
        status = (await connection.execute(sa.select(jobs.c.status).where(jobs.c.id == job_id))).scalar()
    return bool(renewed.rowcount) and status == "running"


async def _finish(connection: AsyncConnection, job_id: str, status: str, error: dict[str, Any] | None,
                  **values: Any) -> None:
    await connection.execute(jobs.update().where(jobs.c.id == job_id).values(
        status=status, finished=_not_before(sa.func.coalesce(jobs.c.started, jobs.c.created), time.time()),
        error=json.dumps(error) if error else None, **values))
    if "progress" in values:
        await add_event(connection, job_id, "progress", json.loads(values["progress"]))
    await connection.execute(work_items.update().where(work_items.c.job_id == job_id).values(status="done"))
    await add_event(connection, job_id, "status", {"status": status, **({"error": error} if error else {})})


async def finish(engine: AsyncEngine, job_id: str, worker: str, status: str, error: dict[str, Any] | None = None,
                 *, usage: dict[str, Any] | None = None, attempt: int = 1, **values: Any) -> bool:
    """Record the end of a run this worker still holds the claim of (False: another process took it over)."""
    async with engine.begin() as connection:
        held = (await connection.execute(sa.select(work_items.c.id).where(
            work_items.c.job_id == job_id, work_items.c.claimed_by == worker,
            work_items.c.status == "claimed"))).first()
        if held is None:
            return False
        if usage is not None:
            values["usage"] = await record_usage(connection, job_id, attempt, usage)
        await _finish(connection, job_id, status, error, **values)
    return True


async def request_cancel(engine: AsyncEngine, tenant: str, job_id: str) -> str | None:
    """Ask a job to stop: a queued job is cancelled at once (no runner ever starts it), a running one turns
    ``cancelling`` until its runner stops it. Returns the new status (None: no such job).

    A runner may claim the job at the same moment: the queued work item is taken from the queue by a compare-and-set
    (and on PostgreSQL locked first, in the claim's own lock order: the work item, then the job), so either the
    cancel takes it and no runner can, or the claim did and the cancel stops a running job."""
    async with engine.begin() as connection:
        if connection.dialect.name == "postgresql":
            await connection.execute(sa.select(work_items.c.id).where(work_items.c.job_id == job_id)
                                     .with_for_update())
        row = (await connection.execute(sa.select(jobs.c.status).where(
            jobs.c.id == job_id, jobs.c.tenant == tenant))).first()
        if row is None:
            return None
        status = str(row.status)
        if status == "queued":
            dequeued = await connection.execute(work_items.update().where(
                work_items.c.job_id == job_id, work_items.c.status == "queued").values(status="done"))
            if dequeued.rowcount:
                await _finish(connection, job_id, "cancelled", None)
                return "cancelled"
            status = str((await connection.execute(sa.select(jobs.c.status).where(jobs.c.id == job_id))).scalar())
        if status == "running":
            asked = await connection.execute(jobs.update().where(jobs.c.id == job_id, jobs.c.status == "running")
                                             .values(status="cancelling", cancel_requested=True))
            if asked.rowcount:
                await add_event(connection, job_id, "status", {"status": "cancelling"})
                return "cancelling"
            status = str((await connection.execute(sa.select(jobs.c.status).where(jobs.c.id == job_id))).scalar())
        return status


async def delete_job(engine: AsyncEngine, tenant: str, job_id: str) -> bool:
    async with engine.begin() as connection:
        await connection.execute(events.delete().where(events.c.job_id == job_id, sa.exists().where(
            jobs.c.id == job_id, jobs.c.tenant == tenant)))
        await connection.execute(work_items.delete().where(work_items.c.job_id == job_id, sa.exists().where(
            jobs.c.id == job_id, jobs.c.tenant == tenant)))
        deleted = await connection.execute(jobs.delete().where(jobs.c.id == job_id, jobs.c.tenant == tenant))
    return bool(deleted.rowcount)


async def release_claims(engine: AsyncEngine, worker: str | None = None, job_ids: list[str] | None = None) -> int:
    """Make claims stale at once, so that their jobs resume without waiting ``stale_after_s``. Without ``worker``
    (SQLite mode, at start: this server holds the database alone) every claim left, from a killed run; with it,
    the claims of ``job_ids`` this worker holds (it stops, and interrupted them)."""
    where = [work_items.c.status == "claimed"]
    if worker is not None:
        where += [work_items.c.claimed_by == worker, work_items.c.job_id.in_(job_ids or [])]
    async with engine.begin() as connection:
        result = await connection.execute(work_items.update().where(*where).values(heartbeat=0.0))
    return int(result.rowcount)
