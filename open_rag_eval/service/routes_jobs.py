"""``/v1/jobs`` and ``/v1/evaluate``: submit, watch, fetch, cancel, delete.

Another tenant's job is a 404, exactly like a job that does not exist.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import sqlalchemy.exc
from fastapi import APIRouter, Depends, Header, Query, Request, Response
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse, StreamingResponse

from open_rag_eval.core.errors import OpenRagEvalError
from open_rag_eval.service import intake, jobs
from open_rag_eval.service.deps import engine_of, reader, settings_of, writer
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import Problem, from_error
from open_rag_eval.service.settings import Settings

__all__ = ["job_view", "router", "submit"]

router = APIRouter(tags=["jobs"])

FILES = {"csv": ("results.csv", "text/csv"), "json": ("results.json", "application/json")}


def job_view(row: dict[str, Any]) -> dict[str, Any]:
    """A job as clients see it (no server paths)."""
    error = json.loads(row["error"]) if row.get("error") else None
    return {"id": row["id"], "kind": row["kind"], "status": row["status"], "created": row["created"],
            "started": row["started"], "finished": row["finished"], "judge_profile": row["judge_profile"],
            "n_outputs": row["n_outputs"], "progress": json.loads(row["progress"] or "{}"),
            "usage": json.loads(row["usage"] or "{}"), "error": error, "sweep_id": row["sweep_id"],
            "verdict": row["verdict"], "links": {"self": f"/v1/jobs/{row['id']}",
                                                 "events": f"/v1/jobs/{row['id']}/events",
                                                 "results": f"/v1/jobs/{row['id']}/results",
                                                 "report": f"/v1/jobs/{row['id']}/report"}}


async def submit(request: Request, who: Principal, body: intake.JobRequest, key: str | None, *,
                 kind: str = "eval", sweep_id: str | None = None, prepared: intake.Prepared | None = None,
                 ) -> tuple[dict[str, Any], bool]:
    """Queue a job (or find the one this Idempotency-Key made): (its row, created now)."""
    engine, settings = engine_of(request), settings_of(request)
    digest = intake.request_hash(body.model_dump(mode="json"))
    if key is not None:
        if len(key) > 256:
            raise Problem(422, "invalid_request", "Idempotency-Key is at most 256 characters")
        existing = await jobs.by_idempotency_key(engine, who.tenant, key)
        if existing is not None:
            return _same(existing, digest), False
    if await jobs.count_active(engine, who.tenant) >= settings.limits.max_active_jobs:  # before preparing inputs
        raise _quota_jobs(settings)
    job_id = jobs.new_id()
    if prepared is None:
        prepared = await _prepare(settings, who.tenant, job_id, body)
    if prepared.n_outputs > settings.limits.max_outputs_per_job:
        shutil.rmtree(prepared.job_dir, ignore_errors=True)
        raise Problem(429, "quota_outputs", f"{prepared.n_outputs} outputs is more than this server takes in one "
                      f"job ({settings.limits.max_outputs_per_job}, limits.max_outputs_per_job): split the input")
    stored = {"body": body.model_dump(mode="json", exclude={"inputs"}), "prepared": prepared.model_dump(),
              "limit": body.limit}
    try:
        await jobs.create_job(engine, job_id=job_id, tenant=who.tenant, kind=kind, request=stored,
                              request_hash=digest, idempotency_key=key, judge_profile=settings.profile(body.judge_profile),
                              n_outputs=prepared.n_outputs, sweep_id=sweep_id,
                              max_active=settings.limits.max_active_jobs)
    except jobs.QuotaFull:  # others were queued while this one was prepared
        shutil.rmtree(prepared.job_dir, ignore_errors=True)
        raise _quota_jobs(settings) from None
    except sqlalchemy.exc.IntegrityError:  # the same key raced us: that job is the one
        shutil.rmtree(prepared.job_dir, ignore_errors=True)
        existing = await jobs.by_idempotency_key(engine, who.tenant, key or "")
        if existing is None:
            raise
        return _same(existing, digest), False
    row = await jobs.get_job(engine, who.tenant, job_id)
    assert row is not None
    return row, True


def _quota_jobs(settings: Settings) -> Problem:
    limit = settings.limits.max_active_jobs
    return Problem(429, "quota_jobs", f"this tenant already has {limit} queued or running jobs (limits.max_active_jobs)",
                   headers={"Retry-After": str(settings.limits.retry_after_s)})


def _same(existing: dict[str, Any], digest: str) -> dict[str, Any]:
    if existing["request_hash"] != digest:
        raise Problem(422, "idempotency_key_reused", "this Idempotency-Key was used for another request body")
    return existing


async def _prepare(settings: Settings, tenant: str, job_id: str, body: intake.JobRequest) -> intake.Prepared:
    try:
        return await asyncio.to_thread(intake.prepare, settings, tenant, job_id, body)
    except OpenRagEvalError as error:
        raise from_error(error, hide=[settings.data_path / "jobs" / job_id, settings.data_path]) from None


def _accepted(row: dict[str, Any]) -> JSONResponse:
    return JSONResponse(job_view(row), status_code=202, headers={"Location": f"/v1/jobs/{row['id']}"})


@router.post("/v1/jobs", status_code=202, responses={202: {"description": "queued; Location names the job"}})
async def create(request: Request, body: intake.JobRequest, who: Principal = Depends(writer),
                 idempotency_key: str | None = Header(None)) -> JSONResponse:
    """Queue an evaluation: the same run as ``open-rag-eval eval`` on the config and inputs given."""
    row, _ = await submit(request, who, body, idempotency_key)
    return _accepted(row)


@router.get("/v1/jobs")
async def list_(request: Request, who: Principal = Depends(reader),
                status: Literal["queued", "running", "completed", "incomplete", "failed", "cancelling", "cancelled"] | None = None,
                limit: int = Query(100, ge=1, le=1000),
                before: float | None = Query(None, description="only jobs created before this time (the `created` "
                                             "of the last job of the previous page)")) -> dict[str, Any]:
    """The tenant's jobs, newest first, ``limit`` at a time; ``next_before`` pages on (null: no more)."""
    rows = await jobs.list_jobs(engine_of(request), who.tenant, status=status, limit=limit, before=before)
    return {"jobs": [job_view(row) for row in rows],
            "next_before": rows[-1]["created"] if len(rows) == limit else None}


