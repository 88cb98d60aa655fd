"""``/v1/sweeps``: sweep definitions (connector + evaluators + thresholds), runs triggered by a schedule, and the
trend and regression verdicts from the same history and test as ``open-rag-eval sweep``."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import JSONResponse

# the config sections whose schemas their owners register (core.sections): a bad one fails at load
import open_rag_eval.ablation.options  # noqa: F401
import open_rag_eval.diagnosis.options  # noqa: F401
import open_rag_eval.tracking.options  # noqa: F401
from open_rag_eval.core.errors import ConfigError, OpenRagEvalError
from open_rag_eval.service import intake, jobs
from open_rag_eval.service.deps import engine_of, owned_row, reader, settings_of, writer
from open_rag_eval.service.db import sweeps
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import Problem, from_error
from open_rag_eval.service.routes_jobs import job_view, submit
from open_rag_eval.service.settings import Settings

__all__ = ["router", "sweep_trend"]

router = APIRouter(tags=["sweeps"])


def _define(settings: Settings, tenant: str, sweep_id: str, body: intake.SweepRequest) -> dict[str, Any]:
    """Write the sweep's folder (queries + ``sweep.yaml``, the file ``open-rag-eval sweep`` would run) and check it."""
    from open_rag_eval.config import load_config_text
    from open_rag_eval.sweeps.run import sweep_options

    raw = intake.check_client_config(body.config, settings)
    if raw.get("connector") is None:
        raise ConfigError("a sweep queries a live system: add a connector", path="config.connector")
    folder = intake.tenant_dir(settings, tenant) / "sweeps" / sweep_id
    folder.mkdir(parents=True, exist_ok=False)
    try:
        (folder / "queries.csv").write_text(body.queries, encoding="utf-8")
        raw["connector"]["queries"] = str(folder / "queries.csv")
        raw["output_dir"] = str(folder / "results")
        raw["sweep"] = {**(raw.get("sweep") or {}), "history": str(folder / "history.sqlite")}
        raw["judge"] = intake.judge_section(settings, settings.profile(body.judge_profile), tenant)
        text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
        (folder / "sweep.yaml").write_text(text, encoding="utf-8")
        loaded = load_config_text(text, base_dir=folder, file="sweep.yaml")
        sweep_options(loaded)
        from open_rag_eval.inputs import read_queries

        n = len(read_queries(folder / "queries.csv")) * loaded.config.connector.repeats  # type: ignore[union-attr]
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return {"name": body.name, "config_file": str(folder / "sweep.yaml"), "base_dir": str(folder),
            "judge_profile": settings.profile(body.judge_profile), "n_outputs": n,
            "history": str(folder / "history.sqlite"), "system": (raw.get("sweep") or {}).get("system", "default"),
            "thresholds": sorted({*(raw["sweep"].get("thresholds") or {}), *(raw["sweep"].get("fail_if_drop") or {})})}


def _view(row: dict[str, Any]) -> dict[str, Any]:
    definition = json.loads(row["definition"])
    return {"id": row["id"], "name": row["name"], "created": row["created"],
            "judge_profile": definition["judge_profile"], "thresholds": definition["thresholds"],
            "links": {"self": f"/v1/sweeps/{row['id']}", "runs": f"/v1/sweeps/{row['id']}/runs"}}


@router.post("/v1/sweeps", status_code=201)
async def create(request: Request, body: intake.SweepRequest, who: Principal = Depends(writer)) -> JSONResponse:
    settings = settings_of(request)
    sweep_id = jobs.new_id()
    try:
        definition = await asyncio.to_thread(_define, settings, who.tenant, sweep_id, body)
    except OpenRagEvalError as error:
        folder = intake.tenant_dir(settings, who.tenant) / "sweeps" / sweep_id
        raise from_error(error, hide=[folder, settings.data_path]) from None
    async with engine_of(request).begin() as connection:
        await connection.execute(sweeps.insert().values(id=sweep_id, tenant=who.tenant, name=body.name,
                                                        definition=json.dumps(definition), created=time.time()))
    row = await _owned(request, who, sweep_id)
    return JSONResponse(_view(row), status_code=201, headers={"Location": f"/v1/sweeps/{sweep_id}"})


