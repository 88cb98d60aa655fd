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
from pathlib import Path
from typing import Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse

from open_rag_eval.service import intake, jobs
from open_rag_eval.service.deps import engine_of, owned_row, reader, settings_of, writer
from open_rag_eval.service.db import jobs as jobs_table
from open_rag_eval.service.db import uploads
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import Problem
from open_rag_eval.service.settings import Settings

__all__ = ["router", "upload_view"]

router = APIRouter(tags=["uploads"])


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
    """Store a large input (the raw file as the body) for later jobs: ``upload_id`` in ``POST /v1/jobs``."""
    settings = settings_of(request)
    upload_id = jobs.new_id()
    folder = intake.tenant_dir(settings, who.tenant) / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    partial = folder / f".{upload_id}.part"
    size = 0
    try:
        with partial.open("wb") as handle:
            async for chunk in request.stream():
                size += len(chunk)
                handle.write(chunk)
        partial.rename(folder / f"{upload_id}.{format}")
    finally:
        partial.unlink(missing_ok=True)
    async with engine_of(request).begin() as connection:
        await connection.execute(uploads.insert().values(id=upload_id, tenant=who.tenant, filename=filename,
                                                         format=format, size=size, created=time.time()))
    return JSONResponse({"id": upload_id, "format": format, "size": size, "filename": filename}, status_code=201,
                        headers={"Location": f"/v1/uploads/{upload_id}"})


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