async def owned(request: Request, who: Principal, job_id: str) -> dict[str, Any]:
    row = await jobs.get_job(engine_of(request), who.tenant, job_id)
    if row is None:
        raise Problem(404, "not_found", f"no job {job_id!r}")
    return row


@router.get("/v1/jobs/{job_id}")
async def get(request: Request, job_id: str, who: Principal = Depends(reader)) -> dict[str, Any]:
    return job_view(await owned(request, who, job_id))


@router.get("/v1/jobs/{job_id}/events", response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def events(request: Request, job_id: str, who: Principal = Depends(reader),
                 last_event_id: str | None = Header(None)) -> StreamingResponse:
    """Server-sent events (``status``, ``progress``) until the job ends; resume with ``Last-Event-ID``."""
    await owned(request, who, job_id)
    after = _event_id(last_event_id)
    return StreamingResponse(_stream(request, job_id, after), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _event_id(value: str | None) -> int:
    """``Last-Event-ID``: an event id (ASCII digits, at most 18) or nothing; anything else is a 422."""
    if not value:
        return 0
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise Problem(422, "invalid_request", "Last-Event-ID must be the id of an event (at most 18 digits)")
    return int(value)


async def _stream(request: Request, job_id: str, after: int) -> AsyncIterator[str]:
    engine = engine_of(request)
    quiet_since = time.monotonic()
    while True:
        batch = await jobs.read_events(engine, job_id, after)
        for event in batch:
            after = event["id"]
            yield f"id: {event['id']}\nevent: {event['type']}\ndata: {event['data']}\n\n"
        row = await jobs.get_job(engine, None, job_id)
        if row is None or (row["status"] in jobs.TERMINAL and not batch):
            return
        if batch:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 15:
            quiet_since = time.monotonic()
            yield ": keep-alive\n\n"
        if await request.is_disconnected():
            return
        await asyncio.sleep(0.25)


def _results_dir(row: dict[str, Any]) -> Path:
    if row["status"] not in jobs.WITH_RESULTS or not row["results_dir"]:
        raise Problem(409, "not_ready", f"the job is {row['status']}; results exist once it is completed "
                      "(or incomplete)")
    return Path(row["results_dir"])


def _file(row: dict[str, Any], name: str, media: str) -> FileResponse:
    path = _results_dir(row) / name
    try:
        found = path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, or with a NUL: no such file
        found = False
    if not found:
        raise Problem(404, "not_found", f"this job has no {name}")
    return FileResponse(path, media_type=media)


@router.get("/v1/jobs/{job_id}/results", responses={200: {"content": {"text/csv": {}, "application/x-ndjson": {}}}})
async def results(request: Request, job_id: str, who: Principal = Depends(reader),
                  format: Literal["csv", "jsonl", "json"] = "json") -> Response:
    """The run's results: ``csv`` (results.csv), ``json`` (results.json) or ``jsonl`` (one output per line)."""
    row = await owned(request, who, job_id)
    if format != "jsonl":
        return _file(row, *FILES[format])
    data = json.loads((_results_dir(row) / "results.json").read_text(encoding="utf-8"))
    lines = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in data.get("outputs", []))
    return PlainTextResponse(lines, media_type="application/x-ndjson")


@router.get("/v1/jobs/{job_id}/summary", responses={200: {"content": {"text/csv": {}}}})
async def summary(request: Request, job_id: str, who: Principal = Depends(reader)) -> FileResponse:
    return _file(await owned(request, who, job_id), "summary.csv", "text/csv")


@router.get("/v1/jobs/{job_id}/manifest")
async def manifest(request: Request, job_id: str, who: Principal = Depends(reader)) -> FileResponse:
    return _file(await owned(request, who, job_id), "manifest.json", "application/json")


@router.get("/v1/jobs/{job_id}/report", responses={200: {"content": {"text/html": {}}}})
@router.get("/v1/jobs/{job_id}/report.html", responses={200: {"content": {"text/html": {}}}},
            description="The report under its file name: its pages (``report-queries/``) link back to it.")
async def report(request: Request, job_id: str, who: Principal = Depends(reader)) -> FileResponse:
    return _file(await owned(request, who, job_id), "report.html", "text/html")


@router.get("/v1/jobs/{job_id}/report-queries/{name}", responses={200: {"content": {"text/html": {}}}})
async def report_page(request: Request, job_id: str, name: str, who: Principal = Depends(reader)) -> FileResponse:
    """A page of a large job's report (``page-NNNN.html``, every query on one): the report's relative links."""
    from open_rag_eval.report.paged import PAGE_NAME
    from open_rag_eval.run.generation import PAGES_DIR

    row = await owned(request, who, job_id)
    if len(name) > 64 or not PAGE_NAME.fullmatch(name):
        raise Problem(404, "not_found", "no such page of this job's report")
    return _file(row, f"{PAGES_DIR}/{name}", "text/html")


@router.post("/v1/jobs/{job_id}/cancel", status_code=202)
async def cancel(request: Request, job_id: str, who: Principal = Depends(writer)) -> JSONResponse:
    """Stop a job. Whatever it judged stays in the tenant's judge cache: submitting it again pays nothing twice."""
    if await jobs.request_cancel(engine_of(request), who.tenant, job_id) is None:
        raise Problem(404, "not_found", f"no job {job_id!r}")
    return _accepted(await owned(request, who, job_id))


@router.delete("/v1/jobs/{job_id}", status_code=204)
async def delete(request: Request, job_id: str, who: Principal = Depends(writer)) -> Response:
    """Delete a finished job, its files and the cached judge replies only it used (a queued or running job: cancel
    it first). Its usage stays counted in ``GET /v1/usage``."""
    row = await owned(request, who, job_id)
    if row["status"] not in jobs.TERMINAL:
        raise Problem(409, "job_active", f"the job is {row['status']}: cancel it first")
    from open_rag_eval.service.retention import remove

    await remove(engine_of(request), settings_of(request), who.tenant, row)
    return Response(status_code=204)


@router.post("/v1/evaluate", responses={200: {"description": "finished in time: the job with its summary"},
                                        202: {"description": "still running: poll Location"}})
async def evaluate(request: Request, body: intake.JobRequest, who: Principal = Depends(writer),
                   idempotency_key: str | None = Header(None),
                   wait_s: float = Query(30.0, ge=0, le=600)) -> JSONResponse:
    """A small evaluation answered in the same request when it finishes within ``wait_s`` (capped by the server),
    else 202 with the job's Location, like ``POST /v1/jobs``."""
    row, _ = await submit(request, who, body, idempotency_key)
    deadline = time.monotonic() + min(wait_s, settings_of(request).limits.evaluate_wait_s)
    while row["status"] not in jobs.TERMINAL and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        row = await owned(request, who, row["id"])
    if row["status"] not in jobs.TERMINAL:
        return _accepted(row)
    view = job_view(row)
    if row["status"] in jobs.WITH_RESULTS:
        view["results"] = json.loads((Path(row["results_dir"]) / "results.json").read_text(encoding="utf-8"))
    return JSONResponse(view, status_code=200)