@router.get("/v1/sweeps")
async def list_(request: Request, who: Principal = Depends(reader)) -> dict[str, Any]:
    async with engine_of(request).connect() as connection:
        rows = (await connection.execute(sa.select(sweeps).where(sweeps.c.tenant == who.tenant)
                                         .order_by(sweeps.c.created))).mappings().all()
    return {"sweeps": [_view(dict(row)) for row in rows]}


async def _owned(request: Request, who: Principal, sweep_id: str) -> dict[str, Any]:
    row = await owned_row(request, sweeps, who.tenant, sweep_id)
    if row is None:
        raise Problem(404, "not_found", f"no sweep {sweep_id!r}")
    return row


@router.get("/v1/sweeps/{sweep_id}")
async def get(request: Request, sweep_id: str, who: Principal = Depends(reader)) -> dict[str, Any]:
    return _view(await _owned(request, who, sweep_id))


@router.post("/v1/sweeps/{sweep_id}/runs", status_code=202)
async def trigger(request: Request, sweep_id: str, who: Principal = Depends(writer),
                  idempotency_key: str | None = Header(None)) -> JSONResponse:
    """Run the sweep once (what a cron job or a CI schedule calls): a job whose verdict compares it with the
    previous run of the same sweep."""
    settings = settings_of(request)
    definition = json.loads((await _owned(request, who, sweep_id))["definition"])
    body = intake.JobRequest(config_name=None, judge_profile=definition["judge_profile"])
    job_id = jobs.new_id()
    job_dir = settings.data_path / "jobs" / job_id  # stays empty: a sweep run writes into the sweep's folder
    prepared = intake.Prepared(job_dir=str(job_dir), config_file=definition["config_file"],
                               base_dir=definition["base_dir"], n_outputs=definition["n_outputs"])
    keyed = f"sweep:{sweep_id}:{idempotency_key}" if idempotency_key else None
    row, _ = await submit(request, who, body, keyed, kind="sweep", sweep_id=sweep_id, prepared=prepared)
    return JSONResponse(job_view(row), status_code=202, headers={"Location": f"/v1/jobs/{row['id']}"})


@router.get("/v1/sweeps/{sweep_id}/runs")
async def runs(request: Request, sweep_id: str, who: Principal = Depends(reader),
               limit: int = Query(50, ge=1, le=1000)) -> dict[str, Any]:
    """The sweep's runs (jobs) and its history: per recorded sweep, the verdict and the mean of each thresholded
    metric (the trend)."""
    definition = json.loads((await _owned(request, who, sweep_id))["definition"])
    rows = await jobs.list_jobs(engine_of(request), who.tenant, sweep_id=sweep_id, limit=limit)
    trend = await asyncio.to_thread(sweep_trend, definition, limit)
    return {"runs": [job_view(row) for row in rows], "history": trend, "metrics": definition["thresholds"]}


def sweep_trend(definition: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Recorded sweeps, oldest first: id, start, verdict and the thresholded metrics' means with their CIs."""
    from open_rag_eval.sweeps.history import History

    path = Path(definition["history"])
    if not path.exists():
        return []
    with History(path, create=False) as history:
        records = history.sweeps(None, limit)
        points = []
        for record in sorted(records, key=lambda r: r.started_at):
            aggregates = history.aggregates(record.id)
            means = {metric: _agg(aggregates.get(metric)) for metric in definition["thresholds"]}
            points.append({"sweep": record.id, "started_at": record.started_at, "verdict": record.verdict,
                           "simulated": record.simulated, "n_queries": record.n_queries, "metrics": means})
    return points


def _agg(aggregate: Any) -> dict[str, Any] | None:
    if aggregate is None:
        return None
    return {"mean": aggregate.mean, "ci95": [aggregate.ci95_low, aggregate.ci95_high], "n": aggregate.n,
            "n_failed": aggregate.n_failed}
