"""``/v1/uploads``: store a large input once, list a tenant's uploads, look one up, delete it.

An upload is the raw file under the tenant's folder and a row naming it. A job given its ``upload_id`` copies it into
the job's own folder at submit, so deleting an upload never touches a job's files; still, an upload that a queued or
running job names is refused deletion (409), so that what a client sees named in its jobs is there while they run.
Another tenant's upload is a 404, exactly like one that does not exist.
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.core.errors import InputError, OpenRagEvalError
from open_rag_eval.service import intake, jobs
from open_rag_eval.service.bounds import check_bounds
from open_rag_eval.service.deps import engine_of, owned_row, reader, settings_of, writer
from open_rag_eval.service.db import jobs as jobs_table
from open_rag_eval.service.db import uploads
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import Problem, from_error
from open_rag_eval.service.settings import Settings

__all__ = ["router", "upload_view"]

router = APIRouter(tags=["uploads"])
_ORDER: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()  # in a process


def upload_view(row: dict[str, Any]) -> dict[str, Any]:
    """An upload as clients see it (no server path)."""
    return {"id": row["id"], "filename": row["filename"], "format": row["format"], "size": row["size"],
            "created": row["created"], "links": {"self": f"/v1/uploads/{row['id']}"}}


def _file(settings: Settings, tenant: str, row: dict[str, Any]) -> Path:
    return intake.tenant_dir(settings, tenant) / "uploads" / f"{row['id']}.{row['format']}"


@router.post("/v1/uploads", status_code=201,
             openapi_extra={"requestBody": {"content": {"application/x-ndjson": {"schema": {"type": "string"}},
                                                        "text/csv": {"schema": {"type": "string"}}},
                                            "required": True}})
async def upload(request: Request, who: Principal = Depends(writer),
                 format: Literal["jsonl", "csv"] = "jsonl", filename: str = Query("upload", max_length=256)
                 ) -> JSONResponse:
    """Store a large input (the raw file as the body) for later jobs: ``upload_id`` in ``POST /v1/jobs``. It is
    checked as it arrives (bounds: 413/422) and read once like a job would (RAG outputs, or a connector's queries
    for CSV), off the event loop: a bad file is refused now, not at the job's submit. Per tenant at most
    ``limits.max_uploads`` files and ``limits.max_upload_mb_total`` MB are stored (429 ``quota_uploads``)."""
    settings = settings_of(request)
    engine = engine_of(request)
    await _quota(engine, settings, who.tenant, 0)  # at once, before the body is read
    upload_id = jobs.new_id()
    folder = intake.tenant_dir(settings, who.tenant) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    partial, final = folder / f".{upload_id}.part", folder / f"{upload_id}.{format}"
    size = 0
    try:
        with partial.open("wb") as handle:
            async for chunk in request.stream():
                size += len(chunk)
                handle.write(chunk)
        partial.rename(final)
        await asyncio.to_thread(_check, final, format, settings)
        async with _ORDER.setdefault(asyncio.get_running_loop(), asyncio.Lock()), engine.begin() as connection:
            await _locked(connection, who.tenant)
            await _quota(connection, settings, who.tenant, size)  # again with its size, among concurrent uploads
            await connection.execute(uploads.insert().values(id=upload_id, tenant=who.tenant, filename=filename,
                                                             format=format, size=size, created=time.time()))
    except OpenRagEvalError as error:
        final.unlink(missing_ok=True)
        raise from_error(error, hide=[folder, settings.data_path]) from None
    except BaseException:
        final.unlink(missing_ok=True)
        raise
    finally:
        partial.unlink(missing_ok=True)
    return JSONResponse({"id": upload_id, "format": format, "size": size, "filename": filename}, status_code=201,
                        headers={"Location": f"/v1/uploads/{upload_id}"})


def _check(path: Path, fmt: str, settings: Settings) -> None:
    """Bounds first (one linear pass), then the file read as a job reads it."""
    from open_rag_eval.inputs import read_outputs, read_queries

    check_bounds(path, fmt, settings.limits, "body")
    try:
        read_outputs(path)
    except InputError as error:
        if fmt != "csv":
            raise
        try:
            read_queries(path)
        except InputError:
            raise error from None


async def _locked(connection: Any, tenant: str) -> None:
    if connection.dialect.name == "postgresql":  # replicas take one tenant's uploads one at a time
        await connection.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                                 {"key": f"open-rag-eval uploads {tenant}"})


async def _quota(engine_or_connection: Any, settings: Settings, tenant: str, adding: int) -> None:
    query = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(uploads.c.size), 0)).where(
        uploads.c.tenant == tenant)
    if isinstance(engine_or_connection, AsyncEngine):
        async with engine_or_connection.connect() as connection:
            count, used = (await connection.execute(query)).one()
    else:
        count, used = (await engine_or_connection.execute(query)).one()
    limits = settings.limits
    if count + 1 > limits.max_uploads:
        raise Problem(429, "quota_uploads", f"this tenant already stores {count} uploads (limits.max_uploads): "
                      "delete some first")
    if used + adding > limits.max_upload_mb_total * 1_000_000:
        raise Problem(429, "quota_uploads", f"this tenant's uploads would hold {(used + adding) / 1e6:,.1f} MB, more "
                      f"than limits.max_upload_mb_total ({limits.max_upload_mb_total:,.0f} MB): delete some first")


@router.get("/v1/uploads")
async def list_(request: Request, who: Principal = Depends(reader), limit: int = Query(100, ge=1, le=1000),
                before: float | None = Query(None, description="only uploads created before this time (the "
                                             "`created` of the last upload of the previous page)")
                ) -> dict[str, Any]:
    """The tenant's uploads, newest first, ``limit`` at a time; ``next_before`` pages on (null: no more)."""
    query = sa.select(uploads).where(uploads.c.tenant == who.tenant)
    if before is not None:
        query = query.where(uploads.c.created < before)
    query = query.order_by(uploads.c.created.desc(), uploads.c.id).limit(limit)
    async with engine_of(request).connect() as connection:
        rows = [dict(row) for row in (await connection.execute(query)).mappings().all()]
    return {"uploads": [upload_view(row) for row in rows],
            "next_before": rows[-1]["created"] if len(rows) == limit else None}


