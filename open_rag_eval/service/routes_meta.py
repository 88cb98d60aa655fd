"""``/healthz`` (the process answers), ``/readyz`` (the database answers and jobs can run), ``/v1/info``,
``/v1/usage`` (what the tenant's jobs paid the judge, for billing)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from open_rag_eval._version import __version__
from open_rag_eval.service.deps import engine_of, metrics_reader, reader, settings_of
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import Problem, problem_response

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses={503: {"description": "not ready"}})
async def readyz(request: Request) -> Any:
    try:
        async with engine_of(request).connect() as connection:
            await connection.execute(sa.text("SELECT 1"))
    except Exception:
        return problem_response(503, "not_ready", "the database does not answer")
    runner = request.app.state.runner
    return JSONResponse({"status": "ready", "runner": runner is not None})


@router.get("/v1/info", tags=["meta"])
async def info(request: Request, who: Principal = Depends(reader)) -> dict[str, Any]:
    """What this server offers: judge profiles (name and model, never URLs or keys), server-side configs, limits."""
    settings = settings_of(request)
    profiles = [{"name": name, "model": section.get("model", "gpt-4o-mini"),
                 "simulated": section.get("simulated") is not None}
                for name, section in settings.judge_profiles.items()]
    return {
        "version": __version__,
        "tenant": who.tenant,
        "judge_profiles": profiles,
        "default_judge_profile": settings.profile(None),
        "configs": sorted(settings.configs),
        "inline_evaluators": settings.inline_evaluators,
        "limits": settings.limits.model_dump(),
        "database": "sqlite" if settings.sqlite else "postgresql",
        "auth": settings.auth,
    }


@router.get("/v1/usage", tags=["meta"])
async def usage(request: Request, who: Principal = Depends(reader),
                since: float = Query(0.0, ge=0, le=1e11, description="from this time (Unix seconds, inclusive)"),
                until: float | None = Query(None, ge=0, le=1e11, description="to this time (exclusive; default now)"),
                ) -> dict[str, Any]:
    """The judge usage of the tenant's jobs in a period, per judge profile and in total: calls, tokens, cost. Every
    attempt of a job counts (a resumed job paid for each); an attempt counts in the period its usage was last
    recorded in; deleting a job keeps its usage."""
    from open_rag_eval.service.db import job_usage

    query = sa.select(job_usage.c.judge_profile, sa.func.count(sa.distinct(job_usage.c.job_id)),
                      sa.func.sum(job_usage.c.calls), sa.func.sum(job_usage.c.prompt_tokens),
                      sa.func.sum(job_usage.c.completion_tokens), sa.func.sum(job_usage.c.cost_usd),
                      sa.func.count(job_usage.c.cost_usd)).where(
        job_usage.c.tenant == who.tenant, job_usage.c.updated >= since)
    if until is not None:
        query = query.where(job_usage.c.updated < until)
    async with engine_of(request).connect() as connection:
        rows = (await connection.execute(query.group_by(job_usage.c.judge_profile)
                                         .order_by(job_usage.c.judge_profile))).all()
    profiles = [{"judge_profile": profile, "jobs": int(n_jobs), "calls": int(calls or 0),
                 "prompt_tokens": int(prompt or 0), "completion_tokens": int(completion or 0),
                 "cost_usd": None if not priced else round(float(cost or 0.0), 10)}
                for profile, n_jobs, calls, prompt, completion, cost, priced in rows]
    total = {name: sum(p[name] for p in profiles) for name in ("jobs", "calls", "prompt_tokens", "completion_tokens")}
    costs = [p["cost_usd"] for p in profiles if p["cost_usd"] is not None]
    return {"tenant": who.tenant, "since": since, "until": until, "by_profile": profiles,
            "total": {**total, "cost_usd": round(sum(costs), 10) if costs else None}}


@router.get("/metrics", tags=["health"], response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(request: Request, who: Principal = Depends(metrics_reader)) -> PlainTextResponse:
    """Prometheus metrics (a key with the ``metrics`` scope when auth is on): jobs by state, queue depth and age,
    judge calls, tokens, cost and failed calls per profile, failed jobs by reason (the deployment's, from the
    database), and this process's judge request durations."""
    from open_rag_eval.service.metrics import CONTENT_TYPE, render

    try:
        text = await render(engine_of(request))
    except ImportError:  # prometheus_client is in the [server] extra
        raise Problem(404, "not_found", "metrics need prometheus_client (the [server] extra)") from None
    return PlainTextResponse(text, media_type=CONTENT_TYPE)