async def _owned(request: Request, who: Principal, upload_id: str) -> dict[str, Any]:
    row = await owned_row(request, uploads, who.tenant, upload_id)
    if row is None:
        raise Problem(404, "not_found", f"no upload {upload_id!r}")
    return row


@router.get("/v1/uploads/{upload_id}")
async def get(request: Request, upload_id: str, who: Principal = Depends(reader)) -> dict[str, Any]:
    return upload_view(await _owned(request, who, upload_id))


@router.delete("/v1/uploads/{upload_id}", status_code=204)
async def delete(request: Request, upload_id: str, who: Principal = Depends(writer)) -> Response:
    """Delete an upload and its file (409 ``upload_in_use`` while a queued or running job names it)."""
    row = await _owned(request, who, upload_id)
    async with engine_of(request).begin() as connection:
        active = (await connection.execute(sa.select(jobs_table.c.id, jobs_table.c.request).where(
            jobs_table.c.tenant == who.tenant, jobs_table.c.status.in_(jobs.ACTIVE)))).all()
        using = sorted(job_id for job_id, stored in active if _names(stored, upload_id))
        if using:
            raise Problem(409, "upload_in_use", f"unfinished jobs name this upload ({', '.join(using)}): wait for "
                          "them to end or cancel them first")
        await connection.execute(uploads.delete().where(uploads.c.id == upload_id, uploads.c.tenant == who.tenant))
    await asyncio.to_thread(_file(settings_of(request), who.tenant, row).unlink, True)
    return Response(status_code=204)


def _names(stored: str, upload_id: str) -> bool:
    return bool(json.loads(stored).get("body", {}).get("upload_id") == upload_id)
